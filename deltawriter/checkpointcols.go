package deltawriter

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// The classic checkpoint's leaf columns are built here straight from a snapshot's typed
// actions, in the levels form of package column: per leaf of checkpointSchema its
// repetition and definition levels as bytes and its set values as words or bytes
// (Dremel; PROTOCOL.md, "Checkpoints" and "Checkpoint Schema"), which parquetenc encodes
// without a parquet.Value per entry. A checkpoint of a table with n live files is about
// 53·n level entries, of which about 17·n hold a value; it is written beside the commit
// path (BenchmarkCheckpointEncode, BenchmarkCommitPath).
//
// Rows come in the order protocol, metaData, txns (by appId), domainMetadata (by
// domain), adds (by reconciliation key), unexpired removes (by key); each row has
// exactly one non-null top-level action column, and the others get a null entry
// (definition level 0) for it, appended as one run per run of rows of one action. Map
// entries are written in key order.

// cpLeaf is one leaf column of checkpointSchema: its index and its maximum definition
// and repetition levels.
type cpLeaf struct{ col, def, rep int }

// cpMap is a MAP<string,string> column: key (required) and value (optional) leaves.
// The map itself is defined at key.def-1 and null at key.def-2.
type cpMap struct{ key, value cpLeaf }

// cpList is a LIST<string> column: its element leaf. The list itself is defined at
// elem.def-2 and null at elem.def-3.
type cpList struct{ elem cpLeaf }

// cpDV is a deletionVector struct; the struct is defined at storageType.def-1.
type cpDV struct{ storageType, pathOrInlineDv, offset, sizeInBytes, cardinality, maxRowIndex cpLeaf }

// cpColumns locates every leaf of checkpointSchema that the writer fills, and the range
// [first, end) of leaf columns under each top-level action column.
type cpColumns struct {
	kinds map[string][2]int

	txnAppID, txnVersion, txnLastUpdated cpLeaf

	addPath, addSize, addModificationTime, addDataChange, addStats cpLeaf
	addBaseRowID, addDefaultRowCommitVersion                       cpLeaf
	addPartitionValues, addTags                                    cpMap
	addDV                                                          cpDV

	removePath, removeDeletionTimestamp, removeDataChange, removeExtendedFileMetadata cpLeaf
	removeSize, removeBaseRowID, removeDefaultRowCommitVersion                        cpLeaf
	removePartitionValues                                                             cpMap
	removeDV                                                                          cpDV

	mdID, mdName, mdDescription, mdFormatProvider, mdSchemaString, mdCreatedTime cpLeaf
	mdFormatOptions, mdConfiguration                                             cpMap
	mdPartitionColumns                                                           cpList

	protoMinReader, protoMinWriter   cpLeaf
	protoReaderFeat, protoWriterFeat cpList
	domDomain, domConfig, domRemoved cpLeaf
}

