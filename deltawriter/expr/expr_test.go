package expr

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

func schema() *deltalog.StructType {
	return &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "created_at", Type: deltalog.Timestamp, Nullable: true},
		{Name: "local_at", Type: deltalog.TimestampNtz, Nullable: true},
		{Name: "d", Type: deltalog.Date, Nullable: true},
		{Name: "s", Type: deltalog.String, Nullable: true},
		{Name: "my col.x", Type: deltalog.String, Nullable: true},
		{Name: "n", Type: deltalog.Long, Nullable: true},
		{Name: "arr", Type: &deltalog.ArrayType{ElementType: deltalog.Long}, Nullable: true},
	}}
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// eval compiles src in zone and evaluates it with the named columns' values.
func eval(t *testing.T, src string, zone string, vals map[string]Value) Value {
	t.Helper()
	e, err := Compile(src, schema(), Options{TimeZone: mustLoc(t, zone)})
	if err != nil {
		t.Fatalf("compile %s: %v", src, err)
	}
	args := make([]Value, len(e.Columns()))
	for i, c := range e.Columns() {
		v, ok := vals[c.Name]
		if !ok {
			v = Null(c.Type)
		}
		args[i] = v
	}
	v, err := e.Eval(args)
	if err != nil {
		t.Fatalf("eval %s: %v", src, err)
	}
	return v
}

func ts(us int64) Value  { return Int(deltalog.Timestamp, us) }
func ntz(us int64) Value { return Int(deltalog.TimestampNtz, us) }
func date(d int64) Value { return Int(deltalog.Date, d) }
func i32(v int64) Value  { return Int(deltalog.Integer, v) }

func micros(t *testing.T, s string) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixMicro()
}

// TestGeneratedDateTimeZone: the generated columns CAST(created_at AS DATE),
// YEAR/MONTH/DAY(created_at) of a Spark table partitioned by the date, under
// TZ=Australia/Melbourne. Computed in UTC they ignore the process zone:
// 1673269200000000 µs (2023-01-09T13:00:00Z) is 2023-01-09, 2023, 1, 9;
// 1704067199999999 µs is 2023-12-31; null gives NULL. In a Melbourne session the first is
// 2023-01-10 (where Spark sessions in another zone disagree); a timestamp_ntz needs no
// zone (2023-01-09 in both).
func TestGeneratedDateTimeZone(t *testing.T) {
	t.Setenv("TZ", "Australia/Melbourne")
	row0 := map[string]Value{"created_at": ts(1673269200000000)}
	row1 := map[string]Value{"created_at": ts(1704067199999999)}
	null := map[string]Value{}
	for _, c := range []struct {
		src  string
		row  map[string]Value
		zone string
		want Value
	}{
		{"CAST(created_at AS DATE)", row0, "UTC", date(19366)}, // 2023-01-09
		{"YEAR(created_at)", row0, "UTC", i32(2023)},
		{"MONTH(created_at)", row0, "UTC", i32(1)},
		{"DAY(created_at)", row0, "UTC", i32(9)},
		{"CAST(created_at AS DATE)", row1, "UTC", date(19722)}, // 2023-12-31
		{"YEAR(created_at)", row1, "UTC", i32(2023)},
		{"MONTH(created_at)", row1, "UTC", i32(12)},
		{"DAY(created_at)", row1, "UTC", i32(31)},
		{"CAST(created_at AS DATE)", null, "UTC", Null(deltalog.Date)},
		{"YEAR(created_at)", null, "UTC", Null(deltalog.Integer)},
		{"CAST(created_at AS DATE)", row0, "Australia/Melbourne", date(19367)}, // a Melbourne session: 2023-01-10
		{"cast(local_at as date)", map[string]Value{"local_at": ntz(1673269200000000)}, "Australia/Melbourne", date(19366)},
		{"cast(local_at as date)", map[string]Value{"local_at": ntz(1673269200000000)}, "UTC", date(19366)},
	} {
		if got := eval(t, c.src, c.zone, c.row); !NullSafeEqual(got, c.want) || got.Type != c.want.Type {
			t.Errorf("%s in %s on %v = %v (%v), want %v (%v)", c.src, c.zone, c.row, got, got.Type, c.want, c.want.Type)
		}
	}
}

