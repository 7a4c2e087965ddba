package keyindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// keyCol is one key (or the sequence) column of the table.
type keyCol struct {
	name  string // logical, as the schema spells it
	phys  string // the Parquet column name (column mapping)
	id    int    // the Parquet field id under column mapping mode id, else 0
	typ   deltalog.DataType
	part  bool // a partition column: its value is in add.partitionValues
	class class
	scale int // decimal
}

// layout is the key and sequence columns of the table at one snapshot.
type layout struct {
	key []keyCol
	seq *keyCol
	loc *time.Location // legacy timestamp partition values
}

func newLayout(snap *deltawriter.Snapshot, spec Spec, loc *time.Location) (*layout, error) {
	if err := CheckKeyColumns(snap.Schema, spec.Key); err != nil {
		return nil, err
	}
	part := map[string]bool{}
	for _, c := range snap.Metadata.PartitionColumns {
		part[deltalog.NameKey(c)] = true
	}
	col := func(name string) keyCol {
		f := snap.Schema.FieldByKey(name)
		c := keyCol{name: f.Name, phys: f.PhysicalName(snap.ColumnMapping), typ: f.Type,
			part: part[deltalog.NameKey(f.Name)], class: keyClass(f.Type)}
		if snap.ColumnMapping == deltalog.ColumnMappingID {
			c.id, _ = f.FieldID()
		}
		if d, ok := f.Type.(deltalog.DecimalType); ok {
			c.scale = d.Scale
		}
		return c
	}
	l := &layout{loc: loc}
	for _, n := range spec.Key {
		l.key = append(l.key, col(n))
	}
	if spec.Sequence != "" {
		if err := CheckSequenceColumn(snap.Schema, spec.Sequence); err != nil {
			return nil, err
		}
		c := col(spec.Sequence)
		l.seq = &c
	}
	return l, nil
}

// sameEncoding reports whether every key encodes, and every sequence reads, the same
// under o as under l.
func (l *layout) sameEncoding(o *layout) bool {
	if len(l.key) != len(o.key) || (l.seq == nil) != (o.seq == nil) {
		return false
	}
	for i, c := range l.key {
		if c.class != o.key[i].class || c.scale != o.key[i].scale {
			return false
		}
	}
	return l.seq == nil || l.seq.class == o.seq.class
}

// row is one live row of a file: its canonical key (valid until the batch's callback
// returns), position and sequence.
type row struct {
	key []byte
	row uint32
	seq int64
}

const batchRows = 1024

