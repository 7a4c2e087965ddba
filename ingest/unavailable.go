package ingest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/rowfill"
)

// Unavailable values (docs/keyed-tables.md, Unavailable values (TOAST)): Debezium sends a
// column whose value it does not have — PostgreSQL's unchanged TOASTed values under
// REPLICA IDENTITY DEFAULT — as a placeholder (table.unavailable_value): a string column
// equal to it, a binary column equal to its bytes, an array column whose only element is
// it. Such a column keeps the key's current value: its latest earlier change in the
// flush that has the value, else (an upsert table) the key's stored row, read from the
// data file the key index names. A primary-key change's create (header
// __debezium.oldkey, rowfill.OldKeyHeader) whose own key has neither takes the old key's
// value the same way (sourceResolver): its latest change in the flush before the create,
// past the old key's own delete and tombstone, else its stored row (the index is as of
// the flush's snapshot, before the old key's delete) unless that is newer than the
// create; a change whose value is itself a placeholder passes on what it resolves to, so
// chains of such changes keep the value. A header that is no key of the table is passed
// over, logged once per flush. With none of these, NULL; a NOT NULL
// column cannot hold that, and its change is dead-lettered not_null_violation. The
// placeholder is never written.
//
// The hot path pays one substring search per candidate column (string, binary, or array
// of those) per data file of the flush, and only with an envelope: the rows are looked
// at, and the keys grouped, only when the placeholder's bytes occur.

// Outcomes of ingestd_keyed_unavailable_values_total: where an unavailable column's value
// came from.
const (
	unavailableFromFlush = "flush"         // an earlier change of the key in the same flush
	unavailableFromTable = "table"         // the key's stored row
	unavailableNull      = "null"          // no current value: NULL written
	unavailableDead      = "dead_lettered" // no current value, NOT NULL column: the change dead-lettered
)

// phColumn is a top-level column of the table that can hold the placeholder.
type phColumn struct {
	name     string // logical name
	phys     string // physical name (the Parquet field)
	array    bool   // an array of strings or binaries: the placeholder is its only element
	nullable bool
	leaf     int // leaf index in the flush's table-wide columns (prepared.cols)
	fileLeaf int // leaf index in a partition file's columns; -1: a partition column
}

// placeholderColumns are the columns of the flush's table (b.schema) that can hold the
// placeholder: string and binary columns, and arrays of them; none without an envelope.
func placeholderColumns(b *prepared, placeholder string) []phColumn {
	if placeholder == "" || b.schema == nil || b.pq == nil {
		return nil
	}
	var out []phColumn
	for _, f := range b.schema.Fields {
		c := phColumn{name: f.Name, phys: f.PhysicalName(b.cm), nullable: f.Nullable, fileLeaf: -1}
		switch t := f.Type.(type) {
		case deltalog.PrimitiveType:
			if t != deltalog.String && t != deltalog.Binary {
				continue
			}
		case *deltalog.ArrayType:
			if t.ElementType != deltalog.String && t.ElementType != deltalog.Binary {
				continue
			}
			c.array = true
		default:
			continue
		}
		var ok bool
		if c.leaf, ok = leafUnder(b.pq, c.phys); !ok {
			continue
		}
		if b.parts != nil {
			if fl, ok := leafUnder(b.parts.FileSchema(), c.phys); ok {
				c.fileLeaf = fl
			}
		}
		out = append(out, c)
	}
	return out
}

// leafUnder is the index of the one leaf column under top-level field name of pq.
func leafUnder(pq *parquet.Schema, name string) (int, bool) {
	for i, p := range pq.Columns() {
		if len(p) > 0 && p[0] == name {
			return i, true
		}
	}
	return 0, false
}

// phHit is a row of a data file of the flush whose column holds the placeholder.
type phHit struct {
	file *rowfill.PartitionFile
	row  int
	col  int // index into the flush's phColumns
}

// flushFile is one data file's columns of a flush: nil is the unpartitioned table's.
type flushFile struct {
	file *rowfill.PartitionFile
	cols []column.Column
	rows int
}

// flushFiles are the flush's data files with their columns.
func flushFiles(b *prepared) []flushFile {
	if b.parts == nil {
		return []flushFile{{cols: b.cols, rows: b.rows}}
	}
	var out []flushFile
	for _, p := range b.parts.Files() {
		out = append(out, flushFile{file: p, cols: p.Cols, rows: p.Rows})
	}
	return out
}

