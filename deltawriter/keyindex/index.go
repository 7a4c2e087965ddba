package keyindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"golang.org/x/sync/errgroup"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// Spec names the columns an Index is built on.
type Spec struct {
	// Key lists the key columns (CheckKeyColumns), in the order their values are
	// concatenated into a key.
	Key []string
	// Sequence is the optional sequence column (CheckSequenceColumn): a top-level
	// integer, date or timestamp column whose value orders the changes of one key. ""
	// orders changes by arrival: every stored sequence is then 0.
	Sequence string
}

// NullSequence is the sequence stored for a row whose sequence column is NULL (or absent
// from its file): older than any sequence.
const NullSequence int64 = math.MinInt64

// ErrLiveRows is returned (wrapped) by PutDeleted when the key still has a live row: a
// delete is remembered only after the commit that deleted its rows has been applied.
var ErrLiveRows = errors.New("key has live rows")

// Location is one live row of a key: the data file's path as its add action spells it
// (URL-encoded, relative to the table root) and the row's position in the file
// (0-based, the index a deletion vector marks), with the row's sequence.
type Location struct {
	Path string
	Row  uint64
	Seq  int64
}

// Hit is what the index holds for one key: its live rows, or a remembered delete.
type Hit struct {
	// Rows are the key's live rows, sorted by path then row: one, or more when the table
	// holds several live rows for the key (written by another writer); an upsert deletes
	// them all.
	Rows []Location
	// Seq is the largest sequence of Rows, or the remembered delete's sequence.
	Seq int64
	// Deleted says the key has no live row and its delete is remembered (PutDeleted) with
	// sequence Seq since At (whole seconds).
	Deleted bool
	At      time.Time
}

// FileKeys is a data file one of our commits added, with each row's key.
type FileKeys struct {
	// Add is the file's add action as committed.
	Add deltalog.Add
	// Keys[i] is the canonical key (AppendValue of each key column, in Spec.Key order)
	// of row i. nil: the key columns are read from the file (e.g. a file rewritten
	// copy-on-write, whose rows the caller did not encode).
	Keys [][]byte
	// Seqs[i] is the sequence of row i; nil stores 0 (arrival order).
	Seqs []int64
}

// Change is what one of our own commits did to the table, for Apply.
type Change struct {
	// Version is the commit's table version.
	Version int64
	// Removed are the paths of files the commit removed without adding them back (a
	// copy-on-write rewrite's old files). A file re-added with a new deletion vector
	// belongs in Updated instead.
	Removed []string
	// Updated are the add actions of the files the commit re-added with a new deletion
	// vector (each remove/add pair's add), with Deleted[path] the rows that vector deletes
	// beyond the previous one. A file of Updated without rows in Deleted is read again.
	Updated []deltalog.Add
	Deleted map[string][]uint64
	// Added are the new data files; Deleted[path] of one lists the rows the commit adds it
	// with already deleted (its deletion vector's: delete markers), which are not live.
	Added []FileKeys
}

// Stats are an Index's counts, for metrics.
type Stats struct {
	// Version is the table version the index reflects.
	Version int64
	// Keys is the number of keys with a live row; Duplicates the live rows beyond the
	// first of keys that have several.
	Keys, Duplicates int
	// Deleted is the number of remembered deletes.
	Deleted int
	// Files is the number of live data files indexed.
	Files int
	// NullKeys is the number of rows read whose key has a NULL value: no upsert or delete
	// can match them, so they are not indexed.
	NullKeys int64
	// Bytes is the memory of the key table (SlotBytes per slot) plus an estimate of the
	// duplicates' overflow (48 bytes per extra row), in bytes.
	Bytes int64
}

// RefreshStats says what Refresh did.
type RefreshStats struct {
	// FilesRead were read (added by other writers, or whose deletion vector changed);
	// FilesRemoved left the index (removed from the table, or read again).
	FilesRead, FilesRemoved int
	// Rebuilt says a key or sequence column's encoding changed (a decimal's scale, date
	// to timestamp_ntz): the index was built again and its DroppedDeletes remembered
	// deletes dropped.
	Rebuilt        bool
	DroppedDeletes int
}

// Option configures Build.
type Option func(*options)

