package decode

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Decoder decodes Avro binary records of one writer schema into rows of one table's
// Parquet layout. It is compiled once per (writer schema id, table schema) and is safe for
// concurrent use.
type Decoder struct {
	ops     []fieldOp // the top-level record's fields
	missing []int     // leaf columns of table fields the writer lacks (null at level 0)
	// recCols are the leaf columns of values sliced from the record (string, uuid,
	// bytes, fixed, map keys; not enum symbols), recRepeated whether one of them is
	// repeated (list items, map keys and values): see copies.
	recCols     []int
	recRepeated bool
	ncols       int
	leaves      []column.Leaf // every leaf column of pq (column.Leaves), for DecodeColumns' check
	topUnion    bool          // writer schema is a union of null and the record
	nullIdx     int64         // index of the null branch when topUnion, else -1
	recordIdx   int64         // index of the record branch when topUnion
	pool        sync.Pool
}

// emitFn reads one value from s and appends its column values; rep is the repetition
// level of the first value it appends to each of its columns.
type emitFn func(s *state, rep int) error

// skipFn reads and discards one value.
type skipFn func(s *state) error

// maxSchemaDepth bounds the nesting the compiler follows, as a guard against cycles.
const maxSchemaDepth = 200

// Compile builds the decoder that reads records written with writer and appends one row
// per record to column buffers laid out as pq, the Parquet schema of table under column
// mapping mode (deltawriter.ParquetSchema(table, mode)); leaf columns are resolved with
// pq.Lookup by physical name.
//
// Writer fields match table columns case-insensitively after Unicode NFC, keeping the
// table's spelling. Table columns the writer lacks are written NULL (no Avro defaults);
// writer fields the table lacks are read and discarded. Values are converted only where
// lossless: int → long, double, or decimal(p,s) with p-s ≥ 10; long → decimal with p-s ≥ 19;
// float → double; date → timestamp_ntz (midnight); decimal(p1,s1) → decimal(p2,s2) with
// s2 ≥ s1 and p2-s2 ≥ p1-s1 (rescaled). A union with ≥ 2 non-null branches is written to
// the table's struct<member0, …> column.
//
// Errors are *Error: the writer's DeltaErr as is (ReasonUnsupportedType), ReasonSchemaMismatch
// with the field path for a type the decoder cannot write losslessly or a writer field
// matching a table column twice, and ReasonNotNullViolation for a NOT NULL table column
// the writer does not send (every record would violate it).
func Compile(writer *WriterSchema, table *deltalog.StructType, mode deltalog.ColumnMappingMode, pq *parquet.Schema) (*Decoder, error) {
	return compile(writer, table, mode, pq, true)
}