// newCPColumns locates the leaves of schema (checkpointSchema or sidecarSchema): a leaf
// that schema lacks is {col: -1} (the sidecar schema has only add and remove, whose rows
// are the only ones written to it). It panics when schema has a leaf the writer does not
// fill: it would get no values for the rows of its action and misalign the file.
func newCPColumns(schema *parquet.Schema) *cpColumns {
	seen := map[int]bool{}
	leaf := func(path ...string) cpLeaf {
		l, ok := schema.Lookup(path...)
		if !ok {
			return cpLeaf{col: -1}
		}
		seen[l.ColumnIndex] = true
		return cpLeaf{col: l.ColumnIndex, def: l.MaxDefinitionLevel, rep: l.MaxRepetitionLevel}
	}
	strMap := func(path ...string) cpMap {
		return cpMap{key: leaf(append(path, "key_value", "key")...), value: leaf(append(path, "key_value", "value")...)}
	}
	strList := func(path ...string) cpList { return cpList{elem: leaf(append(path, "list", "element")...)} }
	dv := func(action string) cpDV {
		f := func(n string) cpLeaf { return leaf(action, "deletionVector", n) }
		return cpDV{f("storageType"), f("pathOrInlineDv"), f("offset"), f("sizeInBytes"), f("cardinality"), f("maxRowIndex")}
	}
	c := &cpColumns{kinds: map[string][2]int{}}
	for i, p := range schema.Columns() {
		r, ok := c.kinds[p[0]]
		if !ok {
			r = [2]int{i, i}
		}
		r[1] = i + 1
		c.kinds[p[0]] = r
	}
	c.txnAppID, c.txnVersion, c.txnLastUpdated = leaf("txn", "appId"), leaf("txn", "version"), leaf("txn", "lastUpdated")

	c.addPath, c.addSize, c.addModificationTime = leaf("add", "path"), leaf("add", "size"), leaf("add", "modificationTime")
	c.addDataChange, c.addStats = leaf("add", "dataChange"), leaf("add", "stats")
	c.addBaseRowID, c.addDefaultRowCommitVersion = leaf("add", "baseRowId"), leaf("add", "defaultRowCommitVersion")
	c.addPartitionValues, c.addTags, c.addDV = strMap("add", "partitionValues"), strMap("add", "tags"), dv("add")

	c.removePath, c.removeDeletionTimestamp = leaf("remove", "path"), leaf("remove", "deletionTimestamp")
	c.removeDataChange, c.removeExtendedFileMetadata = leaf("remove", "dataChange"), leaf("remove", "extendedFileMetadata")
	c.removeSize, c.removeBaseRowID = leaf("remove", "size"), leaf("remove", "baseRowId")
	c.removeDefaultRowCommitVersion = leaf("remove", "defaultRowCommitVersion")
	c.removePartitionValues, c.removeDV = strMap("remove", "partitionValues"), dv("remove")

	c.mdID, c.mdName, c.mdDescription = leaf("metaData", "id"), leaf("metaData", "name"), leaf("metaData", "description")
	c.mdFormatProvider, c.mdFormatOptions = leaf("metaData", "format", "provider"), strMap("metaData", "format", "options")
	c.mdSchemaString, c.mdCreatedTime = leaf("metaData", "schemaString"), leaf("metaData", "createdTime")
	c.mdConfiguration, c.mdPartitionColumns = strMap("metaData", "configuration"), strList("metaData", "partitionColumns")

	c.protoMinReader, c.protoMinWriter = leaf("protocol", "minReaderVersion"), leaf("protocol", "minWriterVersion")
	c.protoReaderFeat, c.protoWriterFeat = strList("protocol", "readerFeatures"), strList("protocol", "writerFeatures")

	c.domDomain, c.domConfig, c.domRemoved = leaf("domainMetadata", "domain"), leaf("domainMetadata", "configuration"), leaf("domainMetadata", "removed")
	if len(seen) != len(schema.Columns()) {
		panic(fmt.Sprintf("checkpoint schema has %d leaf columns, the writer fills %d", len(schema.Columns()), len(seen)))
	}
	return c
}

// cpLayout is the file a checkpointChunk is built for: its schema's leaves, located.
type cpLayout struct {
	c      *cpColumns
	leaves []column.Leaf // the leaf columns, in leaf column order
}

// cpClassic is the layout of a classic checkpoint (every action), cpSidecar that of a V2
// checkpoint's sidecar (add and remove only).
var (
	cpClassic = &cpLayout{c: newCPColumns(checkpointSchema), leaves: column.Leaves(checkpointSchema)}
	cpSidecar = &cpLayout{c: newCPColumns(sidecarSchema), leaves: column.Leaves(sidecarSchema)}
)

// checkpointChunk is the rows of one chunk of a checkpoint or sidecar (one row group) as
// its leaf columns: cols[i] is leaf column i of its layout's schema in the levels form
// of package column, holding an entry for every row of the chunk (nulls for the rows of
// the other actions). The values are copied from the snapshot, so the chunk holds no
// reference into it; its buffers keep their capacity for the next chunk of the same
// layout.
type checkpointChunk struct {
	lay  *cpLayout
	cols []column.Column
	rows int // rows of the chunk

	run     [2]int // the leaf range [first, end) of the action of the current run of rows
	runRows int    // rows of the current run

	yield func() // called every yieldRows rows when not nil
	since int    // rows since the last yield
}

// yieldRows is how many rows fill builds between two yields (about 0.05 ms of work).
const yieldRows = 128

// reset empties the chunk's columns for the next rows of layout lay; yield is called
// every yieldRows rows built when not nil.
func (b *checkpointChunk) reset(lay *cpLayout, yield func()) {
	if b.lay != lay {
		b.lay, b.cols = lay, make([]column.Column, len(lay.leaves))
	}
	for i := range b.cols {
		b.cols[i].ResetLevels(lay.leaves[i])
	}
	b.rows, b.run, b.runRows = 0, [2]int{}, 0
	b.yield, b.since = yield, 0
}

