package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The upsert chaos stream: the keyed-table property test's row (kpStream's changes) under
// the chaos's schema change, v2 adding the nullable field "channel" (the tables evolve).
const (
	chaosUpsertV1 = `{"type":"record","name":"Row","namespace":"chaos","fields":[
  {"name":"id","type":"long"},
  {"name":"v","type":["null","string"],"default":null},
  {"name":"seq","type":"long"},
  {"name":"op","type":"string"},
  {"name":"grp","type":"string"}]}`
	chaosUpsertV2 = `{"type":"record","name":"Row","namespace":"chaos","fields":[
  {"name":"id","type":"long"},
  {"name":"v","type":["null","string"],"default":null},
  {"name":"seq","type":"long"},
  {"name":"op","type":"string"},
  {"name":"grp","type":"string"},
  {"name":"channel","type":["null","string"],"default":null}]}`
)

// chaosUpsertTable is one upsert pipeline of the upsert chaos run (key id, op = 'd'
// deletes, tombstones keyed by the id as a string).
type chaosUpsertTable struct {
	name        string // the pipeline's name and the table's directory
	ordered     bool   // table.sequence_by: seq
	cow         bool   // table.upsert_write: copy_on_write
	partitioned bool   // partition_by: [grp], so keys move between partitions
}

// chaosUpsertTables are the two pipelines every daemon of the upsert chaos run runs on the
// same topic, each in its own consumer group: merge-on-read ordered by seq and
// partitioned by grp, and copy-on-write in offset order (the ordered copy-on-write path,
// which remembers deletes in domainMetadata, is in TestKeyedPropertyKill9).
var chaosUpsertTables = []chaosUpsertTable{
	{name: "upsert", ordered: true, partitioned: true},
	{name: "cow", cow: true},
}

// chaosStream is n keyed changes (kpStream's: upserts, op = 'd' deletes and tombstones,
// sequences up to three behind and tied, keys moving between the three grp values): 70 %
// over hot keys (ids 0 … hot-1: many changes of a key in one flush) and 30 % over cold
// ones (ids from hot: a few changes each, mostly in different flushes, so that a key's
// final row depends on what flushes decided across kills and restarts, e.g. a delete
// remembered against a late older change), interleaved at random; each row's v is "r"
// and its position in the stream.
func chaosStream(rng *rand.Rand, n, hot, cold int) []kpChange {
	nHot := n * 7 / 10
	hs, cs := kpStream(rng, nHot, hot), kpStream(rng, n-nHot, cold)
	out := make([]kpChange, 0, n)
	for len(hs)+len(cs) > 0 {
		var c kpChange
		if len(cs) == 0 || len(hs) > 0 && rng.IntN(len(hs)+len(cs)) < len(hs) {
			c, hs = hs[0], hs[1:]
		} else {
			c, cs = cs[0], cs[1:]
			c.id += int64(hot)
		}
		if c.v != "" {
			c.v = "r" + strconv.Itoa(len(out))
		}
		out = append(out, c)
	}
	return out
}

// chaosOffset is where a produced record landed; offset -1 until acknowledged.
type chaosOffset struct {
	partition int32
	offset    int64
}

