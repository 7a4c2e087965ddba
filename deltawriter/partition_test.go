package deltawriter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestPartitionStringValues: a string partition column "region" and values Spark escapes
// (a slash, ':', '=', '%', '{'), leaves alone (a space, '&', '$', '}', non-ASCII) or
// treats specially (the empty string and null: the null partition; the strings "NULL" and
// "__HIVE_DEFAULT_PARTITION__" kept as they are): for each, add.partitionValues, the
// directory (Hive escaping, upper-case %XX), the add.path prefix (that directory as a
// relative URI, a second layer of escaping) and the object key add.path decodes to. Other
// writers got these wrong: "ID$" written as ID%2524 and then looked up as ID$, values with
// '&' or '/' unreadable.
func TestPartitionStringValues(t *testing.T) {
	null := "<null>"
	cases := []struct {
		in        *string
		pv        string // null: JSON null
		dir, path string
	}{
		{sp("US/East"), "US/East", "region=US%2FEast", "region=US%252FEast/"},
		{sp("a:b"), "a:b", "region=a%3Ab", "region=a%253Ab/"},
		{sp("x=y"), "x=y", "region=x%3Dy", "region=x%253Dy/"},
		{sp("100%"), "100%", "region=100%25", "region=100%2525/"},
		{sp("a b"), "a b", "region=a b", "region=a%20b/"},
		{sp("R&D"), "R&D", "region=R&D", "region=R&D/"},
		{sp("ID$"), "ID$", "region=ID$", "region=ID$/"},
		{sp("a{b}"), "a{b}", "region=a%7Bb}", "region=a%257Bb%7D/"},
		{sp("München"), "München", "region=München", "region=München/"},
		{sp(" "), " ", "region= ", "region=%20/"},
		{sp(""), null, "region=__HIVE_DEFAULT_PARTITION__", "region=__HIVE_DEFAULT_PARTITION__/"},
		{nil, null, "region=__HIVE_DEFAULT_PARTITION__", "region=__HIVE_DEFAULT_PARTITION__/"},
		{sp("NULL"), "NULL", "region=NULL", "region=NULL/"},
		{sp("__HIVE_DEFAULT_PARTITION__"), "__HIVE_DEFAULT_PARTITION__", "region=__HIVE_DEFAULT_PARTITION__", "region=__HIVE_DEFAULT_PARTITION__/"},
		{sp("a\tb"), "a\tb", "region=a%09b", "region=a%2509b/"},
	}
	for _, c := range cases {
		v := parquet.NullValue()
		if c.in != nil {
			v = parquet.ByteArrayValue([]byte(*c.in))
		}
		pv, err := PartitionValue(deltalog.String, v)
		if err != nil {
			t.Fatal(err)
		}
		if got := str(pv); got != c.pv && !(pv == nil && c.pv == null) {
			t.Errorf("%q: pv %q; want %q", deref(c.in), got, c.pv)
		}
		dir := PartitionDir([]string{"region"}, []string{PartitionDirValue(deltalog.String, pv, 0)})
		if dir != c.dir {
			t.Errorf("%q: directory %q; want %q", deref(c.in), dir, c.dir)
		}
		if p := escapePath(dir + "/part-00000-x-c000.snappy.parquet"); p[:len(c.path)] != c.path {
			t.Errorf("%q: add.path %q; want prefix %q", deref(c.in), p, c.path)
		}
		if back := deltalog.CanonicalPath(escapePath(dir + "/f.parquet")); back != dir+"/f.parquet" {
			t.Errorf("%q: add.path decodes once to %q; want the object key %q", deref(c.in), back, dir+"/f.parquet")
		}
	}
	if p := escapePath("a<b>c|d`e"); p != "a%3Cb%3Ec%7Cd%60e" {
		t.Errorf("escapePath(a<b>c|d`e) = %q", p)
	}
}