// open starts a row of action kind: when the previous row was of another action, the
// run of that action's rows ends (endRun).
func (b *checkpointChunk) open(kind string) {
	r := b.lay.c.kinds[kind]
	if b.runRows > 0 && b.run != r {
		b.endRun()
	}
	b.run = r
	b.runRows++
	b.rows++
}

// endRun appends a null entry per row of the current run to every leaf outside its
// action's columns, so that every column holds an entry for each row so far.
func (b *checkpointChunk) endRun() {
	if b.runRows == 0 {
		return
	}
	for i := range b.cols {
		if i < b.run[0] || i >= b.run[1] {
			b.cols[i].AppendNullsAt(b.runRows, 0, 0)
		}
	}
	b.runRows = 0
}

// row counts one built row and yields every yieldRows rows.
func (b *checkpointChunk) row() {
	if b.yield == nil {
		return
	}
	if b.since++; b.since >= yieldRows {
		b.since = 0
		b.yield()
	}
}

// cpSource produces the rows of the classic checkpoint of a snapshot, in chunks:
// protocol, metaData, txns (by appId), domains (by domain), live adds (in key order,
// FileSet.All) and the tombstones not yet expired at now
// (delta.deletedFileRetentionDuration, default 1 week; a tombstone without
// deletionTimestamp never expires) by key; never commitInfo. Only the rows of one chunk
// are held as column values at a time, so a checkpoint of n live files is written with
// memory bounded by the chunk, not n. The snapshot is immutable, so it is read without
// a lock while commits go on; the chunk copies the bytes it takes from it.
type cpSource struct {
	s                           *Snapshot
	txnIDs, domains, removeKeys []string
	stage, i                    int
	next                        func() (string, deltalog.Add, bool)
	stop                        func()
	rows, numAdds               int
}

const (
	cpStageProtocol = iota
	cpStageMetadata
	cpStageTxn
	cpStageDomain
	cpStageAdd
	cpStageRemove
	cpStageDone
)

func newCPSource(s *Snapshot, now time.Time) (*cpSource, error) {
	retention, err := s.Metadata.DurationProperty(deltalog.PropDeletedFileRetention, defaultDeletedFileRetention)
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-retention).UnixMilli()
	src := &cpSource{s: s, txnIDs: slices.Sorted(maps.Keys(s.txns)), domains: slices.Sorted(maps.Keys(s.domains))}
	for k, r := range s.tombstones.all() { // in key order
		if !expired(&r, cutoff) {
			src.removeKeys = append(src.removeKeys, k)
		}
	}
	src.numAdds = s.Files.Len()
	src.rows = 2 + len(src.txnIDs) + len(src.domains) + src.numAdds + len(src.removeKeys)
	src.next, src.stop = iter.Pull2(s.Files.All())
	return src, nil
}

func (src *cpSource) close() { src.stop() }

func (src *cpSource) done() bool { return src.stage == cpStageDone }

// filesOnly makes src produce the file actions only (live adds, then unexpired
// tombstones), for the sidecars of a V2 checkpoint; it is called before the first fill.
func (src *cpSource) filesOnly() {
	src.stage, src.i = cpStageAdd, 0
	src.rows = src.numAdds + len(src.removeKeys)
}

