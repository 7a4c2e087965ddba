package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// cvRow is one record of TestCharVarcharSpark: its values, the CHAR/VARCHAR column it
// violates ("" none) and its Spark INSERT values.
type cvRow struct {
	rec     map[string]any
	violate string
	sql     string
}

func cvRows() []cvRow {
	str := func(s string) any { return map[string]any{"string": s} }
	base := func(id int64) map[string]any {
		return map[string]any{"id": id, "code": str("ab"), "name": str("héllo"),
			"tags": map[string]any{"array": []any{str("ünïc")}}, "attrs": map[string]any{"map": map[string]any{"k": str("€€")}}, "region": str("eu")}
	}
	var out []cvRow
	add := func(set map[string]any, violate, sql string) {
		r := base(int64(len(out) + 1))
		for k, v := range set {
			r[k] = v
		}
		out = append(out, cvRow{r, violate, fmt.Sprintf("(%d, %s)", len(out)+1, sql)})
	}
	add(nil, "", "'ab', 'héllo', array('ünïc'), map('k', '€€'), 'eu'")
	add(map[string]any{"code": str("abcd")}, "code", "'abcd', 'héllo', array('ünïc'), map('k', '€€'), 'eu'")
	add(map[string]any{"name": str("hélloo")}, "name", "'ab', 'hélloo', array('ünïc'), map('k', '€€'), 'eu'")
	add(map[string]any{"tags": map[string]any{"array": []any{str("ok"), str("toolong")}}}, "tags[]", "'ab', 'héllo', array('ok', 'toolong'), map('k', '€€'), 'eu'")
	add(map[string]any{"attrs": map[string]any{"map": map[string]any{"k": str("€€€")}}}, "attrs{}", "'ab', 'héllo', array('ünïc'), map('k', '€€€'), 'eu'")
	add(map[string]any{"region": str("eur")}, "region", "'ab', 'héllo', array('ünïc'), map('k', '€€'), 'eur'")
	add(map[string]any{"name": str("abc  ")}, "", "'ab', 'abc  ', array('ünïc'), map('k', '€€'), 'eu'") // 5 with trailing spaces: at the limit
	add(map[string]any{"code": nil, "name": nil, "tags": nil, "attrs": nil, "region": nil}, "", "NULL, NULL, NULL, NULL, NULL")
	return out
}

const cvAvsc = `{"type":"record","name":"Item","fields":[
 {"name":"id","type":"long"},
 {"name":"code","type":["null","string"],"default":null},
 {"name":"name","type":["null","string"],"default":null},
 {"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null},
 {"name":"attrs","type":["null",{"type":"map","values":["null","string"]}],"default":null},
 {"name":"region","type":["null","string"],"default":null}%s]}`

// produceCV registers the item schema (with extra fields) under <topic>-value and produces
// rows to partition 0 of topic, in order.
func produceCV(ctx context.Context, t *testing.T, s stack, topic, extra string, rows []map[string]any) {
	t.Helper()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(cvAvsc, extra)
	ss, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	sch := avro.MustParse(text)
	var recs []*kgo.Record
	for _, r := range rows {
		body, err := avro.Marshal(sch, r)
		if err != nil {
			t.Fatal(err)
		}
		v := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(v[1:], uint32(ss.ID))
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: append(v, body...)})
	}
	if err := kafkaClient(t, s).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// CHAR(n) and VARCHAR(n) limits on a table Spark creates (code CHAR(3), name VARCHAR(5),