// TestPartitionTypedValues: a table partitioned by int, long, boolean, date,
// decimal(10,2) and double columns; the values and directories Spark writes for the
// extremes, -0.0 (written "0.0", the partition of 0.0), 1e7 (Java's "1.0E7"), a decimal
// keeping its scale ("42.00"), lower-case booleans, and a row of nulls.
func TestPartitionTypedValues(t *testing.T) {
	dec := deltalog.DecimalType{Precision: 10, Scale: 2}
	type col struct {
		t deltalog.DataType
		v parquet.Value
	}
	check := func(row string, cols []col, want []string, wantDir string) {
		t.Helper()
		names := []string{"p_int", "p_long", "p_bool", "p_date", "p_dec", "p_dbl"}
		var dirs []string
		for i, c := range cols {
			pv, err := PartitionValue(c.t, c.v)
			if err != nil {
				t.Fatal(err)
			}
			if got := str(pv); got != want[i] {
				t.Errorf("%s %s: pv %q; want %q", row, names[i], got, want[i])
			}
			dirs = append(dirs, PartitionDirValue(c.t, pv, 0))
		}
		if d := PartitionDir(names, dirs); d != wantDir {
			t.Errorf("%s: directory %q; want %q", row, d, wantDir)
		}
	}
	check("r1", []col{{deltalog.Integer, parquet.Int32Value(-1)}, {deltalog.Long, parquet.Int64Value(math.MaxInt64)},
		{deltalog.Boolean, parquet.BooleanValue(false)}, {deltalog.Date, parquet.Int32Value(19366)}, {dec, parquet.Int64Value(4200)},
		{deltalog.Double, parquet.DoubleValue(math.Copysign(0, -1))}},
		[]string{"-1", "9223372036854775807", "false", "2023-01-09", "42.00", "0.0"},
		"p_int=-1/p_long=9223372036854775807/p_bool=false/p_date=2023-01-09/p_dec=42.00/p_dbl=0.0")
	check("r2", []col{{deltalog.Integer, parquet.Int32Value(0)}, {deltalog.Long, parquet.Int64Value(math.MinInt64)},
		{deltalog.Boolean, parquet.BooleanValue(true)}, {deltalog.Date, parquet.Int32Value(0)}, {dec, parquet.Int64Value(-5)},
		{deltalog.Double, parquet.DoubleValue(1e7)}},
		[]string{"0", "-9223372036854775808", "true", "1970-01-01", "-0.05", "1.0E7"},
		"p_int=0/p_long=-9223372036854775808/p_bool=true/p_date=1970-01-01/p_dec=-0.05/p_dbl=1.0E7")
	n := parquet.NullValue()
	h := HiveDefaultPartition
	check("r3", []col{{deltalog.Integer, n}, {deltalog.Long, n}, {deltalog.Boolean, n}, {deltalog.Date, n}, {dec, n}, {deltalog.Double, n}},
		[]string{"<null>", "<null>", "<null>", "<null>", "<null>", "<null>"},
		"p_int="+h+"/p_long="+h+"/p_bool="+h+"/p_date="+h+"/p_dec="+h+"/p_dbl="+h)
	// Decimal on a fixed-length byte array (precision 38), scale kept.
	b := make([]byte, 16)
	for i := range b {
		b[i] = 0xFF
	}
	b[15] = 0x9C // -100
	if pv, _ := PartitionValue(deltalog.DecimalType{Precision: 38, Scale: 3}, parquet.FixedLenByteArrayValue(b)); str(pv) != "-0.100" {
		t.Errorf("decimal(38,3) -100: %q; want -0.100", str(pv))
	}
	if pv, _ := PartitionValue(deltalog.DecimalType{Precision: 5, Scale: 0}, parquet.Int32Value(7)); str(pv) != "7" {
		t.Errorf("decimal(5,0) 7: %q", str(pv))
	}
	for _, ty := range []deltalog.DataType{deltalog.Byte, deltalog.Short} {
		if pv, _ := PartitionValue(ty, parquet.Int32Value(-128)); str(pv) != "-128" {
			t.Errorf("%s -128: %q", ty, str(pv))
		}
	}
}

// TestJavaDoubleString: Java's Double.toString and Float.toString, as Spark writes them.
func TestJavaDoubleString(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits int
		want string
	}{
		{1e7, 64, "1.0E7"}, {9999999, 64, "9999999.0"}, {0.001, 64, "0.001"}, {0.0001, 64, "1.0E-4"},
		{1.5, 64, "1.5"}, {-2.25, 64, "-2.25"}, {100, 64, "100.0"}, {123456.789, 64, "123456.789"},
		{1.2345e-5, 64, "1.2345E-5"}, {-1.5e300, 64, "-1.5E300"}, {math.Copysign(0, -1), 64, "0.0"}, {0, 64, "0.0"},
		{math.NaN(), 64, "NaN"}, {math.Inf(1), 64, "Infinity"}, {math.Inf(-1), 64, "-Infinity"},
		{float64(float32(0.1)), 32, "0.1"}, {float64(float32(3.4e38)), 32, "3.4E38"}, {float64(float32(1e7)), 32, "1.0E7"},
	} {
		if got := javaFloatString(c.f, c.bits); got != c.want {
			t.Errorf("javaFloatString(%v, %d) = %q; want %q", c.f, c.bits, got, c.want)
		}
	}
	if pv, _ := PartitionValue(deltalog.Float, parquet.FloatValue(0.1)); str(pv) != "0.1" {
		t.Errorf("float 0.1: %q", str(pv))
	}
}