// fill builds the next rows, at most max of them, into b for the file of layout lay
// (its previous rows dropped) and returns how many. yield, when not nil, is called every
// yieldRows rows. Only add and remove rows may be built for cpSidecar (filesOnly).
func (src *cpSource) fill(b *checkpointChunk, lay *cpLayout, max int, yield func()) int {
	c := lay.c
	s := src.s
	b.reset(lay, yield)
	built := 0
	// Each action fills its own columns for its rows; the other columns are null there.
	open := b.open
	for built < max && src.stage != cpStageDone {
		switch src.stage {
		case cpStageProtocol:
			open("protocol")
			p := &s.Protocol
			b.i32(c.protoMinReader, int32(p.MinReaderVersion))
			b.i32(c.protoMinWriter, int32(p.MinWriterVersion))
			b.strList(c.protoReaderFeat, p.ReaderFeatures, p.MinReaderVersion >= 3)
			b.strList(c.protoWriterFeat, p.WriterFeatures, p.MinWriterVersion >= 7)
			src.stage++
		case cpStageMetadata:
			open("metaData")
			m := &s.Metadata
			b.str(c.mdID, m.ID)
			b.optStr(c.mdName, m.Name)
			b.optStr(c.mdDescription, m.Description)
			b.str(c.mdFormatProvider, m.Format.Provider)
			b.strMap(c.mdFormatOptions, m.Format.Options, true)
			b.str(c.mdSchemaString, m.SchemaString)
			b.strList(c.mdPartitionColumns, m.PartitionColumns, true)
			b.strMap(c.mdConfiguration, m.Configuration, true)
			b.optI64(c.mdCreatedTime, m.CreatedTime)
			src.stage++
		case cpStageTxn:
			if src.i >= len(src.txnIDs) {
				src.stage, src.i = src.stage+1, 0
				continue
			}
			open("txn")
			t := s.txns[src.txnIDs[src.i]]
			src.i++
			b.str(c.txnAppID, t.AppID)
			b.i64(c.txnVersion, t.Version)
			b.optI64(c.txnLastUpdated, t.LastUpdated)
		case cpStageDomain:
			if src.i >= len(src.domains) {
				src.stage, src.i = src.stage+1, 0
				continue
			}
			open("domainMetadata")
			dm := s.domains[src.domains[src.i]]
			src.i++
			b.str(c.domDomain, dm.Domain)
			b.str(c.domConfig, dm.Configuration)
			b.boolean(c.domRemoved, false)
		case cpStageAdd:
			_, a, ok := src.next()
			if !ok {
				src.stage, src.i = src.stage+1, 0
				continue
			}
			open("add")
			b.str(c.addPath, a.Path)
			b.partitionValues(c.addPartitionValues, a.PartitionValues, true) // {} when none
			b.i64(c.addSize, a.Size)
			b.i64(c.addModificationTime, a.ModificationTime)
			b.boolean(c.addDataChange, a.DataChange)
			b.strMap(c.addTags, a.Tags, a.Tags != nil)
			b.dv(c.addDV, a.DeletionVector)
			b.optI64(c.addBaseRowID, a.BaseRowID)
			b.optI64(c.addDefaultRowCommitVersion, a.DefaultRowCommitVersion)
			b.optStr(c.addStats, a.Stats)
		case cpStageRemove:
			if src.i >= len(src.removeKeys) {
				src.stage, src.i = src.stage+1, 0
				continue
			}
			open("remove")
			r, _ := s.tombstones.get(src.removeKeys[src.i])
			src.i++
			b.str(c.removePath, r.Path)
			b.optI64(c.removeDeletionTimestamp, r.DeletionTimestamp)
			b.boolean(c.removeDataChange, r.DataChange)
			if r.ExtendedFileMetadata != nil {
				b.boolean(c.removeExtendedFileMetadata, *r.ExtendedFileMetadata)
			} else {
				b.null(c.removeExtendedFileMetadata)
			}
			b.partitionValues(c.removePartitionValues, r.PartitionValues, r.PartitionValues != nil)
			b.optI64(c.removeSize, r.Size)
			b.dv(c.removeDV, r.DeletionVector)
			b.optI64(c.removeBaseRowID, r.BaseRowID)
			b.optI64(c.removeDefaultRowCommitVersion, r.DefaultRowCommitVersion)
		}
		built++
		b.row()
	}
	b.endRun()
	return built
}

// null appends a null leaf whose parent is defined.
func (b *checkpointChunk) null(l cpLeaf) { b.cols[l.col].AppendNullsAt(1, 0, l.def-1) }

func (b *checkpointChunk) str(l cpLeaf, s string) { b.cols[l.col].AppendBytesAt(0, strBytes(s)) }

// optStr writes "" as null (optional string fields that JSON omits when empty).
func (b *checkpointChunk) optStr(l cpLeaf, s string) {
	if s == "" {
		b.null(l)
		return
	}
	b.str(l, s)
}

func (b *checkpointChunk) i32(l cpLeaf, x int32) { b.cols[l.col].AppendWordAt(0, uint64(uint32(x))) }
func (b *checkpointChunk) i64(l cpLeaf, x int64) { b.cols[l.col].AppendWordAt(0, uint64(x)) }

func (b *checkpointChunk) boolean(l cpLeaf, x bool) {
	var w uint64
	if x {
		w = 1
	}
	b.cols[l.col].AppendWordAt(0, w)
}

func (b *checkpointChunk) optI64(l cpLeaf, x *int64) {
	if x == nil {
		b.null(l)
		return
	}
	b.i64(l, *x)
}

