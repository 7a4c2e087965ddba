package ingest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/keyindex"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/rowfill"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Keyed tables (table.mode upsert; docs/keyed-tables.md): a flush's changes are reduced to
// the last per key before anything is written, each winner is compared with what the
// table holds for its key, and the rows that winners replace or delete are marked in
// deletion vectors of the files holding them, in the same commit as the new rows and the
// txns (docs/architecture.md, Keyed tables).

// rowLoc is a row of a data file of the table: its add.path and its 0-based position.
type rowLoc struct {
	path string
	row  uint64
}

// stored is what the table holds for a key when a flush starts: its live rows (more than
// one only in a table another writer filled with duplicates), the sequence of the newest
// change applied to it, and whether that change deleted it (a remembered delete: no live
// row, seq is the delete's).
type stored struct {
	locs    []rowLoc
	seq     int64
	deleted bool
	found   bool
}

// keyedPlan is what a keyed flush does beyond writing its kept rows.
type keyedPlan struct {
	// keep holds, per data file of the flush (nil: the unpartitioned table's columns),
	// which of its rows are written: the rows of winning upserts.
	keep map[*rowfill.PartitionFile][]bool
	// marks are the stored rows to delete, by file path (rows replaced by a kept row, or
	// deleted).
	marks map[string][]uint64
	// deletes are the keys a winning delete removes, with its sequence, remembered for
	// table.delete_horizon when changes are ordered by a column.
	deletes []keyedDelete
	// markers are, per data file of the flush, the rows of winning deletes kept in the
	// file and marked deleted in its deletion vector in the same commit (changes ordered by
	// a column only, when the table holds no row with the delete's sequence: none, or
	// older ones): no reader sees them, and a key index built from the table finds the
	// delete's key and sequence there (a deleted row newer than every live row of its key
	// is a remembered delete), so the delete is remembered across restarts until OPTIMIZE
	// purges the row.
	markers     map[*rowfill.PartitionFile][]int
	withMarkers bool // planKeyed's markers
	// soft is table.deletes soft: a winning delete keeps its key's row flagged instead of
	// removing it (softDelete). flags are the flush's rows kept for a tombstone, to flag
	// deleted (rowfill.Stage.SoftDelete); copies the stored rows to copy flagged into a
	// new file (deltawriter.Snapshot.CopyRows), by file path and row, with the delete's
	// sequence; the originals are marked like replaced rows.
	soft   bool
	flags  []softFlag
	copies map[string]map[uint64]int64
	// counts for the metrics and the log: changes superseded by a later change of their
	// key in the batch, winners older than what the table holds (stale), upserts written,
	// deletes applied (a key with a live row, or remembered), rows marked deleted.
	superseded, stale, upserts, deleted, marked int
}

// softFlag is a row of the flush kept for a soft delete, and the delete's sequence.
type softFlag struct {
	file *rowfill.PartitionFile
	row  int
	seq  int64
}

// keyedDelete is a key a flush deleted, and the delete's sequence.
type keyedDelete struct {
	key []byte
	seq int64
}