func TestFunctions(t *testing.T) {
	mel := "Australia/Melbourne"
	for _, c := range []struct {
		src  string
		zone string
		row  map[string]Value
		want Value
	}{
		// pre-epoch: floor, not truncation
		{"to_date(created_at)", "UTC", map[string]Value{"created_at": ts(-1)}, date(-1)},
		{"date(created_at)", "UTC", map[string]Value{"created_at": ts(-86400000000)}, date(-1)},
		{"hour(created_at)", "UTC", map[string]Value{"created_at": ts(-1)}, i32(23)},
		{"date_format(created_at, 'yyyy-MM-dd-HH')", "UTC", map[string]Value{"created_at": ts(-1)}, Str("1969-12-31-23")},
		{"date_format(created_at, 'yyyy-MM-dd')", mel, map[string]Value{"created_at": ts(micros(t, "2023-01-09T13:00:00Z"))}, Str("2023-01-10")},
		{"date_format(created_at, 'yyyy-MM-dd HH:mm:ss')", "UTC", map[string]Value{"created_at": ts(micros(t, "0987-03-04T05:06:07Z"))}, Str("0987-03-04 05:06:07")},
		{"date_format(created_at, \"yy/M/d 'at' H''\")", "UTC", map[string]Value{"created_at": ts(micros(t, "2004-03-04T05:06:07Z"))}, Str("04/3/4 at 5'")},
		{"year(created_at)", "UTC", map[string]Value{"created_at": ts(micros(t, "2024-02-29T23:59:59.999999Z"))}, i32(2024)},
		{"dayofmonth(created_at)", "UTC", map[string]Value{"created_at": ts(micros(t, "2024-02-29T23:59:59.999999Z"))}, i32(29)},
		{"day(created_at)", mel, map[string]Value{"created_at": ts(micros(t, "2024-02-29T23:59:59.999999Z"))}, i32(1)},
		{"month(created_at)", mel, map[string]Value{"created_at": ts(micros(t, "2024-02-29T23:59:59.999999Z"))}, i32(3)},
		{"year(d)", "UTC", map[string]Value{"d": date(-719162)}, i32(1)}, // 0001-01-01
		{"month(s)", "UTC", map[string]Value{"s": Str(" 2023-7-4T10:00 ")}, i32(7)},
		{"CAST(s AS DATE)", "UTC", map[string]Value{"s": Str("2023")}, date(19358)},
		{"CAST(s AS DATE)", "UTC", map[string]Value{"s": Str("2023-02")}, date(19389)},
		{"CAST(s AS DATE)", "UTC", map[string]Value{"s": Str("-0001-01-01")}, date(-719893)},
		{"hour(local_at)", mel, map[string]Value{"local_at": ntz(micros(t, "2023-01-09T13:00:00Z"))}, i32(13)},
		{"hour(d)", mel, map[string]Value{"d": date(19366)}, i32(0)},
		// DST: Melbourne leaves daylight time 2023-04-02 03:00 (+11) → 02:00 (+10)
		{"date_trunc('HOUR', created_at)", mel, map[string]Value{"created_at": ts(micros(t, "2023-04-01T16:30:00Z"))}, ts(micros(t, "2023-04-01T16:00:00Z"))}, // 02:30 +10... first 02:30 is +11
		{"date_trunc('hour', created_at)", mel, map[string]Value{"created_at": ts(micros(t, "2023-04-01T15:30:00Z"))}, ts(micros(t, "2023-04-01T15:00:00Z"))},
		{"date_trunc('DAY', created_at)", mel, map[string]Value{"created_at": ts(micros(t, "2023-04-02T05:00:00Z"))}, ts(micros(t, "2023-04-01T13:00:00Z"))},
		{"date_trunc('DD', created_at)", "UTC", map[string]Value{"created_at": ts(-1)}, ts(-86400000000)},
		// Melbourne enters daylight time 2023-10-01 02:00 (+10) → 03:00 (+11): 02:30 does not exist
		{"date_format(local_at, 'yyyy-MM-dd-HH')", mel, map[string]Value{"local_at": ntz(micros(t, "2023-10-01T02:30:00Z"))}, Str("2023-10-01-03")},
		{"date_trunc('DAY', local_at)", mel, map[string]Value{"local_at": ntz(micros(t, "2023-10-01T12:00:00Z"))}, ts(micros(t, "2023-09-30T14:00:00Z"))},
		{"date_trunc('HOUR', d)", mel, map[string]Value{"d": date(19366)}, ts(micros(t, "2023-01-08T13:00:00Z"))},
		// Spark's substringSQL
		{"substring(s, 1, 3)", "UTC", map[string]Value{"s": Str("héllo")}, Str("hél")},
		{"substring(s, 0, 3)", "UTC", map[string]Value{"s": Str("hello")}, Str("hel")},
		{"substring(s, -3, 2)", "UTC", map[string]Value{"s": Str("hello")}, Str("ll")},
		{"substring(s, -10, 7)", "UTC", map[string]Value{"s": Str("hello")}, Str("he")},
		{"substring(s, 3)", "UTC", map[string]Value{"s": Str("hello")}, Str("llo")},
		{"substr(s, 9, 2)", "UTC", map[string]Value{"s": Str("hello")}, Str("")},
		{"substring(s, 2, -1)", "UTC", map[string]Value{"s": Str("hello")}, Str("")},
		{"substring(s, 2, NULL)", "UTC", map[string]Value{"s": Str("hello")}, Null(deltalog.String)},
		{"substring(s, 2, 2)", "UTC", map[string]Value{}, Null(deltalog.String)},
		// identity, backticks, case-insensitive names
		{"S", "UTC", map[string]Value{"s": Str("x")}, Str("x")},
		{"`my col.x`", "UTC", map[string]Value{"my col.x": Str("y")}, Str("y")},
		{"substring(`MY COL.X`, 2)", "UTC", map[string]Value{"my col.x": Str("xyz")}, Str("yz")},
		{"CREATED_AT", "UTC", map[string]Value{"created_at": ts(5)}, ts(5)},
	} {
		if got := eval(t, c.src, c.zone, c.row); !NullSafeEqual(got, c.want) || got.Type != c.want.Type {
			t.Errorf("%s in %s on %v = %v (%v), want %v (%v)", c.src, c.zone, c.row, got, got.Type, c.want, c.want.Type)
		}
	}
}