// leafOf is c's leaf index in ff's columns; -1: not in them (a partition column).
func (c phColumn) leafOf(ff *rowfill.PartitionFile) int {
	if ff == nil {
		return c.leaf
	}
	return c.fileLeaf
}

// findPlaceholders returns the rows of the flush's files whose candidate columns hold
// ph. A dense byte column is searched as one buffer first (bytes.Contains), so that a
// flush without the placeholder reads each value's bytes once and decides nothing per
// row.
func findPlaceholders(files []flushFile, cands []phColumn, ph []byte) []phHit {
	var hits []phHit
	for _, ff := range files {
		for ci, c := range cands {
			li := c.leafOf(ff.file)
			if li < 0 {
				continue
			}
			col := &ff.cols[li]
			if col.IsDense() {
				if !bytes.Contains(col.Bytes, ph) {
					continue
				}
				for j := range col.Len() {
					if bytes.Equal(col.ValueBytes(j), ph) {
						hits = append(hits, phHit{file: ff.file, row: j, col: ci})
					}
				}
				continue
			}
			// Rows are counted up to a hit only: most values are rejected by their length.
			row, counted := -1, 0
			vals := col.Values
			for j := range vals {
				v := &vals[j]
				if b := v.ByteArray(); len(b) != len(ph) || v.IsNull() || v.Kind() != parquet.ByteArray || v.RepetitionLevel() != 0 || !bytes.Equal(b, ph) {
					continue
				}
				// An array is the placeholder when it is its only element: the next entry
				// starts another row.
				if c.array && j+1 < len(vals) && vals[j+1].RepetitionLevel() != 0 {
					continue
				}
				for ; counted <= j; counted++ {
					if vals[counted].RepetitionLevel() == 0 {
						row++
					}
				}
				hits = append(hits, phHit{file: ff.file, row: row, col: ci})
			}
		}
	}
	return hits
}

// rowEntries returns the entries of row r of col (one for a dense column; for a levelled
// one, from its repetition-level-0 entry to the next).
func rowEntries(col *column.Column, starts []int, r int) []parquet.Value {
	if col.IsDense() {
		return []parquet.Value{col.At(r)}
	}
	end := len(col.Values)
	if r+1 < len(starts) {
		end = starts[r+1]
	}
	return col.Values[starts[r]:end]
}

// rowStarts are the positions of the entries that start each row of a levelled column;
// nil for a dense one.
func rowStarts(col *column.Column) []int {
	if col.IsDense() {
		return nil
	}
	var out []int
	for j, v := range col.Values {
		if v.RepetitionLevel() == 0 {
			out = append(out, j)
		}
	}
	return out
}

// unavailableFill is what a flush did about its placeholders.
type unavailableFill struct {
	// counts by outcome (unavailableFrom…), for ingestd_keyed_unavailable_values_total
	// once the commit lands; nulls by column name, for the log.
	counts map[string]int
	nulls  map[string]int
	// drop are the rows dead-lettered (a NOT NULL column without a current value), by
	// data file: not written.
	drop map[*rowfill.PartitionFile][]int
	// badOldKeys are the __debezium.oldkey headers that could not be read as a key, by
	// reason (their changes got the rule without the old key), for one WARN.
	badOldKeys map[string]int
}

// fillSource is where a placeholder's value comes from: a row of the flush (file, row),
// a stored row (path, row), or nothing (null). alt is where it comes from when the stored
// row turns out to have none (a soft-deleted row): a primary-key change's old key.
type fillSource struct {
	file  *rowfill.PartitionFile
	row   int
	path  string
	srow  uint64
	flush bool
	table bool
	alt   *fillSource
}

