package rowfill

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
)

const charVarcharAvsc = `{"type":"record","name":"e","fields":[
 {"name":"id","type":"long"},
 {"name":"code","type":["null","string"]},
 {"name":"name","type":["null","string"]},
 {"name":"tags","type":["null",{"type":"array","items":["null","string"]}]},
 {"name":"attrs","type":["null",{"type":"map","values":["null","string"]}]},
 {"name":"s","type":["null",{"type":"record","name":"inner","fields":[{"name":"c","type":["null","string"]}]}]}]}`

// charVarcharSchema is the Delta schema Spark writes for
// (id BIGINT, code CHAR(3), name VARCHAR(5), tags ARRAY<VARCHAR(4)>, attrs MAP<STRING, VARCHAR(2)>, s STRUCT<c: CHAR(1)>):
// strings with __CHAR_VARCHAR_TYPE_STRING on the fields (the struct's on its own field).
func charVarcharSchema(st *deltalog.StructType) {
	meta := func(name, typ string) {
		f := st.FieldByKey(name)
		f.Metadata = map[string]any{deltalog.MetaCharVarcharType: typ}
	}
	meta("code", "char(3)")
	meta("name", "varchar(5)")
	meta("tags", "array<varchar(4)>")
	meta("attrs", "map<string,varchar(2)>")
	inner := st.FieldByKey("s").Type.(*deltalog.StructType)
	inner.Fields[0].Metadata = map[string]any{deltalog.MetaCharVarcharType: "char(1)"}
	st.FieldByKey("s").Metadata = map[string]any{deltalog.MetaCharVarcharType: "struct<c:char(1)>"}
}