// compile is Compile; without inline, every field is a compiled emitFn (opCall), which
// the tests use as the reference for runFields's inline steps.
func compile(writer *WriterSchema, table *deltalog.StructType, mode deltalog.ColumnMappingMode, pq *parquet.Schema, inline bool) (*Decoder, error) {
	if writer == nil || writer.Avro == nil || table == nil || pq == nil {
		return nil, errors.New("compile decoder: writer schema, table schema and parquet schema are required")
	}
	if writer.DeltaErr != nil {
		return nil, writer.DeltaErr
	}
	if mode == "" {
		mode = deltalog.ColumnMappingNone
	}
	rec, _, err := topRecord(writer.Avro)
	if err != nil {
		return nil, err
	}
	c := &compiler{mode: mode, pq: pq, noInline: !inline}
	ops, missing, err := c.recordOps(rec, table, "", nil, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	ncols := len(pq.Columns())
	all, err := c.leaves(table, nil, 0)
	if err != nil {
		return nil, err
	}
	covered := make([]bool, ncols)
	for _, col := range all {
		if col >= ncols || covered[col] {
			return nil, fmt.Errorf("compile decoder: parquet schema does not match the table schema (column %d)", col)
		}
		covered[col] = true
	}
	if len(all) != ncols {
		return nil, fmt.Errorf("compile decoder: parquet schema has %d leaf columns, the table %d", ncols, len(all))
	}
	d := &Decoder{ops: ops, missing: missing, recCols: c.recCols, recRepeated: c.recRepeated, ncols: ncols, leaves: column.Leaves(pq), nullIdx: -1, recordIdx: 0}
	if u, ok := deref(writer.Avro).(*avro.UnionSchema); ok {
		d.topUnion = true
		for i, b := range u.Types() {
			if b.Type() == avro.Null {
				d.nullIdx = int64(i)
			} else {
				d.recordIdx = int64(i)
			}
		}
	}
	d.pool.New = func() any { return &state{} }
	return d, nil
}

// Columns returns the number of leaf columns a row has (len(pq.Columns())).
func (d *Decoder) Columns() int { return d.ncols }

// Decode reads one record's Avro binary payload (the bytes after the Confluent frame) and
// appends exactly one row: one value per top-level-row slot of each leaf column of cols,
// indexed by Parquet leaf column index, each carrying its Dremel repetition and definition
// levels (more than one value per column for lists and maps). cols is grown to Columns()
// if shorter and returned; string and binary values are copied, never aliasing payload
// (the record is copied once and they are slices of the copy). Decode copies into memory
// that is never reused (it stays valid for as long as the values are referenced);
// DecodeWith copies into a caller-held Arena instead.
//
// On any error cols is returned with every column cut back to its length before the call
// (no partial row). Errors are *Error with reason ReasonTruncated (input ended inside a
// value), ReasonTrailingBytes (bytes left after the record), ReasonDecodeError (negative
// or oversized lengths and block counts, overlong varints, out-of-range union or enum
// indexes, invalid booleans, decimals beyond their precision, timestamps overflowing
// microseconds, an Avro string — string, uuid, map key — that is not valid UTF-8, which a
// Delta string column cannot hold: delta-rs refuses the whole data file) or
// ReasonNotNullViolation (a null for a NOT NULL column), with the field path; or
// ErrNullRecord when a [null, record] writer sent null. Bytes and fixed values may hold
// any bytes. Decode never panics on any input and never allocates more than a
// bounded multiple of the payload length.
func (d *Decoder) Decode(payload []byte, cols [][]parquet.Value) ([][]parquet.Value, error) {
	s := d.pool.Get().(*state)
	cols, err := d.decodeLevelled(s, payload, cols)
	d.pool.Put(s)
	return cols, err
}

// DecodeWith is Decode with caller-held decoding state: the per-record state and the
// memory that the record (for its string, binary and fixed values) and wide-decimal
// values are copied into come from a, whose chunks are reused after a.Reset (see Arena
// for the contract). Under a.AliasPayloads the record is not copied: string, binary and
// fixed values are sub-slices of payload, which must then stay unmodified and reachable
// until a.Reset. With a nil Arena it is Decode. Results, errors and the rollback are
// exactly Decode's.
func (d *Decoder) DecodeWith(a *Arena, payload []byte, cols [][]parquet.Value) ([][]parquet.Value, error) {
	if a == nil {
		return d.Decode(payload, cols)
	}
	return d.decodeLevelled(a.state(), payload, cols)
}

// DecodeColumns is DecodeWith appending to columns of package column: cols[i] holds leaf
// column i of the decoder's Parquet schema (len(cols) must be Columns()), each Reset by
// the caller for its leaf, column.Leaves(pq)[i], or holding values appended since. A set
// value of a column that IsDense is appended with no parquet.Value built: a fixed-width
// value as its word (column.Column.AppendDense), a BYTE_ARRAY value (string, uuid,
// bytes, fixed into binary, enum symbol) as its bytes, copied straight from the payload
// (or the enum's symbol) into the column's Bytes (column.Column.AppendBytes; no arena
// bytes, see Arena). Any other value, or any value of a levelled column, is appended
// levelled, and a dense column turns levelled at its first null (column.Column.ToLevelled)
// and stays so until its next Reset. Materialised with column.Column.At, the entries
// appended are exactly the values DecodeWith appends (a dense entry is at repetition
// level 0 and the leaf's maximum definition level: Parquet format, "Nested Encoding"; the
// word is column.Bits of the value, the bytes the value's).
//
// Results, errors and the rollback are exactly DecodeWith's: on an error every column is
// cut back to its length before the call (column.Column.Truncate; a column that turned
// levelled in the failed record stays levelled) and nothing is appended. Besides
// DecodeWith's errors: len(cols) other than Columns(), or an empty dense column Reset for
// another leaf than the decoder's, is an error before anything is read.
func (d *Decoder) DecodeColumns(a *Arena, payload []byte, cols []column.Column) error {
	if len(cols) != d.ncols {
		return fmt.Errorf("decode record: got %d columns, the decoder writes %d", len(cols), d.ncols)
	}
	s, pooled := d.acquire(a)
	err := d.decode(s, payload, cols)
	if pooled {
		d.pool.Put(s)
	}
	return err
}

// acquire returns the state a decode through a runs on: a's, or for a nil Arena one from
// d's pool (pooled: the caller puts it back when done).
func (d *Decoder) acquire(a *Arena) (s *state, pooled bool) {
	if a == nil {
		return d.pool.Get().(*state), true
	}
	return a.state(), false
}

// leavesMatch reports whether no empty dense column of cols is Reset for another leaf
// than the decoder's writes (else decode fails with errLeaf before reading anything).
func (d *Decoder) leavesMatch(cols []column.Column) bool {
	for i := range cols {
		if c := &cols[i]; c.IsDense() && c.Len() == 0 && c.Leaf() != d.leaves[i] {
			return false
		}
	}
	return true
}

// decodeLevelled is decode on cols wrapped as levelled Columns (column.Levelled, no copy):
// cols is grown to Columns() if shorter, and each slice is taken back from its Column
// after the call, appended to or cut back.
func (d *Decoder) decodeLevelled(s *state, payload []byte, cols [][]parquet.Value) ([][]parquet.Value, error) {
	for len(cols) < d.ncols {
		cols = append(cols, nil)
	}
	if cap(s.wrap) < d.ncols {
		s.wrap = make([]column.Column, d.ncols) // zero Columns: levelled, and stay so
	}
	w := s.wrap[:d.ncols]
	in := cols[:len(w)]
	// column.Levelled(in[i]), set in place: a wrap Column is only ever appended to
	// levelled (no leaf, never Reset), so its other fields stay zero; assigning the one
	// slice avoids copying whole Columns.
	for i := range in {
		w[i].Values = in[i]
	}
	err := d.decode(s, payload, w)
	for i := range in {
		in[i], w[i].Values = w[i].Values, nil // the state keeps no reference to the caller's values
	}
	return cols, err
}

// copies reports whether a record decoded into cols is copied into the arena (when it is
// under 16 KiB and the arena does not alias): when one of its values sliced from the
// record goes to a levelled column. A non-repeated leaf gets exactly one entry per
// record, so a column that is dense before the record takes its value in the byte form
// (or turns levelled with a null, which needs no bytes): a record whose such columns are
// all dense copies nothing. A repeated leaf is always levelled.
func (d *Decoder) copies(cols []column.Column) bool {
	if d.recRepeated {
		return true
	}
	for _, c := range d.recCols {
		if !cols[c].IsDense() {
			return true
		}
	}
	return false
}

// errLeaf is DecodeColumns' error for column i, dense for leaf got, of the decoder's leaf want.
func errLeaf(i int, got, want column.Leaf) error {
	return fmt.Errorf("decode record: column %d is dense for leaf %+v, the decoder writes leaf %+v: reset it with column.Leaves of the decoder's parquet schema", i, got, want)
}

// decode runs the decoder on s appending to cols (len(cols) == d.ncols) and, on any error,
// cuts the columns and the arena back to where they were.
func (d *Decoder) decode(s *state, payload []byte, cols []column.Column) error {
	if cap(s.lens) < d.ncols {
		s.lens = make([]int, d.ncols)
	}
	lens := s.lens[:d.ncols]
	cols = cols[:len(lens)]
	for i := range cols {
		c := &cols[i]
		n := len(c.Values) + len(c.Dense) // c.Len(): one of the two is empty
		lens[i] = n
		if n == 0 && c.IsDense() && c.Leaf() != d.leaves[i] {
			return errLeaf(i, c.Leaf(), d.leaves[i])
		}
	}
	markCur, markNext := s.cur, s.next
	s.buf, s.pos, s.cols, s.zeroItems, s.owned = payload, 0, cols, 0, s.alias
	if !s.alias && len(payload) > 0 && len(payload) < slabChunk/4 && d.copies(cols) {
		// One copy of the record; its levelled string, bytes, fixed and map-key values
		// are slices of it (copyBytes, inlined). A larger record is not copied whole (it
		// would need its own allocation): its levelled values are copied one by one (own).
		if m, n := len(s.cur), len(payload); n <= cap(s.cur)-m {
			s.cur = s.cur[:m+n]
			s.buf = s.cur[m : m+n : m+n]
			copy(s.buf, payload)
		} else {
			s.buf = s.copySlow(payload)
		}
		s.owned = true
	}
	err := d.run(s)
	if err != nil {
		// No partial row (ErrNullRecord appended nothing).
		for i, n := range lens {
			cols[i].Truncate(n)
		}
		// The bytes handed out since the mark (the record's copy included) belong to
		// values just cut off, or to none.
		s.cur, s.next = markCur, markNext
	}
	s.buf, s.cols = nil, nil
	return err
}

// run decodes one record from s. The deferred recover is the last line of defence (no
// input is known to panic; the fuzz targets check it): a panic becomes a ReasonDecodeError
// and, like every error, makes decode cut the columns and the arena back.
func (d *Decoder) run(s *state) (err error) {
	defer recoverPanic(&err)
	if d.topUnion {
		idx, err := s.long()
		if err != nil {
			return err
		}
		switch idx {
		case d.recordIdx:
		case d.nullIdx:
			if s.pos != len(s.buf) {
				return newError(ReasonTrailingBytes, "", fmt.Errorf("decode record: %d bytes after the record", len(s.buf)-s.pos))
			}
			return ErrNullRecord
		default:
			return malformed("top-level union index %d out of range", idx)
		}
	}
	if err := s.runFields(d.ops, 0); err != nil {
		return err
	}
	if len(d.missing) > 0 {
		s.nulls(d.missing, 0, 0)
	}
	if s.pos != len(s.buf) {
		return newError(ReasonTrailingBytes, "", fmt.Errorf("decode record: %d bytes after the record", len(s.buf)-s.pos))
	}
	return nil
}

// recoverPanic turns a panic of the deferring function into a ReasonDecodeError in *err.
func recoverPanic(err *error) {
	if r := recover(); r != nil {
		*err = newError(ReasonDecodeError, "", fmt.Errorf("decode record: internal decoder panic: %v", r))
	}
}

type compiler struct {
	mode     deltalog.ColumnMappingMode
	pq       *parquet.Schema
	noInline bool // no inline steps (fastField reports false): the tests' reference
	// recCols lists the leaf columns a compiled value appends bytes read from the record
	// to (string, uuid, bytes, fixed, map keys), recRepeated whether one is repeated.
	recCols     []int
	recRepeated bool
}

// recordBytes notes that leaf column col (repeated when rep > 0) gets values sliced from
// the record.
func (c *compiler) recordBytes(col, rep int) {
	c.recCols = append(c.recCols, col)
	c.recRepeated = c.recRepeated || rep > 0
}

func extend(path []string, names ...string) []string {
	out := make([]string, 0, len(path)+len(names))
	return append(append(out, path...), names...)
}

func mismatch(path string, format string, args ...any) error {
	return newError(ReasonSchemaMismatch, path, fmt.Errorf("compile decoder: "+format, args...))
}

// leaf resolves a leaf column and checks its levels against the ones the decoder emits.
func (c *compiler) leaf(pqPath []string, def, rep int) (int, error) {
	lc, ok := c.pq.Lookup(pqPath...)
	if !ok {
		return 0, fmt.Errorf("compile decoder: parquet schema has no leaf column %q", pqPath)
	}
	if lc.MaxDefinitionLevel != def || lc.MaxRepetitionLevel != rep {
		return 0, fmt.Errorf("compile decoder: parquet column %q has levels (def %d, rep %d), want (%d, %d): not the layout of deltawriter.ParquetSchema",
			pqPath, lc.MaxDefinitionLevel, lc.MaxRepetitionLevel, def, rep)
	}
	if lc.ColumnIndex > parquet.MaxColumnIndex || def > parquet.MaxDefinitionLevel || rep > parquet.MaxRepetitionLevel {
		return 0, fmt.Errorf("compile decoder: parquet column %q beyond parquet-go's level or column limits", pqPath)
	}
	return lc.ColumnIndex, nil
}

// leaves lists the leaf column indexes under a table type at pqPath.
func (c *compiler) leaves(t deltalog.DataType, pqPath []string, depth int) ([]int, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("compile decoder: table schema nested deeper than %d", maxSchemaDepth)
	}
	switch t := t.(type) {
	case *deltalog.StructType:
		var out []int
		for _, f := range t.Fields {
			l, err := c.leaves(f.Type, extend(pqPath, f.PhysicalName(c.mode)), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, l...)
		}
		return out, nil
	case *deltalog.ArrayType:
		return c.leaves(t.ElementType, extend(pqPath, "list", "element"), depth+1)
	case *deltalog.MapType:
		k, err := c.leaves(t.KeyType, extend(pqPath, "key_value", "key"), depth+1)
		if err != nil {
			return nil, err
		}
		v, err := c.leaves(t.ValueType, extend(pqPath, "key_value", "value"), depth+1)
		if err != nil {
			return nil, err
		}
		return append(k, v...), nil
	}
	lc, ok := c.pq.Lookup(pqPath...)
	if !ok {
		return nil, fmt.Errorf("compile decoder: parquet schema has no leaf column %q", pqPath)
	}
	return []int{lc.ColumnIndex}, nil
}

