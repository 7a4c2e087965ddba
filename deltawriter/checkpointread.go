package deltawriter

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// A checkpoint's add rows are decoded column by column straight into a
// fileTableBuilder (paths and stats copied into its arenas, partition values interned),
// without a row tree or a JSON round trip per file: a checkpoint of a table with 10⁶
// live files is 10⁶ add rows (PROTOCOL.md, "Checkpoints", "Checkpoint Schema"; readers
// may read only the columns they need). The other actions — protocol, metaData, txn,
// remove, domainMetadata, sidecar, checkpointMetadata: few, except removes — are
// gathered per row from their own columns and assembled as before.

// cpReadBatch is the number of values read from a column at a time.
const cpReadBatch = 1024

// errRowPath makes readCheckpointParquet fall back to the row-wise reader: the file has
// add columns the columnar decoder does not keep (add.stats_parsed).
var errRowPath = errors.New("checkpoint needs the row-wise reader")

// cpAddLeaves locates the add columns of one checkpoint file (-1: absent).
type cpAddLeaves struct {
	path, size, modTime, dataChange, stats, baseRowID, defaultRCV, clustering int
	pvKey, pvValue, tagKey, tagValue                                          int
	dvStorage, dvPath, dvOffset, dvSize, dvCard, dvMaxRow                     int
}

// readCheckpointParquet decodes the checkpoint or sidecar Parquet file of size bytes at
// r: its add actions into b, its other actions appended to *actions. It returns
// errRowPath, having consumed nothing, when the file needs the row-wise reader.
func readCheckpointParquet(r io.ReaderAt, size int64, b *fileTableBuilder, actions *[]deltalog.Action) error {
	f, err := parquet.OpenFile(r, size, parquet.SkipMagicBytes(true), parquet.OptimisticRead(true),
		parquet.ReadBufferSize(parquetReadBuffer), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return err
	}
	schema := f.Schema()
	leaves := schema.Columns()
	al := cpAddLeaves{}
	al.path, al.size, al.modTime, al.dataChange, al.stats, al.baseRowID, al.defaultRCV, al.clustering = -1, -1, -1, -1, -1, -1, -1, -1
	al.pvKey, al.pvValue, al.tagKey, al.tagValue = -1, -1, -1, -1
	al.dvStorage, al.dvPath, al.dvOffset, al.dvSize, al.dvCard, al.dvMaxRow = -1, -1, -1, -1, -1, -1
	for i, p := range leaves {
		if p[0] != "add" || len(p) < 2 {
			continue
		}
		switch {
		case p[1] == "stats_parsed":
			return errRowPath
		case len(p) == 2:
			switch p[1] {
			case "path":
				al.path = i
			case "size":
				al.size = i
			case "modificationTime":
				al.modTime = i
			case "dataChange":
				al.dataChange = i
			case "stats":
				al.stats = i
			case "baseRowId":
				al.baseRowID = i
			case "defaultRowCommitVersion":
				al.defaultRCV = i
			case "clusteringProvider":
				al.clustering = i
			}
		case len(p) == 4 && (p[1] == "partitionValues" || p[1] == "tags"):
			k, v := &al.pvKey, &al.pvValue
			if p[1] == "tags" {
				k, v = &al.tagKey, &al.tagValue
			}
			switch p[3] {
			case "key":
				*k = i
			case "value":
				*v = i
			}
		case len(p) == 3 && p[1] == "deletionVector":
			switch p[2] {
			case "storageType":
				al.dvStorage = i
			case "pathOrInlineDv":
				al.dvPath = i
			case "offset":
				al.dvOffset = i
			case "sizeInBytes":
				al.dvSize = i
			case "cardinality":
				al.dvCard = i
			case "maxRowIndex":
				al.dvMaxRow = i
			}
		}
	}
	if (al.pvKey < 0) != (al.pvValue < 0) || (al.tagKey < 0) != (al.tagValue < 0) {
		return errRowPath
	}
	maxDef := func(i int) int {
		l, _ := schema.Lookup(leaves[i]...)
		return l.MaxDefinitionLevel
	}
	if al.path >= 0 {
		// Most rows of a big checkpoint are adds: one allocation for all of them.
		b.rows = slices.Grow(b.rows, int(f.NumRows()))
	}
	for _, rg := range f.RowGroups() {
		d := cpRowGroup{rg: rg, b: b, maxDef: maxDef, extras: map[int32]*fileExtra{}}
		if err := d.adds(&al); err != nil {
			return err
		}
		if err := d.others(schema, actions); err != nil {
			return err
		}
	}
	return nil
}