// readFile reads the key and sequence columns of the data file of add and calls fn with
// its live rows in batches, and gone (when not nil) with the rows its deletion vector
// deletes (a NULL key aside). It returns the rows the file's deletion vector deletes (nil
// for none) and the number of live rows skipped for a NULL key value.
func readFile(ctx context.Context, st storage.Store, lay *layout, add deltalog.Add, fn, gone func([]row)) (*roaring.Bitmap, int64, error) {
	dv, err := deltawriter.ReadDeletionVector(ctx, st, add.DeletionVector)
	if err != nil {
		return nil, 0, fmt.Errorf("read key columns of %s: %w", add.Path, err)
	}
	f, err := openFile(ctx, st, add)
	if err != nil {
		return nil, 0, fmt.Errorf("read key columns of %s: %w", add.Path, err)
	}
	if f.NumRows() > math.MaxUint32 {
		return nil, 0, fmt.Errorf("read key columns of %s: %d rows, more than 2^32", add.Path, f.NumRows())
	}
	cols := make([]fileCol, len(lay.key))
	allNull := false
	for i, c := range lay.key {
		if cols[i], err = openCol(f, c, add, lay.loc, false); err != nil {
			return nil, 0, fmt.Errorf("read key columns of %s: %w", add.Path, err)
		}
		allNull = allNull || cols[i].null
	}
	var seq fileCol
	if lay.seq != nil {
		if seq, err = openCol(f, *lay.seq, add, lay.loc, true); err != nil {
			return nil, 0, fmt.Errorf("read key columns of %s: %w", add.Path, err)
		}
	}
	var del *roaring.Bitmap
	if dv.Cardinality() > 0 {
		del = roaring.New()
	}
	var nulls int64
	batch := make([]row, 0, batchRows)
	arena := make([]byte, 0, 64*batchRows)
	var gbatch []row // deleted rows for gone; their keys are in arena too
	flush := func() {
		if len(batch) > 0 {
			fn(batch)
		}
		if len(gbatch) > 0 {
			gone(gbatch)
		}
		batch, gbatch, arena = batch[:0], gbatch[:0], arena[:0]
	}
	base := int64(0)
	for _, rg := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		n := rg.NumRows()
		curs := make([]*cursor, len(cols))
		for i, c := range cols {
			if c.leaf >= 0 && !allNull {
				curs[i] = &cursor{pages: rg.ColumnChunks()[c.leaf].Pages()}
			}
		}
		var seqCur *cursor
		if lay.seq != nil && seq.leaf >= 0 {
			seqCur = &cursor{pages: rg.ColumnChunks()[seq.leaf].Pages()}
		}
		err := func() error {
			defer func() {
				for _, c := range curs {
					c.close()
				}
				seqCur.close()
			}()
			for r := range n {
				idx := uint64(base + r)
				deleted := dv.Contains(idx)
				if deleted {
					del.Add(uint32(idx))
				}
				skip := deleted && gone == nil // a deleted row's key is read only for gone
				start := len(arena)
				null := allNull
				for i, c := range cols {
					if curs[i] == nil {
						if !null {
							arena = append(arena, c.constant...)
						}
						continue
					}
					v, err := curs[i].next()
					if err != nil {
						return fmt.Errorf("column %s: %w", lay.key[i].name, err)
					}
					if null || skip {
						continue
					}
					if arena, err = c.conv.append(arena, v); errors.Is(err, ErrNullKey) {
						null = true
					} else if err != nil {
						return fmt.Errorf("column %s row %d: %w", lay.key[i].name, idx, err)
					}
				}
				s := int64(0)
				switch {
				case lay.seq == nil:
				case seqCur == nil:
					s = NullSequence
				default:
					v, err := seqCur.next()
					if err != nil {
						return fmt.Errorf("column %s: %w", lay.seq.name, err)
					}
					sv, ok, err := seq.conv.sequence(v)
					if err != nil {
						return fmt.Errorf("column %s row %d: %w", lay.seq.name, idx, err)
					}
					s = NullSequence
					if ok {
						s = sv
					}
				}
				if deleted {
					if !skip && !null {
						gbatch = append(gbatch, row{key: arena[start:len(arena):len(arena)], row: uint32(idx), seq: s})
						if len(gbatch) == batchRows || cap(arena)-len(arena) < 256 {
							flush()
						}
					} else {
						arena = arena[:start]
					}
					continue
				}
				if null {
					arena = arena[:start]
					nulls++
					continue
				}
				batch = append(batch, row{key: arena[start:len(arena):len(arena)], row: uint32(idx), seq: s})
				if len(batch) == batchRows || cap(arena)-len(arena) < 256 {
					flush()
				}
			}
			return nil
		}()
		if err != nil {
			return nil, 0, fmt.Errorf("read key columns of %s: %w", add.Path, err)
		}
		base += n
	}
	flush()
	return del, nulls, nil
}

// openFile opens the Parquet footer of add's file, reading with ranged requests when the
// store has them (storage.ObjectReader), else the whole file.
func openFile(ctx context.Context, st storage.Store, add deltalog.Add) (*parquet.File, error) {
	rel := deltalog.CanonicalPath(add.Path)
	var r io.ReaderAt
	size := add.Size
	if rg, ok := st.(storage.RangeGetter); ok && size > 0 {
		r = storage.NewObjectReader(ctx, rg, rel, size)
	} else {
		data, err := st.Get(ctx, rel)
		if err != nil {
			return nil, err
		}
		r, size = bytes.NewReader(data), int64(len(data))
	}
	return parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
}

// fileCol is where one key column's values come from in one file: leaf column index leaf
// converted by conv, or (leaf < 0) the constant encoding of its partition value, or
// null (the column is absent from the file and not a partition column, or its partition
// value is null).
type fileCol struct {
	leaf     int
	conv     conv
	constant []byte
	null     bool
}

func openCol(f *parquet.File, c keyCol, add deltalog.Add, loc *time.Location, seq bool) (fileCol, error) {
	var node parquet.Field
	for _, fld := range f.Schema().Fields() {
		if c.id != 0 && fld.ID() == c.id || c.id == 0 && fld.Name() == c.phys {
			node = fld
			break
		}
	}
	if node == nil && c.id != 0 { // a file written before ids were assigned
		for _, fld := range f.Schema().Fields() {
			if fld.Name() == c.phys {
				node = fld
			}
		}
	}
	if node == nil {
		if c.part && !seq {
			b, null, err := partitionKey(c, add, loc)
			return fileCol{leaf: -1, constant: b, null: null}, err
		}
		return fileCol{leaf: -1, null: true}, nil
	}
	if !node.Leaf() || node.Repeated() {
		return fileCol{}, fmt.Errorf("column %s is not a top-level primitive column in the file (%v)", c.name, node.Type())
	}
	lc, ok := f.Schema().Lookup(node.Name())
	if !ok {
		return fileCol{}, fmt.Errorf("column %s: no leaf %q in the file", c.name, node.Name())
	}
	cv, err := newConv(c.typ, node, seq)
	if err != nil {
		return fileCol{}, fmt.Errorf("column %s: %w", c.name, err)
	}
	return fileCol{leaf: lc.ColumnIndex, conv: cv}, nil
}

