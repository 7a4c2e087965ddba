package rowfill

import (
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// topColumn is a top-level column of the table schema: its field and the range of its
// leaf columns in the Parquet schema (Columns() order).
type topColumn struct {
	field       *deltalog.StructField
	first, n    int
	primitive   bool // field.Type is a deltalog.PrimitiveType or DecimalType: one leaf, one value per row
	maxDefLevel int  // of its single leaf when primitive (1: top-level fields are OPTIONAL)
}

// rowView is the values one record appended to the flush's column buffers: for leaf
// column i (parquet schema Columns() order), the entries of cols[i] from mark[i] on (in
// either form of package column: a dense column holds one word for the row, a
// levelled one its values with levels). Top-level columns are looked up by logical
// name, matched as Delta does (deltalog.NameKey).
//
// Levels: every top-level field is OPTIONAL (deltawriter.ParquetSchema), so a top-level
// primitive has repetition level 0 and definition level 1 when set, 0 when null; its
// value's column index is its leaf index.
type rowView struct {
	// writer is the record's writer schema (Delta model): which columns the record
	// supplies itself (a generated column it supplies is checked, not computed).
	writer *deltalog.StructType
	cols   []column.Column
	mark   []int
	// scratch holds, per leaf, the one value leaf returns for a dense column's row.
	scratch [][1]parquet.Value
	// spare holds, per leaf a fill sets (fillTargets), a levelled column that takes the
	// decoder's value of that leaf instead of the real column (swapSpares), so that the
	// decoder's NULL for a column the writer lacks does not turn a dense column levelled
	// before the fill sets its value.
	spare  []column.Column
	byName map[string]topColumn // deltalog.NameKey(logical name) → column
}

// newRowView indexes the top-level columns of schema in pq (its Parquet schema under
// column mapping mode cm). Errors: a top-level field that pq lacks.
func newRowView(schema *deltalog.StructType, cm deltalog.ColumnMappingMode, pq *parquet.Schema) (*rowView, error) {
	n := len(pq.Columns())
	r := &rowView{mark: make([]int, n), scratch: make([][1]parquet.Value, n), spare: make([]column.Column, n), byName: map[string]topColumn{}}
	first := map[string][2]int{} // physical name → first leaf, leaves
	i := 0
	for _, f := range pq.Fields() {
		n := leafCount(f)
		first[f.Name()] = [2]int{i, n}
		i += n
	}
	for _, f := range schema.Fields {
		rg, ok := first[f.PhysicalName(cm)]
		if !ok {
			return nil, fmt.Errorf("index column %q: the Parquet schema has no field %q", f.Name, f.PhysicalName(cm))
		}
		_, prim := f.Type.(deltalog.PrimitiveType)
		_, dec := f.Type.(deltalog.DecimalType)
		prim = prim || dec // a decimal is one leaf too
		r.byName[deltalog.NameKey(f.Name)] = topColumn{field: f, first: rg[0], n: rg[1], primitive: prim, maxDefLevel: 1}
	}
	return r, nil
}

func leafCount(n parquet.Node) int {
	if n.Leaf() {
		return 1
	}
	c := 0
	for _, f := range n.Fields() {
		c += leafCount(f)
	}
	return c
}

// begin marks the current end of every column of cols: the next record's row starts
// there. cols is used in place (the row's decode and fills append to its columns).
func (r *rowView) begin(cols []column.Column) {
	r.cols = cols
	for i := range cols {
		r.mark[i] = cols[i].Len()
	}
}

// drop removes the row's entries from every column (column.Column.Truncate), restoring
// their lengths to begin's; a column that turned levelled in the row stays levelled.
func (r *rowView) drop() {
	for i := range r.cols {
		r.cols[i].Truncate(r.mark[i])
	}
}

// swapSpares exchanges the columns of leaves with their spares (called around the
// decode: the decoder's values of these leaves go to the spares).
func (r *rowView) swapSpares(leaves []int) {
	for _, i := range leaves {
		r.cols[i], r.spare[i] = r.spare[i], r.cols[i]
	}
}

// clearSpares empties the spares of leaves (the decoder's values, which a fill replaces).
func (r *rowView) clearSpares(leaves []int) {
	for _, i := range leaves {
		r.spare[i].Truncate(0)
	}
}

// fillMissing gives a leaf of leaves that the fills left without a value for the row the
// NULL the decoder wrote into its spare (the fills set every such leaf of a row they
// accept, fillTargets: this keeps one entry a row whatever a fill does).
func (r *rowView) fillMissing(leaves []int) {
	for _, i := range leaves {
		if r.cols[i].Len() == r.mark[i] {
			r.cols[i].Append(parquet.NullValue().Level(0, 0, i))
		}
	}
}

// leaf returns this record's values of leaf column i (one per level entry, with levels
// and column index). For a dense column that is its one word as a value, materialised
// into a per-leaf scratch: valid until the next leaf(i) of the same leaf, and writing
// to it changes nothing (replace, setTop do).
func (r *rowView) leaf(i int) []parquet.Value {
	c := &r.cols[i]
	if !c.IsDense() {
		return c.Values[r.mark[i]:]
	}
	if c.Len() == r.mark[i] {
		return nil
	}
	r.scratch[i][0] = c.At(r.mark[i]) // a non-repeated leaf: one entry a row
	return r.scratch[i][:]
}

// replace replaces this record's values of leaf column i with vs; each value keeps its
// repetition and definition levels and gets column index i. A dense column stays dense
// when vs is one set value; anything else turns it levelled (column.Column.Append).
func (r *rowView) replace(i int, vs ...parquet.Value) {
	c := &r.cols[i]
	c.Truncate(r.mark[i])
	for _, v := range vs {
		c.Append(v.Level(int(v.RepetitionLevel()), int(v.DefinitionLevel()), i))
	}
}

// column returns the top-level column named name (logical name, Delta's matching).
func (r *rowView) column(name string) (topColumn, bool) {
	c, ok := r.byName[deltalog.NameKey(name)]
	return c, ok
}

// top returns this record's value of the top-level primitive column name (a null
// value IsNull), with its field; ok is false when the table has no such primitive column.
func (r *rowView) top(name string) (parquet.Value, deltalog.StructField, bool) {
	c, ok := r.column(name)
	if !ok || !c.primitive {
		return parquet.Value{}, deltalog.StructField{}, false
	}
	vs := r.leaf(c.first)
	if len(vs) != 1 {
		return parquet.Value{}, *c.field, false
	}
	return vs[0], *c.field, true
}

// setTop sets this record's value of the top-level primitive column name to v (v.IsNull:
// null); repetition level, definition level and column index are filled in. It returns
// an error when the table has no such primitive column.
func (r *rowView) setTop(name string, v parquet.Value) error {
	c, ok := r.column(name)
	if !ok || !c.primitive {
		return fmt.Errorf("set column %q: the table has no top-level primitive column of that name", name)
	}
	r.setColumn(c, v)
	return nil
}

// setColumn is setTop for a top-level primitive column c looked up before (column).
func (r *rowView) setColumn(c topColumn, v parquet.Value) {
	def := c.maxDefLevel
	if v.IsNull() {
		def = 0
	}
	col := &r.cols[c.first]
	col.Truncate(r.mark[c.first])
	col.Append(v.Level(0, def, c.first))
}

// leaves returns the leaf range [first, first+n) of the top-level column name of any type;
// n is 0 when the table has no such column.
func (r *rowView) leaves(name string) (first, n int) {
	c, ok := r.column(name)
	if !ok {
		return 0, 0
	}
	return c.first, c.n
}