// cpRowGroup decodes one row group.
type cpRowGroup struct {
	rg     parquet.RowGroup
	b      *fileTableBuilder
	maxDef func(int) int
	addRow []int32 // row → index into b.rows, -1 when the row is no add
	extras map[int32]*fileExtra
	buf    []parquet.Value
	buf2   []parquet.Value
}

// scan calls fn with each value of leaf column col and its row (a row starts at each
// value of repetition level 0).
func (d *cpRowGroup) scan(col int, fn func(row int, v parquet.Value) error) error {
	if d.buf == nil {
		d.buf = make([]parquet.Value, cpReadBatch)
	}
	rd := parquet.NewColumnChunkValueReader(d.rg.ColumnChunks()[col])
	defer rd.Close()
	row := -1
	for {
		n, err := rd.ReadValues(d.buf)
		for _, v := range d.buf[:n] {
			if v.RepetitionLevel() == 0 {
				row++
			}
			if ferr := fn(row, v); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("column %d: %w", col, err)
		}
	}
}

// scanFlat is scan for a non-repeated leaf, reading its pages' levels and values
// directly (no parquet.Value per row): fn gets each row whose value is defined at maxDef,
// with the value as bytes (byte arrays; valid during the call) or as an int64 (INT64).
// Pages of another physical type, or dictionary-encoded, go through their values.
func (d *cpRowGroup) scanFlat(col, maxDef int, fn func(row int, b []byte, x int64)) error {
	pages := d.rg.ColumnChunks()[col].Pages()
	defer pages.Close()
	row := 0
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("column %d: %w", col, err)
		}
		n := int(p.NumValues())
		defs := p.DefinitionLevels()
		kind := p.Type().Kind()
		switch {
		case p.Dictionary() == nil && kind == parquet.ByteArray && (len(defs) == n || maxDef == 0):
			data := p.Data()
			vals, offs := data.ByteArray()
			j := 0
			for i := range n {
				if maxDef == 0 || int(defs[i]) == maxDef {
					fn(row+i, vals[offs[j]:offs[j+1]], 0)
					j++
				}
			}
		case p.Dictionary() == nil && kind == parquet.Int64 && (len(defs) == n || maxDef == 0):
			data := p.Data()
			xs := data.Int64()
			j := 0
			for i := range n {
				if maxDef == 0 || int(defs[i]) == maxDef {
					fn(row+i, nil, xs[j])
					j++
				}
			}
		default:
			if d.buf == nil {
				d.buf = make([]parquet.Value, cpReadBatch)
			}
			vr := p.Values()
			i := 0
			for {
				k, err := vr.ReadValues(d.buf)
				for _, v := range d.buf[:k] {
					if v.DefinitionLevel() == maxDef && !v.IsNull() {
						if kind == parquet.ByteArray || kind == parquet.FixedLenByteArray {
							fn(row+i, v.ByteArray(), 0)
						} else {
							fn(row+i, nil, v.Int64())
						}
					}
					i++
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					parquet.Release(p)
					return fmt.Errorf("column %d: %w", col, err)
				}
			}
		}
		row += n
		parquet.Release(p)
	}
}

