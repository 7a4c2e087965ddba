package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
)

// The keyed-table property test: random streams of inserts, updates, deletes (op = 'd'
// rows and tombstones) and key moves between partition values over a small key space,
// cut into random batches, with kill -9 at random points (a random moment; after a
// flush's data files are written; after its deletion vectors are written, before the
// commit) and restarts; whenever the pipeline has caught up, the table read with its
// deletion vectors applied equals a model (a map applied in offset order per key, which
// sequence_by orders with its deletes remembered), one live row per key, and every offset
// handled once.
//
// The configurations: upsert tables in offset order or by sequence_by, partitioned or not,
// hard deletes (both write modes), soft deletes (both write modes), and changelogs (the table holds every change sent, once).
//
// KEYED_PROPERTY_SEED=<n> reruns the seed a failure logged (the stream, the cuts and the
// kill decisions follow from it; the timing does not); KEYED_PROPERTY_RUNS=<n> sets the
// runs per configuration (default 2 for the four hard-delete merge-on-read ones, 1 for
// the others).

// testKeyedPropRow is testKeyedRow with grp, the partition column of the partitioned runs
// (a key whose grp changes moves).
const testKeyedPropRow = `{"type":"record","name":"Row","namespace":"shop","fields":[
  {"name":"id","type":"long"},
  {"name":"v","type":["null","string"],"default":null},
  {"name":"seq","type":"long"},
  {"name":"op","type":"string"},
  {"name":"grp","type":"string"}]}`

const (
	propPartitions = 3  // Kafka partitions; a key's records go to partition id % propPartitions
	propKeys       = 20 // the key space
	propChanges    = 300
)

// propChange is one record of the stream: a row (op c, u or d) or a tombstone of id.
type propChange struct {
	id   int64
	v    string
	seq  int64
	op   string
	grp  string
	tomb bool
}

// propRow is a live row as the table holds it; deleted and delSeq are a soft-deleted
// row's _deleted and _deleted_sequence (false and 0 for a live row, NULL read as 0).
type propRow struct {
	v       string
	seq     int64
	grp     string
	deleted bool
	delSeq  int64
}

// propMode is one configuration of the property test.
type propMode struct {
	name string
	// once runs the mode with one seed unless KEYED_PROPERTY_RUNS or KEYED_PROPERTY_SEED
	// says otherwise: the modes beyond the four upsert ones share the package's time
	// budget under -race.
	once                 bool
	ordered, partitioned bool
	soft                 bool // table.deletes soft
	cow                  bool // table.upsert_write copy_on_write
	changelog            bool // table.mode changelog
}

func (c propChange) String() string {
	if c.tomb {
		return fmt.Sprintf("tombstone(%d)", c.id)
	}
	return fmt.Sprintf("%s(%d,%s,seq %d,grp %s)", c.op, c.id, c.v, c.seq, c.grp)
}

// propStream is a random stream of n changes over keys keys: 60 % upserts (c or u),
// 25 % op = 'd' rows, 15 % tombstones; each key's sequences mostly grow but run up to
// three behind and tie (out of order, stale); grp is one of three values at random.
func propStream(rng *rand.Rand, n, keys int) []propChange {
	base := make([]int64, keys)
	out := make([]propChange, 0, n)
	for i := range n {
		id := int64(rng.IntN(keys))
		base[id]++
		c := propChange{id: id, seq: base[id] + int64(rng.IntN(5)) - 3, grp: string(rune('a' + rng.IntN(3)))}
		switch r := rng.IntN(100); {
		case r < 60:
			c.op, c.v = []string{"c", "u"}[rng.IntN(2)], "r"+strconv.Itoa(i)
		case r < 85:
			c.op = "d"
		default:
			c.tomb = true
		}
		out = append(out, c)
	}
	return out
}

// keyedModel is what an upsert table holds after a stream: the changes of each key
// applied in offset order. Without sequence_by the last change wins. With it, a change
// whose sequence is lower than the greatest sequence applied to its key (an upsert's or
// a delete's) is stale and dropped, equal sequences go to the later change, and a
// tombstone deletes what is current, taking that greatest sequence (nothing happens to
// a key never seen).
//
// With soft deletes (soft) a delete keeps its key's row, flagged deleted with the
// delete's sequence (sequence_by's value, else the record's offset, off): an op = 'd'
// row is itself the row; a tombstone flags the key's current row, taking its sequence
// (ordered) or its own offset; a key that never had a row stays without one.
type keyedModel struct {
	ordered bool
	soft    bool
	keys    map[int64]*modelKey
}

