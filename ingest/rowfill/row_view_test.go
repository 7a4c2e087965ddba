package rowfill

import (
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
)

const rowfillAvro = `{"type":"record","name":"r","fields":[
 {"name":"id","type":"long"},
 {"name":"Region","type":["null","string"]},
 {"name":"tags","type":{"type":"array","items":"string"}}]}`

// rowfillSetup decodes records of rowfillAvro into the column buffers of its table schema
// (the writer's, plus a column "extra" the writer lacks), as the flush does.
func rowfillSetup(t *testing.T) (*decode.Decoder, *parquet.Schema, *rowView) {
	t.Helper()
	_, pq, dec, row := tableSetup(t, rowfillAvro, func(s *deltalog.StructType) {
		s.Fields = append(s.Fields, &deltalog.StructField{Name: "extra", Type: deltalog.Integer, Nullable: true})
	})
	return dec, pq, row
}

func rowfillRecord(t *testing.T, id int64, region *string, tags []string) []byte {
	t.Helper()
	v := map[string]any{"id": id, "tags": tags, "Region": nil}
	if region != nil {
		v["Region"] = map[string]any{"string": *region}
	}
	b, err := avro.Marshal(avro.MustParse(rowfillAvro), v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRowViewTopAndLeaves: the view of the second record of a batch sees only that
// record's values; top-level columns are found case-insensitively with their leaf ranges.
func TestRowViewTopAndLeaves(t *testing.T) {
	dec, pq, row := rowfillSetup(t)
	cols := newCols(pq)
	us, eu := "US", "EU"
	err := dec.DecodeColumns(nil, rowfillRecord(t, 1, &us, []string{"a", "b"}), cols)
	if err != nil {
		t.Fatal(err)
	}
	row.begin(cols)
	if err := dec.DecodeColumns(nil, rowfillRecord(t, 2, &eu, []string{"c"}), cols); err != nil {
		t.Fatal(err)
	}
	v, f, ok := row.top("region")
	if !ok || f.Name != "Region" || string(v.ByteArray()) != "EU" || v.DefinitionLevel() != 1 {
		t.Fatalf("top(region) = %v %q %v; want EU (def 1) of column Region", v, f.Name, ok)
	}
	if v, _, ok := row.top("ID"); !ok || v.Int64() != 2 {
		t.Fatalf("top(ID) = %v %v; want 2", v, ok)
	}
	if v, _, ok := row.top("extra"); !ok || !v.IsNull() {
		t.Fatalf("top(extra) = %v %v; want null (the writer lacks it)", v, ok)
	}
	if _, _, ok := row.top("tags"); ok {
		t.Fatal("top(tags) found an array column; want not ok")
	}
	tagLeaf := leafIndex(t, pq, "tags", "list", "element")
	if first, n := row.leaves("TAGS"); first != tagLeaf || n != 1 {
		t.Fatalf("leaves(TAGS) = %d, %d; want %d, 1", first, n, tagLeaf)
	}
	if got := row.leaf(tagLeaf); len(got) != 1 || string(got[0].ByteArray()) != "c" {
		t.Fatalf("leaf(tags) = %v; want only this record's [c]", got)
	}
	if first, n := row.leaves("nope"); first != 0 || n != 0 {
		t.Fatalf("leaves(nope) = %d, %d; want 0, 0", first, n)
	}
}

// TestRowViewSetTopAndReplace: setTop fills in levels and the column index (null: def 0);
// replace keeps the given levels; values of the earlier record are untouched.
func TestRowViewSetTopAndReplace(t *testing.T) {
	dec, pq, row := rowfillSetup(t)
	cols := newCols(pq)
	us := "US"
	err := dec.DecodeColumns(nil, rowfillRecord(t, 1, &us, []string{"a"}), cols)
	if err != nil {
		t.Fatal(err)
	}
	before := levelledOf(cols)
	row.begin(cols)
	if err := dec.DecodeColumns(nil, rowfillRecord(t, 2, nil, []string{"b", "c"}), cols); err != nil {
		t.Fatal(err)
	}
	extra := leafIndex(t, pq, "extra")
	if err := row.setTop("EXTRA", parquet.Int32Value(7)); err != nil {
		t.Fatal(err)
	}
	got := row.cols[extra].At(row.cols[extra].Len() - 1)
	if got.Int32() != 7 || got.RepetitionLevel() != 0 || got.DefinitionLevel() != 1 || got.Column() != extra || len(row.leaf(extra)) != 1 {
		t.Fatalf("after setTop(EXTRA, 7): %v (rep %d def %d col %d); want 7 rep 0 def 1 col %d", got, got.RepetitionLevel(), got.DefinitionLevel(), got.Column(), extra)
	}
	region := leafIndex(t, pq, "Region")
	if err := row.setTop("Region", parquet.NullValue()); err != nil {
		t.Fatal(err)
	}
	if g := row.leaf(region); len(g) != 1 || !g[0].IsNull() || g[0].DefinitionLevel() != 0 || g[0].Column() != region {
		t.Fatalf("after setTop(Region, null): %v; want one null, def 0, col %d", g, region)
	}
	if err := row.setTop("tags", parquet.Int32Value(1)); err == nil {
		t.Fatal("setTop on an array column: want an error")
	}
	tags := leafIndex(t, pq, "tags", "list", "element")
	row.replace(tags, parquet.ByteArrayValue([]byte("x")).Level(0, 3, 0), parquet.ByteArrayValue([]byte("y")).Level(1, 3, 0), parquet.ByteArrayValue([]byte("z")).Level(1, 3, 0))
	g := row.leaf(tags)
	if len(g) != 3 || string(g[2].ByteArray()) != "z" || g[0].RepetitionLevel() != 0 || g[1].RepetitionLevel() != 1 || g[1].DefinitionLevel() != 3 || g[1].Column() != tags {
		t.Fatalf("after replace(tags): %v; want x,y,z rep 0,1,1 def 3 col %d", g, tags)
	}
	for i := range before {
		if !equalCols([][]parquet.Value{before[i]}, [][]parquet.Value{levelledOf(row.cols)[i][:len(before[i])]}) {
			t.Fatalf("leaf %d: the earlier record's values changed", i)
		}
	}
}

// TestRowViewDropRestores: a rejected row's values are removed and the buffers are
// exactly as before it (values, levels, column indexes), even after setTop and replace
// grew them; the next record decodes after the earlier one.
func TestRowViewDropRestores(t *testing.T) {
	dec, pq, row := rowfillSetup(t)
	cols := newCols(pq)
	us, eu := "US", "EU"
	err := dec.DecodeColumns(nil, rowfillRecord(t, 1, &us, []string{"a", "b"}), cols)
	if err != nil {
		t.Fatal(err)
	}
	before := levelledOf(cols)
	row.begin(cols)
	if err := dec.DecodeColumns(nil, rowfillRecord(t, 2, &eu, []string{"c", "d", "e"}), cols); err != nil {
		t.Fatal(err)
	}
	_ = row.setTop("extra", parquet.Int32Value(9))
	tags := leafIndex(t, pq, "tags", "list", "element")
	row.replace(tags, parquet.ByteArrayValue([]byte("q")).Level(0, 3, 0))
	row.drop()
	if after := levelledOf(row.cols); !equalCols(after, before) {
		t.Fatalf("after drop: %v; want exactly %v", after, before)
	}
	row.begin(cols)
	if err := dec.DecodeColumns(nil, rowfillRecord(t, 3, nil, nil), cols); err != nil {
		t.Fatal(err)
	}
	if v := levelledOf(cols)[leafIndex(t, pq, "id")]; len(v) != 2 || v[1].Int64() != 3 {
		t.Fatalf("id column after drop and a new record: %v; want [1 3]", v)
	}
}
