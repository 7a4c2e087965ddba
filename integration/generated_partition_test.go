package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// c34Partitioned says whether the tables of c34 and generatedSeed are partitioned by
// event_date (Spark's PARTITIONED BY).
const c34Partitioned = true

// c34 is a generated date partition on a Spark table. On a table with event_date DATE
// GENERATED ALWAYS AS (CAST(created_at AS DATE)), data written in a UTC session and read
// in an Australia/Melbourne one returned the wrong rows, because the cast depends on the
// session zone (delta-io/delta#2343), and delta-rs refused every append with a violated
// "date <=> CAST(timestamp AS DATE)" (delta-io/delta-rs#3182). Spark creates orders(order_id,
// created_at timestamp, event_date, y, m, d generated from created_at) partitioned by
// event_date; confluent-kafka produces through the real registry v1 (order_id,
// created_at) and v2 (+ event_date, which the producer computes itself); one `ingestd
// run` with process TZ=Australia/Melbourne runs an evolve (on_incompatible:
// dead_letter), a dead_letter and a halt pipeline, plus a dead_letter one on a column
// mapping copy (cm) and one on a timestamp_ntz variant (z). Offsets, in order:
//   - 0 v1 {1, 2023-01-09T13:00:00Z} (already 2023-01-10 in Melbourne): event_date
//     2023-01-09, y 2023, m 1, d 9, in partition event_date=2023-01-09;
//   - 1 v1 {2, 2023-12-31T23:59:59.999999Z}: 2023-12-31, 2023, 12, 31;
//   - 2 v1 {3, null}: all four NULL, in __HIVE_DEFAULT_PARTITION__;
//   - 3 v2 supplies 2023-01-09 for 2023-01-09T13:00Z, 7 v2 supplies NULL for NULL:
//     accepted (null-safe equality, as Spark's <=>);
//   - 4 v2 supplies 2023-01-10 and 5 NULL for 2023-01-09T13:00Z, 6 supplies 2023-01-09 for
//     a NULL created_at: generated_column_mismatch, dead-lettered with the column, the
//     expression and both values; halt stops at 4; a supplied value is never replaced by
//     the computed one.
//
// The z table's created_at is timestamp_ntz: 2023-01-09 13:00 local gives 2023-01-09
// under any TZ. Spark's own insert of 2023-01-09 13:00:00 UTC lands in offset 0's
// partition with the same values. delta-rs and Spark read every table.
func c34(t *testing.T, spark *sparkSession) {
	s := need(t)
	dir := t.TempDir()
	partitionBy := ""
	if c34Partitioned {
		partitionBy = " PARTITIONED BY (event_date)"
	}
	create := func(path, tsType, props string) {
		spark.call(t, map[string]any{"op": "sql", "query": "CREATE TABLE delta.`" + path + "` (order_id BIGINT, created_at " + tsType + ", " +
			"event_date DATE GENERATED ALWAYS AS (CAST(created_at AS DATE)), y INT GENERATED ALWAYS AS (YEAR(created_at)), " +
			"m INT GENERATED ALWAYS AS (MONTH(created_at)), d INT GENERATED ALWAYS AS (DAY(created_at))) USING DELTA" + partitionBy + props}, nil)
	}
	policies := []string{"evolve", "dead_letter", "halt"}
	for _, p := range policies {
		create(filepath.Join(dir, p), "TIMESTAMP", "")
	}
	create(filepath.Join(dir, "z"), "TIMESTAMP_NTZ", "")
	// cm: the dead_letter case on a table with column mapping (physical names differ).
	create(filepath.Join(dir, "cm"), "TIMESTAMP", " TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
	proto := protocolOf(t, filepath.Join(dir, "dead_letter"))
	t.Logf("Spark's protocol for a table with generated columns: %s", proto)

	topic := createTopic(t, s, "c34", 1)
	topicZ := createTopic(t, s, "c34z", 1)
	dlqs := map[string]string{"evolve": createTopic(t, s, "c34-evolve.dlq", 1), "dead_letter": createTopic(t, s, "c34-dl.dlq", 1), "halt": createTopic(t, s, "c34-halt.dlq", 1), "z": createTopic(t, s, "c34z.dlq", 1), "cm": createTopic(t, s, "c34-cm.dlq", 1)}
	ts := `{"name":"created_at","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null}`
	v1 := rec("Order", `{"name":"order_id","type":"long"}`, ts)
	v2 := rec("Order", `{"name":"order_id","type":"long"}`, ts, `{"name":"event_date","type":["null",{"type":"int","logicalType":"date"}],"default":null}`)
	produceSpec(t, s, topic, map[string]string{"v1": v1, "v2": v2}, [][2]string{
		{"v1", `{"order_id":1,"created_at":1673269200000000}`},
		{"v1", `{"order_id":2,"created_at":1704067199999999}`},
		{"v1", `{"order_id":3,"created_at":null}`},
		{"v2", `{"order_id":4,"created_at":1673269200000000,"event_date":19366}`},
		{"v2", `{"order_id":5,"created_at":1673269200000000,"event_date":19367}`},
		{"v2", `{"order_id":6,"created_at":1673269200000000,"event_date":null}`},
		{"v2", `{"order_id":7,"created_at":null,"event_date":19366}`},
		{"v2", `{"order_id":8,"created_at":null,"event_date":null}`},
	})
	vz := rec("Order", `{"name":"order_id","type":"long"}`, `{"name":"created_at","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}],"default":null}`)
	produceSpec(t, s, topicZ, map[string]string{"vz": vz}, [][2]string{{"vz", `{"order_id":1,"created_at":1673269200000000}`}})

	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	batch := "{max_records: 100, max_bytes: 1MiB, max_age: 300ms}"
	for _, p := range policies {
		y := pipelineYAML("c34-"+strings.ReplaceAll(p, "_", "-"), s, topic, filepath.Join(dir, p), p, dlqs[p], batch)
		if p == "evolve" {
			y = strings.Replace(y, "on_incompatible: halt}", "on_incompatible: dead_letter}", 1)
		}
		writePipeline(t, cfgDir, p, y)
	}
	writePipeline(t, cfgDir, "z", pipelineYAML("c34-z", s, topicZ, filepath.Join(dir, "z"), "dead_letter", dlqs["z"], batch))
	writePipeline(t, cfgDir, "cm", pipelineYAML("c34-cm", s, topic, filepath.Join(dir, "cm"), "dead_letter", dlqs["cm"], batch))
	t.Setenv("TZ", "Australia/Melbourne") // the daemon's process zone: generated values stay UTC
	d := startDaemon(t, cfgDir)
	var haltedAt int64 = -1
	waitFor(t, d, 90*time.Second, "the c34 pipelines to handle their records or halt", func() bool {
		r, _ := d.readyz(t)
		for _, p := range r.Pipelines {
			if p.Pipeline == "c34-halt" && len(p.Halted) > 0 {
				haltedAt = p.Halted[0].Offset
			}
		}
		return haltedAt >= 0 && handled(t, filepath.Join(dir, "evolve")) == 8 && handled(t, filepath.Join(dir, "dead_letter")) == 8 && handled(t, filepath.Join(dir, "z")) == 1 && handled(t, filepath.Join(dir, "cm")) == 8
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	if haltedAt != 4 {
		t.Errorf("halt pipeline halted at offset %d, want 4 (the first mismatch)", haltedAt)
	}

	row := func(id int, ts any, date any, y, m, dd any) string {
		b, _ := json.Marshal(map[string]any{"order_id": id, "created_at": ts, "event_date": date, "y": y, "m": m, "d": dd})
		return string(b)
	}
	r1, r2 := row(1, 1673269200000000, "2023-01-09", 2023, 1, 9), row(2, 1704067199999999, "2023-12-31", 2023, 12, 31)
	r3, r4, r8 := row(3, nil, nil, nil, nil, nil), row(4, 1673269200000000, "2023-01-09", 2023, 1, 9), row(8, nil, nil, nil, nil, nil)
	want := map[string][]string{"evolve": {r1, r2, r3, r4, r8}, "dead_letter": {r1, r2, r3, r4, r8}, "cm": {r1, r2, r3, r4, r8}, "halt": {r1, r2, r3, r4},
		"z": {row(1, 1673269200000000, "2023-01-09", 2023, 1, 9)}}
	for name, rows := range want {
		slices.Sort(rows)
		got := canon(t, readTable(t, s, filepath.Join(dir, name)).Rows)
		if strings.Join(got, "\n") != strings.Join(rows, "\n") {
			t.Errorf("%s (delta-rs)\n got %s\nwant %s", name, strings.Join(got, "\n     "), strings.Join(rows, "\n     "))
		}
		var sr sparkRead
		spark.call(t, map[string]any{"op": "read", "path": filepath.Join(dir, name)}, &sr)
		if got := canon(t, sr.Rows); strings.Join(got, "\n") != strings.Join(rows, "\n") {
			t.Errorf("%s (Spark)\n got %s\nwant %s", name, strings.Join(got, "\n     "), strings.Join(rows, "\n     "))
		}
	}
	// The three mismatches, dead-lettered with the column, the expression and both values.
	wantDLQ := map[int64][2]string{
		4: {"2023-01-10", "2023-01-09"},
		5: {"NULL", "2023-01-09"},
		6: {"2023-01-09", "NULL"},
	}
	for _, p := range []string{"evolve", "dead_letter", "cm"} {
		got := map[int64]bool{}
		for _, r := range readDLQ(t, s, dlqs[p]) {
			var off int64
			fmt.Sscan(r.headers["__connect.errors.offset"], &off)
			got[off] = true
			w, ok := wantDLQ[off]
			msg := r.headers["__connect.errors.exception.message"]
			if !ok || r.headers["ingestd.error.reason"] != "generated_column_mismatch" || r.headers["ingestd.error.field"] != "event_date" ||
				!strings.Contains(msg, "event_date = "+w[0]+", but event_date GENERATED ALWAYS AS (CAST(created_at AS DATE)) is "+w[1]) ||
				r.headers["ingestd.error.expression"] != "CAST(created_at AS DATE)" || r.headers["ingestd.error.value"] != w[0] || r.headers["ingestd.error.expected"] != w[1] {
				t.Errorf("%s: DLQ record of offset %d: headers %v", p, off, r.headers)
			}
		}
		if len(got) != 3 {
			t.Errorf("%s: DLQ holds offsets %v, want 4, 5, 6", p, got)
		}
	}
	for _, p := range []string{"halt", "z"} {
		if n := len(readDLQ(t, s, dlqs[p])); n != 0 {
			t.Errorf("%s: %d dead letters, want none", p, n)
		}
	}

	// Partition values and directories: one file per event_date of the flush, NULL in
	// __HIVE_DEFAULT_PARTITION__; y, m, d are in the data files, event_date is not.
	if c34Partitioned {
		snap, err := openTable(t, filepath.Join(dir, "dead_letter")).Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pvs := map[string]bool{}
		for _, a := range snap.Files.All() {
			pv, ok := a.PartitionValues["event_date"]
			dirName := "event_date=__HIVE_DEFAULT_PARTITION__/"
			key := "null"
			if ok && pv != nil {
				key, dirName = *pv, "event_date="+*pv+"/"
			}
			pvs[key] = true
			if !ok || !strings.HasPrefix(a.Path, dirName) {
				t.Errorf("add %s: partitionValues %v, want a file under %s", a.Path, a.PartitionValues, dirName)
			}
			if strings.Contains(a.Stats, "event_date") {
				t.Errorf("add %s: stats name the partition column: %s", a.Path, a.Stats)
			}
			for _, c := range []string{`"y"`, `"m"`, `"d"`} {
				if !strings.Contains(a.Stats, c) {
					t.Errorf("add %s: stats lack the data column %s: %s", a.Path, c, a.Stats)
				}
			}
		}
		if fmt.Sprint(pvs) != "map[2023-01-09:true 2023-12-31:true null:true]" {
			t.Errorf("partition values %v, want 2023-01-09, 2023-12-31 and null", pvs)
		}
	}

	// Spark's own insert (session zone UTC) lands in off 0's partition, with the same values.
	dl := filepath.Join(dir, "dead_letter")
	spark.call(t, map[string]any{"op": "sql", "query": "INSERT INTO delta.`" + dl + "` (order_id, created_at) VALUES (9, TIMESTAMP '2023-01-09 13:00:00 UTC')"}, nil)
	var got []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT order_id, CAST(event_date AS STRING) AS event_date, y, m, d, input_file_name() AS f FROM delta.`" + dl + "` WHERE order_id IN (1, 9) ORDER BY order_id"}, &got)
	if len(got) != 2 || fmt.Sprint(got[0]["event_date"], got[0]["y"], got[0]["m"], got[0]["d"]) != fmt.Sprint(got[1]["event_date"], got[1]["y"], got[1]["m"], got[1]["d"]) || got[1]["event_date"] != "2023-01-09" {
		t.Errorf("Spark's insert and off 0: %v", got)
	}
	if c34Partitioned {
		for _, r := range got {
			if f, _ := r["f"].(string); !strings.Contains(f, "/event_date=2023-01-09/") {
				t.Errorf("order %v in file %s, want partition event_date=2023-01-09", r["order_id"], f)
			}
		}
	}
}

// canon renders rows as sorted canonical JSON.
func canon(t *testing.T, rows []map[string]any) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// protocolOf returns the protocol action of a table's first commit, as JSON.
func protocolOf(t *testing.T, path string) string {
	b, err := os.ReadFile(filepath.Join(path, "_delta_log", "00000000000000000000.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, `{"protocol"`) {
			return l
		}
	}
	return ""
}
