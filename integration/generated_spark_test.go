package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

// genExprs are the generation expressions the property test compares with Spark, over
// the columns of genInputSchema.
var genExprs = []string{
	"CAST(ts AS DATE)", "to_date(ts)", "date(ts)", "year(ts)", "month(ts)", "day(ts)", "dayofmonth(ts)", "hour(ts)",
	"date_format(ts, 'yyyy-MM-dd')", "date_format(ts, 'yyyy-MM-dd-HH')", "date_trunc('HOUR', ts)", "date_trunc('DAY', ts)",
	"CAST(ntz AS DATE)", "to_date(ntz)", "year(ntz)", "month(ntz)", "day(ntz)", "hour(ntz)",
	"date_format(ntz, 'yyyy-MM-dd')", "date_format(ntz, 'yyyy-MM-dd-HH')", "date_trunc('HOUR', ntz)", "date_trunc('DAY', ntz)",
	"CAST(d AS DATE)", "year(d)", "month(d)", "day(d)", "date_format(d, 'yyyy-MM-dd-HH')", "date_trunc('DAY', d)",
	"CAST(ds AS DATE)", "to_date(ds)", "year(ds)", "month(ds)", "day(ds)",
	"substring(s, p, l)", "substring(s, p)", "substr(s, p, l)", "ts", "`s`",
}

var genInputSchema = &deltalog.StructType{Fields: []*deltalog.StructField{
	{Name: "ts", Type: deltalog.Timestamp, Nullable: true},
	{Name: "ntz", Type: deltalog.TimestampNtz, Nullable: true},
	{Name: "d", Type: deltalog.Date, Nullable: true},
	{Name: "ds", Type: deltalog.String, Nullable: true},
	{Name: "s", Type: deltalog.String, Nullable: true},
	{Name: "p", Type: deltalog.Integer, Nullable: true},
	{Name: "l", Type: deltalog.Integer, Nullable: true},
}}

// genRow is one input row: nil fields are NULL.
type genRow struct {
	ts, ntz *int64 // µs
	d       *int64 // days
	ds, s   *string
	p, l    *int64
}

// genZones are the session zones compared: a half-hour offset, southern and northern
// DST, and pre-1900 local mean time.
var genZones = []string{"UTC", "Australia/Melbourne", "America/New_York", "Asia/Kolkata", "Europe/Berlin"}

// transitions returns instants around every offset change of zone in the given years.
func transitions(zone string, years ...int) []int64 {
	loc, _ := time.LoadLocation(zone)
	var out []int64
	for _, y := range years {
		t := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		_, prev := t.In(loc).Zone()
		for end := t.AddDate(1, 0, 0); t.Before(end); t = t.Add(time.Hour) {
			if _, off := t.In(loc).Zone(); off != prev {
				tr := t.UnixMicro()
				for _, d := range []int64{-3600e6 - 1, -1800e6, -1, 0, 1, 1800e6, 3600e6, 5400e6} {
					out = append(out, tr+d)
				}
				prev = off
			}
		}
	}
	return out
}

