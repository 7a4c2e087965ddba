package deltawriter

import (
	"cmp"
	"iter"
	"maps"
	"slices"
	"strings"
	"unsafe"

	"github.com/google/btree"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// FileSet is the live add actions of a snapshot, keyed by their reconciliation key
// (deltalog.FileKey: the canonical decoded path, plus the deletion vector's id if any;
// PROTOCOL.md, "Action Reconciliation"). A FileSet handed out in a Snapshot is
// immutable; the Add values it returns share their strings and their PartitionValues
// map with it and with other files of the same partition: callers must not modify them.
//
// The layout is what a table of 10⁵–10⁶ files needs (docs/performance.md, "Big
// tables"): a base table of fixed-size rows sorted by key, whose paths and stats are
// slices of shared byte arenas and whose partition values are interned (one map per
// distinct partition), plus an overlay that the commits after the base change: a bitset
// of removed base rows and a copy-on-write B-tree of added files. Advancing a snapshot
// by one commit copies the bitset (n/8 bytes) and the B-tree nodes on the paths it
// changes, neither the base nor the whole overlay; when the overlay outgrows
// max(compactMin, n/compactRatio), the live files are merged into a new base, sharing
// the arenas. A base row costs 64 bytes (TestFileRowSize) plus its path's and stats'
// bytes.
type FileSet struct {
	base *fileTable
	// dead: bit i is set when base row i is no longer live, in pages of deadPageRows
	// rows (nil: none set); a page is copied before its first change unless its bit in
	// ownDead is set (clones share pages).
	dead    [][]uint64
	ownDead []bool
	nDead   int
	// over holds the live files not (or no longer) in base, by key; nil while none is.
	// Clones share its nodes until either changes them (btree.BTreeG.Clone), so a
	// snapshot handed out stays as it was while the next one is advanced.
	over *btree.BTreeG[overFile]
}

// overFile is one file of the overlay: its key and its add action (never modified once
// in a tree).
type overFile struct {
	key string
	add *deltalog.Add
}

func overLess(a, b overFile) bool { return a.key < b.key }

// deadPageRows is the number of base rows per page of the dead-row bitset (8 KiB): a
// commit that removes a base file copies one page, not the bitset (125 KB at 10⁶ files).
const deadPageRows = 1 << 16

// overDegree is the overlay B-tree's degree: nodes of up to 63 files (1.5 KB), about 3
// levels for the largest overlay (compactRatio of 10⁶ files).
const overDegree = 32

// fileTable is an immutable, key-sorted table of add actions.
type fileTable struct {
	rows   []fileRow
	pvs    []map[string]*string // interned partition values; rows refer to them by index
	extras []fileExtra          // the rare fields of the rows that have any
}

// fileRow is one add action of a fileTable. path and stats point into arenas shared by
// the tables built from the same checkpoint or commits.
type fileRow struct {
	path       string
	stats      string
	size       int64
	modTime    int64
	pv         uint32 // index into fileTable.pvs
	extra      int32  // index+1 into fileTable.extras; 0: none
	dataChange bool
}

// fileExtra holds what few add actions carry: a key that differs from the path (an
// escaped path, a deletion vector), tags, row tracking, clustering, parsed stats.
type fileExtra struct {
	key                   string
	tags                  map[string]string
	dv                    *deltalog.DeletionVector
	baseRowID, defaultRCV *int64
	clusteringProvider    string
	statsParsed           map[string]any
}

// compactMin and compactRatio bound the overlay: a FileSet is compacted into a new base
// once the overlay's entries (removed base rows plus added files) exceed
// max(compactMin, base rows/compactRatio), so the O(n) merge happens once per
// n/compactRatio changed files and lookups stay in the base's binary search and a
// shallow B-tree.
const (
	compactMin   = 4096
	compactRatio = 64
)

// NewFileSet returns the FileSet of adds (a later add of the same key replaces an
// earlier one).
func NewFileSet(adds ...deltalog.Add) *FileSet {
	b := newFileTableBuilder(len(adds))
	for i := range adds {
		b.addAction(&adds[i])
	}
	return &FileSet{base: b.build()}
}

// Len returns the number of live files.
func (f *FileSet) Len() int {
	if f == nil {
		return 0
	}
	n := f.overLen()
	if f.base != nil {
		n += len(f.base.rows) - f.nDead
	}
	return n
}

// Get returns the live add action of key (deltalog.FileKey) and whether there is one.
func (f *FileSet) Get(key string) (deltalog.Add, bool) {
	if f == nil {
		return deltalog.Add{}, false
	}
	if f.over != nil {
		if o, ok := f.over.Get(overFile{key: key}); ok {
			return *o.add, true
		}
	}
	if i, ok := f.base.find(key); ok && !f.isDead(i) {
		return f.base.add(i), true
	}
	return deltalog.Add{}, false
}

// Has reports whether key (deltalog.FileKey) is live.
func (f *FileSet) Has(key string) bool {
	if f == nil {
		return false
	}
	if f.over != nil && f.over.Has(overFile{key: key}) {
		return true
	}
	i, ok := f.base.find(key)
	return ok && !f.isDead(i)
}

// All yields the live files in key order (byte-wise), with their keys.
func (f *FileSet) All() iter.Seq2[string, deltalog.Add] {
	return func(yield func(string, deltalog.Add) bool) {
		if f == nil {
			return
		}
		f.merge(func(i int, o overFile) bool {
			if o.add != nil {
				return yield(o.key, *o.add)
			}
			return yield(f.base.key(i), f.base.add(i))
		})
	}
}

// merge calls fn with the live files in key order: a live base row as (its index, a zero
// overFile), an overlay file as (-1, it); it stops when fn returns false.
func (f *FileSet) merge(fn func(i int, o overFile) bool) {
	var rows []fileRow
	if f.base != nil {
		rows = f.base.rows
	}
	i := 0
	// baseTo yields the live base rows before key k (all of them when k is nil).
	baseTo := func(k *string) bool {
		for ; i < len(rows) && (k == nil || f.base.key(i) < *k); i++ {
			if !f.isDead(i) && !fn(i, overFile{}) {
				return false
			}
		}
		return true
	}
	ok := true
	if f.over != nil {
		f.over.Ascend(func(o overFile) bool {
			ok = baseTo(&o.key) && fn(-1, o)
			return ok
		})
	}
	if ok {
		baseTo(nil)
	}
}

func (f *FileSet) isDead(i int) bool {
	if f.dead == nil {
		return false
	}
	p := f.dead[i/deadPageRows]
	i %= deadPageRows
	return p != nil && p[i>>6]&(1<<(uint(i)&63)) != 0
}

// clone returns a copy that can be changed without changing f: the base is shared, the
// dead-row bitset's pages and the overlay's nodes shared until either set changes them.
func (f *FileSet) clone() *FileSet {
	c := &FileSet{base: f.base, nDead: f.nDead}
	if f.over != nil {
		c.over = f.over.Clone()
	}
	if f.dead != nil {
		c.dead, c.ownDead = slices.Clone(f.dead), make([]bool, len(f.dead))
		clear(f.ownDead) // f's next change to a page copies it too
	}
	return c
}

// overLen is the number of files in the overlay.
func (f *FileSet) overLen() int {
	if f.over == nil {
		return 0
	}
	return f.over.Len()
}

// put makes a (of key k) live, replacing the file of the same key.
func (f *FileSet) put(k string, a deltalog.Add) {
	f.killBase(k)
	if f.over == nil {
		f.over = btree.NewG(overDegree, overLess)
	}
	f.over.ReplaceOrInsert(overFile{key: k, add: &a})
}

// del removes the file of key k, if live.
func (f *FileSet) del(k string) {
	if f.over != nil && f.over.Has(overFile{key: k}) { // a B-tree delete copies its path even when k is not there
		f.over.Delete(overFile{key: k})
		return
	}
	f.killBase(k)
}

func (f *FileSet) killBase(k string) {
	if f.base == nil {
		return
	}
	i, ok := f.base.find(k)
	if !ok || f.isDead(i) {
		return
	}
	if f.dead == nil {
		pages := (len(f.base.rows) + deadPageRows - 1) / deadPageRows
		f.dead, f.ownDead = make([][]uint64, pages), make([]bool, pages)
	}
	pi := i / deadPageRows
	if !f.ownDead[pi] {
		p := make([]uint64, deadPageRows/64)
		copy(p, f.dead[pi]) // nil: a page with no row set yet
		f.dead[pi], f.ownDead[pi] = p, true
	}
	i %= deadPageRows
	f.dead[pi][i>>6] |= 1 << (uint(i) & 63)
	f.nDead++
}

// maybeCompact merges the overlay into a new base when it has outgrown its bound.
func (f *FileSet) maybeCompact() {
	n := 0
	if f.base != nil {
		n = len(f.base.rows)
	}
	if f.nDead+f.overLen() <= max(compactMin, n/compactRatio) {
		return
	}
	f.compact()
}

// compact merges the overlay into a new base (O(live files); the arenas are shared).
func (f *FileSet) compact() {
	b := newFileTableBuilder(f.Len())
	var old *fileTable
	if f.base != nil {
		old = f.base
		b.pvs = slices.Clone(old.pvs)
		for i, pv := range old.pvs {
			b.pvIndex[strings.Clone(pvKey(&b.scratch, pv))] = uint32(i) // pvKey aliases the scratch buffer
		}
	}
	f.merge(func(i int, o overFile) bool {
		if o.add != nil {
			b.addAction(o.add)
			return true
		}
		r := old.rows[i]
		if r.extra > 0 {
			b.extras = append(b.extras, old.extras[r.extra-1])
			r.extra = int32(len(b.extras))
		}
		b.rows = append(b.rows, r)
		return true
	})
	b.sorted = true
	*f = FileSet{base: b.build()}
}

// find returns the row of key k by binary search.
func (t *fileTable) find(k string) (int, bool) {
	if t == nil {
		return 0, false
	}
	return slices.BinarySearchFunc(t.rows, k, func(r fileRow, k string) int {
		return strings.Compare(t.rowKey(&r), k)
	})
}

func (t *fileTable) rowKey(r *fileRow) string {
	if r.extra > 0 && t.extras[r.extra-1].key != "" {
		return t.extras[r.extra-1].key
	}
	return r.path
}

func (t *fileTable) key(i int) string { return t.rowKey(&t.rows[i]) }

// add returns row i as an add action (no allocation: strings and maps are shared).
func (t *fileTable) add(i int) deltalog.Add {
	r := &t.rows[i]
	a := deltalog.Add{Path: r.path, PartitionValues: t.pvs[r.pv], Size: r.size, ModificationTime: r.modTime,
		DataChange: r.dataChange, Stats: r.stats}
	if r.extra > 0 {
		x := &t.extras[r.extra-1]
		a.Tags, a.DeletionVector, a.BaseRowID, a.DefaultRowCommitVersion = x.tags, x.dv, x.baseRowID, x.defaultRCV
		a.ClusteringProvider, a.StatsParsed = x.clusteringProvider, x.statsParsed
	}
	return a
}

// fileTableBuilder collects add actions into a fileTable.
type fileTableBuilder struct {
	rows    []fileRow
	pvs     []map[string]*string
	pvIndex map[string]uint32
	extras  []fileExtra
	sorted  bool // rows are known to be in key order without duplicates
	scratch []byte
	arena   []byte // the current arena chunk: strings are carved from it
}

func newFileTableBuilder(n int) *fileTableBuilder {
	return &fileTableBuilder{rows: make([]fileRow, 0, n), pvIndex: map[string]uint32{}}
}

// arenaChunk is the size of one byte arena of a builder: paths and stats are copied
// into chunks of this size, so that a table holds a few large objects rather than two
// strings per file.
const arenaChunk = 1 << 20

// str returns a string holding a copy of b, carved from the builder's arena.
func (b *fileTableBuilder) str(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	if len(p) > arenaChunk/4 {
		return string(p)
	}
	if cap(b.arena)-len(b.arena) < len(p) {
		b.arena = make([]byte, 0, arenaChunk)
	}
	off := len(b.arena)
	b.arena = append(b.arena, p...)
	return unsafe.String(&b.arena[off], len(p))
}

// internPV returns the index of the partition values pv, adding them when new.
func (b *fileTableBuilder) internPV(pv map[string]*string) uint32 {
	k := pvKey(&b.scratch, pv)
	if i, ok := b.pvIndex[k]; ok {
		return i
	}
	i := uint32(len(b.pvs))
	b.pvs = append(b.pvs, pv)
	b.pvIndex[strings.Clone(k)] = i
	return i
}

// pvKey encodes partition values canonically into *buf (key order; a null value differs
// from every string) and returns it as a string that aliases *buf.
func pvKey(buf *[]byte, pv map[string]*string) string {
	s := (*buf)[:0]
	if len(pv) == 1 {
		for k, v := range pv {
			s = appendPV(s, k, v)
		}
	} else {
		for _, k := range slices.Sorted(maps.Keys(pv)) {
			s = appendPV(s, k, pv[k])
		}
	}
	if pv == nil {
		s = append(s, 0xff)
	}
	*buf = s
	return unsafe.String(unsafe.SliceData(s), len(s))
}

func appendPV(s []byte, k string, v *string) []byte {
	s = append(s, k...)
	if v == nil {
		return append(s, 0, 0)
	}
	s = append(s, 0, 1)
	s = append(s, *v...)
	return append(s, 0)
}

// addAction appends a decoded add action (its strings are kept as they are).
func (b *fileTableBuilder) addAction(a *deltalog.Add) {
	r := fileRow{path: a.Path, stats: a.Stats, size: a.Size, modTime: a.ModificationTime,
		dataChange: a.DataChange, pv: b.internPV(a.PartitionValues)}
	x := fileExtra{tags: a.Tags, dv: a.DeletionVector, baseRowID: a.BaseRowID, defaultRCV: a.DefaultRowCommitVersion,
		clusteringProvider: a.ClusteringProvider, statsParsed: a.StatsParsed}
	if k := deltalog.FileKey(a.Path, a.DeletionVector); k != a.Path {
		x.key = k
	}
	if x.key != "" || x.tags != nil || x.dv != nil || x.baseRowID != nil || x.defaultRCV != nil ||
		x.clusteringProvider != "" || x.statsParsed != nil {
		b.extras = append(b.extras, x)
		r.extra = int32(len(b.extras))
	}
	b.rows = append(b.rows, r)
}

// build sorts the rows by key (a later row of the same key wins) and returns the table.
func (b *fileTableBuilder) build() *fileTable {
	t := &fileTable{rows: b.rows, pvs: b.pvs, extras: b.extras}
	if b.sorted {
		return t
	}
	inOrder := true
	for i := 1; i < len(t.rows); i++ {
		if t.key(i-1) >= t.key(i) {
			inOrder = false
			break
		}
	}
	if inOrder {
		return t
	}
	// Sort a permutation (4 bytes a move instead of a row), stable so that the last of
	// equal keys can be kept.
	perm := make([]int32, len(t.rows))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortStableFunc(perm, func(x, y int32) int { return cmp.Compare(t.key(int(x)), t.key(int(y))) })
	rows := make([]fileRow, 0, len(t.rows))
	for i, p := range perm {
		if i+1 < len(perm) && t.key(int(p)) == t.key(int(perm[i+1])) {
			continue // a later add of the same key replaces this one
		}
		rows = append(rows, t.rows[p])
	}
	t.rows = rows
	return t
}