// fillUnavailable replaces the placeholders of the flush's written rows (written reports
// whether a change's row is written: an upsert table's kept rows, every row of a
// changelog) with the key's current value (see the top of this file). changes are the
// flush's changes (planKeyed ran: a tombstone's sequence is set), pos their batch
// positions; ordered is table.sequence_by; lookup is the table's stored state of a key
// (nil for a changelog: nothing is read from the table). Errors: reading a stored row
// (transient).
func (f *flusher) fillUnavailable(ctx context.Context, t tableState, b *prepared, changes []rowfill.Change, pos []int32,
	ordered bool, written func(*rowfill.Change) bool, lookup func([]byte) stored) (*unavailableFill, error) {
	ph := f.placeholder
	cands := placeholderColumns(b, ph)
	if len(cands) == 0 {
		return nil, nil
	}
	files := flushFiles(b)
	hits := findPlaceholders(files, cands, []byte(ph))
	if len(hits) == 0 {
		return nil, nil
	}
	type fileRow struct {
		file *rowfill.PartitionFile
		row  int
	}
	changeOf := make(map[fileRow]int, len(hits))
	for _, h := range hits {
		changeOf[fileRow{h.file, h.row}] = -1
	}
	keys := map[string][]int{} // the keys of rows with placeholders → their changes
	for i := range changes {
		c := &changes[i]
		if c.Row < 0 {
			continue
		}
		if _, ok := changeOf[fileRow{c.File, c.Row}]; ok {
			changeOf[fileRow{c.File, c.Row}] = i
			keys[string(c.Key)] = nil
		}
	}
	// The old keys of primary-key changes with placeholders: their runs are gathered too.
	var withPlaceholder []int
	for _, ci := range changeOf {
		if ci >= 0 {
			withPlaceholder = append(withPlaceholder, ci)
		}
	}
	oldKeys, bad := f.oldKeys(b, changes, withPlaceholder)
	for _, k := range oldKeys {
		keys[string(k)] = nil
	}
	for i := range changes {
		if run, ok := keys[string(changes[i].Key)]; ok {
			keys[string(changes[i].Key)] = append(run, i)
		}
	}
	// Each key's changes in the order they apply: by (sequence, position) under
	// sequence_by, else by position.
	order := func(a, b int) int {
		if ordered {
			if c := cmp.Compare(changes[a].Seq, changes[b].Seq); c != 0 {
				return c
			}
		}
		return cmp.Compare(pos[a], pos[b])
	}
	for _, run := range keys {
		slices.SortFunc(run, order)
	}
	colsOf := map[*rowfill.PartitionFile][]column.Column{}
	for _, ff := range files {
		colsOf[ff.file] = ff.cols
	}
	isPlaceholder := map[fileRow]map[int]bool{}
	for _, h := range hits {
		fr := fileRow{h.file, h.row}
		if isPlaceholder[fr] == nil {
			isPlaceholder[fr] = map[int]bool{}
		}
		isPlaceholder[fr][h.col] = true
	}
	res := &unavailableFill{counts: map[string]int{}, nulls: map[string]int{}, drop: map[*rowfill.PartitionFile][]int{}, badOldKeys: bad}
	r := &sourceResolver{changes: changes, keys: keys, order: order, ordered: ordered, lookup: lookup, oldKeys: oldKeys,
		placeholder: func(ci, col int) bool {
			c := &changes[ci]
			return c.Row >= 0 && isPlaceholder[fileRow{c.File, c.Row}][col]
		},
		memo: map[[2]int]fillSource{}}
	sources := make([]fillSource, len(hits))
	toRead := map[string][]uint64{} // stored rows to read, by file path
	for hi, h := range hits {
		ci := changeOf[fileRow{h.file, h.row}]
		if ci < 0 || !written(&changes[ci]) {
			sources[hi] = fillSource{row: -1}
			continue
		}
		src := r.resolve(ci, h.col)
		for s := &src; s != nil; s = s.alt {
			if s.table {
				toRead[s.path] = append(toRead[s.path], s.srow)
			}
		}
		sources[hi] = src
	}
	values, err := f.readStored(ctx, t, b, cands, toRead)
	if err != nil {
		return nil, err
	}
	// The replacement entries, by data file and column, then row; computed before any
	// column is rebuilt, since a source may be a row of a rebuilt column.
	type fileCol struct {
		file *rowfill.PartitionFile
		col  int
	}
	repl := map[fileCol]map[int][]parquet.Value{}
	starts := map[fileCol][]int{}
	startsOf := func(fc fileCol) []int {
		s, ok := starts[fc]
		if !ok {
			s = rowStarts(&colsOf[fc.file][cands[fc.col].leafOf(fc.file)])
			starts[fc] = s
		}
		return s
	}
	dropped := map[fileRow]bool{}
	for hi, h := range hits {
		src := sources[hi]
		if src.row < 0 {
			continue // a row that is not written
		}
		c := cands[h.col]
		target := c.leafOf(h.file)
		col := &colsOf[h.file][target]
		lf := col.Leaf()
		var entries []parquet.Value
		outcome := unavailableNull
		for s := &src; s != nil && entries == nil; s = s.alt {
			switch {
			case s.flush:
				sc := fileCol{s.file, h.col}
				for _, v := range rowEntries(&colsOf[s.file][c.leafOf(s.file)], startsOf(sc), s.row) {
					entries = append(entries, v.Level(int(v.RepetitionLevel()), int(v.DefinitionLevel()), target))
				}
				outcome = unavailableFromFlush
			case s.table:
				if vals := values[s.path][s.srow]; vals != nil { // nil: a soft-deleted row
					entries = slices.Clone(vals[h.col])
					for i, v := range entries {
						entries[i] = v.Level(int(v.RepetitionLevel()), int(v.DefinitionLevel()), target)
					}
					outcome = unavailableFromTable
				}
			}
		}
		if entries == nil { // no current value
			if !c.nullable || lf.MaxDef == 0 {
				fr := fileRow{h.file, h.row}
				if !dropped[fr] {
					dropped[fr] = true
					res.drop[h.file] = append(res.drop[h.file], h.row)
				}
				res.counts[unavailableDead]++
				res.nulls[c.name]++
				continue
			}
			entries = []parquet.Value{parquet.NullValue().Level(0, 0, target)}
			res.nulls[c.name]++
		}
		res.counts[outcome]++
		fc := fileCol{h.file, h.col}
		if repl[fc] == nil {
			repl[fc] = map[int][]parquet.Value{}
		}
		repl[fc][h.row] = entries
	}
	for fc, rows := range repl {
		leaf := cands[fc.col].leafOf(fc.file)
		cols := colsOf[fc.file]
		cols[leaf] = rebuildColumn(&cols[leaf], startsOf(fc), rows)
	}
	return res, nil
}