// TestChaosUpsert is the chaos run on keyed tables: three `ingestd run` processes, each
// running the two chaosUpsertTables pipelines (one consumer group each) on a 12-partition
// topic of 20,000 keyed changes (chaosStream: 14,000 over 200 hot keys, 6,000 over 3,000
// cold ones; upserts, op = 'd' deletes and tombstones; sequences out of order; keys moving
// between grp partitions), with the v2 schema change halfway and poison pills. The same chaos as TestChaos: a random process killed with
// SIGKILL every 3-6 s and restarted, the private broker restarted once, the registry
// unreachable for 10 s. At the end each table, read by delta-rs and by Spark, equals the
// model (each key's changes applied in offset order; with sequence_by, stale changes
// dropped and deletes remembered) exactly, with no key twice; each dead-letter topic
// holds every pill and nothing else; each partition's txn version is its end offset - 1
// and grows from commit to commit; no (file, deletion vector) is added twice.
// INGESTD_CHAOS_LONG=1 runs 300,000 changes over 2,000 hot and 45,000 cold keys for 5
// minutes.
func TestChaosUpsert(t *testing.T) {
	t.Parallel() // waits on Spark or the broker; own broker, topics and temp dirs
	s := need(t)
	plan := chaosPlan{records: 20_000, upsert: true, upsertKeys: 200, upsertCold: 3000, pillEvery: 499, produceFor: 25 * time.Second, chaosFor: 30 * time.Second,
		killEvery: [2]time.Duration{3 * time.Second, 6 * time.Second}, brokerAt: 6 * time.Second,
		registryAt: 15 * time.Second, registryDown: 10 * time.Second, drain: 3 * time.Minute}
	if os.Getenv("INGESTD_CHAOS_LONG") == "1" {
		plan = chaosPlan{records: 300_000, upsert: true, upsertKeys: 2000, upsertCold: 45_000, pillEvery: 2999, produceFor: 5 * time.Minute, chaosFor: 5 * time.Minute,
			killEvery: [2]time.Duration{3 * time.Second, 8 * time.Second}, brokerAt: 90 * time.Second,
			registryAt: 150 * time.Second, registryDown: 30 * time.Second, drain: 20 * time.Minute}
	} else if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	runChaos(t, s, plan, nil)
}

// chaosRow is a live row of an upsert chaos table.
type chaosRow struct {
	kpRow
	channel string
}

// checkChaosUpsert checks the upsert chaos tables against the model of stream, whose
// change i landed at landedAt[i]; it returns their figures for the CHAOS RESULT line.
func checkChaosUpsert(t *testing.T, s stack, plan chaosPlan, pipes []chaosPipe, stream []kpChange, landedAt []chaosOffset, spark *sparkSession) string {
	t.Helper()
	// The stream in offset order: a key's changes are in one Kafka partition (keyed
	// records), so this is the order each pipeline reads them in.
	order := make([]int, len(stream))
	for i := range order {
		order[i] = i
		if landedAt[i].offset < 0 {
			t.Fatalf("change %d (%v) was never acknowledged", i, stream[i])
		}
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := landedAt[order[a]], landedAt[order[b]]
		return x.partition < y.partition || x.partition == y.partition && x.offset < y.offset
	})
	inOrder := make([]kpChange, len(stream))
	for i, j := range order {
		inOrder[i] = stream[j]
	}
	// channel: the v2 records (the second half of the stream) carry "web".
	withChannel := func(rows map[int64]kpRow) map[int64]chaosRow {
		out := map[int64]chaosRow{}
		for id, r := range rows {
			c := chaosRow{kpRow: r}
			if i, err := strconv.Atoi(strings.TrimPrefix(r.v, "r")); err == nil && i >= plan.records/2 {
				c.channel = "web"
			}
			out[id] = c
		}
		return out
	}

	var union []string
	for _, p := range pipes {
		union = append(union, fmt.Sprintf("SELECT '%s' AS t, id, v, seq, grp, channel FROM delta.`%s`", p.name, p.table))
	}
	var spRows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": strings.Join(union, " UNION ALL ")}, &spRows)
	sparkRows := map[string][]map[string]any{}
	for _, r := range spRows {
		name, _ := r["t"].(string)
		sparkRows[name] = append(sparkRows[name], r)
	}

	var results []string
	for _, p := range pipes {
		want := withChannel(kpModel(inOrder, p.upsert.ordered))
		// Spark's verdict first: delta-rs may not return on a large table (BENCHMARKS.md).
		spRows, spDup := chaosUpsertRows(t, p.name, "Spark", sparkRows[p.name])
		chaosUpsertCompare(t, p.name, "Spark", inOrder, want, spRows)
		rs := readDeltaRS(t, s.python, p.table)
		if rs.Unsupported != "" {
			t.Fatalf("%s: delta-rs cannot read the table: %s", p.name, rs.Unsupported)
		}
		rsRows, rsDup := chaosUpsertRows(t, p.name, "delta-rs", rs.Rows)
		chaosUpsertCompare(t, p.name, "delta-rs", inOrder, want, rsRows)
		if rsDup+spDup > 0 {
			t.Errorf("%s: %d keys with two live rows in delta-rs, %d in Spark", p.name, rsDup, spDup)
		}
		kpTxnLog(t, p.table) // each appId's txn version grows from commit to commit

		// Files: none added twice with the same deletion vector; deletion vectors under
		// merge-on-read only; each file in its grp directory when partitioned.
		if dup := duplicateAdds(t, p.table); len(dup) > 0 {
			t.Errorf("%s: (file, deletion vector) added more than once across the log: %v", p.name, dup)
		}
		adds := logAdds(t, p.table)
		withDV := 0
		for _, a := range adds {
			if a.DeletionVector != nil {
				withDV++
			}
			if p.upsert.partitioned {
				pv := a.PartitionValues["grp"]
				if pv == nil || len(a.PartitionValues) != 1 || !strings.Contains("abc", *pv) || len(*pv) != 1 || !strings.HasPrefix(a.Path, "grp="+*pv+"/") {
					t.Errorf("%s: add %s with partitionValues %v: want one grp of a, b, c and its directory", p.name, a.Path, pvMap(a.PartitionValues))
				}
			}
		}
		switch {
		case p.upsert.cow && withDV > 0:
			t.Errorf("%s: %d adds carry a deletion vector under copy_on_write", p.name, withDV)
		case !p.upsert.cow && withDV == 0:
			t.Errorf("%s: no add carries a deletion vector under merge_on_read (%d adds)", p.name, len(adds))
		}
		t.Logf("%s: %d live keys of %d as the model in delta-rs and Spark; %d adds (%d with a deletion vector), table version %d",
			p.name, len(want), plan.upsertKeys+plan.upsertCold, len(adds), withDV, rs.Version)
		results = append(results, fmt.Sprintf("%s_keys=%d %s_rows_deltars=%d %s_rows_spark=%d %s_dup_keys=%d %s_adds=%d",
			p.name, len(want), p.name, len(rs.Rows), p.name, len(sparkRows[p.name]), p.name, rsDup+spDup, p.name, len(adds)))
	}
	return strings.Join(results, " ")
}