// record compiles a writer record into a table struct whose value is present at def.
func (c *compiler) record(ws *avro.RecordSchema, ts *deltalog.StructType, path string, pqPath []string, def, rep, depth int) (emitFn, error) {
	steps, missing, err := c.recordOps(ws, ts, path, pqPath, def, rep, depth)
	if err != nil {
		return nil, err
	}
	if len(steps) == 1 && len(missing) == 0 && steps[0].kind == opCall {
		return steps[0].fn, nil
	}
	return func(s *state, r int) error {
		if err := s.runFields(steps, r); err != nil {
			return err
		}
		if len(missing) > 0 {
			s.nulls(missing, r, def)
		}
		return nil
	}, nil
}

// recordOps compiles a writer record into a table struct whose value is present at def:
// the steps that read its fields, and the leaf columns of the table's fields the writer
// lacks (null at def).
func (c *compiler) recordOps(ws *avro.RecordSchema, ts *deltalog.StructType, path string, pqPath []string, def, rep, depth int) ([]fieldOp, []int, error) {
	if depth > maxSchemaDepth {
		return nil, nil, newError(ReasonUnsupportedType, path, fmt.Errorf("compile decoder: schema nested deeper than %d", maxSchemaDepth))
	}
	byKey := make(map[string]int, len(ts.Fields))
	for j, f := range ts.Fields {
		k := deltalog.NameKey(f.Name)
		if _, dup := byKey[k]; dup {
			return nil, nil, mismatch(joinPath(path, f.Name), "table has two columns named %q case-insensitively", f.Name)
		}
		byKey[k] = j
	}
	matched := make([]int, len(ts.Fields))
	for j := range matched {
		matched[j] = -1
	}
	steps := make([]fieldOp, 0, len(ws.Fields()))
	for i, wf := range ws.Fields() {
		j, ok := byKey[deltalog.NameKey(wf.Name())]
		if !ok || carriesNoData(wf.Type()) {
			skip, err := c.skip(wf.Type(), joinPath(path, wf.Name()), depth+1)
			if err != nil {
				return nil, nil, err
			}
			steps = append(steps, fieldOp{kind: opCall, skip: true, fn: func(s *state, _ int) error { return skip(s) }})
			continue
		}
		tf := ts.Fields[j]
		fp := joinPath(path, tf.Name)
		if matched[j] >= 0 {
			return nil, nil, mismatch(fp, "writer fields %q and %q both match column %q", ws.Fields()[matched[j]].Name(), wf.Name(), tf.Name)
		}
		matched[j] = i
		fpq := extend(pqPath, tf.PhysicalName(c.mode))
		// A generated column takes a supplied null: the flush computes the column and
		// checks the supplied value against it (ingest/rowfill), NOT NULL included.
		nullable := tf.Nullable || generated(tf)
		if op, ok := c.fastField(wf.Type(), tf.Type, nullable, fp, fpq, def, rep); ok {
			steps = append(steps, op)
			continue
		}
		fn, err := c.value(wf.Type(), tf.Type, nullable, fp, fpq, def, rep, depth+1)
		if err != nil {
			return nil, nil, err
		}
		steps = append(steps, fieldOp{kind: opCall, fn: fn})
	}
	var missing []int
	for j, tf := range ts.Fields {
		if matched[j] >= 0 {
			continue
		}
		if !tf.Nullable && !generated(tf) { // a generated column is computed, not missing
			return nil, nil, newError(ReasonNotNullViolation, joinPath(path, tf.Name), errors.New("compile decoder: the writer schema has no field for this NOT NULL column"))
		}
		l, err := c.leaves(tf.Type, extend(pqPath, tf.PhysicalName(c.mode)), depth+1)
		if err != nil {
			return nil, nil, err
		}
		missing = append(missing, l...)
	}
	return steps, missing, nil
}

