package parquetenc_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
)

// levelsTestSchema has a leaf of every kind the levels form holds, optional and
// required, and repeated leaves under a map and a list (maximum levels up to (1,3)).
var levelsTestSchema = parquet.NewSchema("t", parquet.Group{
	"i64": parquet.Optional(parquet.Leaf(parquet.Int64Type)),
	"i32": parquet.Optional(parquet.Leaf(parquet.Int32Type)),
	"b":   parquet.Optional(parquet.Leaf(parquet.BooleanType)),
	"f":   parquet.Optional(parquet.Leaf(parquet.FloatType)),
	"d":   parquet.Optional(parquet.Leaf(parquet.DoubleType)),
	"s":   parquet.Optional(parquet.String()),
	"req": parquet.Leaf(parquet.Int64Type),
	"st":  parquet.Optional(parquet.Group{"x": parquet.Optional(parquet.String())}),
	"m":   parquet.Optional(parquet.Map(parquet.Required(parquet.String()), parquet.Optional(parquet.String()))),
	"l":   parquet.Optional(parquet.List(parquet.Optional(parquet.String()))),
})

// levelsColumns returns n random rows of schema's leaves twice: levelled (one
// parquet.Value per entry) and in the levels form, entry for entry the same. A row is
// null (definition level 0) with probability nullP; a repeated leaf gets 0 to 3
// entries, some null, or an empty or null list or map; values are distinct (the
// levelled pass then encodes PLAIN, as the levels pass does).
func levelsColumns(schema *parquet.Schema, n int, nullP float64, rng *rand.Rand) ([]column.Column, []column.Column) {
	leaves := column.Leaves(schema)
	lev := make([]column.Column, len(leaves))
	typed := make([]column.Column, len(leaves))
	for i, l := range leaves {
		typed[i].ResetLevels(l)
	}
	value := func(l column.Leaf) (parquet.Value, uint64, []byte) {
		switch l.Kind {
		case parquet.Boolean:
			b := rng.IntN(2) == 1
			return parquet.BooleanValue(b), column.Bits(parquet.BooleanValue(b)), nil
		case parquet.Int32:
			v := parquet.Int32Value(rng.Int32() - math.MaxInt32/2)
			return v, column.Bits(v), nil
		case parquet.Int64:
			v := parquet.Int64Value(rng.Int64() - math.MaxInt64/2)
			return v, column.Bits(v), nil
		case parquet.Float:
			v := parquet.FloatValue(float32(rng.NormFloat64()))
			return v, column.Bits(v), nil
		case parquet.Double:
			v := parquet.DoubleValue(rng.NormFloat64())
			return v, column.Bits(v), nil
		default:
			b := fmt.Appendf(nil, "v%d-%s", rng.Int64(), strings.Repeat("x", rng.IntN(40)))
			return parquet.ByteArrayValue(b), 0, b
		}
	}
	put := func(i int, l column.Leaf, rep, def int) {
		if def < l.MaxDef {
			lev[i].Values = append(lev[i].Values, parquet.NullValue().Level(rep, def, i))
			typed[i].AppendNullsAt(1, rep, def)
			return
		}
		v, w, b := value(l)
		lev[i].Values = append(lev[i].Values, v.Level(rep, def, i))
		if l.Kind == parquet.ByteArray {
			typed[i].AppendBytesAt(rep, b)
		} else {
			typed[i].AppendWordAt(rep, w)
		}
	}
	for range n {
		for i, l := range leaves {
			switch {
			case l.MaxRep == 0 && rng.Float64() < nullP && l.MaxDef > 0:
				put(i, l, 0, rng.IntN(l.MaxDef)) // null at any ancestor
			case l.MaxRep == 0:
				put(i, l, 0, l.MaxDef)
			case i > 0 && leaves[i-1].MaxRep > 0 && leaves[i-1].MaxDef == l.MaxDef-1:
				// a map's value: one entry per key entry, at the key's levels
				for _, k := range lev[i-1].Values[len(lev[i].Values):] {
					r, d := int(k.RepetitionLevel()), int(k.DefinitionLevel())
					if d == l.MaxDef-1 && rng.IntN(3) > 0 {
						d = l.MaxDef // set value
					}
					if d < l.MaxDef-1 {
						put(i, l, r, d) // the map is null or empty
						continue
					}
					put(i, l, r, d)
				}
			default:
				// a map's key or a list's element: null, empty or up to 3 entries
				switch k := rng.IntN(6); {
				case k == 0:
					put(i, l, 0, l.MaxDef-3+btoi(leaves[i].MaxDef == 2)) // null
				case k == 1:
					put(i, l, 0, l.MaxDef-2+btoi(leaves[i].MaxDef == 2)) // empty
				default:
					for e := range k - 1 {
						def := l.MaxDef
						if l.MaxDef == 3 && rng.IntN(4) == 0 {
							def = l.MaxDef - 1 // a null element of a list
						}
						put(i, l, min(e, 1)*l.MaxRep, def)
					}
				}
			}
		}
	}
	return lev, typed
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The proof of the levels pass: for random rows of every kind of leaf (optional and
// required, nulls at every definition level, maps and lists with null, empty and
// several entries), with pages of one row up to the default target and two codecs, the
// file encoded from columns in the levels form is byte for byte the file the levelled
// pass encodes from the same values (PLAIN), with the same summaries; and a Writer
// calling a yield writes the same row groups.
func TestLevelsSameBytesAsLevelled(t *testing.T) {
	defer func(p int) { *parquetenc.PageTargetBytes = p }(*parquetenc.PageTargetBytes)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		rows       int
		nullP      float64
		pageTarget int
	}{{1, 0.5, 1 << 20}, {1_000, 0, 1 << 20}, {3_000, 0.3, 1 << 20}, {3_000, 0.9, 1 << 10}, {300, 0.3, 1}, {5_000, 0.99, 256}} {
		*parquetenc.PageTargetBytes = c.pageTarget
		lev, typed := levelsColumns(levelsTestSchema, c.rows, c.nullP, rng)
		for _, codec := range []compress.Codec{parquetenc.Snappy(), &parquet.Uncompressed} {
			name := fmt.Sprintf("%d-rows/nulls-%v/page-%d/%s", c.rows, c.nullP, c.pageTarget, codec)
			want, wantSums, err := parquetenc.EncodeWith(levelsTestSchema, lev, c.rows, codec, 0)
			if err != nil {
				t.Fatalf("%s: levelled: %v", name, err)
			}
			got, sums, err := parquetenc.EncodeWith(levelsTestSchema, typed, c.rows, codec, 0)
			if err != nil {
				t.Fatalf("%s: levels form: %v", name, err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("%s: levels-form file of %d bytes differs from the levelled one of %d at byte %d", name, len(got.Bytes()), len(want.Bytes()), firstDiff(got.Bytes(), want.Bytes()))
			}
			if !reflect.DeepEqual(sums, wantSums) {
				t.Fatalf("%s: levels-form summaries %+v, levelled %+v", name, sums, wantSums)
			}
			if dict, _ := footerStats(t, want.Bytes()); dict["s"] || dict["i64"] {
				t.Fatalf("%s: the levelled pass chose a dictionary: the case does not compare PLAIN passes", name)
			}
			want.Release()
			got.Release()
			// entries read back through At are the levelled values
			for i := range typed {
				for j := range typed[i].Len() {
					if g, w := typed[i].At(j), lev[i].Values[j]; !parquet.Equal(g, w) || g.IsNull() != w.IsNull() ||
						g.RepetitionLevel() != w.RepetitionLevel() || g.DefinitionLevel() != w.DefinitionLevel() || g.Column() != w.Column() {
						t.Fatalf("%s: column %d entry %d: At %v (r%d d%d c%d), levelled %v (r%d d%d c%d)", name, i, j,
							g, g.RepetitionLevel(), g.DefinitionLevel(), g.Column(), w, w.RepetitionLevel(), w.DefinitionLevel(), w.Column())
					}
				}
			}
		}
		// two row groups through a Writer, with and without a yield, and with the page
		// target set on the Writer rather than the package
		var plain, yielded, targeted bytes.Buffer
		yields := 0
		for _, out := range []*bytes.Buffer{&plain, &yielded, &targeted} {
			w, err := parquetenc.NewWriter(out, levelsTestSchema, parquetenc.Snappy())
			if err != nil {
				t.Fatal(err)
			}
			switch out {
			case &yielded:
				w.SetYield(func() { yields++ })
			case &targeted:
				*parquetenc.PageTargetBytes = 1 << 20
				w.SetPageTarget(c.pageTarget)
			}
			for range 2 {
				if _, err := w.WriteRowGroup(typed, c.rows); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(plain.Bytes(), yielded.Bytes()) {
			t.Fatalf("%d rows: the file written with a yield differs at byte %d", c.rows, firstDiff(plain.Bytes(), yielded.Bytes()))
		}
		if !bytes.Equal(plain.Bytes(), targeted.Bytes()) {
			t.Fatalf("%d rows: the file written with Writer.SetPageTarget(%d) differs at byte %d", c.rows, c.pageTarget, firstDiff(plain.Bytes(), targeted.Bytes()))
		}
		if pages := pageCount(t, yielded.Bytes()); yields != pages {
			t.Errorf("%d rows: %d yields for %d pages", c.rows, yields, pages)
		}
	}
}

// pageCount is the number of data pages of a file's row groups (from the footer's
// encoding statistics).
func pageCount(t *testing.T, data []byte) int {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			for _, s := range c.MetaData.EncodingStats {
				n += int(s.Count)
			}
		}
	}
	return n
}

// A column in the levels form that does not fit the schema's leaf or its rows is
// refused, naming the column.
func TestLevelsErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	_, good := levelsColumns(levelsTestSchema, 10, 0.3, rng)
	i64l, _ := column.LeafOf(levelsTestSchema, "i64")
	i32l, _ := column.LeafOf(levelsTestSchema, "i32")
	i64 := i64l.Index
	for _, c := range []struct {
		name  string
		bad   func() column.Column
		rows  int
		wantE string
	}{
		{"another leaf", func() column.Column { var c column.Column; c.ResetLevels(i32l); c.AppendNullsAt(10, 0, 0); return c }, 10, "column i64: levels form of a INT32 leaf for a INT64 column"},
		{"too few rows", func() column.Column { var c column.Column; c.ResetLevels(i64l); c.AppendNullsAt(9, 0, 0); return c }, 10, "column i64 has 9 rows, want 10"},
		{"a value missing", func() column.Column {
			c := good[i64]
			c.Dense = c.Dense[:len(c.Dense)-1]
			return c
		}, 10, "column i64 value"},
		{"a value too many", func() column.Column {
			c := good[i64]
			c.Dense = append(c.Dense[:len(c.Dense):len(c.Dense)], 7)
			return c
		}, 10, "column i64: "},
	} {
		cols := append([]column.Column(nil), good...)
		cols[i64] = c.bad()
		_, _, err := parquetenc.Encode(levelsTestSchema, cols, c.rows, parquetenc.Snappy())
		if err == nil || !strings.HasPrefix(err.Error(), c.wantE) {
			t.Errorf("%s: error %v, want one starting %q", c.name, err, c.wantE)
		}
	}
}