// partitionKey encodes the key column c's value from add.partitionValues (PROTOCOL.md,
// "Partition Value Serialization"); null reports a null value (absent, null or "").
func partitionKey(c keyCol, add deltalog.Add, loc *time.Location) (enc []byte, null bool, err error) {
	pv, ok := add.PartitionValues[c.phys]
	if !ok {
		for k, v := range add.PartitionValues {
			if deltalog.NameKey(k) == deltalog.NameKey(c.phys) || deltalog.NameKey(k) == deltalog.NameKey(c.name) {
				pv, ok = v, true
				break
			}
		}
	}
	if !ok || pv == nil || *pv == "" {
		return nil, true, nil
	}
	s := *pv
	var v parquet.Value
	switch c.class {
	case classInt:
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("partition value %s=%q: %w", c.name, s, err)
		}
		v = parquet.Int64Value(x)
	case classBool:
		b, err := strconv.ParseBool(strings.ToLower(s))
		if err != nil {
			return nil, false, fmt.Errorf("partition value %s=%q: %w", c.name, s, err)
		}
		v = parquet.BooleanValue(b)
	case classDate:
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return nil, false, fmt.Errorf("partition value %s=%q: %w", c.name, s, err)
		}
		v = parquet.Int32Value(int32(t.Unix() / 86400))
	case classMicros:
		l := loc
		if c.typ == deltalog.TimestampNtz {
			l = time.UTC // wall-clock values: no zone
		}
		us, err := deltawriter.ParsePartitionTimestamp(s, l)
		if err != nil {
			return nil, false, fmt.Errorf("partition value %s: %w", c.name, err)
		}
		v = parquet.Int64Value(us)
	case classDecimal:
		u, err := parseDecimal(s, c.scale)
		if err != nil {
			return nil, false, fmt.Errorf("partition value %s=%q: %w", c.name, s, err)
		}
		var w [16]byte
		if u.Sign() < 0 {
			u.Add(u, new(big.Int).Lsh(big.NewInt(1), 128))
		}
		u.FillBytes(w[:])
		v = parquet.FixedLenByteArrayValue(w[:])
	case classBytes:
		v = parquet.ByteArrayValue([]byte(s))
	}
	cv := conv{cls: c.class, mulMicros: 1, divMicros: 1, typ: c.typ}
	enc, err = cv.append(nil, v)
	return enc, false, err
}

// parseDecimal parses a plain decimal string ("-12.50") into its unscaled value at scale.
func parseDecimal(s string, scale int) (*big.Int, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > scale {
		if strings.TrimRight(frac[scale:], "0") != "" {
			return nil, fmt.Errorf("more than %d fraction digits", scale)
		}
		frac = frac[:scale]
	}
	digits := whole + frac + strings.Repeat("0", scale-len(frac))
	u, ok := new(big.Int).SetString(digits, 10)
	if !ok || strings.ContainsAny(digits, "+-") {
		return nil, fmt.Errorf("not a decimal number")
	}
	if neg {
		u.Neg(u)
	}
	if u.BitLen() > 127 {
		return nil, fmt.Errorf("does not fit 128 bits")
	}
	return u, nil
}

// cursor walks the values of one column chunk across its pages. A value read stays valid
// until the cursor moves to the next page.
type cursor struct {
	pages parquet.Pages
	page  parquet.Page
	vals  []parquet.Value
	i     int
}

func (c *cursor) next() (parquet.Value, error) {
	for c.i >= len(c.vals) {
		if c.page != nil {
			parquet.Release(c.page)
			c.page = nil
		}
		p, err := c.pages.ReadPage()
		if err == io.EOF {
			return parquet.Value{}, fmt.Errorf("fewer values than rows")
		}
		if err != nil {
			return parquet.Value{}, err
		}
		c.page = p
		n := int(p.NumValues())
		if cap(c.vals) < n {
			c.vals = make([]parquet.Value, n)
		}
		c.vals, c.i = c.vals[:n], 0
		vr := p.Values()
		k := 0
		for k < n {
			m, err := vr.ReadValues(c.vals[k:])
			k += m
			if err == io.EOF {
				break
			}
			if err != nil {
				return parquet.Value{}, err
			}
			if m == 0 {
				break
			}
		}
		c.vals = c.vals[:k]
	}
	v := c.vals[c.i]
	c.i++
	return v, nil
}

func (c *cursor) close() {
	if c == nil {
		return
	}
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	_ = c.pages.Close()
}