// carriesNoData reports a null type or a union of only nulls.
func carriesNoData(w avro.Schema) bool {
	switch w := deref(w).(type) {
	case *avro.NullSchema:
		return true
	case *avro.UnionSchema:
		for _, b := range w.Types() {
			if b.Type() != avro.Null {
				return false
			}
		}
		return true
	}
	return false
}

// value compiles a writer value (possibly a union) into a table column whose null is at
// definition level nullDef (present values are at nullDef+1).
func (c *compiler) value(w avro.Schema, t deltalog.DataType, nullable bool, path string, pqPath []string, nullDef, rep, depth int) (emitFn, error) {
	if depth > maxSchemaDepth {
		return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("compile decoder: schema nested deeper than %d", maxSchemaDepth))
	}
	u, ok := deref(w).(*avro.UnionSchema)
	if !ok {
		return c.nonUnion(w, t, path, pqPath, nullDef+1, rep, depth+1)
	}
	leaves, err := c.leaves(t, pqPath, depth)
	if err != nil {
		return nil, err
	}
	onNull := func(s *state, r int) error {
		if !nullable {
			return newError(ReasonNotNullViolation, path, errors.New("decode record: null for a NOT NULL column"))
		}
		s.nulls(leaves, r, nullDef)
		return nil
	}
	types := u.Types()
	branches := make([]emitFn, len(types))
	var nonNull []int
	for i, b := range types {
		if b.Type() == avro.Null {
			branches[i] = onNull
		} else {
			nonNull = append(nonNull, i)
		}
	}
	switch len(nonNull) {
	case 0:
	case 1:
		fn, err := c.nonUnion(types[nonNull[0]], t, path, pqPath, nullDef+1, rep, depth+1)
		if err != nil {
			return nil, err
		}
		branches[nonNull[0]] = fn
	default:
		st, ok := t.(*deltalog.StructType)
		if !ok {
			return nil, mismatch(path, "writer union %s cannot be written to column type %s (want struct<member0,…>)", u.String(), t)
		}
		byKey := make(map[string]int, len(st.Fields))
		for j, f := range st.Fields {
			byKey[deltalog.NameKey(f.Name)] = j
		}
		memberLeaves := make([][]int, len(st.Fields))
		for j, f := range st.Fields {
			if memberLeaves[j], err = c.leaves(f.Type, extend(pqPath, f.PhysicalName(c.mode)), depth+1); err != nil {
				return nil, err
			}
		}
		for k, bi := range nonNull {
			j, ok := byKey[deltalog.NameKey(memberName(k))]
			if !ok {
				return nil, mismatch(joinPath(path, memberName(k)), "column %s has no field for union branch %d (%s)", t, bi, types[bi].Type())
			}
			mf := st.Fields[j]
			mp := joinPath(path, mf.Name)
			fn, err := c.value(types[bi], mf.Type, mf.Nullable, mp, extend(pqPath, mf.PhysicalName(c.mode)), nullDef+1, rep, depth+1)
			if err != nil {
				return nil, err
			}
			var others []int
			var notNull string
			for jj, of := range st.Fields {
				if jj == j {
					continue
				}
				if !of.Nullable && notNull == "" {
					notNull = joinPath(path, of.Name)
				}
				others = append(others, memberLeaves[jj]...)
			}
			memberDef := nullDef + 1
			branches[bi] = func(s *state, r int) error {
				if notNull != "" {
					return newError(ReasonNotNullViolation, notNull, errors.New("decode record: union member is null for a NOT NULL column"))
				}
				if err := fn(s, r); err != nil {
					return err
				}
				s.nulls(others, r, memberDef)
				return nil
			}
		}
	}
	n := int64(len(branches))
	if len(branches) == 2 && branches[0] != nil && branches[1] != nil {
		b0, b1 := branches[0], branches[1]
		return func(s *state, r int) error {
			idx, err := s.long()
			if err != nil {
				return withField(err, path)
			}
			switch idx {
			case 0:
				return b0(s, r)
			case 1:
				return b1(s, r)
			}
			return withField(malformed("union index %d out of range [0,%d)", idx, n), path)
		}, nil
	}
	return func(s *state, r int) error {
		idx, err := s.long()
		if err != nil {
			return withField(err, path)
		}
		if idx < 0 || idx >= n {
			return withField(malformed("union index %d out of range [0,%d)", idx, n), path)
		}
		return branches[idx](s, r)
	}, nil
}