// TestPartitionTimestamps: timestamp and timestamp_ntz partition values of the instants
// 1718479845000000, 1718495999999999, 0, -1 and -2342342342 µs, with the process zone at
// UTC+11: a timestamp is written in UTC ISO-8601 with six fraction digits (Delta 3.3+),
// the seconds found by floor division (-2342342342 µs is 23:20:57.657658 on 1969-12-31,
// not :58); a timestamp_ntz zone-less; the directory as Spark renders it in UTC (fraction
// without trailing zeros); and the legacy zone-less form written by Spark before Delta
// 3.3 is the same partition as the ISO form of the same instant.
func TestPartitionTimestamps(t *testing.T) {
	old := time.Local
	time.Local = time.FixedZone("Melbourne", 11*3600)
	defer func() { time.Local = old }()
	values := []int64{1718479845000000, 1718495999999999, 0, -1, -2342342342}
	wantTS := []string{"2024-06-15T19:30:45.000000Z", "2024-06-15T23:59:59.999999Z", "1970-01-01T00:00:00.000000Z", "1969-12-31T23:59:59.999999Z", "1969-12-31T23:20:57.657658Z"}
	wantNtz := []string{"2024-06-15 19:30:45", "2024-06-15 23:59:59.999999", "1970-01-01 00:00:00", "1969-12-31 23:59:59.999999", "1969-12-31 23:20:57.657658"}
	wantDir := []string{"window_start=2024-06-15 19%3A30%3A45", "window_start=2024-06-15 23%3A59%3A59.999999", "window_start=1970-01-01 00%3A00%3A00",
		"window_start=1969-12-31 23%3A59%3A59.999999", "window_start=1969-12-31 23%3A20%3A57.657658"}
	for i, us := range values {
		pv, err := PartitionValue(deltalog.Timestamp, parquet.Int64Value(us))
		if err != nil {
			t.Fatal(err)
		}
		if str(pv) != wantTS[i] {
			t.Errorf("timestamp %d: pv %q; want %q", us, str(pv), wantTS[i])
		}
		dir := PartitionDir([]string{"window_start"}, []string{PartitionDirValue(deltalog.Timestamp, pv, us)})
		if dir != wantDir[i] {
			t.Errorf("timestamp %d: directory %q; want %q", us, dir, wantDir[i])
		}
		if back, err := ParsePartitionTimestamp(*pv, nil); err != nil || back != us {
			t.Errorf("parse %q: %d, %v; want %d", *pv, back, err, us)
		}
		ntz, _ := PartitionValue(deltalog.TimestampNtz, parquet.Int64Value(us))
		if str(ntz) != wantNtz[i] {
			t.Errorf("timestamp_ntz %d: pv %q; want %q", us, str(ntz), wantNtz[i])
		}
		if back, err := ParsePartitionTimestamp(*ntz, nil); err != nil || back != us {
			t.Errorf("parse legacy %q as UTC: %d, %v; want %d", *ntz, back, err, us)
		}
	}
	if p := escapePath("window_start=2024-06-15 19%3A30%3A45/part-x"); p != "window_start=2024-06-15%2019%253A30%253A45/part-x" {
		t.Errorf("add.path %q", p)
	}
	if pv, _ := PartitionValue(deltalog.Timestamp, parquet.NullValue()); pv != nil || PartitionDirValue(deltalog.Timestamp, pv, 0) != HiveDefaultPartition {
		t.Errorf("null timestamp: %v", pv)
	}
	// A table written by Spark before Delta 3.3: the legacy form and the ISO form are the
	// same partition.
	a, _ := NormalizePartitionValue(deltalog.Timestamp, sp("2024-06-15 19:30:45"), nil)
	b, _ := NormalizePartitionValue(deltalog.Timestamp, sp("2024-06-15T19:30:45.000000Z"), nil)
	if str(a) != "2024-06-15T19:30:45.000000Z" || str(b) != str(a) {
		t.Errorf("normalised legacy %q, ISO %q; want both 2024-06-15T19:30:45.000000Z", str(a), str(b))
	}
	if c, _ := NormalizePartitionValue(deltalog.Timestamp, sp("2024-06-15 19:30:45"), time.FixedZone("x", 3600)); str(c) != "2024-06-15T18:30:45.000000Z" {
		t.Errorf("legacy in UTC+1: %q", str(c))
	}
}

// TestCheckPartitionColumns: binary and nested partition columns are refused by name.
func TestCheckPartitionColumns(t *testing.T) {
	s := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "id", Type: deltalog.Long}, {Name: "raw", Type: deltalog.Binary},
		{Name: "s", Type: &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "a", Type: deltalog.Long}}}},
		{Name: "ts", Type: deltalog.Timestamp}, {Name: "d", Type: deltalog.DecimalType{Precision: 10, Scale: 2}},
	}}
	if err := CheckPartitionColumns(s, []string{"id", "TS", "d"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"raw", "s"} {
		if err := CheckPartitionColumns(s, []string{c}); !errors.Is(err, deltalog.ErrPartitionType) {
			t.Errorf("%s: %v; want ErrPartitionType", c, err)
		}
	}
	if err := CheckPartitionColumns(s, []string{"nope"}); err == nil {
		t.Error("missing column: want an error")
	}
}