// tags ARRAY<VARCHAR(4)>, attrs MAP<STRING, VARCHAR(2)>, partitioned by region
// VARCHAR(2)), written by dead_letter, halt and evolve pipelines (evolve's writer adds a
// column note, on_incompatible: dead_letter): each over-length value — top-level, an array
// element, a map value, the partition column — is a check_violation dead letter naming
// char_varchar(<column>) and its limit (ingestd.error.field the column), halt stops at the
// first; the rows within the limits land, CHAR values as sent (Spark pads them on read).
// Spark's own INSERT of the same rows fails for exactly those. Evolve's metaData commit
// keeps the metadata (Spark still refuses an over-length INSERT) and its new column has
// none. After Spark's ALTER COLUMN code TYPE STRING, a 4-character code lands.
func TestCharVarcharSpark(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "template")
	spark.call(t, map[string]any{"op": "sql", "query": "CREATE TABLE delta.`" + tmpl + "` (id BIGINT, code CHAR(3), name VARCHAR(5), tags ARRAY<VARCHAR(4)>, " +
		"attrs MAP<STRING, VARCHAR(2)>, region VARCHAR(2)) USING DELTA PARTITIONED BY (region)"}, nil)
	policies := []string{"dead_letter", "halt", "evolve"}
	for _, p := range append(policies, "spark") {
		copyTable(t, tmpl, filepath.Join(dir, p))
	}
	rows := cvRows()
	var recs []map[string]any
	for _, r := range rows {
		recs = append(recs, r.rec)
	}
	topic := createTopic(t, s, "cv", 1)
	produceCV(ctx, t, s, topic, "", recs)
	evTopic := createTopic(t, s, "cv-ev", 1)
	var evRecs []map[string]any
	for _, r := range recs {
		e := map[string]any{"note": map[string]any{"string": "n"}}
		for k, v := range r {
			e[k] = v
		}
		evRecs = append(evRecs, e)
	}
	produceCV(ctx, t, s, evTopic, `,{"name":"note","type":["null","string"],"default":null}`, evRecs)

	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	dlqs := map[string]string{}
	for _, p := range policies {
		name := "cv-" + strings.ReplaceAll(p, "_", "-")
		dlqs[p] = createTopic(t, s, name+".dlq", 1)
		src := topic
		if p == "evolve" {
			src = evTopic
		}
		y := strings.Replace(pipelineYAML(name, s, src, filepath.Join(dir, p), p, dlqs[p], ""), ", create: true}", ", create: false}", 1)
		if p == "evolve" {
			y = strings.Replace(y, "on_incompatible: halt}", "on_incompatible: dead_letter}", 1)
		}
		writePipeline(t, cfgDir, p, y)
	}
	d := startDaemon(t, cfgDir)
	var haltedAt int64 = -1
	haltReason := ""
	n := int64(len(rows))
	waitFor(t, d, 90*time.Second, "the CHAR/VARCHAR pipelines to handle their records or halt", func() bool {
		r, _ := d.readyz(t)
		for _, p := range r.Pipelines {
			if p.Pipeline == "cv-halt" && len(p.Halted) > 0 {
				haltedAt, haltReason = p.Halted[0].Offset, p.Halted[0].Reason
			}
		}
		return haltedAt >= 0 && handled(t, filepath.Join(dir, "dead_letter")) == n && handled(t, filepath.Join(dir, "evolve")) == n
	})
	if haltedAt != 1 || haltReason != "check_violation" {
		t.Errorf("halt pipeline halted at offset %d (%s), want 1 (code 'abcd', check_violation)", haltedAt, haltReason)
	}
	wantDLQ := map[int64]string{}
	var wantIDs []string
	for i, r := range rows {
		if r.violate != "" {
			wantDLQ[int64(i)] = r.violate
		} else {
			wantIDs = append(wantIDs, fmt.Sprint(i+1))
		}
	}
	limitOf := map[string]string{"code": "length(code) <= 3 (char(3), declared char(3))", "name": "length(name) <= 5 (varchar(5), declared varchar(5))",
		"tags[]": "length(tags[]) <= 4 (varchar(4), declared array<varchar(4)>)", "attrs{}": "length(attrs{}) <= 2 (varchar(2), declared map<string,varchar(2)>)",
		"region": "length(region) <= 2 (varchar(2), declared varchar(2))"}
	for _, p := range []string{"dead_letter", "evolve"} {
		path := filepath.Join(dir, p)
		var got []map[string]any
		spark.call(t, map[string]any{"op": "sql", "query": "SELECT CAST(id AS STRING) AS id, code, length(code) AS code_len, name, region FROM delta.`" + path + "` ORDER BY id"}, &got)
		var ids []string
		for _, r := range got {
			ids = append(ids, fmt.Sprint(r["id"]))
			if r["id"] == "1" && (r["code"] != "ab " || fmt.Sprint(r["code_len"]) != "3") {
				t.Errorf("%s (Spark): row 1 code %q (length %v), want 'ab ' (Spark pads CHAR(3) on read)", p, r["code"], r["code_len"])
			}
		}
		if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
			t.Errorf("%s (Spark): ids %v, want %v", p, ids, wantIDs)
		}
		dr := readTable(t, s, path)
		stored := map[string]any{}
		for _, r := range dr.Rows {
			stored[fmt.Sprint(r["id"])] = r["code"]
		}
		if len(dr.Rows) != len(wantIDs) || stored["1"] != "ab" {
			t.Errorf("%s (delta-rs): %d rows, row 1 code %q; want %d rows, code stored as sent ('ab')", p, len(dr.Rows), stored["1"], len(wantIDs))
		}
		dl := readDLQ(t, s, dlqs[p])
		for _, r := range dl {
			var off int64
			fmt.Sscan(r.headers["__connect.errors.offset"], &off)
			col := wantDLQ[off]
			name := "char_varchar(" + col + ")"
			if col == "" || r.headers["ingestd.error.reason"] != "check_violation" || r.headers["ingestd.error.constraint"] != name ||
				r.headers["ingestd.error.field"] != col || r.headers["ingestd.error.constraint."+name] != limitOf[col] {
				t.Errorf("%s: dead letter of offset %d: headers %v, want check_violation %s %q", p, off, r.headers, name, limitOf[col])
			}
		}
		if len(dl) != len(wantDLQ) {
			t.Errorf("%s: %d dead letters, want %d", p, len(dl), len(wantDLQ))
		}
	}
	if got := readTable(t, s, filepath.Join(dir, "halt")); len(got.Rows) != 1 {
		t.Errorf("halt: %d rows, want the 1 before offset 1", len(got.Rows))
	}

	// evolve's metaData commit kept the limits; its new column has none.
	ev := filepath.Join(dir, "evolve")
	snap, err := openTable(t, ev).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for col, typ := range map[string]string{"code": "char(3)", "name": "varchar(5)", "tags": "array<varchar(4)>", "attrs": "map<string,varchar(2)>", "region": "varchar(2)"} {
		if f := snap.Schema.FieldByKey(col); f == nil || f.Metadata["__CHAR_VARCHAR_TYPE_STRING"] != typ {
			t.Errorf("evolve: column %s after the metaData commit: %+v, want __CHAR_VARCHAR_TYPE_STRING %s", col, f, typ)
		}
	}
	if f := snap.Schema.FieldByKey("note"); f == nil || len(f.Metadata) != 0 {
		t.Errorf("evolve: the added column note %+v, want no metadata", f)
	}
	if err := sparkTry(t, spark, "INSERT INTO delta.`"+ev+"` (id, code) VALUES (99, 'abcd')"); err == nil || !strings.Contains(err.Error(), "DELTA_EXCEED_CHAR_VARCHAR_LIMIT") {
		t.Errorf("Spark INSERT of an over-length code into the evolved table: %v, want DELTA_EXCEED_CHAR_VARCHAR_LIMIT", err)
	}

	// Spark's own INSERT fails for exactly the rows ingestd rejects.
	sp := filepath.Join(dir, "spark")
	for i, r := range rows {
		err := sparkTry(t, spark, "INSERT INTO delta.`"+sp+"` VALUES "+r.sql)
		if (err != nil) != (r.violate != "") {
			t.Errorf("Spark INSERT of row %d %s: error %v; ingestd rejects it: %v", i+1, r.sql, err, r.violate != "")
		} else if err != nil && !strings.Contains(err.Error(), "EXCEED_CHAR_VARCHAR_LIMIT") && !strings.Contains(err.Error(), "EXCEED_LIMIT_LENGTH") {
			t.Errorf("Spark INSERT of row %d: %v, want a CHAR/VARCHAR length error", i+1, firstLine(err.Error()))
		}
	}

	// ALTER COLUMN code TYPE STRING drops the limit: a 4-character code lands.
	dl := filepath.Join(dir, "dead_letter")
	if err := sparkTry(t, spark, "ALTER TABLE delta.`"+dl+"` ALTER COLUMN code TYPE STRING"); err != nil {
		t.Fatalf("Spark ALTER COLUMN code TYPE STRING: %v", err)
	}
	later := cvRows()[1].rec
	later["id"] = int64(100)
	produceCV(ctx, t, s, topic, "", []map[string]any{later})
	waitFor(t, d, 60*time.Second, "the record after the ALTER to be handled", func() bool { return handled(t, dl) == n+1 })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	var after []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT code FROM delta.`" + dl + "` WHERE id = 100"}, &after)
	if len(after) != 1 || after[0]["code"] != "abcd" {
		t.Errorf("after ALTER COLUMN code TYPE STRING: %v, want the row with code 'abcd'", after)
	}
	if got := len(readDLQ(t, s, dlqs["dead_letter"])); got != len(wantDLQ) {
		t.Errorf("dead_letter: %d dead letters after the ALTER, want still %d", got, len(wantDLQ))
	}
}