// nonUnion compiles a non-union writer type into a table column present at def.
func (c *compiler) nonUnion(w avro.Schema, t deltalog.DataType, path string, pqPath []string, def, rep, depth int) (emitFn, error) {
	if depth > maxSchemaDepth {
		return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("compile decoder: schema nested deeper than %d", maxSchemaDepth))
	}
	switch w := deref(w).(type) {
	case *avro.RecordSchema:
		if _, ok, err := connectRecordType(w); ok {
			if err != nil {
				return nil, newError(ReasonUnsupportedType, path, err)
			}
			return c.varDecimal(w, t, path, pqPath, def, rep)
		}
		st, ok := t.(*deltalog.StructType)
		if !ok {
			return nil, mismatch(path, "writer record %s cannot be written to column type %s", w.FullName(), t)
		}
		return c.record(w, st, path, pqPath, def, rep, depth+1)
	case *avro.ArraySchema:
		at, ok := t.(*deltalog.ArrayType)
		if !ok {
			return nil, mismatch(path, "writer array cannot be written to column type %s", t)
		}
		return c.array(w, at, path, pqPath, def, rep, depth+1)
	case *avro.MapSchema:
		mt, ok := t.(*deltalog.MapType)
		if !ok || mt.KeyType != deltalog.String {
			return nil, mismatch(path, "writer map cannot be written to column type %s", t)
		}
		return c.mapping(w, mt, path, pqPath, def, rep, depth+1)
	case *avro.UnionSchema, *avro.NullSchema:
		return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("compile decoder: writer type %s has no column representation here", w.Type()))
	}
	k, err := classify(w)
	if err != nil {
		return nil, newError(ReasonUnsupportedType, path, err)
	}
	switch t.(type) {
	case deltalog.PrimitiveType, deltalog.DecimalType:
	default:
		return nil, mismatch(path, "writer type %s cannot be written to column type %s", w.Type(), t)
	}
	col, err := c.leaf(pqPath, def, rep)
	if err != nil {
		return nil, err
	}
	switch k.base {
	case kString, kUUID, kBytes, kFixed:
		c.recordBytes(col, rep)
	}
	return leafFn(k, w, t, path, col, def)
}

// varDecimal compiles a Debezium VariableScaleDecimal record into a string column: the
// exact value as Java's BigDecimal.toPlainString writes it (plainDecimal), never rescaled.
func (c *compiler) varDecimal(w *avro.RecordSchema, t deltalog.DataType, path string, pqPath []string, def, rep int) (emitFn, error) {
	if t != deltalog.String {
		return nil, mismatch(path, "writer %s cannot be written losslessly to column type %s (want string)", debeziumVarScale, t)
	}
	vd, err := varDecimalOf(w)
	if err != nil {
		return nil, newError(ReasonUnsupportedType, path, err)
	}
	col, err := c.leaf(pqPath, def, rep)
	if err != nil {
		return nil, err
	}
	return func(s *state, r int) error {
		var scale int32
		var value []byte
		for i := range 2 {
			var err error
			if i == vd.scale {
				scale, err = s.int()
			} else {
				value, err = s.span()
			}
			if err != nil {
				return withField(err, path)
			}
		}
		text, err := plainDecimal(value, scale)
		if err != nil {
			return withField(err, path)
		}
		s.putByteArray(text, r, def, col)
		return nil
	}, nil
}

func (c *compiler) array(w *avro.ArraySchema, t *deltalog.ArrayType, path string, pqPath []string, def, rep, depth int) (emitFn, error) {
	ep := path + "[]"
	elem, err := c.value(w.Items(), t.ElementType, t.ContainsNull, ep, extend(pqPath, "list", "element"), def+1, rep+1, depth+1)
	if err != nil {
		return nil, err
	}
	leaves, err := c.leaves(t, pqPath, depth)
	if err != nil {
		return nil, err
	}
	minItem, err := minSize(w.Items(), 0)
	if err != nil {
		return nil, newError(ReasonUnsupportedType, path, err)
	}
	inner := rep + 1
	return func(s *state, r int) error {
		first := true
		for {
			n, size, err := s.blockCount(minItem)
			if err != nil {
				return withField(err, path)
			}
			if n == 0 {
				break
			}
			start := s.pos
			for i := int64(0); i < n; i++ {
				er := inner
				if first {
					er, first = r, false
				}
				if err := elem(s, er); err != nil {
					return err
				}
			}
			if size >= 0 && int64(s.pos-start) != size {
				return withField(malformed("array block declares %d bytes, its items took %d", size, s.pos-start), path)
			}
		}
		if first {
			s.nulls(leaves, r, def)
		}
		return nil
	}, nil
}

func (c *compiler) mapping(w *avro.MapSchema, t *deltalog.MapType, path string, pqPath []string, def, rep, depth int) (emitFn, error) {
	keyCol, err := c.leaf(extend(pqPath, "key_value", "key"), def+1, rep+1)
	if err != nil {
		return nil, err
	}
	c.recordBytes(keyCol, rep+1)
	val, err := c.value(w.Values(), t.ValueType, t.ValueContainsNull, path+"{}", extend(pqPath, "key_value", "value"), def+1, rep+1, depth+1)
	if err != nil {
		return nil, err
	}
	leaves, err := c.leaves(t, pqPath, depth)
	if err != nil {
		return nil, err
	}
	minVal, err := minSize(w.Values(), 0)
	if err != nil {
		return nil, newError(ReasonUnsupportedType, path, err)
	}
	inner, keyDef := rep+1, def+1
	return func(s *state, r int) error {
		first := true
		for {
			n, size, err := s.blockCount(1 + minVal)
			if err != nil {
				return withField(err, path)
			}
			if n == 0 {
				break
			}
			start := s.pos
			for i := int64(0); i < n; i++ {
				er := inner
				if first {
					er, first = r, false
				}
				k, err := s.span()
				if err != nil {
					return withField(err, path+"{}")
				}
				if !validText(k) {
					return withField(badUTF8(k), path+"{}")
				}
				s.putLevelledBytes(s.own(k), er, keyDef, keyCol) // a repeated leaf: levelled
				if err := val(s, er); err != nil {
					return err
				}
			}
			if size >= 0 && int64(s.pos-start) != size {
				return withField(malformed("map block declares %d bytes, its entries took %d", size, s.pos-start), path)
			}
		}
		if first {
			s.nulls(leaves, r, def)
		}
		return nil
	}, nil
}