func sp(s string) *string { return &s }

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestPartitionTimestampsCheckpointRoundTrip: every value of TestPartitionTimestamps
// (timestamp and timestamp_ntz, null included) survives a checkpoint ingestd writes: read
// back from the checkpoint alone, each add's partitionValues are the same strings, and
// each parses to its µs (a writer's checkpoint that could not parse its own values back
// broke its table).
func TestPartitionTimestampsCheckpointRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"window_start","type":"timestamp","nullable":true,"metadata":{}},{"name":"local_start","type":"timestamp_ntz","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	create, _, err := PrepareSchemaChange(nil, SchemaChange{Name: "windows", Schema: schema, PartitionColumns: []string{"window_start", "local_start"}})
	if err != nil {
		t.Fatal(err)
	}
	values := []int64{1718479845000000, 1718495999999999, 0, -1, -2342342342}
	c := Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata, Operation: "WRITE"}
	want := map[string][2]*string{}
	micros := map[string]int64{}
	for i := 0; i <= len(values); i++ {
		v := parquet.NullValue()
		if i < len(values) {
			v = parquet.Int64Value(values[i])
		}
		ts, _ := PartitionValue(deltalog.Timestamp, v)
		ntz, _ := PartitionValue(deltalog.TimestampNtz, v)
		path := fmt.Sprintf("f%d.parquet", i)
		want[path] = [2]*string{ts, ntz}
		if i < len(values) {
			micros[path] = values[i]
		}
		c.Adds = append(c.Adds, deltalog.Add{Path: path, PartitionValues: map[string]*string{"window_start": ts, "local_start": ntz}, Size: 1, DataChange: true})
	}
	if _, err := tbl.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeCheckpoint(ctx, st, snap, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := readCheckpoint(ctx, st, snap.Version, []string{fmt.Sprintf("%020d.checkpoint.parquet", snap.Version)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Files.Len() != len(want) {
		t.Fatalf("checkpoint holds %d files, want %d", got.Files.Len(), len(want))
	}
	for _, a := range got.Files.All() {
		w := want[a.Path]
		if str(a.PartitionValues["window_start"]) != str(w[0]) || str(a.PartitionValues["local_start"]) != str(w[1]) {
			t.Errorf("%s: %s / %s after the checkpoint, want %s / %s", a.Path, str(a.PartitionValues["window_start"]), str(a.PartitionValues["local_start"]), str(w[0]), str(w[1]))
		}
		if w[0] == nil {
			continue
		}
		a1, err1 := ParsePartitionTimestamp(*a.PartitionValues["window_start"], nil)
		a2, err2 := ParsePartitionTimestamp(*a.PartitionValues["local_start"], nil)
		if err1 != nil || err2 != nil || a1 != micros[a.Path] || a2 != micros[a.Path] {
			t.Errorf("%s: parse %d (%v), %d (%v); want %d", a.Path, a1, err1, a2, err2, micros[a.Path])
		}
	}
}

// FuzzPartitionPath: for any string value, the directory and add.path ingestd builds
// decode back exactly once to the store path (deltalog.CanonicalPath), the directory is
// one path segment (no '/' survives escaping), and pv is the value (empty → null).
func FuzzPartitionPath(f *testing.F) {
	for _, s := range []string{"US/East", "a:b", "x=y", "100%", "a b", "R&D", "ID$", "a{b}", "München", " ", "", "NULL", HiveDefaultPartition, "a\tb", "%2F", "a<b>|`", "\u00a0x", "..", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip() // a string column holds UTF-8
		}
		pv, err := PartitionValue(deltalog.String, parquet.ByteArrayValue([]byte(s)))
		if err != nil {
			t.Fatal(err)
		}
		if (s == "") != (pv == nil) || (pv != nil && *pv != s) {
			t.Fatalf("pv of %q = %v", s, pv)
		}
		dir := PartitionDir([]string{"p"}, []string{PartitionDirValue(deltalog.String, pv, 0)})
		if strings.Contains(dir, "/") {
			t.Fatalf("directory %q of %q has a '/'", dir, s)
		}
		key := dir + "/part-00000-x-c000.snappy.parquet"
		if back := deltalog.CanonicalPath(escapePath(key)); back != key {
			t.Fatalf("add.path %q decodes to %q, want %q", escapePath(key), back, key)
		}
	})
}