type modelKey struct {
	live  bool
	row   propRow
	high  int64
	known bool
}

func newKeyedModel(ordered, soft bool) *keyedModel {
	return &keyedModel{ordered: ordered, soft: soft, keys: map[int64]*modelKey{}}
}

// apply applies change c, the record at offset off of its partition.
func (m *keyedModel) apply(c propChange, off int64) {
	k := m.keys[c.id]
	if k == nil {
		k = &modelKey{}
		m.keys[c.id] = k
	}
	if m.soft {
		m.applySoft(k, c, off)
		return
	}
	switch {
	case c.tomb:
		k.live = false
	case m.ordered && k.known && c.seq < k.high:
		// stale
	case c.op == "d":
		k.live, k.high, k.known = false, c.seq, true
	default:
		k.live, k.row, k.high, k.known = true, propRow{v: c.v, seq: c.seq, grp: c.grp}, c.seq, true
	}
}

func (m *keyedModel) applySoft(k *modelKey, c propChange, off int64) {
	seq := c.seq
	if !m.ordered {
		seq = off
	}
	switch {
	case c.tomb:
		if k.live { // live here: the key has a row, flagged or not
			k.row.deleted, k.row.delSeq = true, off
			if m.ordered {
				k.row.delSeq = k.high
			}
		}
	case m.ordered && k.known && c.seq < k.high:
		// stale
	case c.op == "d":
		k.live, k.row, k.high, k.known = true, propRow{seq: c.seq, grp: c.grp, deleted: true, delSeq: seq}, c.seq, true
	default:
		k.live, k.row, k.high, k.known = true, propRow{v: c.v, seq: c.seq, grp: c.grp}, c.seq, true
	}
}

func (m *keyedModel) rows() map[int64]propRow {
	out := map[int64]propRow{}
	for id, k := range m.keys {
		if k.live {
			out[id] = k.row
		}
	}
	return out
}

// propHarness is the harness with testKeyedPropRow registered.
type propHarness struct {
	*harness
	id     int
	schema avro.Schema
}