// minSize is the smallest number of bytes one value of w encodes to.
func minSize(w avro.Schema, depth int) (int, error) {
	if depth > maxSchemaDepth {
		return 0, fmt.Errorf("compile decoder: schema nested deeper than %d (recursive?)", maxSchemaDepth)
	}
	switch w := deref(w).(type) {
	case *avro.NullSchema:
		return 0, nil
	case *avro.RecordSchema:
		n := 0
		for _, f := range w.Fields() {
			m, err := minSize(f.Type(), depth+1)
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	case *avro.FixedSchema:
		return w.Size(), nil
	case *avro.PrimitiveSchema:
		switch w.Type() {
		case avro.Float:
			return 4, nil
		case avro.Double:
			return 8, nil
		}
		return 1, nil
	}
	return 1, nil // enum, union, array, map: at least one varint
}

// skip compiles a reader that validates and discards one value of w.
func (c *compiler) skip(w avro.Schema, path string, depth int) (skipFn, error) {
	if depth > maxSchemaDepth {
		return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("compile decoder: schema nested deeper than %d (recursive?)", maxSchemaDepth))
	}
	wrap := func(fn skipFn) skipFn {
		return func(s *state) error {
			if err := fn(s); err != nil {
				return withField(err, path)
			}
			return nil
		}
	}
	switch w := deref(w).(type) {
	case *avro.NullSchema:
		return func(*state) error { return nil }, nil
	case *avro.RecordSchema:
		fns := make([]skipFn, len(w.Fields()))
		for i, f := range w.Fields() {
			fn, err := c.skip(f.Type(), joinPath(path, f.Name()), depth+1)
			if err != nil {
				return nil, err
			}
			fns[i] = fn
		}
		return func(s *state) error {
			for _, fn := range fns {
				if err := fn(s); err != nil {
					return err
				}
			}
			return nil
		}, nil
	case *avro.UnionSchema:
		fns := make([]skipFn, len(w.Types()))
		for i, b := range w.Types() {
			fn, err := c.skip(b, path, depth+1)
			if err != nil {
				return nil, err
			}
			fns[i] = fn
		}
		n := int64(len(fns))
		return func(s *state) error {
			idx, err := s.long()
			if err != nil {
				return withField(err, path)
			}
			if idx < 0 || idx >= n {
				return withField(malformed("union index %d out of range [0,%d)", idx, n), path)
			}
			return fns[idx](s)
		}, nil
	case *avro.ArraySchema:
		item, err := c.skip(w.Items(), path+"[]", depth+1)
		if err != nil {
			return nil, err
		}
		minItem, err := minSize(w.Items(), depth)
		if err != nil {
			return nil, newError(ReasonUnsupportedType, path, err)
		}
		return c.skipBlocks(path, minItem, func(s *state) error { return item(s) }), nil
	case *avro.MapSchema:
		val, err := c.skip(w.Values(), path+"{}", depth+1)
		if err != nil {
			return nil, err
		}
		minVal, err := minSize(w.Values(), depth)
		if err != nil {
			return nil, newError(ReasonUnsupportedType, path, err)
		}
		return c.skipBlocks(path, 1+minVal, func(s *state) error {
			if _, err := s.span(); err != nil {
				return err
			}
			return val(s)
		}), nil
	case *avro.FixedSchema:
		n := w.Size()
		return wrap(func(s *state) error { _, err := s.fixed(n); return err }), nil
	case *avro.EnumSchema:
		n := int32(len(w.Symbols()))
		return wrap(func(s *state) error {
			i, err := s.int()
			if err == nil && (i < 0 || i >= n) {
				err = malformed("enum index %d out of range [0,%d)", i, n)
			}
			return err
		}), nil
	case *avro.PrimitiveSchema:
		switch w.Type() {
		case avro.Boolean:
			return wrap(func(s *state) error { _, err := s.bool(); return err }), nil
		case avro.Int:
			return wrap(func(s *state) error { _, err := s.int(); return err }), nil
		case avro.Long:
			return wrap(func(s *state) error { _, err := s.long(); return err }), nil
		case avro.Float:
			return wrap(func(s *state) error { _, err := s.fixed(4); return err }), nil
		case avro.Double:
			return wrap(func(s *state) error { _, err := s.fixed(8); return err }), nil
		case avro.String, avro.Bytes:
			return wrap(func(s *state) error { _, err := s.span(); return err }), nil
		}
	}
	return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("compile decoder: cannot skip Avro type %s", w.Type()))
}

func (c *compiler) skipBlocks(path string, minItem int, item skipFn) skipFn {
	return func(s *state) error {
		for {
			n, size, err := s.blockCount(minItem)
			if err != nil {
				return withField(err, path)
			}
			if n == 0 {
				return nil
			}
			if size >= 0 {
				s.pos += int(size) // bounds checked by blockCount
				continue
			}
			for i := int64(0); i < n; i++ {
				if err := item(s); err != nil {
					return err
				}
			}
		}
	}
}

// timestampOutOfRange is the decode_error of a timestamp value v, in units of mul µs (1:
// micros, 1000: millis) since the epoch, outside Delta's range (deltalog.TimestampMinMicros
// ..TimestampMaxMicros).
func timestampOutOfRange(v, mul int64) error {
	unit, t := "µs", time.UnixMicro(v)
	if mul == 1000 {
		unit, t = "ms", time.UnixMilli(v)
	}
	return malformed("timestamp %d %s since the epoch (%s) is outside Delta's range 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z",
		v, unit, t.UTC().Format(time.RFC3339Nano))
}

// daysOutOfRange is the decode_error of a date v, in days since 1970-01-01, outside
// Delta's range (deltalog.DateMinDays..DateMaxDays).
func daysOutOfRange(v int64) error {
	return malformed("date %d days since 1970-01-01 (%s) is outside Delta's range 0001-01-01..9999-12-31",
		v, time.Unix(v*86400, 0).UTC().Format(time.DateOnly))
}

// ---- leaves ----