func TestStringToDate(t *testing.T) {
	for s, want := range map[string]int64{"2023-01-09": 19366, "2023-1-9": 19366, "2023-01-09 10:00": 19366, "2023-01-09Tx": 19366, "\t2023-01-09\n": 19366, "+2023-01-09": 19366, "1970": 0} {
		if got, ok := stringToDate(s); !ok || got != want {
			t.Errorf("stringToDate(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "202-01-01", "2023-13-01", "2023-02-30", "2023-01-09x", "2023-001-01", "2023 01", "abc", "2023-01-091", "12345678-01-01"} {
		if got, ok := stringToDate(s); ok {
			t.Errorf("stringToDate(%q) = %d, want no date", s, got)
		}
	}
	e, err := Compile("CAST(s AS DATE)", schema(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval([]Value{Str("2023-02-30")}); err == nil || !strings.Contains(err.Error(), `"2023-02-30"`) {
		t.Errorf("an invalid date string: got %v, want an error naming the value", err)
	}
}

func TestTypes(t *testing.T) {
	for src, want := range map[string]deltalog.DataType{
		"CAST(created_at AS DATE)": deltalog.Date, "year(created_at)": deltalog.Integer, "hour(local_at)": deltalog.Integer,
		"date_format(created_at, 'yyyy-MM-dd-HH')": deltalog.String, "date_trunc('DAY', created_at)": deltalog.Timestamp,
		"substring(s, 1, 2)": deltalog.String, "n": deltalog.Long, "local_at": deltalog.TimestampNtz,
	} {
		e, err := Compile(src, schema(), Options{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if e.Type() != want {
			t.Errorf("%s: type %v, want %v", src, e.Type(), want)
		}
	}
}

func TestErrors(t *testing.T) {
	for src, want := range map[string]string{
		"CAST(created_at AS INTERVAL)":        "CAST to INTERVAL",
		"created_at + 1":                      "operator +",
		"regexp_like(s, '^a')":                "function regexp_like",
		"missing":                             "column `missing` does not exist",
		"date_trunc('MONTH', created_at)":     `date_trunc unit "MONTH"`,
		"date_format(created_at, 'yyyy-MMM')": `"MMM"`,
		"date_format(created_at, s)":          "pattern that is not a string literal",
		"to_date(s, 'yyyy')":                  "to_date with a format",
		"year(n)":                             "a long argument",
		"substring(n, 1)":                     "a long first argument",
		"arr":                                 "column `arr` of type array<long>",
		"a.b":                                 "nested field reference",
		"s || 'x'":                            "operator ||",
		"year(created_at":                     `or ")", found ""`,
		"year(created_at))":                   `unexpected ")"`,
		"'abc":                                "unterminated string",
		"hour()":                              "hour takes 1 argument(s)",
		"s = 'x' AND n IN (1, s)":             "mixing long and string",
	} {
		_, err := Compile(src, schema(), Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", src, err, want)
		}
	}
	if _, err := Compile("regexp_like(s, '^a')", schema(), Options{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("an unsupported function: %v does not wrap ErrUnsupported", err)
	}
	if _, err := Compile("missing", schema(), Options{}); errors.Is(err, ErrUnsupported) {
		t.Errorf("an unknown column: %v wraps ErrUnsupported", err)
	}
}

// TestParse checks the grammar's precedence and literals, as String renders the tree.
func TestParse(t *testing.T) {
	for src, want := range map[string]string{
		"a OR b AND NOT c = 1":                   "(`a` OR (`b` AND NOT (`c` = 1)))",
		"a + b * -2 || 'x'":                      "((`a` + (`b` * -2)) || 'x')",
		"x NOT BETWEEN 1 AND 2 AND y":            "(`x` NOT BETWEEN 1 AND 2 AND `y`)",
		"x not in (1, 'a\\'b') or z is not null": "(`x` NOT IN (1, 'a\\'b') OR `z` IS NOT NULL)",
		"`a``b`.c LIKE 'x%'":                     "`a``b`.`c` LIKE 'x%'",
		"CAST(a AS decimal(10, 2))":              "CAST(`a` AS DECIMAL(10,2))",
		"a <=> NULL":                             "(`a` <=> NULL)",
	} {
		n, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := String(n); got != want {
			t.Errorf("%s parses as %s, want %s", src, got, want)
		}
	}
}

func TestParquetRoundTrip(t *testing.T) {
	for _, v := range []Value{date(-1), ts(-5), ntz(7), i32(2023), Int(deltalog.Long, 1<<40), Str("é"), Null(deltalog.Date)} {
		p, err := ToParquet(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromParquet(v.Type, p)
		if err != nil {
			t.Fatal(err)
		}
		if !NullSafeEqual(v, back) {
			t.Errorf("%v → %v → %v", v, p, back)
		}
	}
	if p, _ := ToParquet(date(19366)); p.Kind() != parquet.Int32 || p.Int32() != 19366 {
		t.Errorf("a date is INT32 days: %v", p)
	}
	if p, _ := ToParquet(ts(1673269200000000)); p.Kind() != parquet.Int64 || p.Int64() != 1673269200000000 {
		t.Errorf("a timestamp is INT64 µs: %v", p)
	}
}
