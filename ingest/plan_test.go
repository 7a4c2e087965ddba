package ingest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/schemaguard"
)

// TestRouter routes batches with a fake decoder: what each record becomes (write,
// dead-letter, halt, skip, duplicate, kept, carried), the txn watermark per partition, and
// the messages that go into dead letters and halts.
func TestRouter(t *testing.T) {
	fits := &decode.WriterSchema{ID: 1}
	misfit := &decode.WriterSchema{ID: 2, Delta: &dl.StructType{}}
	guard := schemaguard.BatchPlan{Base: &dl.StructType{}, Decisions: map[int]schemaguard.Decision{
		1: {Action: schemaguard.Write},
		2: {Action: schemaguard.DeadLetterIt, Reason: decode.ReasonSchemaMismatch, Field: "channel"},
	}}
	rec := func(part int32, off int64) *kgo.Record { return &kgo.Record{Topic: "t", Partition: part, Offset: off} }
	// decode results by offset: "" writes a row, "null" is a null record, else a reason
	type in struct {
		rec   *kgo.Record
		ws    *decode.WriterSchema
		fail  string // a failure found before the guard (frame, schema lookup)
		route route
		dec   string
		id    string // identity
	}
	cases := []struct {
		name    string
		rules   rules
		guard   schemaguard.BatchPlan
		in      []in
		want    string // routes by offset
		handled string
		rows    int
	}{
		{"a halt stops its partition, not the others", rules{policy: config.PolicyHalt, onIncompatible: config.PolicyHalt},
			schemaguard.BatchPlan{Base: &dl.StructType{}, Decisions: map[int]schemaguard.Decision{1: {Action: schemaguard.Write},
				2: {Action: schemaguard.HaltIt, Reason: decode.ReasonSchemaMismatch}}},
			[]in{{rec: rec(0, 0), ws: fits}, {rec: rec(1, 10), ws: fits}, {rec: rec(0, 1), ws: misfit}, {rec: rec(0, 2), ws: fits}, {rec: rec(1, 11), ws: fits}},
			"0:write 10:write 1:halt 2:- 11:write", "t/0=0 t/1=11", 3},
		{"the guard's rejection and decode failures dead-letter; null records skip", rules{policy: config.PolicyDeadLetter, onIncompatible: config.PolicyHalt, hasDLQ: true}, guard,
			[]in{{rec: rec(0, 0), ws: misfit}, {rec: rec(0, 1), ws: fits, dec: "null"}, {rec: rec(0, 2), ws: fits, dec: decode.ReasonTruncated},
				{rec: rec(0, 3), ws: fits, dec: decode.ReasonNotNullViolation}, {rec: rec(0, 4), ws: misfit}, {rec: rec(0, 5), ws: fits}},
			"0:dead_letter 1:skip 2:dead_letter 3:dead_letter 4:dead_letter 5:write", "t/0=5", 1},
		{"evolve: a null for a NOT NULL column follows on_incompatible; bad bytes halt without a DLQ", rules{policy: config.PolicyEvolve, onIncompatible: config.PolicyHalt}, guard,
			[]in{{rec: rec(0, 0), ws: fits, dec: decode.ReasonNotNullViolation}, {rec: rec(1, 0), fail: decode.ReasonBadMagic}, {rec: rec(2, 0), ws: fits}},
			"0:halt 0:halt 0:write", "t/2=0", 1},
		{"bad bytes dead-letter whenever a DLQ is configured, even under halt", rules{policy: config.PolicyHalt, onIncompatible: config.PolicyHalt, hasDLQ: true}, guard,
			[]in{{rec: rec(0, 0), fail: decode.ReasonBadMagic}, {rec: rec(0, 1), ws: fits, dec: decode.ReasonNotNullViolation}},
			"0:dead_letter 1:halt", "t/0=0", 0},
		{"routes set before the guard pass through and are handled", rules{policy: config.PolicyDeadLetter, hasDLQ: true}, guard,
			[]in{{rec: rec(0, 0), route: routeSkip}, {rec: rec(0, 1), route: routeKeep}, {rec: rec(0, 2), route: routeCarry}, {rec: rec(0, 3), route: routeDuplicate}},
			"0:skip 1:keep 2:carry 3:duplicate", "t/0=3", 0},
		{"identity: a second copy of a written original is a duplicate; one whose first failed is written", rules{policy: config.PolicyDeadLetter, hasDLQ: true}, guard,
			[]in{{rec: rec(0, 0), ws: fits, id: "a"}, {rec: rec(0, 1), ws: fits, id: "a"}, {rec: rec(0, 2), ws: fits, id: "b", dec: decode.ReasonTruncated},
				{rec: rec(0, 3), ws: fits, id: "b"}, {rec: rec(0, 4), route: routeCarry, id: "a"}, {rec: rec(0, 5), route: routeKeep, id: "a"}},
			"0:write 1:duplicate 2:dead_letter 3:write 4:duplicate 5:keep", "t/0=5", 2},
	}
	names := map[route]string{routeGuard: "-", routeWrite: "write", routeSkip: "skip", routeDuplicate: "duplicate",
		routeDeadLetter: "dead_letter", routeKeep: "keep", routeCarry: "carry", routeHalt: "halt"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			items := make([]item, len(c.in))
			ids := map[*kgo.Record]string{}
			decs := map[*kgo.Record]string{}
			useID := false
			for i, x := range c.in {
				items[i] = item{rec: x.rec, ws: x.ws, route: x.route}
				if x.fail != "" {
					items[i].fail = &decode.Error{Reason: x.fail, Err: errors.New("bad frame")}
				}
				ids[x.rec], decs[x.rec] = x.id, x.dec
				useID = useID || x.id != ""
			}
			decoded := 0
			rt := router{rules: c.rules, guard: c.guard, table: "orders", version: 7,
				decode: func(it *item) error {
					decoded++
					switch d := decs[it.rec]; d {
					case "":
						return nil
					case "null":
						return decode.ErrNullRecord
					default:
						return &decode.Error{Reason: d, Field: "customer", Err: errors.New(d)}
					}
				}}
			if useID {
				rt.identity = func(r *kgo.Record) string { return ids[r] }
			}
			res := rt.route(items)
			var got []string
			for i, it := range items {
				got = append(got, fmt.Sprintf("%d:%s", it.rec.Offset, names[res.routes[i]]))
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Errorf("routes\n got %s\nwant %s", g, c.want)
			}
			var hs []string
			for _, p := range []int32{0, 1, 2} {
				if off, ok := res.handled[topicPartition{"t", p}]; ok {
					hs = append(hs, fmt.Sprintf("t/%d=%d", p, off))
				}
			}
			if g := strings.Join(hs, " "); g != c.handled {
				t.Errorf("handled %s, want %s", g, c.handled)
			}
			if res.rows != c.rows {
				t.Errorf("rows %d, want %d", res.rows, c.rows)
			}
			for i, r := range res.routes {
				if _, ok := res.why[i]; ok != (r == routeDeadLetter || r == routeHalt) {
					t.Errorf("item %d (%s): why given %v", i, names[r], ok)
				}
			}
		})
	}
}