// leafFn compiles the reader of one primitive writer value into one column present at def.
func leafFn(k kind, w avro.Schema, t deltalog.DataType, path string, col, def int) (emitFn, error) {
	bad := func() (emitFn, error) {
		return nil, mismatch(path, "writer type %s cannot be written losslessly to column type %s", describe(w), t)
	}
	fail := func(err error) error { return withField(err, path) }
	if dt, ok := t.(deltalog.DecimalType); ok {
		return decimalLeaf(k, dt, path, col, def, bad)
	}
	switch t {
	case deltalog.Boolean:
		if k.base != kBool {
			return bad()
		}
		return func(s *state, r int) error {
			v, err := s.bool()
			if err != nil {
				return fail(err)
			}
			s.putBoolean(v, r, def, col)
			return nil
		}, nil
	case deltalog.Integer, deltalog.Date:
		want := kInt
		if t == deltalog.Date {
			want = kDate
		}
		if k.base != want && !(t == deltalog.Integer && k.base == kTimeMillis) {
			return bad()
		}
		lo, hi := int32(math.MinInt32), int32(math.MaxInt32) // every int
		if t == deltalog.Date {
			lo, hi = deltalog.DateMinDays, deltalog.DateMaxDays
		}
		return func(s *state, r int) error {
			v, err := s.int()
			if err != nil {
				return fail(err)
			}
			if v < lo || v > hi {
				return fail(daysOutOfRange(int64(v)))
			}
			s.putInt32(v, r, def, col)
			return nil
		}, nil
	case deltalog.Long, deltalog.Timestamp, deltalog.TimestampNtz:
		var mul int64
		switch {
		case t == deltalog.Long && (k.base == kInt || k.base == kTimeMillis):
			return func(s *state, r int) error {
				v, err := s.int()
				if err != nil {
					return fail(err)
				}
				s.putInt64(int64(v), r, def, col)
				return nil
			}, nil
		case t == deltalog.TimestampNtz && k.base == kDate:
			const microsPerDay = 86_400_000_000
			return func(s *state, r int) error {
				v, err := s.int()
				if err != nil {
					return fail(err)
				}
				// Within Delta's date range, the day's midnight is within its timestamp
				// range (and v × 8.64e10 within int64).
				if v < deltalog.DateMinDays || v > deltalog.DateMaxDays {
					return fail(daysOutOfRange(int64(v)))
				}
				s.putInt64(int64(v)*microsPerDay, r, def, col)
				return nil
			}, nil
		case t == deltalog.Long && k.base == kTimeMillisMicros:
			return func(s *state, r int) error {
				v, err := s.int()
				if err != nil {
					return fail(err)
				}
				s.putInt64(int64(v)*1000, r, def, col)
				return nil
			}, nil
		case t == deltalog.Long && k.base == kTimeNanos,
			t == deltalog.TimestampNtz && k.base == kLocalTsNanos:
			// Delta keeps microseconds: the nanoseconds are cut to the earlier
			// microsecond (floor), before 1970 as after.
			return func(s *state, r int) error {
				v, err := s.long()
				if err != nil {
					return fail(err)
				}
				q := v / 1000
				if v%1000 < 0 {
					q--
				}
				if t == deltalog.TimestampNtz && (q < deltalog.TimestampMinMicros || q > deltalog.TimestampMaxMicros) {
					return fail(timestampOutOfRange(q, 1))
				}
				s.putInt64(q, r, def, col)
				return nil
			}, nil
		case t == deltalog.Timestamp && k.base == kZonedTs:
			return func(s *state, r int) error {
				b, err := s.span()
				if err != nil {
					return fail(err)
				}
				v, err := zonedMicros(b)
				if err != nil {
					return fail(err)
				}
				s.putInt64(v, r, def, col)
				return nil
			}, nil
		case t == deltalog.Long && (k.base == kLong || k.base == kTimeMicros),
			t == deltalog.Timestamp && k.base == kTsMicros,
			t == deltalog.TimestampNtz && k.base == kLocalTsMicros:
			mul = 1
		case t == deltalog.Timestamp && k.base == kTsMillis,
			t == deltalog.TimestampNtz && k.base == kLocalTsMillis:
			mul = 1000
		default:
			return bad()
		}
		if mul == 1 && t == deltalog.Long {
			return func(s *state, r int) error {
				v, err := s.long()
				if err != nil {
					return fail(err)
				}
				s.putInt64(v, r, def, col)
				return nil
			}, nil
		}
		// A timestamp: checked against Delta's range before it is scaled, so that the
		// product cannot overflow.
		lo, hi := deltalog.TimestampMinMicros/mul, deltalog.TimestampMaxMicros/mul
		return func(s *state, r int) error {
			v, err := s.long()
			if err != nil {
				return fail(err)
			}
			if v < lo || v > hi {
				return fail(timestampOutOfRange(v, mul))
			}
			s.putInt64(v*mul, r, def, col)
			return nil
		}, nil
	case deltalog.Float:
		if k.base != kFloat {
			return bad()
		}
		return func(s *state, r int) error {
			v, err := s.float()
			if err != nil {
				return fail(err)
			}
			s.putFloat(v, r, def, col)
			return nil
		}, nil
	case deltalog.Double:
		switch k.base {
		case kDouble:
			return func(s *state, r int) error {
				v, err := s.double()
				if err != nil {
					return fail(err)
				}
				s.putDouble(v, r, def, col)
				return nil
			}, nil
		case kFloat:
			return func(s *state, r int) error {
				v, err := s.float()
				if err != nil {
					return fail(err)
				}
				s.putDouble(float64(v), r, def, col)
				return nil
			}, nil
		case kInt:
			return func(s *state, r int) error {
				v, err := s.int()
				if err != nil {
					return fail(err)
				}
				s.putDouble(float64(v), r, def, col)
				return nil
			}, nil
		}
		return bad()
	case deltalog.String:
		switch k.base {
		case kString, kUUID:
			return func(s *state, r int) error {
				if err := s.putText(r, def, col); err != nil {
					return fail(err)
				}
				return nil
			}, nil
		case kEnum:
			syms := k.symbols
			n := int32(len(syms))
			return func(s *state, r int) error {
				i, err := s.int()
				if err != nil {
					return fail(err)
				}
				if i < 0 || i >= n {
					return fail(malformed("enum index %d out of range [0,%d)", i, n))
				}
				s.putByteArray(syms[i], r, def, col)
				return nil
			}, nil
		}
		return bad()
	case deltalog.Binary:
		switch k.base {
		case kBytes:
			return func(s *state, r int) error {
				if err := s.putString(r, def, col); err != nil {
					return fail(err)
				}
				return nil
			}, nil
		case kFixed:
			n := k.size
			return func(s *state, r int) error {
				b, err := s.fixed(n)
				if err != nil {
					return fail(err)
				}
				s.putBytes(b, r, def, col)
				return nil
			}, nil
		}
		return bad()
	}
	return bad()
}