// The CHAR/VARCHAR limits Spark's metadata declares are checked on every row, in Unicode
// code points with trailing spaces counted, on top-level strings, array elements, map
// values and nested struct fields; a row within every limit (multi-byte characters at the
// limit, NULLs, a CHAR shorter than n, stored as sent) passes; each violating row is a
// check_violation naming the column, the limit and its length. Without the metadata
// (ALTER COLUMN … TYPE STRING) the same rows pass.
func TestCharVarcharLimitsPerRow(t *testing.T) {
	schema, pq, dec, _ := tableSetup(t, charVarcharAvsc, charVarcharSchema)
	limits, err := deltawriter.CharVarcharLimits(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range limits {
		got = append(got, l.Column+"="+l.Type+"@"+strings.Join(l.Leaf, "."))
	}
	want := []string{"code=char(3)@code", "name=varchar(5)@name", "tags[]=varchar(4)@tags.list.element",
		"attrs{}=varchar(2)@attrs.key_value.value", "s.c=char(1)@s.c"}
	if !slices.Equal(got, want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	cfg := &config.Config{}
	avsc := avro.MustParse(charVarcharAvsc)
	str := func(s string) any { return map[string]any{"string": s} }
	run := func(schema *deltalog.StructType, rec map[string]any) error {
		t.Helper()
		s, err := New(cfg, Table{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone, Parquet: pq}, Options{Log: discard()})
		if err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return nil // no limits, no constraints: New builds no stage
		}
		body, err := avro.Marshal(avsc, rec)
		if err != nil {
			t.Fatal(err)
		}
		cols := newCols(pq)
		ws, _ := decode.ParseWriterSchema(1, charVarcharAvsc)
		s.Begin(cols, ws)
		err = dec.DecodeColumns(nil, body, cols)
		s.Decoded()
		if err != nil {
			t.Fatal(err)
		}
		return s.Fill(nil)
	}
	base := func() map[string]any {
		return map[string]any{"id": int64(1), "code": str("ab"), "name": str("héllo"),
			"tags": map[string]any{"array": []any{str("ünïc"), nil}}, "attrs": map[string]any{"map": map[string]any{"k": str("€€"), "n": nil}},
			"s": map[string]any{"inner": map[string]any{"c": str("x")}}}
	}
	if err := run(schema, base()); err != nil {
		t.Fatalf("a row within every limit: %v", err)
	}
	nulls := map[string]any{"id": int64(2), "code": nil, "name": nil, "tags": nil, "attrs": nil, "s": nil}
	if err := run(schema, nulls); err != nil {
		t.Fatalf("a row of NULLs: %v", err)
	}
	cases := []struct {
		col, set string
		val      any
		length   int
	}{
		{"code", "code", str("abcd"), 4},
		{"code", "code", str("ab  "), 4}, // trailing spaces count
		{"name", "name", str("hélloo"), 6},
		{"tags[]", "tags", map[string]any{"array": []any{str("ok"), str("toolong")}}, 7},
		{"attrs{}", "attrs", map[string]any{"map": map[string]any{"k": str("€€€")}}, 3},
		{"s.c", "s", map[string]any{"inner": map[string]any{"c": str("xy")}}, 2},
	}
	for _, c := range cases {
		rec := base()
		rec[c.set] = c.val
		err := run(schema, rec)
		var de *decode.Error
		if !errors.As(err, &de) || de.Reason != decode.ReasonCheckViolation || de.Field != c.col {
			t.Errorf("%s=%v: err %v, want check_violation at %s", c.col, c.val, err, c.col)
			continue
		}
		name := LimitName(c.col)
		var lim deltawriter.CharVarcharLimit
		for _, l := range limits {
			if l.Column == c.col {
				lim = l
			}
		}
		wantDetails := map[string]string{"constraint": name,
			"constraint." + name: "length(" + c.col + ") <= " + strings.TrimSuffix(strings.SplitN(lim.Type, "(", 2)[1], ")") + " (" + lim.Type + ", declared " + lim.Declared + ")"}
		if !maps.Equal(de.Details, wantDetails) {
			t.Errorf("%s: details %v, want %v", c.col, de.Details, wantDetails)
		}
		if msg := de.Error(); !strings.Contains(msg, "column "+c.col+" is "+lim.Type+", the value has "+itoa(c.length)+" characters") {
			t.Errorf("%s: message %q", c.col, msg)
		}
		// ALTER COLUMN … TYPE STRING drops the metadata: the limit is gone.
		plain := schema.Clone()
		for _, f := range plain.Fields {
			delete(f.Metadata, deltalog.MetaCharVarcharType)
			if st, ok := f.Type.(*deltalog.StructType); ok {
				delete(st.Fields[0].Metadata, deltalog.MetaCharVarcharType)
			}
		}
		if err := run(plain, rec); err != nil {
			t.Errorf("%s without the metadata: %v", c.col, err)
		}
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// Metadata that is not a type string, or declares char(n) on a non-string, refuses the
// table with ErrUnsupportedFeature naming the column; map keys and struct<…> parse.
func TestCharVarcharLimitsMetadataErrors(t *testing.T) {
	for _, c := range []struct {
		typ  deltalog.DataType
		meta string
		want string // "" ok
	}{
		{deltalog.String, "varchar(x)", `varchar length "x" is not a count`},
		{deltalog.Integer, "char(2)", "char(2) declared for c of type integer, not string"},
		{&deltalog.ArrayType{ElementType: deltalog.String, ContainsNull: true}, "map<string,char(1)>", "map declared for c"},
		{&deltalog.MapType{KeyType: deltalog.String, ValueType: deltalog.String, ValueContainsNull: true}, "map<varchar(3),char(1)>", ""},
		{&deltalog.ArrayType{ElementType: &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "a b", Type: deltalog.String}}}}, "array<struct<`a b`:varchar(2),d:decimal(10,2) NOT NULL>>", ""},
	} {
		st := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "c", Type: c.typ, Nullable: true, Metadata: map[string]any{deltalog.MetaCharVarcharType: c.meta}}}}
		l, err := deltawriter.CharVarcharLimits(st, deltalog.ColumnMappingNone)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.meta, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, deltawriter.ErrUnsupportedFeature)):
			t.Errorf("%s: err %v, want %q", c.meta, err, c.want)
		}
		if c.meta == "map<varchar(3),char(1)>" && (len(l) != 2 || l[0].Column != "c{key}" || l[0].N != 3 || l[1].Column != "c{}" || !l[1].Char) {
			t.Errorf("map limits %+v", l)
		}
	}
}