// genRows returns the property test's inputs: fixed edge values (epoch, pre-epoch,
// leap days, DST transitions of every zone as instants and as wall-clock times, LMT
// years) and seeded random ones.
func genRows() []genRow {
	r := rand.New(rand.NewPCG(13, 2))
	p64 := func(v int64) *int64 { return &v }
	ps := func(s string) *string { return &s }
	var instants []int64
	for _, s := range []string{"1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999999Z", "2024-02-29T12:00:00Z", "2023-02-28T23:30:00Z",
		"2000-02-29T23:59:59.999999Z", "1900-03-01T00:00:00Z", "1890-06-15T10:20:30.5Z", "2100-12-31T23:00:00Z", "2023-01-09T13:00:00Z", "2023-12-31T23:59:59.999999Z", "1582-10-15T01:00:00Z"} {
		tm, _ := time.Parse(time.RFC3339Nano, s)
		instants = append(instants, tm.UnixMicro())
	}
	for _, z := range genZones {
		instants = append(instants, transitions(z, 2023, 1950, 1916, 2038)...)
	}
	lo, hi := time.Date(1850, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for len(instants) < 420 {
		instants = append(instants, lo+r.Int64N(hi-lo))
	}
	strs := []string{"", "a", "hello", "héllo wörld", "中文字符串", "😀x😀", "2023-01-09", "spaces  here", "0123456789"}
	dateStrs := []string{"2023-01-09", "2023-1-9", "  2024-02-29 ", "2023-01-09 13:00:00", "2023-01-09T23:59:59", "1999", "2000-12", "+2023-06-30", "0987-03-04", "1969-12-31"}
	var rows []genRow
	for i, us := range instants {
		row := genRow{ts: p64(us), ntz: p64(us + r.Int64N(7200e6) - 3600e6), d: p64(floorDiv(us, 86400e6)),
			ds: ps(dateStrs[i%len(dateStrs)]), s: ps(strs[i%len(strs)]), p: p64(r.Int64N(15) - 7), l: p64(r.Int64N(10) - 2)}
		if i%4 == 1 { // wall-clock times right at the transitions (gaps and overlaps)
			row.ntz = p64(us + 3600e6*int64(i%3))
		}
		switch i % 17 { // NULLs in each column
		case 3:
			row.ts = nil
		case 5:
			row.ntz = nil
		case 7:
			row.d = nil
		case 9:
			row.s = nil
		case 11:
			row.p = nil
		case 13:
			row.l = nil
		case 15:
			row.ds = nil
		}
		rows = append(rows, row)
	}
	return rows
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// sqlValues renders rows as a Spark VALUES table t(id, ts, ntz, d, ds, s, p, l).
func sqlValues(rows []genRow) string {
	lit := func(v *int64, f func(int64) string, typ string) string {
		if v == nil {
			return "CAST(NULL AS " + typ + ")"
		}
		return f(*v)
	}
	str := func(s *string) string {
		if s == nil {
			return "CAST(NULL AS STRING)"
		}
		return "'" + strings.ReplaceAll(strings.ReplaceAll(*s, `\`, `\\`), "'", `\'`) + "'"
	}
	var b strings.Builder
	b.WriteString("VALUES ")
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, %s, %s, %s, %s, %s, %s, %s)", i,
			lit(r.ts, func(v int64) string { return fmt.Sprintf("TIMESTAMP_MICROS(%d)", v) }, "TIMESTAMP"),
			lit(r.ntz, func(v int64) string {
				return "TIMESTAMP_NTZ '" + time.UnixMicro(v).UTC().Format("2006-01-02 15:04:05.000000") + "'"
			}, "TIMESTAMP_NTZ"),
			lit(r.d, func(v int64) string { return fmt.Sprintf("DATE_FROM_UNIX_DATE(%d)", v) }, "DATE"),
			str(r.ds), str(r.s),
			lit(r.p, func(v int64) string { return fmt.Sprint(v) }, "INT"),
			lit(r.l, func(v int64) string { return fmt.Sprint(v) }, "INT"))
	}
	b.WriteString(" AS t(id, ts, ntz, d, ds, s, p, l)")
	return b.String()
}

// render is a Value as the Spark helper renders a result (testdata/spark_delta_session.py:
// dates ISO, timestamps µs, NULL null), in JSON.
func render(v expr.Value) string {
	if v.Null {
		return "null"
	}
	var x any
	switch v.Type {
	case deltalog.Date:
		x = time.Unix(v.Int*86400, 0).UTC().Format("2006-01-02")
	case deltalog.String:
		x = v.Str
	default:
		x = v.Int
	}
	b, _ := json.Marshal(x)
	return string(b)
}

// evalGo evaluates every genExprs on every row in zone with ingestd's evaluator.
func evalGo(t *testing.T, rows []genRow, zone string) [][]string {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]string, len(rows))
	for k, src := range genExprs {
		e, err := expr.Compile(src, genInputSchema, expr.Options{TimeZone: loc})
		if err != nil {
			t.Fatalf("compile %s: %v", src, err)
		}
		for i, r := range rows {
			vals := map[string]*int64{"ts": r.ts, "ntz": r.ntz, "d": r.d, "p": r.p, "l": r.l}
			svals := map[string]*string{"ds": r.ds, "s": r.s}
			args := make([]expr.Value, len(e.Columns()))
			for j, c := range e.Columns() {
				args[j] = expr.Null(c.Type)
				if v := vals[c.Name]; v != nil {
					args[j] = expr.Int(c.Type, *v)
				} else if s := svals[c.Name]; s != nil {
					args[j] = expr.Str(*s)
				}
			}
			v, err := e.Eval(args)
			if err != nil {
				t.Fatalf("%s on row %d: %v", src, i, err)
			}
			if out[i] == nil {
				out[i] = make([]string, len(genExprs))
			}
			out[i][k] = render(v)
		}
	}
	return out
}

