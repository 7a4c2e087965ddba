package column

// KeepRows drops from c every row whose keep entry is false, in place, keeping the others
// in order: keep has one entry per row of c (a row is one dense entry, or the levelled
// entries from one at repetition level 0 to the next). Dropped levelled values are
// cleared so that they keep no bytes alive; a dense BYTE_ARRAY column moves its kept
// values' bytes to the front of Bytes. A levelled column's values that alias Bytes keep
// aliasing it (nothing is moved there). It panics when keep does not have one entry per
// row.
func (c *Column) KeepRows(keep []bool) {
	c.notLevels("KeepRows")
	if c.dense {
		c.keepDense(keep)
		return
	}
	w, row := 0, -1
	for _, v := range c.Values {
		if v.RepetitionLevel() == 0 {
			row++
		}
		if keep[row] {
			c.Values[w] = v
			w++
		}
	}
	if row != len(keep)-1 {
		panic("column: KeepRows: keep has one entry per row")
	}
	clear(c.Values[w:])
	c.Values = c.Values[:w]
}

// keepDense is KeepRows on the dense form.
func (c *Column) keepDense(keep []bool) {
	if len(keep) != len(c.Dense) {
		panic("column: KeepRows: keep has one entry per row")
	}
	if !c.leaf.bytes() {
		w := 0
		for j, k := range keep {
			if k {
				c.Dense[w] = c.Dense[j]
				w++
			}
		}
		c.Dense = c.Dense[:w]
		return
	}
	w, end := 0, uint64(0)
	var start uint64
	for j, k := range keep {
		next := c.Dense[j]
		if k {
			n := next - start
			copy(c.Bytes[end:end+n], c.Bytes[start:next])
			end += n
			c.Dense[w] = end
			w++
		}
		start = next
	}
	c.Dense, c.Bytes = c.Dense[:w], c.Bytes[:end]
}