// chaosUpsertRows maps a reader's rows (id, v, seq, grp, channel) to id → row; dup counts
// the ids read more than once (each also an error).
func chaosUpsertRows(t *testing.T, name, who string, rows []map[string]any) (out map[int64]chaosRow, dup int) {
	t.Helper()
	num := func(r map[string]any, col string) int64 { return readerInt(t, name, who, r, col) }
	out = map[int64]chaosRow{}
	for _, r := range rows {
		id := num(r, "id")
		row := chaosRow{kpRow: kpRow{seq: num(r, "seq")}}
		row.v, _ = r["v"].(string)
		row.grp, _ = r["grp"].(string)
		row.channel, _ = r["channel"].(string)
		if prev, ok := out[id]; ok {
			dup++
			if dup <= 10 {
				t.Errorf("%s: %s reads two live rows of id %d: %+v and %v", name, who, id, prev, r)
			}
		}
		out[id] = row
	}
	return out, dup
}

// chaosUpsertCompare fails t with the keys (the first 10) whose row differs between the
// table and the model, with each key's changes in offset order.
func chaosUpsertCompare(t *testing.T, name, who string, stream []kpChange, want, got map[int64]chaosRow) {
	t.Helper()
	var ids []int64
	for id := range want {
		ids = append(ids, id)
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	bad := 0
	for _, id := range ids {
		g, gok := got[id]
		w, wok := want[id]
		if g == w && gok == wok {
			continue
		}
		if bad++; bad > 10 {
			continue
		}
		var hist []string
		for i, c := range stream {
			if c.id == id {
				hist = append(hist, fmt.Sprintf("#%d %v", i, c))
			}
		}
		t.Errorf("%s: %s reads key %d as %+v (present %v), the model %+v (present %v); its changes in offset order: %s",
			name, who, id, g, gok, w, wok, strings.Join(hist, ", "))
	}
	if bad > 0 {
		t.Errorf("%s: %s differs from the model on %d of %d keys", name, who, bad, len(ids))
	}
}
