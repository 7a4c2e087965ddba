package ingest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
)

// BenchmarkFlushUpsert times whole flushes (decode, reduction, key lookups, deletion
// vectors, data file, commit) of 100,000 changes of ~200-byte records (benchFlushAvro,
// keyed by id) into an upsert table that already holds 1,000,000 rows in 10 files,
// beside the same batch appended by an append pipeline in the same process (the
// baseline): "update=P" has P % of the changes update a uniformly chosen stored key (the
// rest insert new keys), "hot" has every update hit the same 1 % of the stored keys, and
// every variant deletes 5 % of the stored keys (kind = 'BUY' is a delete). One op is one
// flush; it reports changes per CPU-second of the process and the live rows the table
// holds after the last flush (checked against the model's count).
//
// Unavailable values (docs/keyed-tables.md, Unavailable values (TOAST)): "update=10/search"
// is update=10 with the placeholder search on, as under table.envelope (the string
// columns name, note, kind and the tags array searched; no placeholder in the batch);
// "update=10/placeholder" has every update's note be the placeholder, so that each takes
// the stored row's note (read from the table's files).
func BenchmarkFlushUpsert(b *testing.B) {
	const batch, stored = 100_000, 1_000_000
	for _, v := range []struct {
		name        string
		update      float64
		hot         bool
		append      bool
		search      bool // the placeholder search on
		placeholder bool // updates carry the placeholder in note
	}{
		{name: "append"}, {name: "update=1", update: 0.01}, {name: "update=10", update: 0.10},
		{name: "update=10/search", update: 0.10, search: true},
		{name: "update=10/placeholder", update: 0.10, search: true, placeholder: true},
		{name: "update=100", update: 1}, {name: "update=100/hot", update: 1, hot: true},
	} {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			tbl := benchTable(ctx, b)
			p := benchFlushPipeline(b, batch, tbl, nil)
			if !v.append {
				keyed := *p.cfg
				keyed.Table.Mode, keyed.Table.Key, keyed.Table.DeleteWhen = config.ModeUpsert, []string{"id"}, "kind = 'BUY'"
				p = NewPipeline(&keyed, p.deps)
			}
			if v.search {
				// The records are no envelopes: the search is turned on as table.envelope would.
				p.fl.placeholder = config.DefaultUnavailableValue
			}
			g := newChangeGen(b, stored)
			if v.placeholder {
				g.updNote = config.DefaultUnavailableValue
			}
			offset := int64(0)
			flush := func(recs []*kgo.Record) {
				for _, r := range recs {
					r.Offset = offset
					offset++
				}
				if _, err := p.fl.flush(ctx, recs, frameNote{id: 7, uniform: true}); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < stored; i += batch { // the table before the benchmark: keys 0..stored-1
				flush(g.inserts(batch))
			}
			live := stored
			var cpu int64 // the flushes' process CPU time, in ns (generating the records aside)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				recs, added, deleted := g.changes(batch, v.update, v.hot, !v.append)
				live += added - deleted
				b.StartTimer()
				cpu0 := processCPU(b)
				flush(recs)
				cpu += processCPU(b) - cpu0
			}
			b.StopTimer()
			b.ReportMetric(float64(batch*b.N)/(float64(cpu)/float64(time.Second)), "changes/cpu-s")
			rows := benchLiveRows(ctx, b, p)
			if v.append {
				live = stored + batch*b.N
			}
			if rows != int64(live) {
				b.Fatalf("the table holds %d live rows, the model %d", rows, live)
			}
			b.ReportMetric(float64(rows), "live-rows")
		})
	}
}

// changeGen makes the batches of BenchmarkFlushUpsert: keys are ids; next is the next new
// key; liveKeys the stored keys not deleted (a delete takes one out).
type changeGen struct {
	b        *testing.B
	sch      avro.Schema
	next     int64
	liveKeys []int64
	rng      *rand.Rand
	updNote  string // an update's note ("": as an insert's)
}

func newChangeGen(b *testing.B, stored int) *changeGen {
	return &changeGen{b: b, sch: avro.MustParse(benchFlushAvro), rng: rand.New(rand.NewPCG(1, 2))}
}

// record is one framed change of key id (kind BUY: a delete).
func (g *changeGen) record(id int64, kind string) *kgo.Record {
	return g.recordNote(id, kind, "n-note-of-this-record-padding-to-two-hundred")
}

// recordNote is record with note.
func (g *changeGen) recordNote(id int64, kind, note string) *kgo.Record {
	v := map[string]any{"id": id, "name": fmt.Sprintf("user-%06d", id%100_000), "score": float64(id) / 3,
		"active": id%2 == 0, "ts": int64(1_700_000_000_000_000 + id), "note": map[string]any{"string": note},
		"count": int32(id % 1000), "amount": float64(id%100_000) / 100, "kind": kind,
		"tags": []string{"web", "promo-spring-2024", "eu-west-1", "returning-customer!!!"}}
	body, err := avro.Marshal(g.sch, v)
	if err != nil {
		g.b.Fatal(err)
	}
	return &kgo.Record{Topic: "bench", Partition: 0, Key: fmt.Append(nil, id), Value: append([]byte{0, 0, 0, 0, 7}, body...)}
}

// inserts is n records of new keys.
func (g *changeGen) inserts(n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = g.record(g.next, "VIEW")
		g.liveKeys = append(g.liveKeys, g.next)
		g.next++
	}
	return recs
}

// changes is a batch of n changes: 5 % deletes of stored keys (when deletes), update of
// the rest updates a stored key (uniform, or among the first 1 % when hot), the others
// insert new keys. It returns the keys it added and deleted.
func (g *changeGen) changes(n int, update float64, hot, deletes bool) (recs []*kgo.Record, added, deleted int) {
	recs = make([]*kgo.Record, 0, n)
	if deletes {
		for range n / 20 {
			j := g.rng.IntN(len(g.liveKeys))
			recs = append(recs, g.record(g.liveKeys[j], "BUY"))
			g.liveKeys[j] = g.liveKeys[len(g.liveKeys)-1]
			g.liveKeys = g.liveKeys[:len(g.liveKeys)-1]
			deleted++
		}
	}
	for len(recs) < n {
		if g.rng.Float64() < update {
			span := len(g.liveKeys)
			if hot {
				span = max(1, span/100)
			}
			if g.updNote != "" {
				recs = append(recs, g.recordNote(g.liveKeys[g.rng.IntN(span)], "VIEW", g.updNote))
				continue
			}
			recs = append(recs, g.record(g.liveKeys[g.rng.IntN(span)], "VIEW"))
			continue
		}
		recs = append(recs, g.record(g.next, "VIEW"))
		g.liveKeys = append(g.liveKeys, g.next)
		g.next++
		added++
	}
	g.rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	return recs, added, deleted
}
