package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// generatedSeed is the three-policy orders scenario (TestSeedScenario) on tables ingestd
// creates with table.generated_columns {event_date: CAST(created_at AS DATE)}
// (partitioned by it: c34Partitioned): 10,000 v1 then 1,000 v2 orders spanning two
// UTC dates, one `ingestd run` with evolve, dead_letter and halt pipelines, the daemon's
// process zone Australia/Melbourne. Every row has event_date = its created_at's UTC date,
// in delta-rs and in Spark alike; Spark sees the column as generated.
func generatedSeed(t *testing.T, spark *sparkSession) {
	s := need(t)
	const nV1, nV2 = 10_000, 1_000
	const start = 80_000 // created_at from 2026-11-01T22:13Z to 2026-11-02T01:16Z
	topic := createTopic(t, s, "gen-orders", 3)
	dlq := createTopic(t, s, "gen-orders.dlq", 1)
	orders := produce(t, s, topic, nV1, nV2, start)
	byID := map[int64]order{}
	for _, o := range orders {
		byID[o.OrderID] = o
	}
	src := readTopic(t, s, topic, nV1+nV2)
	var v2ID uint32
	for _, r := range src {
		if id, _ := strconv.ParseInt(r.key, 10, 64); byID[id].Version == "v2" {
			v2ID = r.schemaID
		}
	}
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	tables := map[string]string{}
	table := `table: {uri: "file://%s", create: true, generated_columns: {event_date: "CAST(created_at AS DATE)"}}`
	if c34Partitioned {
		table = `table: {uri: "file://%s", create: true, partition_by: [event_date], generated_columns: {event_date: "CAST(created_at AS DATE)"}}`
	}
	for _, p := range []struct{ name, policy string }{{"bronze", "evolve"}, {"silver", "dead_letter"}, {"gold", "halt"}} {
		tables[p.name] = filepath.Join(dir, p.name, "orders")
		y := pipelineYAML("gen-"+p.name, s, topic, tables[p.name], p.policy, dlq, "")
		y = strings.Replace(y, fmt.Sprintf(`table: {uri: "file://%s", create: true}`, tables[p.name]), fmt.Sprintf(table, tables[p.name]), 1)
		writePipeline(t, cfgDir, p.name, y)
	}
	t.Setenv("TZ", "Australia/Melbourne")
	d := startDaemon(t, cfgDir)
	goldHalted := func() bool {
		r, _ := d.readyz(t)
		for _, p := range r.Pipelines {
			if p.Pipeline == "gen-gold" {
				return len(p.Halted) == 3
			}
		}
		return false
	}
	waitFor(t, d, 3*time.Minute, "bronze and silver to handle 11,000 records and gold to halt on 3 partitions", func() bool {
		return handled(t, tables["bronze"]) == nV1+nV2 && handled(t, tables["silver"]) == nV1+nV2 && goldHalted()
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	firstV2 := map[int32]int64{}
	for _, r := range src {
		if o, ok := firstV2[r.partition]; r.schemaID == v2ID && (!ok || r.offset < o) {
			firstV2[r.partition] = r.offset
		}
	}
	eventDate := func(o order) string { return time.UnixMicro(o.CreatedAt).UTC().Format("2006-01-02") }
	dates := map[string]int{}
	for _, o := range orders {
		dates[eventDate(o)]++
	}
	if len(dates) != 2 {
		t.Fatalf("the orders span dates %v, want two", dates)
	}
	want := map[string]map[int64]bool{"bronze": {}, "silver": {}, "gold": {}}
	for _, r := range src {
		id, _ := strconv.ParseInt(r.key, 10, 64)
		want["bronze"][id] = true
		if byID[id].Version == "v1" {
			want["silver"][id] = true
		}
		if r.offset < firstV2[r.partition] {
			want["gold"][id] = true
		}
	}
	for _, name := range []string{"bronze", "silver", "gold"} {
		data := readTable(t, s, tables[name])
		rows := rowsByID(t, name, data)
		if len(rows) != len(want[name]) {
			t.Errorf("%s has %d rows, want %d", name, len(rows), len(want[name]))
		}
		for id, row := range rows {
			o := byID[id]
			if !want[name][id] {
				t.Errorf("%s has order %d, which it must not", name, id)
				continue
			}
			checkRow(t, name, row, o, name == "bronze")
			if row["event_date"] != eventDate(o) {
				t.Errorf("%s order %d: event_date %v, want %s (created_at %d in UTC)", name, id, row["event_date"], eventDate(o), o.CreatedAt)
			}
		}
		// Spark reads the same rows and sees a generated column.
		var sr sparkRead
		spark.call(t, map[string]any{"op": "read", "path": tables[name]}, &sr)
		var fromSpark, fromRS []string
		for _, r := range sr.Rows {
			fromSpark = append(fromSpark, fmt.Sprint(r["order_id"], r["event_date"], r["created_at"]))
		}
		for _, r := range data.Rows {
			fromRS = append(fromRS, fmt.Sprint(int64(r["order_id"].(float64)), r["event_date"], int64(r["created_at"].(float64))))
		}
		if fmt.Sprint(sortedCopy(fromSpark)) != fmt.Sprint(sortedCopy(fromRS)) {
			t.Errorf("%s: Spark and delta-rs read different rows (%d vs %d)", name, len(fromSpark), len(fromRS))
		}
		if proto := protocolOf(t, tables[name]); !strings.Contains(proto, `"generatedColumns"`) {
			t.Errorf("%s: protocol %s lacks generatedColumns", name, proto)
		}
	}
	checkDLQ(t, s, dlq, topic, src, v2ID, nV2)
	// Spark enforces the generated column ingestd created: it computes it on its own
	// insert and refuses a value that differs.
	bronze := tables["bronze"]
	spark.call(t, map[string]any{"op": "sql", "query": "INSERT INTO delta.`" + bronze + "` (order_id, created_at) VALUES (999999, TIMESTAMP '2026-11-02 05:00:00 UTC')"}, nil)
	var ins []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT CAST(event_date AS STRING) AS d FROM delta.`" + bronze + "` WHERE order_id = 999999"}, &ins)
	if len(ins) != 1 || ins[0]["d"] != "2026-11-02" {
		t.Errorf("Spark's insert into the table ingestd created: %v, want event_date 2026-11-02", ins)
	}
	if err := spark.try(t, map[string]any{"op": "sql", "query": "INSERT INTO delta.`" + bronze + "` (order_id, created_at, event_date) VALUES (1000000, TIMESTAMP '2026-11-02 05:00:00 UTC', DATE '2000-01-01')"}, nil); err == nil ||
		!strings.Contains(err.Error(), "event_date") {
		t.Errorf("Spark accepted a wrong event_date into the table ingestd created: %v", err)
	}
	if c34Partitioned {
		// A filter on created_at prunes partitions through the generated column.
		var plan []map[string]any
		spark.call(t, map[string]any{"op": "sql", "query": "EXPLAIN SELECT count(*) FROM delta.`" + tables["bronze"] + "` WHERE created_at >= TIMESTAMP '2026-11-02 00:00:00 UTC'"}, &plan)
		b, _ := json.Marshal(plan)
		text := string(b)
		i := strings.Index(text, "PartitionFilters: [")
		if i < 0 {
			t.Fatalf("no PartitionFilters in the plan: %s", text)
		}
		filters := text[i : i+strings.Index(text[i:], "]")]
		if !strings.Contains(filters, "event_date") {
			t.Errorf("the scan's partition filters %q do not prune on event_date: %s", filters, text)
		}
		t.Logf("Spark prunes through the generated column: %s", filters)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