// oldKeys decodes the __debezium.oldkey header (rowfill.OldKeyHeader) of each change of
// withPlaceholder (indexes into changes: the changes whose rows hold the placeholder)
// that has one, as a key (rowfill.Stage.HeaderKey): the canonical old key by change
// index, and the headers that could not be read as a key, counted by decode reason
// (those changes keep the rule without it). A replayed dead letter keeps its source
// record's headers (dlq.OriginalHeaders), so it is followed too.
func (f *flusher) oldKeys(b *prepared, changes []rowfill.Change, withPlaceholder []int) (map[int][]byte, map[string]int) {
	var keys map[int][]byte
	var bad map[string]int // reason → count: the header's bytes may be sensitive, never logged
	for _, ci := range withPlaceholder {
		c := &changes[ci]
		if c.Rec == nil {
			continue
		}
		h := oldKeyHeader(c.Rec)
		if h == nil {
			continue
		}
		k, err := b.stage.HeaderKey(f.cfg, h)
		if err != nil {
			if bad == nil {
				bad = map[string]int{}
			}
			bad[string(asDecodeError(err).Reason)]++
			continue
		}
		if keys == nil {
			keys = map[int][]byte{}
		}
		keys[ci] = k
	}
	return keys, bad
}

// sourceResolver finds where the value of a placeholder comes from, per change and
// candidate column (fillUnavailable). A change whose column holds the value is its own
// source; one that holds the placeholder takes its key's current value just before it:
// the key's previous change in the flush (itself resolved the same way), none after a
// delete, else the key's stored row; when that gives none and the change names an old key
// (a primary-key change's create), the old key's current value just before it, the same
// way. Resolution always goes to changes earlier in the order they apply, so it ends;
// results are memoized, since chains of changes share their sources.
type sourceResolver struct {
	changes     []rowfill.Change
	keys        map[string][]int // each key's changes in the flush, in the order they apply
	order       func(a, b int) int
	ordered     bool                // table.sequence_by: stored rows carry a sequence
	lookup      func([]byte) stored // nil for a changelog
	oldKeys     map[int][]byte      // change → the old key its header names
	placeholder func(ci, col int) bool
	memo        map[[2]int]fillSource
}

// valueOf is the source of change ci's value in column col: its own row unless that holds
// the placeholder.
func (r *sourceResolver) valueOf(ci, col int) fillSource {
	if !r.placeholder(ci, col) {
		c := &r.changes[ci]
		return fillSource{file: c.File, row: c.Row, flush: true}
	}
	return r.resolve(ci, col)
}