// TestRouterMessages: the guard's rejection is explained once per writer schema, a null
// for a NOT NULL column says how to let it through, other failures carry their error.
func TestRouterMessages(t *testing.T) {
	table := &dl.StructType{Fields: []*dl.StructField{{Name: "id", Type: dl.Long, Nullable: true}}}
	v2 := &dl.StructType{Fields: []*dl.StructField{{Name: "id", Type: dl.Long}, {Name: "channel", Type: dl.String, Nullable: true}}}
	opts := schemaguard.Options{Policy: schemaguard.DeadLetter, OnIncompatible: schemaguard.Halt}
	g := schemaguard.PlanBatch(table, []schemaguard.Writer{{ID: 5, Schema: v2}}, opts)
	ws := &decode.WriterSchema{ID: 5, Delta: v2}
	fits := &decode.WriterSchema{ID: 4, Delta: table}
	g.Decisions[4] = schemaguard.Decision{Action: schemaguard.Write}
	items := []item{{rec: &kgo.Record{Offset: 0}, ws: ws}, {rec: &kgo.Record{Offset: 1}, ws: ws}, {rec: &kgo.Record{Offset: 2}, ws: fits}}
	rt := router{rules: rules{policy: config.PolicyDeadLetter, hasDLQ: true}, guard: g, opts: opts, table: "orders", version: 7,
		decode: func(*item) error {
			return &decode.Error{Reason: decode.ReasonNotNullViolation, Field: "customer", Err: errors.New("null")}
		}}
	res := rt.route(items)
	if res.why[0].fail != res.why[1].fail {
		t.Error("the rejection of one writer schema is built twice")
	}
	if m := res.why[0].message; !strings.Contains(m, "channel") || !strings.Contains(m, "orders") {
		t.Errorf("rejection message does not name the field and table: %q", m)
	}
	want := "writer schema id 4: customer is null in this record, but the column is NOT NULL in table orders at version 7 " +
		"(the writer schema declares it nullable). To let it through: make the column nullable " +
		"(ALTER TABLE … ALTER COLUMN customer DROP NOT NULL), or set schema.policy: evolve, which relaxes it in the same commit"
	if m := res.why[2].message; m != want {
		t.Errorf("not-null message\n got %q\nwant %q", m, want)
	}
	if res.why[0].fail.Reason != decode.ReasonSchemaMismatch || res.why[0].fail.Field != "channel" {
		t.Errorf("rejection %s/%s", res.why[0].fail.Reason, res.why[0].fail.Field)
	}
}