// scanPairs is scan over two sibling leaves of one repeated group (a map's keys and
// values), in step.
func (d *cpRowGroup) scanPairs(kc, vc int, fn func(row int, k, v parquet.Value)) error {
	if d.buf == nil {
		d.buf = make([]parquet.Value, cpReadBatch)
	}
	if d.buf2 == nil {
		d.buf2 = make([]parquet.Value, cpReadBatch)
	}
	kr := parquet.NewColumnChunkValueReader(d.rg.ColumnChunks()[kc])
	defer kr.Close()
	vr := parquet.NewColumnChunkValueReader(d.rg.ColumnChunks()[vc])
	defer vr.Close()
	row := -1
	var ks, vs []parquet.Value
	kdone, vdone := false, false
	for {
		if len(ks) == 0 && !kdone {
			n, err := kr.ReadValues(d.buf)
			ks = d.buf[:n]
			if errors.Is(err, io.EOF) {
				kdone = true
			} else if err != nil {
				return fmt.Errorf("column %d: %w", kc, err)
			}
		}
		if len(vs) == 0 && !vdone {
			n, err := vr.ReadValues(d.buf2)
			vs = d.buf2[:n]
			if errors.Is(err, io.EOF) {
				vdone = true
			} else if err != nil {
				return fmt.Errorf("column %d: %w", vc, err)
			}
		}
		if len(ks) == 0 || len(vs) == 0 {
			if len(ks) == 0 && len(vs) == 0 && kdone && vdone {
				return nil
			}
			if (len(ks) == 0 && kdone) || (len(vs) == 0 && vdone) {
				return fmt.Errorf("columns %d and %d have different numbers of values", kc, vc)
			}
			continue
		}
		m := min(len(ks), len(vs))
		for i := range m {
			if ks[i].RepetitionLevel() == 0 {
				row++
			}
			fn(row, ks[i], vs[i])
		}
		ks, vs = ks[m:], vs[m:]
	}
}

// cpKeyField is a field every action of a kind has: where its column holds only nulls,
// a row group has no such action (a readable one).
var cpKeyField = map[string]string{"protocol": "minReaderVersion", "metaData": "id", "txn": "appId", "remove": "path",
	"domainMetadata": "domain", "sidecar": "path", "checkpointMetadata": "version"}

// allNull reports whether the chunk of leaf column col holds only nulls by its
// statistics (writers need not fill them: false then).
func (d *cpRowGroup) allNull(col int) bool {
	c, ok := d.rg.ColumnChunks()[col].(*parquet.FileColumnChunk)
	return ok && c.NumValues() > 0 && c.NullCount() == c.NumValues()
}

func (d *cpRowGroup) extra(i int32) *fileExtra {
	x := d.extras[i]
	if x == nil {
		x = &fileExtra{}
		d.extras[i] = x
	}
	return x
}