// resolve is the source of the value of change ci's placeholder in column col.
func (r *sourceResolver) resolve(ci, col int) fillSource {
	k := [2]int{ci, col}
	if src, ok := r.memo[k]; ok {
		return src
	}
	r.memo[k] = fillSource{} // a guard: resolution only goes to earlier changes
	c := &r.changes[ci]
	src, deleted := r.current(c.Key, ci, col, false)
	if old, ok := r.oldKeys[ci]; ok && !src.flush {
		// A primary-key change's create: without a value of its own (a soft-deleted stored
		// row has none either, known once read), the row's value is the old key's.
		alt, _ := r.current(old, ci, col, true)
		switch {
		case deleted || !src.table:
			src = alt
		case alt.flush || alt.table:
			src.alt = &alt
		}
	}
	r.memo[k] = src
	return src
}

// current is key's current value in column col just before change ci: its latest change
// in the flush before ci, resolved (none when that is a delete; with skipDeletes, the
// deletes just before ci are passed over: a primary-key change's delete and tombstone of
// its old key), else its stored row when that is not newer than ci under sequence_by.
// deleted reports that a delete ended the key's value.
func (r *sourceResolver) current(key []byte, ci, col int, skipDeletes bool) (src fillSource, deleted bool) {
	var st stored
	if r.lookup != nil {
		st = r.lookup(key)
	}
	run := r.keys[string(key)]
	at, _ := slices.BinarySearchFunc(run, ci, r.order) // run[:at] apply before ci
	for i := at - 1; i >= 0; i-- {
		p := &r.changes[run[i]]
		if r.ordered && st.found && p.Seq < st.seq {
			break // the stored row is newer than the rest of the run
		}
		if p.Delete || p.Row < 0 {
			if skipDeletes {
				continue
			}
			return fillSource{}, true
		}
		return r.valueOf(run[i], col), false
	}
	if st.deleted || len(st.locs) == 0 || r.ordered && st.found && st.seq > r.changes[ci].Seq {
		return fillSource{}, st.deleted
	}
	l := st.locs[len(st.locs)-1]
	return fillSource{path: l.path, srow: l.row, table: true}, false
}

// rebuildColumn is col with the entries of the rows in repl replaced: a new column of
// col's leaf, every value copied (nothing aliases col, whose rows may have been the
// sources).
func rebuildColumn(col *column.Column, starts []int, repl map[int][]parquet.Value) column.Column {
	var out column.Column
	out.Reset(col.Leaf())
	rows := col.Len()
	if !col.IsDense() {
		rows = len(starts)
	}
	for r := range rows {
		entries, ok := repl[r]
		if !ok {
			entries = rowEntries(col, starts, r)
		}
		for _, v := range entries {
			out.AppendCopy(v)
		}
	}
	return out
}

// readStored reads the candidate columns of the stored rows (by file path) from the
// table's files (deltawriter.Snapshot.ReadRowColumns: those columns only) and returns,
// per path and row, each candidate column's entries as the flush's columns hold them
// (by index of cands; the column index is set by the caller). A soft-deleted stored row
// has no current value (nil). Errors: a file that is not live (the index is behind the
// table), the store's (transient).
func (f *flusher) readStored(ctx context.Context, t tableState, b *prepared, cands []phColumn, stored map[string][]uint64) (map[string]map[uint64][][]parquet.Value, error) {
	if len(stored) == 0 || t.snap == nil {
		return nil, nil
	}
	live := map[string]deltalog.Add{}
	for _, a := range t.files().All() {
		if _, ok := stored[a.Path]; ok {
			live[a.Path] = a
		}
	}
	names := make([]string, 0, len(cands)+1)
	fields := make([]*deltalog.StructField, 0, len(cands))
	for _, c := range cands {
		names = append(names, c.name)
		fields = append(fields, b.schema.Field(c.name))
	}
	soft := f.keyed != nil && f.keyed.soft
	if soft {
		names = append(names, rowfill.Deleted)
	}
	// The entries are made by the writer's own conversion of rows (RowsToColumns), on a
	// schema of the candidate columns alone.
	pq, err := deltawriter.ParquetSchema(&deltalog.StructType{Fields: fields}, b.cm)
	if err != nil {
		return nil, fmt.Errorf("read stored values: %w", err)
	}
	leaves := make([]int, len(cands))
	for i, c := range cands {
		leaves[i], _ = leafUnder(pq, c.phys)
	}
	out := map[string]map[uint64][][]parquet.Value{}
	for _, p := range slices.Sorted(maps.Keys(stored)) {
		a, ok := live[p]
		if !ok {
			f.keyed.ix = nil
			return nil, fmt.Errorf("read stored values of %s: the file is not in table version %d (the key index is behind): %w", p, t.version, errSnapshotChanged)
		}
		rows, err := t.snap.ReadRowColumns(ctx, f.deps.Table.Store(), a, stored[p], names)
		if err != nil {
			return nil, &transientError{stage: "store", what: "read stored values of " + p, err: err}
		}
		out[p] = map[uint64][][]parquet.Value{}
		for r, row := range rows {
			if soft {
				if del, _ := row[deletedPhys(t)].(bool); del {
					continue
				}
				delete(row, deletedPhys(t))
			}
			cols, err := deltawriter.RowsToColumns(pq, []map[string]any{row})
			if err != nil {
				return nil, fmt.Errorf("read stored values of %s row %d: %w", p, r, err)
			}
			vals := make([][]parquet.Value, len(cands))
			for i := range cands {
				vals[i] = cols[leaves[i]]
			}
			out[p][r] = vals
		}
	}
	return out, nil
}