// generatedPropertyVsSpark compares ingestd's evaluator with Spark on every
// (expression, row, session zone) of genExprs × genRows × genZones, one query per zone.
func generatedPropertyVsSpark(t *testing.T, spark *sparkSession) {
	rows := genRows()
	cols := make([]string, len(genExprs))
	for k, e := range genExprs {
		cols[k] = fmt.Sprintf("%s AS e%d", e, k)
	}
	query := "SELECT id, " + strings.Join(cols, ", ") + " FROM " + sqlValues(rows) + " ORDER BY id"
	cases, mismatches, nonNull := 0, 0, 0
	byZone := map[string][]map[string]json.RawMessage{}
	for _, zone := range genZones {
		spark.call(t, map[string]any{"op": "sql", "query": "SET spark.sql.session.timeZone=" + zone}, nil)
		var got []map[string]json.RawMessage
		spark.call(t, map[string]any{"op": "sql", "query": query}, &got)
		if len(got) != len(rows) {
			t.Fatalf("%s: Spark returned %d rows, want %d", zone, len(got), len(rows))
		}
		byZone[zone] = got
		want := evalGo(t, rows, zone)
		for i, r := range got {
			for k := range genExprs {
				cases++
				g := strings.TrimSpace(string(r[fmt.Sprintf("e%d", k)]))
				if g != "null" {
					nonNull++
				}
				if g != want[i][k] {
					if mismatches++; mismatches <= 40 {
						t.Errorf("zone %s, %s on row %d (%+v): Spark %s, ingestd %s", zone, genExprs[k], i, showRow(rows[i]), g, want[i][k])
					}
				}
			}
		}
	}
	spark.call(t, map[string]any{"op": "sql", "query": "SET spark.sql.session.timeZone=UTC"}, nil)
	// The comparison is not vacuous: most results are values, and the session zone
	// changes CAST(ts AS DATE) on some rows (e0) and hour(ts) on every row but NULLs (e7).
	zoneMatters := 0
	for i := range rows {
		if string(byZone["UTC"][i]["e0"]) != string(byZone["Australia/Melbourne"][i]["e0"]) {
			zoneMatters++
		}
	}
	t.Logf("%d (expression, value, zone) cases compared with Spark, %d mismatches; %d non-NULL results; CAST(ts AS DATE) differs between UTC and Melbourne on %d rows",
		cases, mismatches, nonNull, zoneMatters)
	if cases < 3000 || nonNull < cases*3/4 || zoneMatters < 20 {
		t.Fatalf("the comparison is too weak: %d cases, %d non-NULL, zone mattered on %d rows", cases, nonNull, zoneMatters)
	}
}

func showRow(r genRow) string {
	var parts []string
	add := func(name string, v *int64, f func(int64) string) {
		if v != nil {
			parts = append(parts, name+"="+f(*v))
		}
	}
	add("ts", r.ts, func(v int64) string { return time.UnixMicro(v).UTC().Format(time.RFC3339Nano) })
	add("ntz", r.ntz, func(v int64) string { return time.UnixMicro(v).UTC().Format("2006-01-02T15:04:05.999999") })
	add("d", r.d, func(v int64) string { return time.Unix(v*86400, 0).UTC().Format("2006-01-02") })
	add("p", r.p, func(v int64) string { return fmt.Sprint(v) })
	add("l", r.l, func(v int64) string { return fmt.Sprint(v) })
	if r.s != nil {
		parts = append(parts, fmt.Sprintf("s=%q", *r.s))
	}
	if r.ds != nil {
		parts = append(parts, fmt.Sprintf("ds=%q", *r.ds))
	}
	return strings.Join(parts, " ")
}

// TestGeneratedColumnsSpark runs the generated-column checks that need Spark in one
// Spark session: the evaluator's property test against Spark, a generated date partition
// on a Spark table (c34), and the three-policy orders scenario on tables ingestd creates
// with a generated event_date (generatedSeed).
func TestGeneratedColumnsSpark(t *testing.T) {
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	t.Run("PropertyVsSpark", func(t *testing.T) { generatedPropertyVsSpark(t, spark) })
	t.Run("C34", func(t *testing.T) { c34(t, spark) })
	t.Run("Seed", func(t *testing.T) { generatedSeed(t, spark) })
}