// strList writes a LIST<string>: null when !present, else its elements (an empty list
// when there are none).
func (b *checkpointChunk) strList(l cpList, xs []string, present bool) {
	e := l.elem
	col := &b.cols[e.col]
	switch {
	case !present:
		col.AppendNullsAt(1, 0, e.def-3)
	case len(xs) == 0:
		col.AppendNullsAt(1, 0, e.def-2)
	default:
		for i, x := range xs {
			col.AppendBytesAt(repAt(i, e.rep), strBytes(x))
		}
	}
}

// strMap writes a MAP<string,string> in key order: null when !present, else its entries
// (an empty map when there are none).
func (b *checkpointChunk) strMap(m cpMap, kv map[string]string, present bool) {
	if !b.mapHead(m, len(kv), present) {
		return
	}
	keys, vals := &b.cols[m.key.col], &b.cols[m.value.col]
	for i, k := range sortedKeys(kv) {
		keys.AppendBytesAt(repAt(i, m.key.rep), strBytes(k))
		vals.AppendBytesAt(repAt(i, m.value.rep), strBytes(kv[k]))
	}
}

// partitionValues writes a MAP<string,string> whose nil values are null, in key order.
func (b *checkpointChunk) partitionValues(m cpMap, pv map[string]*string, present bool) {
	if !b.mapHead(m, len(pv), present) {
		return
	}
	keys, vals := &b.cols[m.key.col], &b.cols[m.value.col]
	for i, k := range sortedKeys(pv) {
		r := repAt(i, m.key.rep)
		keys.AppendBytesAt(r, strBytes(k))
		if v := pv[k]; v != nil {
			vals.AppendBytesAt(r, strBytes(*v))
		} else {
			vals.AppendNullsAt(1, r, m.value.def-1)
		}
	}
}

// mapHead writes a null or empty map and reports whether entries remain to be written.
func (b *checkpointChunk) mapHead(m cpMap, n int, present bool) bool {
	def := m.key.def - 1 // the map is defined, with no entry
	if !present {
		def--
	}
	if !present || n == 0 {
		b.cols[m.key.col].AppendNullsAt(1, 0, def)
		b.cols[m.value.col].AppendNullsAt(1, 0, def)
		return false
	}
	return true
}

func (b *checkpointChunk) dv(c cpDV, d *deltalog.DeletionVector) {
	if d == nil {
		for _, l := range [...]cpLeaf{c.storageType, c.pathOrInlineDv, c.offset, c.sizeInBytes, c.cardinality, c.maxRowIndex} {
			b.cols[l.col].AppendNullsAt(1, 0, l.def-2)
		}
		return
	}
	b.str(c.storageType, d.StorageType)
	b.str(c.pathOrInlineDv, d.PathOrInlineDv)
	if d.Offset != nil {
		b.i32(c.offset, *d.Offset)
	} else {
		b.null(c.offset)
	}
	b.i32(c.sizeInBytes, d.SizeInBytes)
	b.i64(c.cardinality, d.Cardinality)
	b.optI64(c.maxRowIndex, d.MaxRowIndex)
}

// repAt is the repetition level of the i-th element of a repeated field whose maximum
// repetition level is rep: 0 (a new row) for the first, rep for the others.
func repAt(i, rep int) int {
	if i == 0 {
		return 0
	}
	return rep
}

// sortRun is the number of keys sortYielding sorts or merges between two yields.
const sortRun = 2048

// sortYielding sorts keys, calling yield (when not nil) every sortRun keys: runs of
// sortRun keys are sorted, then merged pairwise. It returns the sorted slice, which may
// not be keys' backing array.
func sortYielding(keys []string, yield func()) []string {
	if yield == nil || len(keys) <= sortRun {
		slices.Sort(keys)
		return keys
	}
	for i := 0; i < len(keys); i += sortRun {
		slices.Sort(keys[i:min(i+sortRun, len(keys))])
		yield()
	}
	buf := make([]string, len(keys))
	for width := sortRun; width < len(keys); width *= 2 {
		for lo := 0; lo < len(keys); lo += 2 * width {
			mid, hi := min(lo+width, len(keys)), min(lo+2*width, len(keys))
			i, j := lo, mid
			for k := lo; k < hi; k++ {
				if j >= hi || (i < mid && keys[i] <= keys[j]) {
					buf[k] = keys[i]
					i++
				} else {
					buf[k] = keys[j]
					j++
				}
				if (k-lo+1)%sortRun == 0 {
					yield()
				}
			}
		}
		keys, buf = buf, keys
	}
	return keys
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 1 {
		for k := range m {
			return []string{k}
		}
	}
	return slices.Sorted(maps.Keys(m))
}

// strBytes is s's bytes without a copy (the column copies them).
func strBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