type options struct {
	concurrency int
	loc         *time.Location
	deletedRows bool
	domains     bool
	now         func() time.Time
}

// WithDeletedRows makes Build, and Refresh for the files it reads, read the rows deletion
// vectors delete too: a key whose newest row (by sequence) is a deleted one, newer than
// every live row of the key, gets a remembered delete with that row's sequence, at the
// time of the Build or Refresh (PutDeleted). A keyed pipeline ordered by a sequence keeps
// a delete's sequence in the table that way (the replaced row, or the delete's own row
// kept and marked deleted); a row another writer deleted counts the same way, so a
// pipeline learns the deletes of another pipeline on its table. Only with Spec.Sequence.
func WithDeletedRows() Option { return func(o *options) { o.deletedRows = true } }

// WithDeletesDomains makes Build and Refresh read the table's deletes domains
// (DeletesDomainPrefix) as remembered deletes at the time each was written, unless a
// live row of the key is as new: the deletes of an upsert table written copy-on-write,
// whose deleted rows do not stay in the table. Only with Spec.Sequence.
func WithDeletesDomains() Option { return func(o *options) { o.domains = true } }

// WithConcurrency sets how many data files Build and Refresh read at once (default 8).
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = max(1, n) } }

// WithPartitionTimeZone sets the zone in which legacy zone-less timestamp partition
// values are read (deltawriter.ParsePartitionTimestamp; default UTC).
func WithPartitionTimeZone(loc *time.Location) Option { return func(o *options) { o.loc = loc } }

type fp struct{ hi, lo uint64 }

// loc is one live row inside the index.
type loc struct {
	file, row uint32
	seq       int64
}

type fileState struct {
	path string          // as in the add action
	dvID string          // the deletion vector's unique id as last read ("" for none)
	del  *roaring.Bitmap // rows deleted: the deletion vector read plus rows our commits deleted
	dead bool
}

// Index maps keys to their live rows in a Delta table (see the package doc). It is safe for
// concurrent use; Build, Refresh and Apply hold it exclusively while they change it.
type Index struct {
	mu      sync.RWMutex
	spec    Spec
	opts    options
	lay     *layout // nil while the table does not exist
	s1, s2  maphash.Seed
	t       table
	over    map[fp][]loc
	files   []*fileState // by id; 0 is never used
	byPath  map[string]uint32
	free    []uint32
	domains map[string]bool // deletes domains read (rememberDomains)
	version int64
	deleted int
	dupes   int
	nulls   int64
	touched uint64 // keeps touch's loads from being optimised away
}

