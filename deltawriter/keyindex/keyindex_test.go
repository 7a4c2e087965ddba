package keyindex

import (
	"context"
	"encoding/hex"
	"errors"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

var long = []deltalog.DataType{deltalog.Long}

func TestAppendValue(t *testing.T) {
	dec := deltalog.DecimalType{Precision: 25, Scale: 3}
	cases := []struct {
		typ  deltalog.DataType
		v    parquet.Value
		want string
	}{
		{deltalog.Integer, parquet.Int32Value(7), "8000000000000007"},
		{deltalog.Long, parquet.Int64Value(7), "8000000000000007"}, // the same key as the integer 7
		{deltalog.Byte, parquet.Int32Value(-1), "7fffffffffffffff"},
		{deltalog.Boolean, parquet.BooleanValue(true), "01"},
		{deltalog.Date, parquet.Int32Value(19975), "80004e07"},
		{deltalog.Timestamp, parquet.Int64Value(1_700_000_000_000_000), "80060a24181e4000"},
		{deltalog.TimestampNtz, parquet.Int64Value(-1), "7fffffffffffffff"},
		{deltalog.String, parquet.ByteArrayValue([]byte("ab")), "026162"},
		{deltalog.Binary, parquet.ByteArrayValue([]byte{}), "00"},
		{deltalog.DecimalType{Precision: 10, Scale: 2}, parquet.Int64Value(-5), "7ffffffffffffffffffffffffffffffb"},
		{deltalog.DecimalType{Precision: 9, Scale: 2}, parquet.Int32Value(1234), "800000000000000000000000000004d2"},
		// A FIXED_LEN_BYTE_ARRAY decimal (11 bytes) encodes as the INT64 one of equal value.
		{dec, parquet.FixedLenByteArrayValue([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfb}), "7ffffffffffffffffffffffffffffffb"},
		{dec, parquet.FixedLenByteArrayValue([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0x04, 0xd2}), "800000000000000000000000000004d2"},
	}
	for _, c := range cases {
		got, err := AppendValue([]byte{}, c.typ, c.v)
		if err != nil {
			t.Fatalf("%s %v: %v", c.typ, c.v, err)
		}
		if hex.EncodeToString(got) != c.want {
			t.Errorf("%s %v: %x, want %s", c.typ, c.v, got, c.want)
		}
	}
	// INT96: Julian day 2440589 (1970-01-02), 1 µs into the day.
	got, err := AppendValue(nil, deltalog.Timestamp, parquet.Int96Value(deprecated.Int96{1000, 0, 2440589}))
	if err != nil || hex.EncodeToString(got) != hex.EncodeToString(mustAppend(t, deltalog.Timestamp, parquet.Int64Value(86_400_000_001))) {
		t.Errorf("INT96: %x, %v", got, err)
	}
	if _, err := AppendValue(nil, deltalog.Long, parquet.NullValue()); !errors.Is(err, ErrNullKey) {
		t.Errorf("NULL: %v, want ErrNullKey", err)
	}
	if _, err := AppendValue(nil, deltalog.Long, parquet.ByteArrayValue([]byte("x"))); err == nil || !strings.Contains(err.Error(), "BYTE_ARRAY") {
		t.Errorf("a string for a long: %v", err)
	}
	if _, err := AppendValue(nil, deltalog.Double, parquet.DoubleValue(1)); !errors.Is(err, ErrKeyColumn) {
		t.Errorf("double: %v, want ErrKeyColumn", err)
	}
}

func mustAppend(t *testing.T, typ deltalog.DataType, v parquet.Value) []byte {
	b, err := AppendValue(nil, typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckKeyColumns(t *testing.T) {
	schema, err := deltalog.ParseSchema(`{"type":"struct","fields":[
{"name":"Id","type":"long","nullable":true,"metadata":{}},
{"name":"region","type":"string","nullable":true,"metadata":{}},
{"name":"price","type":"double","nullable":true,"metadata":{}},
{"name":"st","type":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
{"name":"day","type":"date","nullable":true,"metadata":{}},
{"name":"amount","type":"decimal(38,10)","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckKeyColumns(schema, []string{"ID", "Region", "day", "amount"}); err != nil {
		t.Errorf("valid key: %v", err)
	}
	for names, want := range map[string]string{
		"":          "check key columns: unsupported key column: no key column",
		"price":     "check key columns: unsupported key column: column price has type double; a key column must be string, binary, boolean, byte, short, integer, long, date, timestamp, timestamp_ntz or decimal",
		"st":        "check key columns: unsupported key column: column st has type struct<x:long>; a key column must be string, binary, boolean, byte, short, integer, long, date, timestamp, timestamp_ntz or decimal",
		"nope":      `check key columns: unsupported key column: "nope" is not a column of the table`,
		"id,ID":     `check key columns: unsupported key column: "id" and "ID" name the same column Id`,
		"st.x":      `check key columns: unsupported key column: "st.x" is not a column of the table`,
		"region,id": "",
	} {
		var list []string
		if names != "" {
			list = strings.Split(names, ",")
		}
		err := CheckKeyColumns(schema, list)
		if got := errString(err); got != want {
			t.Errorf("CheckKeyColumns(%q) = %q, want %q", names, got, want)
		}
		if err != nil && !errors.Is(err, ErrKeyColumn) {
			t.Errorf("CheckKeyColumns(%q): not ErrKeyColumn", names)
		}
	}
	if got := errString(CheckSequenceColumn(schema, "region")); got != "check sequence column: unsupported key column: column region has type string; a sequence column must be byte, short, integer, long, date, timestamp or timestamp_ntz" {
		t.Errorf("sequence region: %s", got)
	}
	if err := CheckSequenceColumn(schema, "DAY"); err != nil {
		t.Errorf("sequence day: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

const idSeqSchema = `{"type":"struct","fields":[
{"name":"id","type":"long","nullable":true,"metadata":{}},
{"name":"seq","type":"long","nullable":true,"metadata":{}},
{"name":"v","type":"string","nullable":true,"metadata":{}}]}`

func rowsOf(ids ...int64) []map[string]any {
	rows := make([]map[string]any, len(ids))
	for i, id := range ids {
		rows[i] = map[string]any{"id": id, "seq": id*10 + int64(i), "v": "x"}
	}
	return rows
}

// hits returns Lookup's answer for id as "path#row@seq ..." with paths shortened to a name.
func hits(t *testing.T, x *Index, names map[string]string, id int64) string {
	t.Helper()
	h, ok := x.Lookup(key(t, long, parquet.Int64Value(id)))
	if !ok {
		return "-"
	}
	if h.Deleted {
		return "deleted@" + itoa(h.Seq)
	}
	var s []string
	for _, r := range h.Rows {
		s = append(s, names[r.Path]+"#"+itoa(int64(r.Row))+"@"+itoa(r.Seq))
	}
	sort.Strings(s)
	return strings.Join(s, " ") + " max@" + itoa(h.Seq)
}

func itoa(i int64) string {
	if i == NullSequence {
		return "null"
	}
	return strconv.FormatInt(i, 10)
}

// A table of three files: duplicates across files, a deletion vector, a NULL key and a
// NULL sequence.
func TestBuild(t *testing.T) {
	ctx := context.Background()
	tt := newTable(t, idSeqSchema, nil, true, false)
	a := tt.write(rowsOf(1, 2, 3, 4, 5), nil)
	b := tt.write(rowsOf(4, 5, 6), nil)
	c := tt.write([]map[string]any{{"id": int64(7), "seq": nil, "v": "n"}, {"id": nil, "seq": int64(1), "v": "n"}, {"id": int64(8), "seq": int64(80), "v": "n"}}, nil)
	tt.commit([]deltalog.Add{a, b, c}, nil)
	// Another writer deletes rows 1 (id 2) and 4 (id 5) of a with a deletion vector.
	ad := withDV(t, a, 1, 4)
	tt.commit([]deltalog.Add{ad}, []deltalog.Remove{remove(a)})

	x, err := Build(ctx, tt.st, tt.snap(), Spec{Key: []string{"ID"}, Sequence: "Seq"}, WithConcurrency(2))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{a.Path: "a", b.Path: "b", c.Path: "c"}
	want := map[int64]string{
		1: "a#0@10 max@10", 2: "-", 3: "a#2@32 max@32",
		4: "a#3@43 b#0@40 max@43", 5: "b#1@51 max@51", 6: "b#2@62 max@62",
		7: "c#0@null max@null", 8: "c#2@80 max@80", 9: "-",
	}
	for id := int64(1); id <= 9; id++ {
		if got := hits(t, x, names, id); got != want[id] {
			t.Errorf("key %d: %s, want %s", id, got, want[id])
		}
	}
	st := x.Stats()
	st.Bytes = 0
	if want := (Stats{Version: 2, Keys: 7, Duplicates: 1, Files: 3, NullKeys: 1}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}

// Key columns that are partition columns come from add.partitionValues; a key moves
// between partitions.
func TestBuildPartitionKey(t *testing.T) {
	tt := newTable(t, `{"type":"struct","fields":[
{"name":"id","type":"integer","nullable":true,"metadata":{}},
{"name":"region","type":"string","nullable":true,"metadata":{}},
{"name":"day","type":"date","nullable":true,"metadata":{}}]}`, []string{"region", "day"}, false, false)
	eu, us, d1 := "eu", "us", "2024-09-09"
	a := tt.write([]map[string]any{{"id": int32(1)}, {"id": int32(2)}}, map[string]*string{"region": &eu, "day": &d1})
	b := tt.write([]map[string]any{{"id": int32(2)}, {"id": int32(3)}}, map[string]*string{"region": &us, "day": &d1})
	tt.commit([]deltalog.Add{a, b}, nil)
	x, err := Build(context.Background(), tt.st, tt.snap(), Spec{Key: []string{"region", "id", "day"}})
	if err != nil {
		t.Fatal(err)
	}
	types := []deltalog.DataType{deltalog.String, deltalog.Long, deltalog.Date}
	for _, c := range []struct {
		region string
		id     int64
		want   string
		row    uint64
	}{{"eu", 1, a.Path, 0}, {"eu", 2, a.Path, 1}, {"us", 2, b.Path, 0}, {"us", 3, b.Path, 1}, {"eu", 3, "", 0}} {
		h, ok := x.Lookup(key(t, types, parquet.ByteArrayValue([]byte(c.region)), parquet.Int64Value(c.id), parquet.Int32Value(19975)))
		if c.want == "" {
			if ok {
				t.Errorf("%s/%d: %+v, want none", c.region, c.id, h)
			}
			continue
		}
		if want := []Location{{Path: c.want, Row: c.row}}; !ok || !reflect.DeepEqual(h.Rows, want) {
			t.Errorf("%s/%d: %+v, want %+v", c.region, c.id, h.Rows, want)
		}
	}
}

// Under column mapping the key column is read by its physical name.
func TestBuildColumnMapping(t *testing.T) {
	tt := newTable(t, `{"type":"struct","fields":[
{"name":"Order Id","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-5f1c"}},
{"name":"id","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-77aa"}}]}`, nil, false, true)
	a := tt.write([]map[string]any{{"col-5f1c": "o-1", "col-77aa": "decoy"}, {"col-5f1c": "o-2", "col-77aa": "o-1"}}, nil)
	tt.commit([]deltalog.Add{a}, nil)
	x, err := Build(context.Background(), tt.st, tt.snap(), Spec{Key: []string{"order id"}})
	if err != nil {
		t.Fatal(err)
	}
	str := []deltalog.DataType{deltalog.String}
	for k, row := range map[string]uint64{"o-1": 0, "o-2": 1} {
		h, ok := x.Lookup(key(t, str, parquet.ByteArrayValue([]byte(k))))
		if want := []Location{{Path: a.Path, Row: row}}; !ok || !reflect.DeepEqual(h.Rows, want) {
			t.Errorf("%s: %+v, want %+v", k, h.Rows, want)
		}
	}
	if _, ok := x.Lookup(key(t, str, parquet.ByteArrayValue([]byte("decoy")))); ok {
		t.Error("decoy (another column's value) found")
	}
}

// Spark's type-widening table: one file written before integer → long, decimal(10,2) →
// decimal(20,5) and date → timestamp_ntz, one after.
func TestBuildSparkTypeWidening(t *testing.T) {
	st, snap := kernelTable(t, "type-widening")
	var old, young string
	for _, a := range snap.Files.All() {
		if strings.Contains(a.Path, "f6dbc649") {
			old = a.Path
		} else {
			young = a.Path
		}
	}
	dec := deltalog.DecimalType{Precision: 20, Scale: 5}
	ts := time.Date(2024, 9, 9, 12, 34, 56, 123_456_000, time.UTC).UnixMicro()
	for _, c := range []struct {
		col  string
		typ  deltalog.DataType
		v    parquet.Value
		want string
	}{
		{"int_long", deltalog.Long, parquet.Int64Value(2), old},
		{"int_long", deltalog.Integer, parquet.Int32Value(2), old},
		{"int_long", deltalog.Long, parquet.Int64Value(9223372036854775807), young},
		{"byte_long", deltalog.Long, parquet.Int64Value(1), old},
		{"decimal_decimal_greater_scale", dec, parquet.Int64Value(6_789_000), old}, // 67.89 rescaled from scale 2
		{"decimal_decimal_greater_scale", dec, parquet.Int64Value(1_234_567_890_123_456), young},
		{"date_timestamp_ntz", deltalog.TimestampNtz, parquet.Int64Value(time.Date(2024, 9, 9, 0, 0, 0, 0, time.UTC).UnixMicro()), old},
		{"date_timestamp_ntz", deltalog.TimestampNtz, parquet.Int64Value(ts), young},
		{"int_decimal", deltalog.DecimalType{Precision: 11, Scale: 1}, parquet.Int64Value(30), old}, // integer 3 → 3.0
	} {
		x, err := Build(context.Background(), st, snap, Spec{Key: []string{c.col}})
		if err != nil {
			t.Fatalf("%s: %v", c.col, err)
		}
		h, ok := x.Lookup(key(t, []deltalog.DataType{c.typ}, c.v))
		if want := []Location{{Path: c.want, Row: 0}}; !ok || !reflect.DeepEqual(h.Rows, want) {
			t.Errorf("%s = %v: %+v, want %+v", c.col, c.v, h.Rows, want)
		}
		if s := x.Stats(); s.Keys != 2 {
			t.Errorf("%s: %d keys, want 2", c.col, s.Keys)
		}
	}
}

// Spark's DELETE with a deletion vector (values 0 and 9 of 0..9).
func TestBuildSparkDeletionVector(t *testing.T) {
	st, snap := kernelTable(t, "table-with-dv-small")
	x, err := Build(context.Background(), st, snap, Spec{Key: []string{"value"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := x.Stats(); s.Keys != 8 || s.Files != 1 {
		t.Errorf("stats %+v, want 8 keys in 1 file", s)
	}
	for v := int32(0); v < 10; v++ {
		h, ok := x.Lookup(key(t, []deltalog.DataType{deltalog.Integer}, parquet.Int32Value(v)))
		if v == 0 || v == 9 {
			if ok {
				t.Errorf("value %d (deleted): %+v", v, h)
			}
			continue
		}
		if !ok || len(h.Rows) != 1 || h.Rows[0].Row != uint64(v) || !strings.HasPrefix(h.Rows[0].Path, "part-00000-fae5310a") {
			t.Errorf("value %d: %+v, want row %d", v, h.Rows, v)
		}
	}
}

// Our commit applied in memory, then other writers' commits: OPTIMIZE, an append with a
// duplicate key, a deletion vector grown by another writer.
func TestApplyRefresh(t *testing.T) {
	ctx := context.Background()
	tt := newTable(t, idSeqSchema, nil, true, false)
	a := tt.write(rowsOf(1, 2, 3), nil)
	b := tt.write(rowsOf(4, 5), nil)
	tt.commit([]deltalog.Add{a, b}, nil)
	spec := Spec{Key: []string{"id"}, Sequence: "seq"}
	x, err := Build(ctx, tt.st, tt.snap(), spec)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{a.Path: "a", b.Path: "b"}

	// Our upsert of 2 and 4 and insert of 6: rows a#1 and b#0 deleted, a new file n.
	n := tt.write(rowsOf(2, 4, 6), nil)
	ad, bd := withDV(t, a, 1), withDV(t, b, 0)
	v := tt.commit([]deltalog.Add{ad, bd, n}, []deltalog.Remove{remove(a), remove(b)})
	names[n.Path] = "n"
	keys := [][]byte{key(t, long, parquet.Int64Value(2)), key(t, long, parquet.Int64Value(4)), key(t, long, parquet.Int64Value(6))}
	if err := x.Apply(ctx, tt.st, Change{Version: v, Updated: []deltalog.Add{ad, bd}, Deleted: map[string][]uint64{a.Path: {1}, b.Path: {0}},
		Added: []FileKeys{{Add: n, Keys: keys, Seqs: []int64{20, 41, 62}}}}); err != nil {
		t.Fatal(err)
	}
	check := func(step string, want map[int64]string) {
		t.Helper()
		for id, w := range want {
			if got := hits(t, x, names, id); got != w {
				t.Errorf("%s: key %d: %s, want %s", step, id, got, w)
			}
		}
	}
	check("apply", map[int64]string{1: "a#0@10 max@10", 2: "n#0@20 max@20", 3: "a#2@32 max@32", 4: "n#1@41 max@41", 5: "b#1@51 max@51", 6: "n#2@62 max@62"})
	// Refresh at our own version reads nothing: the index already knows the new DVs.
	if rs, err := x.Refresh(ctx, tt.st, tt.snap()); err != nil || rs != (RefreshStats{}) {
		t.Errorf("refresh after apply: %+v, %v", rs, err)
	}

	// OPTIMIZE: a (with its DV) and n compacted into o; b stays.
	o := tt.write([]map[string]any{{"id": int64(1), "seq": int64(10)}, {"id": int64(3), "seq": int64(32)}, {"id": int64(2), "seq": int64(20)}, {"id": int64(4), "seq": int64(41)}, {"id": int64(6), "seq": int64(62)}}, nil)
	o.DataChange = false
	tt.commit([]deltalog.Add{o}, []deltalog.Remove{remove(ad), remove(n)})
	names[o.Path] = "o"
	// Another writer appends key 5 again (a duplicate) and key 7.
	d := tt.write(rowsOf(5, 7), nil)
	tt.commit([]deltalog.Add{d}, nil)
	names[d.Path] = "d"
	rs, err := x.Refresh(ctx, tt.st, tt.snap())
	if err != nil {
		t.Fatal(err)
	}
	if rs != (RefreshStats{FilesRead: 2, FilesRemoved: 2}) {
		t.Errorf("refresh after OPTIMIZE: %+v", rs)
	}
	check("optimize", map[int64]string{1: "o#0@10 max@10", 2: "o#2@20 max@20", 3: "o#1@32 max@32", 4: "o#3@41 max@41", 5: "b#1@51 d#0@50 max@51", 6: "o#4@62 max@62", 7: "d#1@71 max@71"})
	if s := x.Stats(); s.Keys != 7 || s.Duplicates != 1 || s.Files != 3 {
		t.Errorf("stats after optimize: %+v", s)
	}

	// Another writer deletes o#1 (key 3) and d#0 (one of key 5's rows) with deletion vectors.
	od, dd := withDV(t, o, 1), withDV(t, d, 0)
	tt.commit([]deltalog.Add{od, dd}, []deltalog.Remove{remove(o), remove(d)})
	rs, err = x.Refresh(ctx, tt.st, tt.snap())
	if err != nil {
		t.Fatal(err)
	}
	if rs != (RefreshStats{FilesRead: 2, FilesRemoved: 2}) {
		t.Errorf("refresh after DVs: %+v", rs)
	}
	check("dv", map[int64]string{3: "-", 5: "b#1@51 max@51", 7: "d#1@71 max@71", 1: "o#0@10 max@10"})
	if s := x.Stats(); s.Keys != 6 || s.Duplicates != 0 || s.Files != 3 || s.Version != 5 {
		t.Errorf("stats after dv: %+v", s)
	}

	// A copy-on-write commit of ours: b rewritten without key 5 as w, whose keys Apply
	// reads from the file.
	w2 := tt.write(rowsOf(9), nil)
	v = tt.commit([]deltalog.Add{w2}, []deltalog.Remove{remove(b)})
	names[w2.Path] = "w"
	if err := x.Apply(ctx, tt.st, Change{Version: v, Removed: []string{b.Path}, Added: []FileKeys{{Add: w2}}}); err != nil {
		t.Fatal(err)
	}
	check("cow", map[int64]string{5: "-", 9: "w#0@90 max@90"})
	if _, err := x.Refresh(ctx, tt.st, tt.snap()); err != nil {
		t.Fatal(err)
	}
	old := *tt.snap()
	old.Version = 1
	if _, err := x.Refresh(ctx, tt.st, &old); err == nil || err.Error() != "refresh key index: snapshot version 1 is older than the index (6)" {
		t.Errorf("refresh to an older snapshot: %v", err)
	}
}

// Remembered deletes: PutDeleted after the rows are gone, Expire by time.
func TestDeletedExpire(t *testing.T) {
	ctx := context.Background()
	tt := newTable(t, idSeqSchema, nil, true, false)
	a := tt.write(rowsOf(1, 2), nil)
	tt.commit([]deltalog.Add{a}, nil)
	x, err := Build(ctx, tt.st, tt.snap(), Spec{Key: []string{"id"}, Sequence: "seq"})
	if err != nil {
		t.Fatal(err)
	}
	k1, k2, k3 := key(t, long, parquet.Int64Value(1)), key(t, long, parquet.Int64Value(2)), key(t, long, parquet.Int64Value(3))
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := x.PutDeleted(k1, 99, t0); !errors.Is(err, ErrLiveRows) {
		t.Fatalf("PutDeleted of a live key: %v, want ErrLiveRows", err)
	}
	ad := withDV(t, a, 0)
	v := tt.commit([]deltalog.Add{ad}, []deltalog.Remove{remove(a)})
	if err := x.Apply(ctx, tt.st, Change{Version: v, Updated: []deltalog.Add{ad}, Deleted: map[string][]uint64{a.Path: {0}}}); err != nil {
		t.Fatal(err)
	}
	if h, ok := x.Lookup(k1); ok {
		t.Errorf("key 1 after its row's DV: %+v", h)
	}
	if err := x.PutDeleted(k1, 99, t0); err != nil {
		t.Fatal(err)
	}
	if err := x.PutDeleted(k3, 300, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if h, ok := x.Lookup(k1); !ok || !reflect.DeepEqual(h, Hit{Seq: 99, Deleted: true, At: t0.Local()}) {
		t.Errorf("key 1: %+v %v", h, ok)
	}
	if s := x.Stats(); s.Deleted != 2 || s.Keys != 1 {
		t.Errorf("stats %+v, want 2 deleted, 1 key", s)
	}
	if n := x.Expire(t0.Add(time.Minute)); n != 1 {
		t.Errorf("Expire dropped %d, want 1", n)
	}
	if _, ok := x.Lookup(k1); ok {
		t.Error("key 1 still remembered after Expire")
	}
	if h, ok := x.Lookup(k3); !ok || !h.Deleted || h.Seq != 300 {
		t.Errorf("key 3: %+v", h)
	}
	// A new row of a deleted key replaces the remembered delete.
	n := tt.write(rowsOf(3), nil)
	v = tt.commit([]deltalog.Add{n}, nil)
	if err := x.Apply(ctx, tt.st, Change{Version: v, Added: []FileKeys{{Add: n, Keys: [][]byte{k3}, Seqs: []int64{301}}}}); err != nil {
		t.Fatal(err)
	}
	if h, ok := x.Lookup(k3); !ok || h.Deleted || h.Seq != 301 || len(h.Rows) != 1 {
		t.Errorf("key 3 re-inserted: %+v", h)
	}
	x.Forget(k2)
	if _, ok := x.Lookup(k2); ok {
		t.Error("key 2 after Forget")
	}
	if s := x.Stats(); s.Deleted != 0 || s.Keys != 1 {
		t.Errorf("stats %+v, want 0 deleted, 1 key", s)
	}
}

// With WithDeletedRows, Refresh remembers the deletes other writers made as Build does
// (the newest deleted row of a key with no newer live row): another keyed pipeline on the
// same table deleted key 2 (its row marked) and key 4 (a delete marker: its own row, kept
// in its new file and marked in the same commit). An index that only dropped the dead
// rows would forget both, and a change older than the delete would be written as new.
func TestRefreshRemembersOtherWritersDeletes(t *testing.T) {
	ctx := context.Background()
	tt := newTable(t, idSeqSchema, nil, true, false)
	a := tt.write(rowsOf(1, 2, 3), nil)
	tt.commit([]deltalog.Add{a}, nil)
	spec := Spec{Key: []string{"id"}, Sequence: "seq"}
	x, err := Build(ctx, tt.st, tt.snap(), spec, WithDeletedRows())
	if err != nil {
		t.Fatal(err)
	}
	m := tt.write([]map[string]any{{"id": int64(4), "seq": int64(77), "v": "x"}, {"id": int64(5), "seq": int64(50), "v": "x"}}, nil)
	ad, md := withDV(t, a, 1), withDV(t, m, 0)
	tt.commit([]deltalog.Add{ad, md}, []deltalog.Remove{remove(a)})
	names := map[string]string{a.Path: "a", m.Path: "m"}
	want := map[int64]string{1: "a#0@10 max@10", 2: "deleted@21", 3: "a#2@32 max@32", 4: "deleted@77", 5: "m#1@50 max@50"}
	if rs, err := x.Refresh(ctx, tt.st, tt.snap()); err != nil || rs != (RefreshStats{FilesRead: 2, FilesRemoved: 1}) {
		t.Fatalf("refresh: %+v, %v", rs, err)
	}
	built, err := Build(ctx, tt.st, tt.snap(), spec, WithDeletedRows())
	if err != nil {
		t.Fatal(err)
	}
	for id, w := range want {
		if got := hits(t, x, names, id); got != w {
			t.Errorf("refreshed index: key %d: %s, want %s", id, got, w)
		}
		if got := hits(t, built, names, id); got != w {
			t.Errorf("built index: key %d: %s, want %s", id, got, w)
		}
	}
	if s := x.Stats(); s.Deleted != 2 || s.Keys != 3 {
		t.Errorf("stats after refresh %+v, want 2 deleted, 3 keys", s)
	}
}