// describe names a writer type with its logical type, for error messages.
func describe(w avro.Schema) string {
	w = deref(w)
	if name := connectNameOf(w); isConnectLogical(name) {
		return string(w.Type()) + "/" + name
	}
	if ls, ok := w.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		return string(w.Type()) + "/" + ls.Logical().String()
	}
	return string(w.Type())
}

// ---- decimals ----

var pow10 = func() [19]int64 {
	var p [19]int64
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func bigPow10(n int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// decOut writes unscaled values of decimal(p,s) the way deltawriter.ParquetSchema lays them
// out: INT32 for p ≤ 9, INT64 for p ≤ 18, else a big-endian two's-complement
// FIXED_LEN_BYTE_ARRAY of deltawriter.DecimalBytes(p) bytes.
type decOut struct {
	p, col, def, width int
	bound              *big.Int // 10^p
	path               string
}

func (d *decOut) exceeds() error {
	return withField(malformed("decimal value exceeds precision %d", d.p), d.path)
}

// emit appends v (already at the column's scale).
func (d *decOut) emit(s *state, r int, v int64) error {
	switch {
	case d.p <= 9:
		if v >= pow10[d.p] || v <= -pow10[d.p] {
			return d.exceeds()
		}
		s.putInt32(int32(v), r, d.def, d.col)
	case d.p <= 18:
		if v >= pow10[d.p] || v <= -pow10[d.p] {
			return d.exceeds()
		}
		s.putInt64(v, r, d.def, d.col)
	default: // |v| < 2^63 < 10^19 <= 10^p
		b := s.alloc(d.width)
		u := uint64(v)
		fill := byte(0)
		if v < 0 {
			fill = 0xff
		}
		for i := d.width - 1; i >= 0; i-- {
			if i >= d.width-8 {
				b[i] = byte(u)
				u >>= 8
			} else {
				b[i] = fill
			}
		}
		s.putFixedLenByteArray(b, r, d.def, d.col)
	}
	return nil
}

func (d *decOut) emitBig(s *state, r int, v *big.Int) error {
	if v.CmpAbs(d.bound) >= 0 {
		return d.exceeds()
	}
	if d.p <= 18 {
		return d.emit(s, r, v.Int64())
	}
	b := s.alloc(d.width)
	if v.Sign() >= 0 {
		v.FillBytes(b)
	} else {
		t := new(big.Int).Lsh(big.NewInt(1), uint(8*d.width))
		t.Add(t, v)
		t.FillBytes(b)
	}
	s.putFixedLenByteArray(b, r, d.def, d.col)
	return nil
}

// emitScaled appends v × 10^up.
func (d *decOut) emitScaled(s *state, r int, v int64, up int) error {
	if up == 0 {
		return d.emit(s, r, v)
	}
	if up < len(pow10) {
		m := pow10[up]
		if v <= math.MaxInt64/m && v >= math.MinInt64/m {
			return d.emit(s, r, v*m)
		}
	}
	if d.p <= 18 {
		return d.exceeds()
	}
	x := big.NewInt(v)
	return d.emitBig(s, r, x.Mul(x, bigPow10(up)))
}

// emitTwos appends the big-endian two's-complement unscaled value b × 10^up.
func (d *decOut) emitTwos(s *state, r int, b []byte, up int) error {
	for len(b) > 1 && ((b[0] == 0 && b[1]&0x80 == 0) || (b[0] == 0xff && b[1]&0x80 != 0)) {
		b = b[1:]
	}
	if len(b) <= 8 {
		var v int64
		if len(b) > 0 && b[0]&0x80 != 0 {
			v = -1
		}
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		return d.emitScaled(s, r, v, up)
	}
	if len(b) > 17 { // 2^128 > 10^38: beyond any precision
		return d.exceeds()
	}
	x := new(big.Int).SetBytes(b)
	if b[0]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if up > 0 {
		x.Mul(x, bigPow10(up))
	}
	return d.emitBig(s, r, x)
}

func decimalLeaf(k kind, t deltalog.DecimalType, path string, col, def int, bad func() (emitFn, error)) (emitFn, error) {
	d := &decOut{p: t.Precision, col: col, def: def, width: decimalBytes(t.Precision), bound: bigPow10(t.Precision), path: path}
	fail := func(err error) error { return withField(err, path) }
	switch k.base {
	case kDecimalBytes, kDecimalFixed:
		if t.Scale < k.scale || t.Precision-t.Scale < k.precision-k.scale {
			return bad()
		}
		up := t.Scale - k.scale
		if k.base == kDecimalFixed {
			n := k.size
			return func(s *state, r int) error {
				b, err := s.fixed(n)
				if err != nil {
					return fail(err)
				}
				return d.emitTwos(s, r, b, up)
			}, nil
		}
		return func(s *state, r int) error {
			b, err := s.span()
			if err != nil {
				return fail(err)
			}
			return d.emitTwos(s, r, b, up)
		}, nil
	case kInt:
		if t.Precision-t.Scale < 10 {
			return bad()
		}
		return func(s *state, r int) error {
			v, err := s.int()
			if err != nil {
				return fail(err)
			}
			return d.emitScaled(s, r, int64(v), t.Scale)
		}, nil
	case kLong:
		if t.Precision-t.Scale < 19 {
			return bad()
		}
		return func(s *state, r int) error {
			v, err := s.long()
			if err != nil {
				return fail(err)
			}
			return d.emitScaled(s, r, v, t.Scale)
		}, nil
	}
	return bad()
}

// decimalBytes is the FIXED_LEN_BYTE_ARRAY width deltawriter.ParquetSchema gives
// decimal(precision, _) for precision > 18 (deltawriter.DecimalBytes, Spark's
// minBytesForPrecision): the smallest n with 2^(8n-1) >= 10^precision. It is restated
// here so the hot path does not import the writer; a test keeps the two equal.
func decimalBytes(precision int) int {
	limit := bigPow10(precision)
	n := 1
	for new(big.Int).Lsh(big.NewInt(1), uint(8*n-1)).Cmp(limit) < 0 {
		n++
	}
	return n
}

// generated reports whether f is a generated column (delta.generationExpression; PROTOCOL.md,
// "Generated Columns"): its value is computed after decoding, so a missing field or a
// supplied null is not a NOT NULL violation here.
func generated(f *deltalog.StructField) bool {
	_, ok := f.Metadata[deltalog.MetaGenerationExpression]
	return ok
}