// Build reads the key columns (and the sequence column) of every live data file of snap
// and returns the index of its live rows (PROTOCOL.md, "Deletion Vectors": rows a file's
// deletion vector marks are skipped). Only those columns' chunks are read, with ranged
// reads when st supports them (storage.RangeGetter); key columns that are partition
// columns come from add.partitionValues when the file lacks them. Files are read
// concurrently (WithConcurrency). Rows whose key has a NULL are counted (Stats.NullKeys),
// not indexed; a NULL or absent sequence is NullSequence. A snapshot of a table that does
// not exist yet (Version -1) gives an empty index.
//
// Errors: spec names columns CheckKeyColumns or CheckSequenceColumn refuses, a file or
// deletion vector cannot be read, a key column is nested or repeated in a file, a file
// of more than 2^32 rows, or ctx's error.
func Build(ctx context.Context, st storage.Store, snap *deltawriter.Snapshot, spec Spec, opts ...Option) (*Index, error) {
	o := options{concurrency: 8, loc: time.UTC, now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	if (o.deletedRows || o.domains) && spec.Sequence == "" {
		return nil, fmt.Errorf("build key index: remembered deletes need a sequence column")
	}
	x := newIndex(spec, o)
	x.version = snap.Version
	if snap.Version < 0 {
		return x, nil
	}
	lay, err := newLayout(snap, spec, o.loc)
	if err != nil {
		return nil, fmt.Errorf("build key index: %w", err)
	}
	x.lay = lay
	n := int64(0)
	for _, a := range snap.Files.All() {
		if r, ok := a.NumRecords(); ok {
			n += r
		}
		if a.DeletionVector != nil {
			n -= a.DeletionVector.Cardinality
		}
	}
	x.t.presize(int(max(n, 0)))
	adds := make([]deltalog.Add, 0, snap.Files.Len())
	for _, a := range snap.Files.All() {
		adds = append(adds, a)
	}
	var gone map[fp]int64 // with WithDeletedRows: per key, its newest deleted row's sequence
	if o.deletedRows {
		gone = map[fp]int64{}
	}
	if err := x.readFiles(ctx, st, adds, gone); err != nil {
		return nil, fmt.Errorf("build key index: %w", err)
	}
	x.rememberGone(gone, o.now())
	if o.domains {
		if err := x.rememberDomains(snap); err != nil {
			return nil, fmt.Errorf("build key index: %w", err)
		}
	}
	return x, nil
}

// rememberGone turns the newest deleted row of each key in gone into a remembered delete
// at time at, unless a live row of the key has an equal or greater sequence.
func (x *Index) rememberGone(gone map[fp]int64, at time.Time) {
	if len(gone) == 0 {
		return
	}
	sec := uint32(max(at.Unix(), 0))
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, seq := range gone {
		sh := x.t.shard(k.hi)
		i := sh.find(k.hi, k.lo)
		if i < 0 {
			sh.insert(slot{hi: k.hi, lo: k.lo, file: flagDeleted, row: sec, seq: seq})
			x.deleted++
			continue
		}
		e := &sh.slots[i]
		if e.file&flagDeleted != 0 {
			if seq > e.seq { // a newer delete (Refresh): remembered from now
				e.row, e.seq = sec, seq
			}
			continue
		}
		newest, live := NullSequence, false
		consider := func(l loc) {
			if x.live(l) {
				live, newest = true, max(newest, l.seq)
			}
		}
		consider(loc{file: e.file & fileMask, row: e.row, seq: e.seq})
		if e.file&flagOverflow != 0 {
			for _, o := range x.over[k] {
				consider(o)
			}
		}
		if live && newest >= seq {
			continue
		}
		if e.file&flagOverflow != 0 {
			x.dupes -= len(x.over[k])
			delete(x.over, k)
		}
		*e = slot{hi: k.hi, lo: k.lo, file: flagDeleted, row: sec, seq: seq}
		x.deleted++
	}
}

func newIndex(spec Spec, o options) *Index {
	return &Index{spec: spec, opts: o, s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), over: map[fp][]loc{},
		files: []*fileState{nil}, byPath: map[string]uint32{}, domains: map[string]bool{}}
}

func (x *Index) fingerprint(key []byte) (uint64, uint64) {
	return maphash.Bytes(x.s1, key), maphash.Bytes(x.s2, key)
}

// register gives a file an id (x.mu held).
func (x *Index) register(a deltalog.Add) uint32 {
	f := &fileState{path: a.Path, dvID: a.DeletionVector.UniqueID()}
	var id uint32
	if n := len(x.free); n > 0 {
		id, x.free = x.free[n-1], x.free[:n-1]
		x.files[id] = f
	} else {
		id = uint32(len(x.files))
		x.files = append(x.files, f)
	}
	x.byPath[deltalog.CanonicalPath(a.Path)] = id
	return id
}