func newPropHarness(t *testing.T) *propHarness {
	h := newHarness(t, propPartitions)
	id, _, err := h.reg.RegisterSchema("rows-value", sr.Schema{Schema: testKeyedPropRow, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	s, err := avro.Parse(testKeyedPropRow)
	if err != nil {
		t.Fatal(err)
	}
	return &propHarness{harness: h, id: id, schema: s}
}

// send produces cs, each to partition id % propPartitions, keyed by its id.
func (h *propHarness) send(cs []propChange) {
	h.t.Helper()
	out := make([]*kgo.Record, 0, len(cs))
	for _, c := range cs {
		r := &kgo.Record{Topic: h.topic, Partition: int32(c.id % propPartitions), Key: fmt.Appendf(nil, "%d", c.id)}
		if !c.tomb {
			row := map[string]any{"id": c.id, "seq": c.seq, "op": c.op, "grp": c.grp, "v": nil}
			if c.v != "" {
				row["v"] = c.v
			}
			body, err := avro.Marshal(h.schema, row)
			if err != nil {
				h.t.Fatal(err)
			}
			var hdr sr.ConfluentHeader
			framed, err := hdr.AppendEncode(nil, h.id, nil)
			if err != nil {
				h.t.Fatal(err)
			}
			r.Value = append(framed, body...)
		}
		out = append(out, r)
	}
	if err := h.producer.ProduceSync(context.Background(), out...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// table reads the table's live rows (deletion vectors applied, as Spark and delta-rs
// read them); a second live row of one id is returned as an error.
func (h *propHarness) table() (map[int64]propRow, error) {
	h.t.Helper()
	out := map[int64]propRow{}
	if err := h.liveRows(func(add deltalog.Add, row map[string]any) error {
		id := row["id"].(int64)
		if prev, dup := out[id]; dup {
			return fmt.Errorf("two live rows for id %d: %+v and the one in %s", id, prev, add.Path)
		}
		r := propRow{seq: row["seq"].(int64)}
		r.v, _ = row["v"].(string)
		r.deleted, _ = row["_deleted"].(bool)
		r.delSeq, _ = row["_deleted_sequence"].(int64)
		if g, ok := row["grp"].(string); ok {
			r.grp = g
		} else if pv := add.PartitionValues["grp"]; pv != nil {
			r.grp = *pv
		}
		out[id] = r
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// changelog reads a changelog table's rows, each as changelogRow formats it, sorted.
func (h *propHarness) changelog() ([]string, error) {
	h.t.Helper()
	var out []string
	if err := h.liveRows(func(add deltalog.Add, row map[string]any) error {
		grp := row["grp"]
		if pv, ok := add.PartitionValues["grp"]; ok {
			grp = nil
			if pv != nil {
				grp = *pv
			}
		}
		out = append(out, fmt.Sprint(row["id"], row["v"], row["seq"], row["op"], grp, row["_change_operation"], row["_change_sequence"]))
		return nil
	}); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// changelogRow is the row a changelog holds for change c, the record at offset off of
// its partition (as changelog formats it): a tombstone's row holds its key alone, and
// its sequence is NULL under sequence_by.
func changelogRow(c propChange, off int64, ordered bool) string {
	if c.tomb {
		var seq any = off
		if ordered {
			seq = nil
		}
		return fmt.Sprint(c.id, nil, nil, nil, nil, "delete", seq)
	}
	var v any = c.v
	if c.v == "" {
		v = nil
	}
	op, seq := "upsert", c.seq
	if c.op == "d" {
		op = "delete"
	}
	if !ordered {
		seq = off
	}
	return fmt.Sprint(c.id, v, c.seq, c.op, c.grp, op, seq)
}

// txnLog checks that across the table's log every commit's txn of a partition is above
// the one before (no offset is handled twice) and returns the last per appId.
func (h *propHarness) txnLog() map[string]int64 {
	h.t.Helper()
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		h.t.Fatal(err)
	}
	last := map[string]int64{}
	for v := int64(0); ; v++ {
		b, err := st.Get(context.Background(), fmt.Sprintf("_delta_log/%020d.json", v))
		if err != nil {
			return last
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var a struct {
				Txn *struct {
					AppID   string `json:"appId"`
					Version int64  `json:"version"`
				} `json:"txn"`
			}
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				h.t.Fatalf("commit %d: %v", v, err)
			}
			if a.Txn == nil {
				continue
			}
			if prev, ok := last[a.Txn.AppID]; ok && a.Txn.Version <= prev {
				h.t.Errorf("commit %d: txn %s version %d after %d: offsets handled twice", v, a.Txn.AppID, a.Txn.Version, prev)
			}
			last[a.Txn.AppID] = a.Txn.Version
		}
	}
}

// propRun is one run of the property test: its stream, model and the running member.
type propRun struct {
	mode    propMode
	h       *propHarness
	cfg     config.Config
	rng     *rand.Rand
	seed    uint64
	stream  []propChange
	sent    int
	ends    [propPartitions]int64 // offsets produced per partition
	m       *member
	killed  chan string // a hook's kill point, once it holds its flush for the kill
	release *latch      // opened after the kill: the held hook fails its flush
	kills   map[string]int
	checks  int
}

// start starts a member with a random batch bound and, unless calm, kill -9 hooks that
// fire with probability 1/6 at each of their points.
func (r *propRun) start(calm bool) {
	cfg := r.cfg
	cfg.Batch.MaxRecords = 3 + r.rng.IntN(60)
	cfg.Batch.MaxAge = time.Duration(10+r.rng.IntN(90)) * time.Millisecond
	hookRng := rand.New(rand.NewPCG(r.rng.Uint64(), r.rng.Uint64()))
	var mu sync.Mutex
	killed, release := make(chan string, 1), newLatch()
	r.killed, r.release = killed, release
	r.h.t.Cleanup(release.open)
	crash := func(point string) error {
		mu.Lock()
		fire := !calm && hookRng.IntN(6) == 0
		mu.Unlock()
		if !fire {
			return nil
		}
		select {
		case killed <- point:
		default: // a kill is already under way
		}
		release.wait()
		return &transientError{stage: "commit", err: errors.New("injected: the process died at " + point)}
	}
	r.m = r.h.startHooked(fmt.Sprintf("member-%d", len(r.kills)), &cfg, nil, func(hk *hooks) {
		hk.afterWrite = func() error { return crash("after the data files") }
		hk.beforeCommit = func(int) error { return crash("after the deletion vectors") }
	})
}

// kill is kill -9 of the running member (its flush in flight, if a hook holds it, fails
// there; otherwise it settles, committed or not).
func (r *propRun) kill(point string) {
	r.m.cancel(errAbandon)
	r.release.open()
	<-r.m.done
	r.m.done <- nil
	r.m = nil
	r.kills[point]++
}

// produce sends the next n changes of the stream.
func (r *propRun) produce(n int) {
	cs := r.stream[r.sent:min(r.sent+n, len(r.stream))]
	r.h.send(cs)
	for _, c := range cs {
		r.ends[c.id%propPartitions]++
	}
	r.sent += len(cs)
}

// catchUp waits until the table handled every record sent, restarting the member after
// each kill a hook makes (after three kills, with calm hooks); then it checks the table.
func (r *propRun) catchUp() {
	t := r.h.t
	t.Helper()
	for n := 0; ; {
		if r.m == nil {
			r.start(n >= 3)
		}
		deadline := time.Now().Add(60 * time.Second)
		done := false
		for !done {
			select {
			case point := <-r.killed:
				r.kill(point)
				n++
				done = true
				continue
			default:
			}
			if r.handledAll() {
				r.check()
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d: the table did not handle the %d records sent in 60 s", r.seed, r.sent)
			}
			running(t, r.m)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// handledAll reports whether the table's txns account for every record sent.
func (r *propRun) handledAll() bool {
	txns := r.h.snapshot().Txns
	for p, end := range r.ends {
		if end == 0 {
			continue
		}
		if v, ok := txns[fmt.Sprintf("orders-orders-%d", p)]; !ok || v != end-1 {
			return false
		}
	}
	return true
}

// check compares the table with the model of the changes sent.
func (r *propRun) check() {
	t := r.h.t
	t.Helper()
	r.checks++
	var offs [propPartitions]int64
	if r.mode.changelog {
		// The table holds every change sent, once.
		want := make([]string, 0, r.sent)
		for _, c := range r.stream[:r.sent] {
			want = append(want, changelogRow(c, offs[c.id%propPartitions], r.mode.ordered))
			offs[c.id%propPartitions]++
		}
		slices.Sort(want)
		got, err := r.h.changelog()
		if err != nil {
			t.Fatalf("seed %d, after %d changes: %v", r.seed, r.sent, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d, after %d changes (kills %v): the changelog differs from the changes sent:\n%s\nwant\n%s",
				r.seed, r.sent, r.kills, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return
	}
	model := newKeyedModel(r.mode.ordered, r.mode.soft)
	for _, c := range r.stream[:r.sent] {
		model.apply(c, offs[c.id%propPartitions])
		offs[c.id%propPartitions]++
	}
	want := model.rows()
	got, err := r.h.table()
	if err != nil {
		t.Fatalf("seed %d, after %d changes: %v", r.seed, r.sent, err)
	}
	var diff []string
	for id := range int64(propKeys) {
		g, gok := got[id]
		w, wok := want[id]
		if g == w && gok == wok {
			continue
		}
		var hist []string
		for i, c := range r.stream[:r.sent] {
			if c.id == id {
				hist = append(hist, fmt.Sprintf("#%d %v", i, c))
			}
		}
		diff = append(diff, fmt.Sprintf("key %d: table %v (present %v), model %v (present %v); its changes: %s",
			id, g, gok, w, wok, strings.Join(hist, ", ")))
	}
	if len(diff) > 0 {
		t.Fatalf("seed %d, after %d changes (kills %v): the table differs from the model:\n%s", r.seed, r.sent, r.kills, strings.Join(diff, "\n"))
	}
}

// runKeyedProperty is one run: the stream sent in random chunks, each followed by a kill
// at a random moment (one in three), or by catching up with the table checked; at the
// end the last member stops like SIGTERM and the table and the txns are checked.
func runKeyedProperty(t *testing.T, seed uint64, mode propMode) (kills map[string]int, checks int) {
	h := newPropHarness(t)
	cfg := h.config()
	cfg.Table.Mode, cfg.Table.Key, cfg.Table.DeleteWhen, cfg.Table.KeyFormat = config.ModeUpsert, []string{"id"}, "op = 'd'", "string"
	cfg.Table.DeleteHorizon, cfg.Table.UpsertWrite, cfg.Table.Deletes = config.DefaultDeleteHorizon, config.MergeOnRead, config.DeletesHard
	switch {
	case mode.changelog:
		cfg.Table.Mode, cfg.Table.DeleteHorizon, cfg.Table.UpsertWrite, cfg.Table.Deletes = config.ModeChangelog, 0, "", ""
	case mode.soft:
		cfg.Table.Deletes = config.DeletesSoft
	}
	if mode.cow {
		cfg.Table.UpsertWrite = config.CopyOnWrite
	}
	if mode.ordered {
		cfg.Table.SequenceBy = "seq"
	}
	if mode.partitioned {
		cfg.Table.PartitionBy = []string{"grp"}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r := &propRun{mode: mode, h: h, cfg: *cfg, rng: rng, seed: seed, stream: propStream(rng, propChanges, propKeys), kills: map[string]int{}}
	for r.sent < len(r.stream) {
		r.produce(1 + rng.IntN(50))
		if r.m == nil {
			r.start(false)
		}
		if rng.IntN(3) == 0 {
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
			select {
			case point := <-r.killed:
				r.kill(point)
			default:
				r.kill("a random moment")
			}
			continue
		}
		r.catchUp()
	}
	r.catchUp()
	r.m.stop(t)
	r.m = nil
	r.check()
	last := h.txnLog()
	for p, end := range r.ends {
		if v, ok := last[fmt.Sprintf("orders-orders-%d", p)]; end > 0 && (!ok || v != end-1) {
			t.Errorf("seed %d: partition %d: txn %d (present %v), want %d", seed, p, v, ok, end-1)
		}
	}
	if dl := h.dlqCount(); dl != 0 {
		t.Errorf("seed %d: %d dead letters, want none", seed, dl)
	}
	return r.kills, r.checks
}

func TestKeyedProperty(t *testing.T) {
	if testing.Short() {
		t.Skip("the keyed property test runs pipelines for a while")
	}
	base, runs, runsSet := uint64(time.Now().UnixNano()), 2, false
	if s := os.Getenv("KEYED_PROPERTY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KEYED_PROPERTY_SEED=%q: %v", s, err)
		}
		base, runs = v, 1
	}
	if s := os.Getenv("KEYED_PROPERTY_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("KEYED_PROPERTY_RUNS=%q: want a positive count", s)
		}
		runs, runsSet = v, true
	}
	for _, mode := range []propMode{
		{name: "offset order", ordered: false, partitioned: false},
		{name: "sequence_by", ordered: true, partitioned: false},
		{name: "offset order partitioned", ordered: false, partitioned: true},
		{name: "sequence_by partitioned", ordered: true, partitioned: true},
		{name: "offset order copy_on_write", cow: true, once: true},
		{name: "sequence_by partitioned copy_on_write", ordered: true, partitioned: true, cow: true, once: true},
		{name: "soft sequence_by", ordered: true, soft: true, once: true},
		{name: "soft offset order partitioned", partitioned: true, soft: true, once: true},
		{name: "soft sequence_by partitioned copy_on_write", ordered: true, partitioned: true, soft: true, cow: true, once: true},
		{name: "changelog sequence_by", ordered: true, changelog: true, once: true},
		{name: "changelog offset order partitioned", partitioned: true, changelog: true, once: true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			n := runs
			if mode.once && !runsSet {
				n = 1
			}
			for i := range n {
				seed := base + uint64(i)
				start := time.Now()
				kills, checks := runKeyedProperty(t, seed, mode)
				if t.Failed() {
					return
				}
				t.Logf("seed %d (KEYED_PROPERTY_SEED=%d): %d changes over %d keys, kills %v, %d checks of the table against the model, %v",
					seed, seed, propChanges, propKeys, kills, checks, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}