// planKeyed reduces changes (in any order; pos[i] is changes[i]'s position in the
// batch) to the last change per key and decides each winner against the table. ordered is
// true when changes carry a sequence (table.sequence_by): a key's last change is then the
// one with the greatest (sequence, position), and a winner whose sequence is lower than
// the one the table holds for its key is stale (dropped, deletes included); without a
// sequence the batch's order decides and the batch always wins over the table. A
// tombstone carries no sequence of its own: it deletes what is current at its position,
// so it takes the greatest sequence of its key seen before it (the table's included). So
// does a snapshot read without its envelope sequence (rowfill.Change.SeqFromPosition):
// current as of its position, it wins over every earlier change of its key and loses to
// every later one with a greater sequence.
// rows gives each data file's row count (the keep masks' lengths); lookup returns what
// the table holds for a key.
//
// markers keeps a winning delete's own row as a delete marker (keyedPlan.markers) when the
// table holds no row of its key; false under copy-on-write, which writes no deletion
// vector, and with soft deletes. soft keeps a deleted key's row flagged (softDelete).
func planKeyed(changes []rowfill.Change, pos []int32, ordered, markers, soft bool, rows map[*rowfill.PartitionFile]int,
	lookup func(key []byte) stored) keyedPlan {
	p := keyedPlan{keep: map[*rowfill.PartitionFile][]bool{}, marks: map[string][]uint64{}, markers: map[*rowfill.PartitionFile][]int{},
		withMarkers: markers && !soft, soft: soft, copies: map[string]map[uint64]int64{}}
	for f, n := range rows {
		p.keep[f] = make([]bool, n)
	}
	// The changes are grouped by key in a sort of small values (the key's first 8 bytes,
	// the position), reading the key itself only when two prefixes are equal: a sort
	// through the changes' keys missed the cache on most comparisons.
	order := make([]changeOrder, len(changes))
	for i := range order {
		order[i] = changeOrder{prefix: keyPrefix(changes[i].Key), pos: pos[i], i: int32(i)}
	}
	slices.SortFunc(order, func(a, b changeOrder) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		if c := bytes.Compare(changes[a.i].Key, changes[b.i].Key); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	var run []int
	for i := 0; i < len(order); {
		first := &changes[order[i].i]
		run = append(run[:0], int(order[i].i))
		j := i + 1
		for j < len(order) && order[j].prefix == order[i].prefix && bytes.Equal(changes[order[j].i].Key, first.Key) {
			run = append(run, int(order[j].i))
			j++
		}
		st := lookup(first.Key)
		win, carrier := run[len(run)-1], -1
		if ordered {
			win, carrier = lastBySequence(changes, run, st)
		} else if soft {
			carrier = lastRow(changes, run)
		}
		p.superseded += len(run) - 1
		var carries *rowfill.Change
		if carrier >= 0 {
			carries = &changes[carrier]
		}
		p.decide(&changes[win], carries, st, ordered)
		i = j
	}
	return p
}

// changeOrder is a change in planKeyed's sort: its key's prefix (keyPrefix), its position
// in the batch and its index in the changes.
type changeOrder struct {
	prefix uint64
	pos, i int32
}

// keyPrefix is key's first 8 bytes as a big-endian integer, zero-padded: keys whose
// prefixes differ compare as their prefixes do (bytes.Compare).
func keyPrefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// lastBySequence is the winner of one key's changes run (in position order) when changes
// are ordered by a sequence: the greatest (sequence, position), a tombstone and a snapshot
// read without its sequence (rowfill.Change.SeqFromPosition) taking the greatest sequence
// seen before it (st's included: a live row's or a remembered delete's), minSeq when
// nothing is known; it sets their Seq. carrier is the change of the run whose row carries
// the winner's sequence: the winner itself when it has a row (a snapshot read's row is
// given the sequence it took: rowfill.Stage.SetSequence), for a tombstone the last change
// with a row that set the sequence it took; -1 when that sequence came from the table (or
// from nothing).
func lastBySequence(changes []rowfill.Change, run []int, st stored) (win, carrier int) {
	win, carrier = -1, -1
	have, high, highRow := st.found, st.seq, -1
	for _, i := range run {
		c := &changes[i]
		from := i
		tomb := c.Row < 0 && c.Delete
		if tomb || c.SeqFromPosition {
			if tomb {
				from = highRow
			}
			if have {
				c.Seq = high
			} else {
				c.Seq = minSeq
			}
		}
		if !have || c.Seq >= high {
			high, have = c.Seq, true
			if c.Row >= 0 {
				highRow = i
			}
		}
		if win < 0 || c.Seq >= changes[win].Seq {
			win, carrier = i, from
		}
	}
	return win, carrier
}

// lastRow is, in a key's run of changes in position order whose last change wins (no
// sequence), the last change with a row before a winning tombstone: the values a soft
// delete keeps; -1 when the winner has a row of its own or none precedes it.
func lastRow(changes []rowfill.Change, run []int) int {
	if changes[run[len(run)-1]].Row >= 0 {
		return -1
	}
	for i := len(run) - 2; i >= 0; i-- {
		if changes[run[i]].Row >= 0 {
			return run[i]
		}
	}
	return -1
}

// minSeq is a tombstone's (or a snapshot read's without its sequence) sequence when
// nothing of its key is known: any change wins over it. It is the key index's NULL
// sequence, so a snapshot read's row written with a NULL sequence (rowfill.Stage.SetSequence)
// orders the same after a restart.
const minSeq = keyindex.NullSequence

// decide applies the winning change c of its key to the plan, given what the table holds
// for the key; carries is the change of the flush whose row carries c's sequence
// (lastBySequence; nil: none).
func (p *keyedPlan) decide(c, carries *rowfill.Change, st stored, ordered bool) {
	if ordered && st.found && c.Seq < st.seq {
		p.stale++
		return
	}
	for _, l := range st.locs {
		p.marks[l.path] = append(p.marks[l.path], l.row)
		p.marked++
	}
	if c.Delete && p.soft {
		p.softDelete(c, carries, st, ordered)
		return
	}
	if c.Delete {
		if len(st.locs) > 0 {
			p.deleted++
		}
		if ordered && c.Seq != minSeq {
			p.deletes = append(p.deletes, keyedDelete{key: c.Key, seq: c.Seq})
			if p.withMarkers && carries != nil && (len(st.locs) == 0 || c.Seq > st.seq) {
				// No row of the table carries this delete's sequence (the rows it marks,
				// kept in their files, carry an older one): the flush's row that does —
				// the delete's own, or the one whose sequence a tombstone took — is kept
				// as a marker, so that a restarted pipeline remembers the delete at its
				// sequence.
				p.keep[carries.File][carries.Row] = true
				p.markers[carries.File] = append(p.markers[carries.File], carries.Row)
			}
		}
		return
	}
	p.keep[c.File][c.Row] = true
	p.upserts++
}

// softDelete applies a winning delete c under soft deletes: its key keeps a row, flagged
// deleted with the delete's sequence (its sequence_by value, else its record's Kafka
// offset), in place of the stored rows decide marked. The row is the delete's own when it
// has one (a delete_when row, flagged by the row stage); for a tombstone, the flush's row
// that carries the values it deletes (carries, flagged here), else a copy of the stored
// row; a tombstone of a key with no row anywhere keeps nothing.
func (p *keyedPlan) softDelete(c, carries *rowfill.Change, st stored, ordered bool) {
	seq := c.Seq
	if !ordered {
		seq = c.Rec.Offset
	}
	switch {
	case c.Row >= 0:
		p.keep[c.File][c.Row] = true
	case carries != nil:
		p.keep[carries.File][carries.Row] = true
		p.flags = append(p.flags, softFlag{file: carries.File, row: carries.Row, seq: seq})
	case len(st.locs) > 0:
		l := st.locs[len(st.locs)-1] // one live row a key, but for another writer's duplicates
		if p.copies[l.path] == nil {
			p.copies[l.path] = map[uint64]int64{}
		}
		p.copies[l.path][l.row] = seq
	default:
		return
	}
	p.deleted++
}

// keyedState is a keyed pipeline's state across flushes: the key index of its table
// (deltawriter/keyindex), built on the first flush that finds the table and kept current
// by each commit (ours, applied in memory) and each snapshot change (others', read).
type keyedState struct {
	spec    keyindex.Spec
	ordered bool          // table.sequence_by is set
	cow     bool          // table.upsert_write copy_on_write
	soft    bool          // table.deletes soft
	horizon time.Duration // table.delete_horizon
	ix      *keyindex.Index
	// stale is set when the index missed commits of other writers (our commit landed
	// past the version after the one it read): the next flush refreshes it from the
	// snapshot instead of trusting its version.
	stale bool
	// expired is when remembered deletes past the horizon were last forgotten
	// (Index.Expire visits every key: at most once a minute); expiredN how many since the
	// last report.
	expired  time.Time
	expiredN int
	// pending are the deletes of commits made while there was no index (the commit that
	// created the table, or one after a failed Apply): put into the index by the next
	// Build, since the table holds only the deletes with a marker row (none under
	// copy-on-write).
	pending []pendingDelete
}

// pendingDelete is a delete to remember once the index is built, and when it was made.
type pendingDelete struct {
	keyedDelete
	at time.Time
}

// newKeyedState is the keyed state of cfg's pipeline; nil for an append table.
func newKeyedState(cfg *config.Config) *keyedState {
	if !cfg.Table.Upsert() {
		return nil
	}
	return &keyedState{spec: keyindex.Spec{Key: cfg.Table.Key, Sequence: rowfill.SequenceColumn(cfg)},
		ordered: cfg.Table.SequenceBy != "", cow: cfg.Table.CopyOnWrite(), soft: cfg.Table.SoftDeletes(), horizon: cfg.Table.DeleteHorizon}
}

// tableRemembersDeletes reports whether the table itself remembers deletes: ordered by a
// sequence under merge-on-read, the rows deletes mark stay in their files (a file whose
// rows all end up deleted too: RowDeletes.KeepEmpty) and a key index built from the table
// reads them as remembered deletes (keyindex.WithDeletedRows). Soft deletes keep a live,
// flagged row instead; copy-on-write marks no rows.
func (k *keyedState) tableRemembersDeletes() bool { return k.ordered && !k.cow && !k.soft }

// domainsRememberDeletes reports whether the table remembers deletes in domainMetadata
// (keyindex.DeletesDomainPrefix): ordered by a sequence under copy-on-write with hard
// deletes, where a deleted row does not stay in the table.
func (k *keyedState) domainsRememberDeletes() bool { return k.ordered && k.cow && !k.soft }

// deletesDomains are the domainMetadata actions of a keyed flush on a table that
// remembers deletes in domains (domainsRememberDeletes): the removals of the domains
// older than table.delete_horizon, whether or not the flush deletes (a table whose
// deletes stop must not keep them for ever), and one recording the flush's deletes at
// now under the commit's id when it has any. Errors: DeletesDomain's.
func (f *flusher) deletesDomains(t tableState, kf *keyedFlush, now time.Time) ([]deltalog.DomainMetadata, error) {
	k := f.keyed
	if !k.domainsRememberDeletes() {
		return nil, nil
	}
	var out []deltalog.DomainMetadata
	if t.exists() {
		out = keyindex.ExpiredDeletesDomains(t.snap, now.Add(-k.horizon))
	}
	if len(kf.plan.deletes) == 0 {
		return out, nil
	}
	deletes := make([]keyindex.Deleted, len(kf.plan.deletes))
	for i, d := range kf.plan.deletes {
		deletes[i] = keyindex.Deleted{Key: d.key, Seq: d.seq}
	}
	d, err := keyindex.DeletesDomain(now, f.commitID, deletes)
	if err != nil {
		return nil, fmt.Errorf("remember the flush's deletes in table %s: %w", f.cfg.Table.URI, err)
	}
	return append(out, d), nil
}

// sync brings the index to snap: built on first use, refreshed when snap is newer than
// it (another writer's commits) or it missed commits. Errors: the store's, reading the
// key columns of the table's files.
func (k *keyedState) sync(ctx context.Context, st storage.Store, snap *deltawriter.Snapshot) error {
	switch {
	case k.ix == nil:
		var opts []keyindex.Option
		if k.tableRemembersDeletes() {
			opts = append(opts, keyindex.WithDeletedRows())
		}
		if k.domainsRememberDeletes() {
			opts = append(opts, keyindex.WithDeletesDomains())
		}
		ix, err := keyindex.Build(ctx, st, snap, k.spec, opts...)
		if err != nil {
			return fmt.Errorf("build key index: %w", err)
		}
		k.ix, k.stale = ix, false
		if err := k.rememberPending(); err != nil {
			return err
		}
	case k.stale || k.ix.Version() != snap.Version:
		if _, err := k.ix.Refresh(ctx, st, snap); err != nil {
			k.ix = nil // rebuilt by the next attempt
			return fmt.Errorf("refresh key index: %w", err)
		}
		k.stale = false
	}
	if now := time.Now(); k.ordered && now.Sub(k.expired) > time.Minute {
		k.expiredN += k.ix.Expire(now.Add(-k.horizon))
		k.expired = now
	}
	return nil
}

// rememberPending puts the pending deletes into a newly built index, unless the table
// holds a live row of the key (written since by another writer: its change wins) or a
// remembered delete at least as new. Errors: PutDeleted's (a time outside 1970–2106).
func (k *keyedState) rememberPending() error {
	pending := k.pending
	k.pending = nil
	for _, d := range pending {
		if h, ok := k.ix.Lookup(d.key); ok && (len(h.Rows) > 0 || h.Seq >= d.seq) {
			continue
		}
		if err := k.ix.PutDeleted(d.key, d.seq, d.at); err != nil {
			return fmt.Errorf("remember the deletes of earlier commits: %w", err)
		}
	}
	return nil
}

// remember keeps deletes for the next Build of the index.
func (k *keyedState) remember(deletes []keyedDelete, at time.Time) {
	for _, d := range deletes {
		// The key aliases the flush's key arena, which does not outlive the flush.
		k.pending = append(k.pending, pendingDelete{keyedDelete: keyedDelete{key: bytes.Clone(d.key), seq: d.seq}, at: at})
	}
}

// report sets the key index's gauges (ingestd_key_index), counts the deletes forgotten
// since the last report, and reserves the index's bytes in the process's memory limit
// (mem; nil: not managed).
func (k *keyedState) report(m *Metrics, mem *MemoryLimit, pipeline string) {
	if k.ix == nil {
		return
	}
	st := k.ix.Stats()
	mem.Reserve(pipeline, st.Bytes)
	m.KeyIndex.WithLabelValues(pipeline, "keys").Set(float64(st.Keys))
	m.KeyIndex.WithLabelValues(pipeline, "remembered_deletes").Set(float64(st.Deleted))
	m.KeyIndex.WithLabelValues(pipeline, "bytes").Set(float64(st.Bytes))
	m.KeyIndexExpired.WithLabelValues(pipeline).Add(float64(k.expiredN))
	k.expiredN = 0
}

// lookup is what the table holds for key, from the index (none before the table exists).
func (k *keyedState) lookup(key []byte) stored {
	if k.ix == nil {
		return stored{}
	}
	h, ok := k.ix.Lookup(key)
	if !ok {
		return stored{}
	}
	s := stored{seq: h.Seq, deleted: h.Deleted, found: true}
	for _, l := range h.Rows {
		s.locs = append(s.locs, rowLoc{path: l.Path, row: l.Row})
	}
	return s
}

// keyedFlush is a keyed flush's plan and what its commit tells the index.
type keyedFlush struct {
	plan keyedPlan
	// files are the flush's data files with rows after the reduction, in the order
	// writeFiles writes them (nil: the unpartitioned table's), and keys/seqs each file's
	// rows' keys and sequences in row order.
	files []*rowfill.PartitionFile
	keys  [][][]byte
	seqs  [][]int64
	// markers are, per file of files, the positions of its delete markers
	// (keyedPlan.markers) after the reduction.
	markers [][]uint64
	// updated and removed are what keyedActions made of the stored files it marked: the
	// add of each with its grown deletion vector, and the paths of files all of whose rows
	// are now deleted (removed); for the index after the commit.
	updated []deltalog.Add
	removed []string
	// rewritten are the new files of a copy-on-write flush's rewrites, and of the stored
	// rows a soft delete copies flagged (their keys are read from them by the index).
	rewritten []deltalog.Add
}

// reduceKeyed reduces a keyed flush after routing: the tombstones' changes join the
// decoded rows' (a tombstone whose key cannot be read is dead-lettered missing_key; one
// at or after its partition's halt or cut is left for the flush that resumes it), the
// changes are planned against the index (planKeyed), and the rows that are not kept are
// dropped from the flush's columns (under soft deletes, the rows a tombstone keeps are
// flagged first). out.rows becomes the rows written. Errors: a row that cannot be flagged
// (a table without the soft delete columns, which the start-up check refuses).
func (f *flusher) reduceKeyed(ctx context.Context, t tableState, b *prepared, items []item, out *outcome) (*keyedFlush, error) {
	if b.stage == nil {
		return nil, nil // no table and no schema: nothing decoded, nothing to delete
	}
	// Each change's position in the batch: the rows' changes are in record order, and a
	// tombstone's change is the last one when Tombstone accepts it.
	changes := b.stage.Changes()
	pos := make([]int32, len(changes), len(changes)+8)
	next := 0
	stopped := out.stoppedAt()
	for i := range items {
		it := &items[i]
		if next < len(changes) && changes[next].Rec == it.rec {
			pos[next] = int32(i)
			next++
			continue
		}
		if !it.tomb || stopped.covers(it.rec) {
			continue
		}
		if err := b.stage.Tombstone(f.cfg, it.rec); err == nil {
			pos = append(pos, int32(i))
		} else {
			out.fresh = append(out.fresh, f.tombstoneDeadLetter(t, it.rec, err))
		}
	}
	rows := map[*rowfill.PartitionFile]int{}
	if b.parts == nil {
		rows[nil] = b.rows
	} else {
		for _, p := range b.parts.Files() {
			rows[p] = p.Rows
		}
	}
	changes = b.stage.Changes()
	kf := &keyedFlush{plan: planKeyed(changes, pos, f.keyed.ordered, !f.keyed.cow, f.keyed.soft, rows, f.keyed.lookup)}
	// Placeholders of unavailable values take the key's current value before the rows
	// that are not kept (an earlier change's among them) are dropped.
	fill, err := f.fillUnavailable(ctx, t, b, changes, pos, f.keyed.ordered,
		func(c *rowfill.Change) bool { return kf.plan.keep[c.File][c.Row] }, f.keyed.lookup)
	if err != nil {
		return nil, err
	}
	if fill != nil {
		b.unavailable = fill
		f.dropUnavailable(t, b, fill, changes, items, pos, out)
		for file, rows := range fill.drop {
			for _, r := range rows {
				kf.plan.keep[file][r] = false
				kf.plan.upserts--
			}
		}
	}
	for _, fl := range kf.plan.flags { // before the drop: positions are the decoded rows'
		if err := b.stage.SoftDelete(fl.file, b.cols, fl.row, fl.seq); err != nil {
			return nil, fmt.Errorf("soft-delete in table %s: %w", f.cfg.Table.URI, err) // the start-up check refuses such a table
		}
	}
	for _, c := range changes {
		// A kept snapshot read ordered by its position holds the sequence it took, where a
		// key index built after a restart reads it.
		if c.SeqFromPosition && c.Row >= 0 && kf.plan.keep[c.File][c.Row] {
			if err := b.stage.SetSequence(b.cols, c); err != nil {
				return nil, fmt.Errorf("write a snapshot read in table %s: %w", f.cfg.Table.URI, err) // the start-up check refuses such a table
			}
		}
	}
	// New row positions after the drop: the rank of a kept row among its file's kept rows.
	rank := map[*rowfill.PartitionFile][]int{}
	kept := map[*rowfill.PartitionFile]int{}
	for file, keep := range kf.plan.keep {
		r := make([]int, len(keep))
		n := 0
		for j, k := range keep {
			r[j] = n
			if k {
				n++
			}
		}
		rank[file], kept[file] = r, n
	}
	index := map[*rowfill.PartitionFile]int{}
	if b.parts == nil {
		keepColumns(b.cols, kf.plan.keep[nil])
		b.rows, out.rows = kept[nil], kept[nil]
		kf.files = []*rowfill.PartitionFile{nil}
		index[nil] = 0
	} else {
		out.rows = 0
		for _, p := range b.parts.Files() {
			keepColumns(p.Cols, kf.plan.keep[p])
			p.Rows = kept[p]
			out.rows += p.Rows
			if p.Rows > 0 {
				index[p] = len(kf.files)
				kf.files = append(kf.files, p)
			}
		}
	}
	kf.keys, kf.seqs, kf.markers = make([][][]byte, len(kf.files)), make([][]int64, len(kf.files)), make([][]uint64, len(kf.files))
	for i, p := range kf.files {
		kf.keys[i], kf.seqs[i] = make([][]byte, kept[p]), make([]int64, kept[p])
	}
	for _, c := range changes {
		if c.Row < 0 || !kf.plan.keep[c.File][c.Row] {
			continue
		}
		i, r := index[c.File], rank[c.File][c.Row]
		kf.keys[i][r], kf.seqs[i][r] = c.Key, c.Seq
	}
	for file, rows := range kf.plan.markers {
		i := index[file]
		for _, row := range rows {
			kf.markers[i] = append(kf.markers[i], uint64(rank[file][row]))
		}
	}
	if out.rows == 0 {
		kf.files, kf.keys, kf.seqs = nil, nil, nil
	}
	return kf, nil
}

// tombstoneDeadLetter is the dead letter of a keyed table's tombstone whose change or row
// cannot be made (err: its key cannot be read, missing_key; a CHECK constraint its NULLs
// fail): a tombstone has no writer schema (SchemaID -1).
func (f *flusher) tombstoneDeadLetter(t tableState, rec *kgo.Record, err error) dlq.DeadLetter {
	fail := asDecodeError(err)
	return dlq.DeadLetter{Pipeline: f.cfg.Name, Rec: rec, Reason: fail.Reason, Field: fail.Field,
		Message: fail.Error(), SchemaID: -1, TableVersion: t.version, Ack: f.ackOf(rec)}
}

// keepColumns drops the rows keep marks false from every column of cols.
func keepColumns(cols []column.Column, keep []bool) {
	if !slices.Contains(keep, false) {
		return
	}
	for i := range cols {
		cols[i].KeepRows(keep)
	}
}

// keyedActions turns a keyed flush's marks into the commit's deletion vectors
// (deltawriter.DeleteRows, one deletion-vector file for the commit): per file of the
// snapshot with marked rows, its remove and its add with the grown deletion vector; and
// the flush's own data files with delete markers get their deletion vector in place
// (adds holds them first, in kf.files' order; they replace those adds). Errors: a marked
// file that is not live in the snapshot (the index is behind the table: rebuild), the
// store's.
func (f *flusher) keyedActions(ctx context.Context, t tableState, kf *keyedFlush, adds []deltalog.Add) ([]deltalog.Remove, []deltalog.Add, error) {
	var own []int // indexes into adds of the flush's files with markers
	for i := range kf.files {
		if len(kf.markers[i]) > 0 {
			own = append(own, i)
		}
	}
	if len(kf.plan.marks) == 0 && len(own) == 0 {
		return nil, nil, nil
	}
	live := make(map[string]deltalog.Add, len(kf.plan.marks))
	for _, a := range t.files().All() {
		if _, ok := kf.plan.marks[a.Path]; ok {
			live[a.Path] = a
		}
	}
	copies, err := f.softCopies(ctx, t, kf, live)
	if err != nil {
		return nil, nil, err
	}
	if f.keyed.cow {
		removes, adds, err := f.rewriteMarked(ctx, t, kf, live)
		kf.rewritten = append(kf.rewritten, copies...)
		return removes, append(adds, copies...), err
	}
	dels := make([]deltawriter.RowDeletes, 0, len(kf.plan.marks))
	for _, p := range slices.Sorted(maps.Keys(kf.plan.marks)) {
		a, ok := live[p]
		if !ok {
			f.keyed.ix = nil
			return nil, nil, fmt.Errorf("mark rows of %s: the file is not in table version %d (the key index is behind): %w", p, t.version, errSnapshotChanged)
		}
		// Ordered by a sequence, a stored file whose rows all end up deleted stays (with a
		// vector of every row): its rows carry the sequences of the deletes that marked
		// them, which a key index built from the table reads as remembered deletes.
		dels = append(dels, deltawriter.RowDeletes{Add: a, Rows: kf.plan.marks[p], KeepEmpty: f.keyed.tableRemembersDeletes()})
	}
	ownAt := map[string]int{} // path → index into adds of the flush's files with markers
	for _, i := range own {
		dels = append(dels, deltawriter.RowDeletes{Add: adds[i], Rows: kf.markers[i], KeepEmpty: true})
		ownAt[adds[i].Path] = i
	}
	removes, marked, err := deltawriter.DeleteRows(ctx, f.deps.Table.Store(), dels, time.Now())
	if err != nil {
		return nil, nil, &transientError{stage: "write deletion vectors", err: err}
	}
	// DeleteRows' actions follow dels, less the files it did not change; a stored file
	// all of whose rows are deleted has a remove and no add.
	var outR []deltalog.Remove
	var outA []deltalog.Add
	readded := map[string]bool{}
	for _, a := range marked {
		if i, ok := ownAt[a.Path]; ok {
			adds[i] = a // a new file: no remove, its add carries the deletion vector
			continue
		}
		outA = append(outA, a)
		readded[a.Path] = true
	}
	kf.updated, kf.removed, kf.rewritten = outA, nil, copies
	outA = append(outA, copies...)
	for _, r := range removes {
		if _, ok := ownAt[r.Path]; ok {
			continue
		}
		outR = append(outR, r)
		if !readded[r.Path] {
			kf.removed = append(kf.removed, r.Path)
		}
	}
	return outR, outA, nil
}

// softCopies writes, for a soft-delete flush, the stored rows its tombstones delete as
// copies flagged deleted (_deleted true, _deleted_sequence the delete's), one new file
// per stored file (deltawriter.Snapshot.CopyRows): the originals are marked like replaced
// rows. live holds the marked files' adds. Errors: a file that is not live (rebuild), the
// store's.
func (f *flusher) softCopies(ctx context.Context, t tableState, kf *keyedFlush, live map[string]deltalog.Add) ([]deltalog.Add, error) {
	var out []deltalog.Add
	for _, p := range slices.Sorted(maps.Keys(kf.plan.copies)) {
		a, ok := live[p]
		if !ok {
			f.keyed.ix = nil
			return nil, fmt.Errorf("copy soft-deleted rows of %s: the file is not in table version %d (the key index is behind): %w", p, t.version, errSnapshotChanged)
		}
		seqs := kf.plan.copies[p]
		na, err := t.snap.CopyRows(ctx, f.deps.Table.Store(), a, slices.Collect(maps.Keys(seqs)), func(row uint64) map[string]any {
			var seq any = seqs[row]
			if seqs[row] == minSeq {
				seq = nil // the stored row's sequence was NULL (a snapshot read of an unknown key): so is the delete's
			}
			return map[string]any{rowfill.Deleted: true, rowfill.DeletedSequence: seq}
		})
		if err != nil {
			return nil, &transientError{stage: "write data file", what: "copy soft-deleted rows of " + p, err: err}
		}
		out = append(out, na)
	}
	return out, nil
}

// rewriteMarked is keyedActions under copy-on-write: each file of the snapshot with
// marked rows is rewritten without them (deltawriter.Snapshot.RewriteWithoutRows): its
// remove, and the add of the new file unless no row remains. live holds the marked
// files' adds. Errors: a marked file that is not live (rebuild), the store's.
func (f *flusher) rewriteMarked(ctx context.Context, t tableState, kf *keyedFlush, live map[string]deltalog.Add) ([]deltalog.Remove, []deltalog.Add, error) {
	var removes []deltalog.Remove
	var adds []deltalog.Add
	kf.updated, kf.removed, kf.rewritten = nil, nil, nil
	now := time.Now()
	for _, p := range slices.Sorted(maps.Keys(kf.plan.marks)) {
		a, ok := live[p]
		if !ok {
			f.keyed.ix = nil
			return nil, nil, fmt.Errorf("rewrite %s: the file is not in table version %d (the key index is behind): %w", p, t.version, errSnapshotChanged)
		}
		rm, add, err := t.snap.RewriteWithoutRows(ctx, f.deps.Table.Store(), a, kf.plan.marks[p], now)
		if err != nil {
			return nil, nil, &transientError{stage: "write data file", what: "rewrite " + p, err: err}
		}
		removes = append(removes, rm)
		kf.removed = append(kf.removed, p)
		if add != nil {
			adds = append(adds, *add)
			kf.rewritten = append(kf.rewritten, *add)
		}
	}
	return removes, adds, nil
}

// committedKeyed tells the index what commit version did: its new files' rows (adds
// holds the flush's data files first, in kf.files' order), the rows it marked deleted,
// and the deletes to remember; it counts the flush's changes (ingestd_keyed_*).
func (f *flusher) committedKeyed(ctx context.Context, version int64, t tableState, kf *keyedFlush, adds []deltalog.Add) {
	// Counted once the commit landed: a flush that lost its commit is decided again on the
	// new snapshot, and only the decision that was committed counts.
	m := f.m
	m.KeyedChanges.WithLabelValues(f.cfg.Name, "superseded").Add(float64(kf.plan.superseded))
	m.KeyedChanges.WithLabelValues(f.cfg.Name, "stale").Add(float64(kf.plan.stale))
	m.KeyedChanges.WithLabelValues(f.cfg.Name, "upserted").Add(float64(kf.plan.upserts))
	m.KeyedChanges.WithLabelValues(f.cfg.Name, "deleted").Add(float64(kf.plan.deleted))
	m.KeyedRowsMarked.WithLabelValues(f.cfg.Name).Add(float64(kf.plan.marked))
	k := f.keyed
	now := time.Now()
	if k.ix == nil {
		k.remember(kf.plan.deletes, now) // the index is built by the next flush
		return
	}
	c := keyindex.Change{Version: version, Removed: kf.removed, Updated: kf.updated, Deleted: map[string][]uint64{}}
	for p, rows := range kf.plan.marks {
		c.Deleted[p] = rows
	}
	for _, a := range kf.rewritten {
		c.Added = append(c.Added, keyindex.FileKeys{Add: a}) // Keys nil: read from the file
	}
	for i := range kf.files {
		c.Added = append(c.Added, keyindex.FileKeys{Add: adds[i], Keys: kf.keys[i], Seqs: kf.seqs[i]})
		if len(kf.markers[i]) > 0 {
			c.Deleted[adds[i].Path] = kf.markers[i]
		}
	}
	if err := k.ix.Apply(ctx, f.deps.Table.Store(), c); err != nil {
		f.log.Warn("key index: applying the commit failed; rebuilding it from the table before the next flush", "version", version, "err", err)
		k.ix = nil
		k.remember(kf.plan.deletes, now)
		return
	}
	for _, d := range kf.plan.deletes {
		if err := k.ix.PutDeleted(d.key, d.seq, now); err != nil {
			f.log.Warn("key index: a delete could not be remembered; rebuilding the index before the next flush", "version", version, "err", err)
			k.ix = nil
			k.remember(kf.plan.deletes, now)
			return
		}
	}
	if version != t.version+1 {
		k.stale = true // others committed in between: read them before the next lookup
	}
	k.report(f.m, f.deps.Memory, f.cfg.Name)
}