// adds decodes the add rows of the row group into d.b.
func (d *cpRowGroup) adds(al *cpAddLeaves) error {
	n := int(d.rg.NumRows())
	d.addRow = slices.Repeat([]int32{-1}, n)
	if al.path < 0 || d.allNull(al.path) {
		return nil
	}
	b := d.b
	first := len(b.rows)
	overflow := false
	err := d.scanFlat(al.path, d.maxDef(al.path), func(row int, v []byte, _ int64) {
		if row >= n {
			overflow = true
			return
		}
		d.addRow[row] = int32(len(b.rows))
		b.rows = append(b.rows, fileRow{path: b.str(v)})
	})
	if err != nil {
		return err
	}
	if overflow {
		return fmt.Errorf("add.path: more rows than the row group's %d", n)
	}
	// flat runs fn for the values of non-repeated leaf col in add rows.
	flat := func(col int, fn func(r *fileRow, v []byte, x int64)) error {
		if col < 0 {
			return nil
		}
		return d.scanFlat(col, d.maxDef(col), func(row int, v []byte, x int64) {
			if row < n && d.addRow[row] >= 0 {
				fn(&b.rows[d.addRow[row]], v, x)
			}
		})
	}
	if len(b.rows) == first {
		return nil
	}
	// each runs fn for the non-null values of leaf col in add rows.
	each := func(col int, fn func(r *fileRow, i int32, v parquet.Value)) error {
		if col < 0 {
			return nil
		}
		def := d.maxDef(col)
		return d.scan(col, func(row int, v parquet.Value) error {
			if row < n && d.addRow[row] >= 0 && v.DefinitionLevel() == def {
				i := d.addRow[row]
				fn(&b.rows[i], i, v)
			}
			return nil
		})
	}
	steps := []func() error{
		func() error { return flat(al.size, func(r *fileRow, _ []byte, x int64) { r.size = x }) },
		func() error { return flat(al.modTime, func(r *fileRow, _ []byte, x int64) { r.modTime = x }) },
		func() error {
			return each(al.dataChange, func(r *fileRow, _ int32, v parquet.Value) { r.dataChange = v.Boolean() })
		},
		func() error { return flat(al.stats, func(r *fileRow, v []byte, _ int64) { r.stats = b.str(v) }) },
		func() error {
			return each(al.baseRowID, func(_ *fileRow, i int32, v parquet.Value) { x := v.Int64(); d.extra(i).baseRowID = &x })
		},
		func() error {
			return each(al.defaultRCV, func(_ *fileRow, i int32, v parquet.Value) { x := v.Int64(); d.extra(i).defaultRCV = &x })
		},
		func() error {
			return each(al.clustering, func(_ *fileRow, i int32, v parquet.Value) {
				d.extra(i).clusteringProvider = string(v.ByteArray())
			})
		},
		func() error {
			return each(al.dvStorage, func(_ *fileRow, i int32, v parquet.Value) {
				d.dv(i).StorageType = string(v.ByteArray())
			})
		},
		func() error {
			return each(al.dvPath, func(_ *fileRow, i int32, v parquet.Value) { d.dv(i).PathOrInlineDv = string(v.ByteArray()) })
		},
		func() error {
			return each(al.dvOffset, func(_ *fileRow, i int32, v parquet.Value) { x := int32(v.Int64()); d.dv(i).Offset = &x })
		},
		func() error {
			return each(al.dvSize, func(_ *fileRow, i int32, v parquet.Value) { d.dv(i).SizeInBytes = int32(v.Int64()) })
		},
		func() error {
			return each(al.dvCard, func(_ *fileRow, i int32, v parquet.Value) { d.dv(i).Cardinality = v.Int64() })
		},
		func() error {
			return each(al.dvMaxRow, func(_ *fileRow, i int32, v parquet.Value) { x := v.Int64(); d.dv(i).MaxRowIndex = &x })
		},
		func() error { return d.partitionValues(al, n) },
		func() error { return d.tags(al, n) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	// Keys that differ from the path (escaped paths, deletion vectors), and the extras.
	for i := first; i < len(b.rows); i++ {
		r := &b.rows[i]
		x := d.extras[int32(i)]
		var dv *deltalog.DeletionVector
		if x != nil {
			dv = x.dv
		}
		if dv != nil || strings.HasPrefix(r.path, "file:") || strings.IndexByte(r.path, '%') >= 0 {
			if k := deltalog.FileKey(r.path, dv); k != r.path {
				x = d.extra(int32(i))
				x.key = k
			}
		}
		if x != nil {
			b.extras = append(b.extras, *x)
			r.extra = int32(len(b.extras))
		}
	}
	return nil
}

func (d *cpRowGroup) dv(i int32) *deltalog.DeletionVector {
	x := d.extra(i)
	if x.dv == nil {
		x.dv = &deltalog.DeletionVector{}
	}
	return x.dv
}

// mapEntries gathers one MAP<string,string> column per add row: fn receives each add
// row's entries (nil when the map is null), the bytes valid until it returns.
func (d *cpRowGroup) mapEntries(kc, vc, n int, fn func(i int32, present bool, keys, vals [][]byte, nulls []bool)) error {
	kdef, vdef := d.maxDef(kc), d.maxDef(vc)
	var keys, vals [][]byte
	var nulls []bool
	var arena []byte
	cur, present := -1, false
	flush := func() {
		if cur >= 0 && cur < n && d.addRow[cur] >= 0 {
			// Re-slice the copies: arena may have moved while the row was gathered.
			off := 0
			for j := range keys {
				kl, vl := len(keys[j]), len(vals[j])
				keys[j] = arena[off : off+kl]
				off += kl
				vals[j] = arena[off : off+vl]
				off += vl
			}
			fn(d.addRow[cur], present, keys, vals, nulls)
		}
		keys, vals, nulls, arena = keys[:0], vals[:0], nulls[:0], arena[:0]
	}
	err := d.scanPairs(kc, vc, func(row int, k, v parquet.Value) {
		if row != cur {
			flush()
			cur = row
			present = k.DefinitionLevel() >= kdef-1
		}
		if k.DefinitionLevel() < kdef {
			return
		}
		kb, vb := k.ByteArray(), v.ByteArray()
		null := v.DefinitionLevel() < vdef
		if null {
			vb = nil
		}
		arena = append(arena, kb...)
		arena = append(arena, vb...)
		keys = append(keys, kb[:len(kb):len(kb)])
		vals = append(vals, vb[:len(vb):len(vb)])
		nulls = append(nulls, null)
	})
	if err != nil {
		return err
	}
	flush()
	return nil
}

// partitionValues interns each add row's partition values.
func (d *cpRowGroup) partitionValues(al *cpAddLeaves, n int) error {
	b := d.b
	if al.pvKey < 0 {
		for _, i := range d.addRow {
			if i >= 0 {
				b.rows[i].pv = b.internPV(nil)
			}
		}
		return nil
	}
	var order []int
	return d.mapEntries(al.pvKey, al.pvValue, n, func(i int32, present bool, keys, vals [][]byte, nulls []bool) {
		if !present {
			b.rows[i].pv = b.internPV(nil)
			return
		}
		order = order[:0]
		for j := range keys {
			order = append(order, j)
		}
		slices.SortFunc(order, func(x, y int) int { return strings.Compare(string(keys[x]), string(keys[y])) })
		s := b.scratch[:0]
		for _, j := range order {
			s = append(s, keys[j]...)
			if nulls[j] {
				s = append(s, 0, 0)
				continue
			}
			s = append(s, 0, 1)
			s = append(s, vals[j]...)
			s = append(s, 0)
		}
		b.scratch = s
		if p, ok := b.pvIndex[string(s)]; ok {
			b.rows[i].pv = p
			return
		}
		m := make(map[string]*string, len(keys))
		for j := range keys {
			if nulls[j] {
				m[string(keys[j])] = nil
			} else {
				v := string(vals[j])
				m[string(keys[j])] = &v
			}
		}
		p := uint32(len(b.pvs))
		b.pvs = append(b.pvs, m)
		b.pvIndex[string(s)] = p
		b.rows[i].pv = p
	})
}

// tags keeps each add row's tags (a rare field) in its extras.
func (d *cpRowGroup) tags(al *cpAddLeaves, n int) error {
	if al.tagKey < 0 {
		return nil
	}
	return d.mapEntries(al.tagKey, al.tagValue, n, func(i int32, present bool, keys, vals [][]byte, nulls []bool) {
		if !present {
			return
		}
		m := make(map[string]string, len(keys))
		for j := range keys {
			if !nulls[j] {
				m[string(keys[j])] = string(vals[j])
			}
		}
		d.extra(i).tags = m
	})
}

// others gathers the rows of every other action from their own columns and converts
// them (checkpointAction) in row order per action.
func (d *cpRowGroup) others(schema *parquet.Schema, actions *[]deltalog.Action) error {
	col := 0
	for _, field := range schema.Fields() {
		nleaves := countLeaves(field)
		first := col
		col += nleaves
		kind := field.Name()
		if kind == "add" || !slices.Contains(checkpointKinds, kind) {
			continue
		}
		slot := map[int]int{} // row → index into rows
		var rows [][][]parquet.Value
		if l, ok := schema.Lookup(kind, cpKeyField[kind]); ok && d.allNull(l.ColumnIndex) {
			continue // no row of this row group has the action (or its required field)
		}
		for j := range nleaves {
			lead := j == 0
			if !lead && len(rows) == 0 {
				break
			}
			err := d.scan(first+j, func(row int, v parquet.Value) error {
				s, ok := slot[row]
				if !ok {
					if !lead || v.RepetitionLevel() != 0 || v.DefinitionLevel() < 1 {
						return nil
					}
					s = len(rows)
					slot[row] = s
					rows = append(rows, make([][]parquet.Value, nleaves))
				}
				rows[s][j] = append(rows[s][j], v.Clone())
				return nil
			})
			if err != nil {
				return err
			}
		}
		for _, s := range rows {
			tree := assembleField(field, s, 0, 0)
			if tree == nil {
				continue
			}
			if m, ok := tree.(map[string]any); ok && kind == "remove" {
				if r, ok := removeFromTree(m); ok {
					if r.Path != "" {
						*actions = append(*actions, deltalog.Action{Remove: &r})
					}
					continue
				}
			}
			a, err := checkpointAction(map[string]any{kind: tree})
			if err != nil {
				return err
			}
			if a != nil {
				*actions = append(*actions, *a)
			}
		}
	}
	return nil
}

// removeFromTree converts an assembled remove row without the JSON round trip of
// checkpointAction (a checkpoint holds every unexpired tombstone); ok is false on a
// value of another type than the protocol's, which then takes that round trip.
func removeFromTree(m map[string]any) (r deltalog.Remove, ok bool) {
	str := func(v any) (string, bool) { s, ok := v.(string); return s, ok }
	i64 := func(v any) (*int64, bool) {
		x, ok := v.(int64)
		return &x, ok
	}
	for k, v := range m {
		if v == nil {
			continue
		}
		switch k {
		case "path":
			if r.Path, ok = str(v); !ok {
				return r, false
			}
		case "deletionTimestamp":
			if r.DeletionTimestamp, ok = i64(v); !ok {
				return r, false
			}
		case "dataChange":
			if r.DataChange, ok = v.(bool); !ok {
				return r, false
			}
		case "extendedFileMetadata":
			b, isBool := v.(bool)
			if !isBool {
				return r, false
			}
			r.ExtendedFileMetadata = &b
		case "size":
			if r.Size, ok = i64(v); !ok {
				return r, false
			}
		case "baseRowId":
			if r.BaseRowID, ok = i64(v); !ok {
				return r, false
			}
		case "defaultRowCommitVersion":
			if r.DefaultRowCommitVersion, ok = i64(v); !ok {
				return r, false
			}
		case "stats":
			if r.Stats, ok = str(v); !ok {
				return r, false
			}
		case "partitionValues":
			pm, isMap := v.(map[string]any)
			if !isMap {
				return r, false
			}
			r.PartitionValues = make(map[string]*string, len(pm))
			for pk, pv := range pm {
				if pv == nil {
					r.PartitionValues[pk] = nil
					continue
				}
				s, isStr := pv.(string)
				if !isStr {
					return r, false
				}
				r.PartitionValues[pk] = &s
			}
		default:
			return r, false // tags, deletionVector, anything else: the JSON round trip
		}
	}
	return r, true
}
