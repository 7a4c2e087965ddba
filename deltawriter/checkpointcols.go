package deltawriter

import (
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// The classic checkpoint's leaf columns are built here straight from a snapshot's typed
// actions, one []parquet.Value per leaf column of checkpointSchema with its repetition
// and definition levels (Dremel), without going through generic row trees: a checkpoint
// of a table with n live files is about 36·n values, and it is written on the commit
// path (BenchmarkCheckpointEncode, BenchmarkCommitPath).
//
// Rows come in the order protocol, metaData, txns (by appId), domainMetadata (by
// domain), adds (by reconciliation key), unexpired removes (by key); each row has
// exactly one non-null top-level action column. Map entries are written in key order.

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

var cpCol = func() *cpColumns {
	seen := map[int]bool{}
	leaf := func(path ...string) cpLeaf {
		l, ok := checkpointSchema.Lookup(path...)
		if !ok {
			panic("checkpoint schema has no column " + strings.Join(path, "."))
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
	for i, p := range checkpointSchema.Columns() {
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
	// Every leaf must be filled by the writer: a leaf it did not know of would get no
	// values for the rows of its action and misalign the file.
	if len(seen) != len(checkpointSchema.Columns()) {
		panic(fmt.Sprintf("checkpoint schema has %d leaf columns, the writer fills %d", len(checkpointSchema.Columns()), len(seen)))
	}
	return c
}()

// checkpointColumns is the content of one classic checkpoint: the leaf columns and the
// figures _last_checkpoint reports.
//
// cols[i] holds only the values of the rows of column i's own action; the rows of the
// other actions are null there and are written from nulls (see encodeCheckpoint).
type checkpointColumns struct {
	cols     [][]parquet.Value
	sections []cpSection // the actions, in row order
	nulls    []parquet.Value
	rows     int // actions (rows)
	numAdds  int

	yield func() // called every yieldRows rows when not nil
	since int    // rows since the last yield
}

// cpSection is a run of rows of one action, whose values are in cols[first:end].
type cpSection struct{ rows, first, end int }

// nullRun returns n values that make n rows null in any column: definition level 0,
// repetition level 0 (parquet-go's column writers do not read a value's column index).
func (b *checkpointColumns) nullRun(n int) []parquet.Value {
	if len(b.nulls) < n {
		b.nulls = slices.Repeat([]parquet.Value{parquet.NullValue().Level(0, 0, 0)}, n)
	}
	return b.nulls[:n]
}

// yieldRows is how many rows buildCheckpointColumns builds between two yields (about
// 0.1 ms of work).
const yieldRows = 128

// row counts one built row and yields every yieldRows rows.
func (b *checkpointColumns) row() {
	if b.yield == nil {
		return
	}
	if b.since++; b.since >= yieldRows {
		b.since = 0
		b.yield()
	}
}

// buildCheckpointColumns returns the leaf columns of the whole classic checkpoint of s
// in one chunk (cpSource.fill without a row limit); reuse, when not nil, lends its column
// slices' storage, and yield is called every yieldRows rows when not nil.
func buildCheckpointColumns(s *Snapshot, now time.Time, reuse *checkpointColumns, yield func()) (*checkpointColumns, error) {
	src, err := newCPSource(s, now)
	if err != nil {
		return nil, err
	}
	defer src.close()
	b := reuse
	if b == nil {
		b = &checkpointColumns{}
	}
	src.fill(b, math.MaxInt, yield)
	return b, nil
}

// cpSource produces the rows of the classic checkpoint of a snapshot, in chunks:
// protocol, metaData, txns (by appId), domains (by domain), live adds (in key order,
// FileSet.All) and the tombstones not yet expired at now
// (delta.deletedFileRetentionDuration, default 1 week; a tombstone without
// deletionTimestamp never expires) by key; never commitInfo. Only the rows of one chunk
// are held as column values at a time, so a checkpoint of n live files is written with
// memory bounded by the chunk, not n. The string values point into the snapshot, which
// is immutable.
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
	retention, err := s.Metadata.DurationProperty(deltalog.PropDeletedFileRetention, 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-retention).UnixMilli()
	src := &cpSource{s: s, txnIDs: slices.Sorted(maps.Keys(s.txns)), domains: slices.Sorted(maps.Keys(s.domains))}
	for k, r := range s.tombstones {
		if r.DeletionTimestamp == nil || *r.DeletionTimestamp >= cutoff {
			src.removeKeys = append(src.removeKeys, k)
		}
	}
	slices.Sort(src.removeKeys)
	src.numAdds = s.Files.Len()
	src.rows = 2 + len(src.txnIDs) + len(src.domains) + src.numAdds + len(src.removeKeys)
	src.next, src.stop = iter.Pull2(s.Files.All())
	return src, nil
}

func (src *cpSource) close() { src.stop() }

func (src *cpSource) done() bool { return src.stage == cpStageDone }

// fill builds the next rows, at most max of them, into b (its previous values dropped)
// and returns how many. yield, when not nil, is called every yieldRows rows.
func (src *cpSource) fill(b *checkpointColumns, max int, yield func()) int {
	c := cpCol
	s := src.s
	n := len(checkpointSchema.Columns())
	if len(b.cols) != n {
		b.cols = make([][]parquet.Value, n)
	}
	for i := range b.cols {
		clear(b.cols[i])
		b.cols[i] = b.cols[i][:0]
	}
	b.sections = b.sections[:0]
	b.rows, b.numAdds = src.rows, src.numAdds
	b.yield, b.since = yield, 0
	built := 0
	// Each action fills its own columns for its rows; the other columns are null there.
	open := func(kind string) *cpSection {
		r := c.kinds[kind]
		if k := len(b.sections); k == 0 || b.sections[k-1].first != r[0] {
			b.sections = append(b.sections, cpSection{first: r[0], end: r[1]})
		}
		return &b.sections[len(b.sections)-1]
	}
	for built < max && src.stage != cpStageDone {
		switch src.stage {
		case cpStageProtocol:
			open("protocol").rows++
			p := &s.Protocol
			b.i32(c.protoMinReader, int32(p.MinReaderVersion))
			b.i32(c.protoMinWriter, int32(p.MinWriterVersion))
			b.strList(c.protoReaderFeat, p.ReaderFeatures, p.MinReaderVersion >= 3)
			b.strList(c.protoWriterFeat, p.WriterFeatures, p.MinWriterVersion >= 7)
			src.stage++
		case cpStageMetadata:
			open("metaData").rows++
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
			open("txn").rows++
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
			open("domainMetadata").rows++
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
			open("add").rows++
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
			open("remove").rows++
			r := s.tombstones[src.removeKeys[src.i]]
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
	return built
}

func (b *checkpointColumns) put(l cpLeaf, rep, def int, v parquet.Value) {
	b.cols[l.col] = append(b.cols[l.col], v.Level(rep, def, l.col))
}

// null appends a null leaf whose parent is defined.
func (b *checkpointColumns) null(l cpLeaf) { b.put(l, 0, l.def-1, parquet.NullValue()) }

func (b *checkpointColumns) str(l cpLeaf, s string) { b.put(l, 0, l.def, stringValue(s)) }

// optStr writes "" as null (optional string fields that JSON omits when empty).
func (b *checkpointColumns) optStr(l cpLeaf, s string) {
	if s == "" {
		b.null(l)
		return
	}
	b.str(l, s)
}

func (b *checkpointColumns) i32(l cpLeaf, x int32)    { b.put(l, 0, l.def, parquet.Int32Value(x)) }
func (b *checkpointColumns) i64(l cpLeaf, x int64)    { b.put(l, 0, l.def, parquet.Int64Value(x)) }
func (b *checkpointColumns) boolean(l cpLeaf, x bool) { b.put(l, 0, l.def, parquet.BooleanValue(x)) }

func (b *checkpointColumns) optI64(l cpLeaf, x *int64) {
	if x == nil {
		b.null(l)
		return
	}
	b.i64(l, *x)
}

// strList writes a LIST<string>: null when !present, else its elements (an empty list
// when there are none).
func (b *checkpointColumns) strList(l cpList, xs []string, present bool) {
	e := l.elem
	switch {
	case !present:
		b.put(e, 0, e.def-3, parquet.NullValue())
	case len(xs) == 0:
		b.put(e, 0, e.def-2, parquet.NullValue())
	default:
		for i, x := range xs {
			b.put(e, repAt(i, e.rep), e.def, stringValue(x))
		}
	}
}

// strMap writes a MAP<string,string> in key order: null when !present, else its entries
// (an empty map when there are none).
func (b *checkpointColumns) strMap(m cpMap, kv map[string]string, present bool) {
	if !b.mapHead(m, len(kv), present) {
		return
	}
	for i, k := range sortedKeys(kv) {
		b.put(m.key, repAt(i, m.key.rep), m.key.def, stringValue(k))
		b.put(m.value, repAt(i, m.value.rep), m.value.def, stringValue(kv[k]))
	}
}

// partitionValues writes a MAP<string,string> whose nil values are null, in key order.
func (b *checkpointColumns) partitionValues(m cpMap, pv map[string]*string, present bool) {
	if !b.mapHead(m, len(pv), present) {
		return
	}
	for i, k := range sortedKeys(pv) {
		r := repAt(i, m.key.rep)
		b.put(m.key, r, m.key.def, stringValue(k))
		if v := pv[k]; v != nil {
			b.put(m.value, r, m.value.def, stringValue(*v))
		} else {
			b.put(m.value, r, m.value.def-1, parquet.NullValue())
		}
	}
}

// mapHead writes a null or empty map and reports whether entries remain to be written.
func (b *checkpointColumns) mapHead(m cpMap, n int, present bool) bool {
	def := m.key.def - 1 // the map is defined, with no entry
	if !present {
		def--
	}
	if !present || n == 0 {
		b.put(m.key, 0, def, parquet.NullValue())
		b.put(m.value, 0, def, parquet.NullValue())
		return false
	}
	return true
}

func (b *checkpointColumns) dv(c cpDV, d *deltalog.DeletionVector) {
	if d == nil {
		for _, l := range []cpLeaf{c.storageType, c.pathOrInlineDv, c.offset, c.sizeInBytes, c.cardinality, c.maxRowIndex} {
			b.put(l, 0, l.def-2, parquet.NullValue())
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

// stringValue is a BYTE_ARRAY value that shares s's bytes (parquet-go only reads them
// while the column is written).
func stringValue(s string) parquet.Value {
	return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// release drops the references the columns hold into a snapshot's strings, keeping the
// slices' storage for the next checkpoint.
func (b *checkpointColumns) release() {
	for i := range b.cols {
		clear(b.cols[i])
		b.cols[i] = b.cols[i][:0]
	}
}