// readFiles registers and reads adds concurrently (x.mu not held). When gone is not nil,
// it also collects the newest sequence of each key's deleted rows (WithDeletedRows).
func (x *Index) readFiles(ctx context.Context, st storage.Store, adds []deltalog.Add, gone map[fp]int64) error {
	if len(adds) == 0 {
		return nil
	}
	if x.lay == nil {
		return fmt.Errorf("read key columns: the table had no schema when the index was built")
	}
	ids := make([]uint32, len(adds))
	x.mu.Lock()
	for i, a := range adds {
		if len(x.files) > fileMask && len(x.free) == 0 {
			x.mu.Unlock()
			return fmt.Errorf("read key columns: more than %d data files", fileMask)
		}
		ids[i] = x.register(a)
	}
	x.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(x.opts.concurrency)
	for i, a := range adds {
		g.Go(func() error {
			fps := make([]fp, 0, batchRows)
			var goneFn func([]row)
			if gone != nil {
				goneFn = func(b []row) {
					x.mu.Lock()
					defer x.mu.Unlock()
					for _, r := range b {
						hi, lo := x.fingerprint(r.key)
						k := fp{hi, lo}
						if s, ok := gone[k]; !ok || r.seq > s {
							gone[k] = r.seq
						}
					}
				}
			}
			del, nulls, err := readFile(gctx, st, x.lay, a, func(b []row) {
				fps = fps[:0]
				for _, r := range b {
					hi, lo := x.fingerprint(r.key)
					fps = append(fps, fp{hi, lo})
				}
				x.mu.Lock()
				x.touch(fps)
				for j, r := range b {
					x.insertLoc(fps[j].hi, fps[j].lo, loc{file: ids[i], row: r.row, seq: r.seq})
				}
				x.mu.Unlock()
			}, goneFn)
			if err != nil {
				return err
			}
			x.mu.Lock()
			x.files[ids[i]].del = del
			x.nulls += nulls
			x.mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// touch reads the home slot of every fingerprint of a batch before the batch is inserted:
// the loads are independent, so the processor overlaps their cache misses, and the
// inserts that follow find the slots in cache (x.mu held).
func (x *Index) touch(fps []fp) {
	var sum uint64
	for _, f := range fps {
		sh := x.t.shard(f.hi)
		if len(sh.slots) > 0 {
			sum += sh.slots[sh.home(f.lo)].lo
		}
	}
	x.touched += sum
}

// live reports whether l is a live row (x.mu held).
func (x *Index) live(l loc) bool {
	if int(l.file) >= len(x.files) {
		return false
	}
	f := x.files[l.file]
	return f != nil && !f.dead && (f.del == nil || !f.del.Contains(l.row))
}

// insertLoc records l as a live row of the key (hi, lo), keeping the key's other live
// rows (x.mu held).
func (x *Index) insertLoc(hi, lo uint64, l loc) {
	sh := x.t.shard(hi)
	i := sh.find(hi, lo)
	if i < 0 {
		sh.insert(slot{hi: hi, lo: lo, file: l.file, row: l.row, seq: l.seq})
		return
	}
	e := &sh.slots[i]
	if e.file&flagDeleted != 0 {
		x.deleted--
		*e = slot{hi: hi, lo: lo, file: l.file, row: l.row, seq: l.seq}
		return
	}
	k := fp{hi, lo}
	var keep []loc
	if m := (loc{file: e.file & fileMask, row: e.row, seq: e.seq}); x.live(m) && !sameRow(m, l) {
		keep = append(keep, m)
	}
	if e.file&flagOverflow != 0 {
		for _, o := range x.over[k] {
			if x.live(o) && !sameRow(o, l) {
				keep = append(keep, o)
			}
		}
		x.dupes -= len(x.over[k])
		delete(x.over, k)
	}
	*e = slot{hi: hi, lo: lo, file: l.file, row: l.row, seq: l.seq}
	if len(keep) > 0 {
		e.file |= flagOverflow
		x.over[k] = keep
		x.dupes += len(keep)
	}
}

func sameRow(a, b loc) bool { return a.file == b.file && a.row == b.row }

// Lookup returns what the index holds for key (the concatenated AppendValue encodings of
// the key columns' values, in Spec.Key order): its live rows and their largest
// sequence, or its remembered delete; false when it holds nothing.
func (x *Index) Lookup(key []byte) (Hit, bool) {
	hi, lo := x.fingerprint(key)
	x.mu.RLock()
	defer x.mu.RUnlock()
	sh := x.t.shard(hi)
	i := sh.find(hi, lo)
	if i < 0 {
		return Hit{}, false
	}
	e := sh.slots[i]
	if e.file&flagDeleted != 0 {
		return Hit{Seq: e.seq, Deleted: true, At: time.Unix(int64(e.row), 0)}, true
	}
	h := Hit{Seq: NullSequence}
	add := func(l loc) {
		if x.live(l) {
			h.Rows = append(h.Rows, Location{Path: x.files[l.file].path, Row: uint64(l.row), Seq: l.seq})
			h.Seq = max(h.Seq, l.seq)
		}
	}
	add(loc{file: e.file & fileMask, row: e.row, seq: e.seq})
	if e.file&flagOverflow != 0 {
		for _, o := range x.over[fp{hi, lo}] {
			add(o)
		}
	}
	if len(h.Rows) == 0 {
		return Hit{}, false
	}
	slices.SortFunc(h.Rows, func(a, b Location) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Row, b.Row))
	})
	return h, true
}

// PutDeleted remembers that key was deleted with sequence seq at time at (kept to whole
// seconds), so that a later change with an older sequence does not bring it back
// (Expire forgets it). Call it after Apply of the commit that deleted the key's rows.
// Errors: ErrLiveRows (wrapped) when the key still has a live row; a time outside
// 1970–2106.
func (x *Index) PutDeleted(key []byte, seq int64, at time.Time) error {
	sec := at.Unix()
	if sec < 0 || sec > math.MaxUint32 {
		return fmt.Errorf("remember delete: time %s outside 1970–2106", at)
	}
	hi, lo := x.fingerprint(key)
	x.mu.Lock()
	defer x.mu.Unlock()
	sh := x.t.shard(hi)
	marker := slot{hi: hi, lo: lo, file: flagDeleted, row: uint32(sec), seq: seq}
	i := sh.find(hi, lo)
	if i < 0 {
		sh.insert(marker)
		x.deleted++
		return nil
	}
	e := &sh.slots[i]
	if e.file&flagDeleted != 0 {
		*e = marker
		return nil
	}
	k := fp{hi, lo}
	n := 0
	if x.live(loc{file: e.file & fileMask, row: e.row}) {
		n++
	}
	if e.file&flagOverflow != 0 {
		for _, o := range x.over[k] {
			if x.live(o) {
				n++
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("remember delete: %w: %d", ErrLiveRows, n)
	}
	if e.file&flagOverflow != 0 {
		x.dupes -= len(x.over[k])
		delete(x.over, k)
	}
	*e = marker
	x.deleted++
	return nil
}

// Forget drops everything the index holds for key (its rows or its remembered delete).
func (x *Index) Forget(key []byte) {
	hi, lo := x.fingerprint(key)
	x.mu.Lock()
	defer x.mu.Unlock()
	sh := x.t.shard(hi)
	i := sh.find(hi, lo)
	if i < 0 {
		return
	}
	e := sh.slots[i]
	if e.file&flagDeleted != 0 {
		x.deleted--
	}
	if e.file&flagOverflow != 0 {
		k := fp{hi, lo}
		x.dupes -= len(x.over[k])
		delete(x.over, k)
	}
	sh.remove(i)
}

// Expire forgets the remembered deletes made before before (PutDeleted's at) and returns
// how many it dropped. It visits every slot of the table.
func (x *Index) Expire(before time.Time) int {
	cut := before.Unix()
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for i := range x.t.shards {
		x.t.shards[i].filter(func(e *slot) bool {
			if e.file&flagDeleted != 0 && int64(e.row) < cut {
				n++
				return false
			}
			return true
		})
	}
	x.deleted -= n
	return n
}

// Stats returns the index's counts.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	files := 0
	for _, f := range x.files {
		if f != nil && !f.dead {
			files++
		}
	}
	return Stats{
		Version: x.version, Keys: x.t.len() - x.deleted, Duplicates: x.dupes, Deleted: x.deleted,
		Files: files, NullKeys: x.nulls,
		Bytes: int64(x.t.slotCount())*SlotBytes + int64(x.dupes)*48,
	}
}

// Version is the table version the index reflects.
func (x *Index) Version() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.version
}

// Apply brings the index to the table after one of our own commits without reading its
// new files: c.Added's rows become their keys' live rows (a key's earlier rows stay
// only while still live, so rows the commit's deletion vectors delete drop out), files of
// c.Removed leave, and the rows c.Deleted lists are no longer live. Added files without
// Keys, and Updated files without rows in Deleted, are read from st.
//
// Errors: Keys and Seqs of different lengths, a file of Updated the index does not know
// and cannot read, or a read error (the index is then only good for a fresh Build).
func (x *Index) Apply(ctx context.Context, st storage.Store, c Change) error {
	var reread []deltalog.Add
	x.mu.Lock()
	dead := false
	for _, p := range c.Removed {
		if id, ok := x.byPath[deltalog.CanonicalPath(p)]; ok {
			x.kill(id)
			dead = true
		}
	}
	for _, a := range c.Updated {
		id, ok := x.byPath[deltalog.CanonicalPath(a.Path)]
		rows, has := c.Deleted[a.Path]
		if !has {
			rows, has = c.Deleted[deltalog.CanonicalPath(a.Path)]
		}
		if !ok || !has {
			if ok {
				x.kill(id)
				dead = true
			}
			reread = append(reread, a)
			continue
		}
		f := x.files[id]
		if f.del == nil {
			f.del = roaring.New()
		}
		for _, r := range rows {
			if r > math.MaxUint32 {
				x.mu.Unlock()
				return fmt.Errorf("apply commit %d: row %d of %s past 2^32", c.Version, r, a.Path)
			}
			f.del.Add(uint32(r))
		}
		f.dvID = a.DeletionVector.UniqueID()
	}
	for _, fk := range c.Added {
		if fk.Keys == nil {
			reread = append(reread, fk.Add)
			continue
		}
		if fk.Seqs != nil && len(fk.Seqs) != len(fk.Keys) {
			x.mu.Unlock()
			return fmt.Errorf("apply commit %d: %s has %d keys and %d sequences", c.Version, fk.Add.Path, len(fk.Keys), len(fk.Seqs))
		}
		if len(fk.Keys) > math.MaxUint32 {
			x.mu.Unlock()
			return fmt.Errorf("apply commit %d: %s has more than 2^32 rows", c.Version, fk.Add.Path)
		}
		if id, ok := x.byPath[deltalog.CanonicalPath(fk.Add.Path)]; ok {
			x.kill(id)
			dead = true
		}
		id := x.register(fk.Add)
		if rows := c.Deleted[fk.Add.Path]; len(rows) > 0 {
			// Rows the commit marks deleted in the file it adds (a keyed pipeline's delete
			// markers): never live.
			f := x.files[id]
			f.del = roaring.New()
			for _, r := range rows {
				if r > math.MaxUint32 {
					x.mu.Unlock()
					return fmt.Errorf("apply commit %d: row %d of %s past 2^32", c.Version, r, fk.Add.Path)
				}
				f.del.Add(uint32(r))
			}
		}
		for r, k := range fk.Keys {
			var seq int64
			if fk.Seqs != nil {
				seq = fk.Seqs[r]
			}
			hi, lo := x.fingerprint(k)
			x.insertLoc(hi, lo, loc{file: id, row: uint32(r), seq: seq})
		}
	}
	if dead {
		x.sweep()
	}
	x.version = max(x.version, c.Version)
	x.mu.Unlock()
	if err := x.readFiles(ctx, st, reread, nil); err != nil {
		return fmt.Errorf("apply commit %d: %w", c.Version, err)
	}
	if len(reread) > 0 {
		x.mu.Lock()
		x.sweep()
		x.mu.Unlock()
	}
	return nil
}

// kill marks file id removed; sweep drops its rows (x.mu held).
func (x *Index) kill(id uint32) {
	f := x.files[id]
	f.dead = true
	if cur, ok := x.byPath[deltalog.CanonicalPath(f.path)]; ok && cur == id {
		delete(x.byPath, deltalog.CanonicalPath(f.path))
	}
}

// sweep drops every row of removed files, keeps each key's remaining live rows, and frees
// the removed files' ids (x.mu held). It visits every slot.
func (x *Index) sweep() {
	for i := range x.t.shards {
		x.t.shards[i].filter(func(e *slot) bool {
			if e.file&flagDeleted != 0 {
				return true
			}
			m := loc{file: e.file & fileMask, row: e.row, seq: e.seq}
			if e.file&flagOverflow == 0 {
				return x.live(m)
			}
			k := fp{e.hi, e.lo}
			var keep []loc
			if x.live(m) {
				keep = append(keep, m)
			}
			for _, o := range x.over[k] {
				if x.live(o) {
					keep = append(keep, o)
				}
			}
			x.dupes -= len(x.over[k])
			delete(x.over, k)
			if len(keep) == 0 {
				return false
			}
			e.file, e.row, e.seq = keep[0].file, keep[0].row, keep[0].seq
			if len(keep) > 1 {
				e.file |= flagOverflow
				x.over[k] = keep[1:]
				x.dupes += len(keep) - 1
			}
			return true
		})
	}
	for id, f := range x.files {
		if f != nil && f.dead {
			x.files[id] = nil
			x.free = append(x.free, uint32(id))
		}
	}
}

// Refresh brings the index to snap, a later snapshot of the table that other writers may
// have changed: files no longer live leave (OPTIMIZE, copy-on-write writers), files it
// does not know are read (other writers' appends, OPTIMIZE's output), and a file whose
// deletion vector differs from the one the index knows is read again. The comparison is
// of the live file sets, so Refresh is right whatever commits happened in between, ours
// (Apply) included. With WithDeletedRows, the deleted rows of the files it reads become
// remembered deletes as in Build (another keyed writer's deletes). When a key or sequence
// column's encoding changed (a decimal's scale widened, date widened to timestamp_ntz) the
// index is built again.
//
// Errors: snap older than the index, a read error (the index is then only good for a
// fresh Build), or a Build error.
func (x *Index) Refresh(ctx context.Context, st storage.Store, snap *deltawriter.Snapshot) (RefreshStats, error) {
	var rs RefreshStats
	x.mu.Lock()
	if snap.Version < x.version {
		x.mu.Unlock()
		return rs, fmt.Errorf("refresh key index: snapshot version %d is older than the index (%d)", snap.Version, x.version)
	}
	if snap.Version < 0 {
		x.mu.Unlock()
		return rs, nil
	}
	lay, err := newLayout(snap, x.spec, x.opts.loc)
	if err != nil {
		x.mu.Unlock()
		return rs, fmt.Errorf("refresh key index: %w", err)
	}
	if x.lay != nil && !lay.sameEncoding(x.lay) {
		rs.Rebuilt, rs.DroppedDeletes = true, x.deleted
		x.mu.Unlock()
		fresh, err := Build(ctx, st, snap, x.spec, func(o *options) { *o = x.opts })
		if err != nil {
			return rs, fmt.Errorf("refresh key index: %w", err)
		}
		x.mu.Lock()
		x.lay, x.t, x.over, x.files, x.byPath, x.free = fresh.lay, fresh.t, fresh.over, fresh.files, fresh.byPath, fresh.free
		x.s1, x.s2, x.deleted, x.dupes, x.nulls, x.version = fresh.s1, fresh.s2, fresh.deleted, fresh.dupes, fresh.nulls, fresh.version
		x.domains = fresh.domains
		rs.FilesRead = snap.Files.Len()
		x.mu.Unlock()
		return rs, nil
	}
	x.lay = lay
	live := make(map[string]deltalog.Add, snap.Files.Len())
	for _, a := range snap.Files.All() {
		live[deltalog.CanonicalPath(a.Path)] = a
	}
	var reads []deltalog.Add
	queued := map[string]bool{}
	for id, f := range x.files {
		if f == nil || f.dead {
			continue
		}
		a, ok := live[deltalog.CanonicalPath(f.path)]
		switch {
		case !ok:
			x.kill(uint32(id))
			rs.FilesRemoved++
		case a.DeletionVector.UniqueID() != f.dvID:
			x.kill(uint32(id))
			rs.FilesRemoved++
			reads = append(reads, a)
			queued[deltalog.CanonicalPath(a.Path)] = true
		}
	}
	for p, a := range live {
		if _, ok := x.byPath[p]; !ok && !queued[p] {
			reads = append(reads, a)
		}
	}
	x.version = snap.Version
	x.mu.Unlock()
	rs.FilesRead = len(reads)
	// The files read may hold rows other writers deleted (another keyed pipeline's
	// replaced rows and delete markers): remembered as Build remembers them, or a change
	// older than such a delete would be written as new.
	var gone map[fp]int64
	if x.opts.deletedRows {
		gone = map[fp]int64{}
	}
	err = x.readFiles(ctx, st, reads, gone)
	if rs.FilesRemoved > 0 {
		x.mu.Lock()
		x.sweep()
		x.mu.Unlock()
	}
	if err != nil {
		return rs, fmt.Errorf("refresh key index: %w", err)
	}
	x.rememberGone(gone, x.opts.now())
	if x.opts.domains {
		if err := x.rememberDomains(snap); err != nil {
			return rs, fmt.Errorf("refresh key index: %w", err)
		}
	}
	return rs, nil
}