// deletedPhys is the physical name of the soft delete flag column.
func deletedPhys(t tableState) string {
	if f := t.snap.Schema.Field(rowfill.Deleted); f != nil {
		return f.PhysicalName(t.snap.ColumnMapping)
	}
	return rowfill.Deleted
}

// dropUnavailable dead-letters the changes of the rows fill dropped (a NOT NULL column
// without a current value: not_null_violation) and removes those rows from keep (an
// upsert table's plan; nil: a changelog's rows, dropped from the columns here).
func (f *flusher) dropUnavailable(t tableState, b *prepared, fill *unavailableFill, changes []rowfill.Change, items []item, pos []int32, out *outcome) {
	if fill == nil || len(fill.drop) == 0 {
		return
	}
	at := map[*rowfill.PartitionFile]map[int]int{} // file → row → change
	for i := range changes {
		c := &changes[i]
		if rows, ok := fill.drop[c.File]; ok && c.Row >= 0 && slices.Contains(rows, c.Row) {
			if at[c.File] == nil {
				at[c.File] = map[int]int{}
			}
			at[c.File][c.Row] = i
		}
	}
	for file, rows := range fill.drop {
		for _, r := range rows {
			ci, ok := at[file][r]
			if !ok {
				continue
			}
			it := &items[pos[ci]]
			fail := &decode.Error{Reason: decode.ReasonNotNullViolation, Err: fmt.Errorf(
				"a column of this change is %s (the value was not sent: unchanged and TOASTed in the source) and the key has no current value to keep (no earlier change in the flush, no stored row); the column is NOT NULL",
				f.placeholder)}
			out.fresh = append(out.fresh, dlq.DeadLetter{Pipeline: f.cfg.Name, Rec: it.rec, Reason: fail.Reason, Field: fail.Field,
				Message: fail.Error(), SchemaID: it.schemaID(), TableVersion: t.version, Ack: f.ackOf(it.rec)})
		}
	}
}

// reportUnavailable logs a flush's unavailable columns that got NULL or were
// dead-lettered, by column name and count (never the keys: their values may be
// sensitive), and counts each outcome (ingestd_keyed_unavailable_values_total).
func (f *flusher) reportUnavailable(fill *unavailableFill) {
	if fill == nil {
		return
	}
	for _, o := range []string{unavailableFromFlush, unavailableFromTable, unavailableNull, unavailableDead} {
		if n := fill.counts[o]; n > 0 {
			f.m.KeyedUnavailable.WithLabelValues(f.cfg.Name, o).Add(float64(n))
		}
	}
	if len(fill.badOldKeys) > 0 {
		f.log.Warn("primary-key changes whose "+rowfill.OldKeyHeader+" header is not a key of the table: their unavailable values do not take the old key's (NULL when the new key has none)",
			"table", f.cfg.Table.URI, "reasons", fill.badOldKeys)
	}
	if len(fill.nulls) > 0 {
		f.log.Warn("unavailable values without a current value: NULL written (a NOT NULL column's change dead-lettered not_null_violation)",
			"table", f.cfg.Table.URI, "columns", fill.nulls, "dead_lettered", fill.counts[unavailableDead])
	}
}
