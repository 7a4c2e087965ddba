package deltawriter

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
)

// Per-file statistics (PROTOCOL.md, "Per-file Statistics"), computed
// from the columns handed to WriteColumns or WriteDataFile, levelled or dense (never from
// the Parquet footer: its decimal min/max on FIXED_LEN_BYTE_ARRAY are wrong in parquet-go
// v0.32.0).
//
//   - numRecords always; nullCount for every indexed leaf (a null parent struct counts as
//     a null leaf) and for arrays and maps (rows where the array/map itself is null);
//   - minValues/maxValues for numeric, date, timestamp, timestamp_ntz, string and decimal
//     leaves outside arrays and maps; omitted for all-null columns and for floating
//     columns holding NaN or ±Inf;
//   - strings truncated to delta.dataSkippingStringPrefixLength (32) characters, max
//     with a tie-breaker; timestamps truncated to ms ("…T…:…:….SSSZ" / no zone for ntz);
//     decimals as exact JSON numbers with their scale;
//   - the first delta.dataSkippingNumIndexedCols (32, -1 = all) leaves in schema order,
//     or exactly delta.dataSkippingStatsColumns; keys are physical names.

type statsConfig struct {
	numIndexed   int64 // -1 = all
	statsColumns map[string]bool
	prefixLen    int
}

func newStatsConfig(conf map[string]string) (statsConfig, error) {
	m := &deltalog.Metadata{Configuration: conf}
	c := statsConfig{}
	var err error
	if c.numIndexed, err = m.IntProperty(deltalog.PropNumIndexedCols, 32); err != nil {
		return c, err
	}
	pl, err := m.IntProperty(deltalog.PropStringPrefixLength, 32)
	if err != nil {
		return c, err
	}
	c.prefixLen = int(pl)
	if v := strings.TrimSpace(conf[deltalog.PropStatsColumns]); v != "" {
		c.statsColumns = map[string]bool{}
		for _, col := range strings.Split(v, ",") {
			col = strings.ReplaceAll(strings.TrimSpace(col), "`", "")
			c.statsColumns[deltalog.NameKey(col)] = true
		}
	}
	return c, nil
}

// ordered is a JSON object that keeps its keys in insertion (schema) order.
type ordered []kv

type kv struct {
	k string
	v any
}

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

type statsBuilder struct {
	schema  *parquet.Schema
	cols    []column.Column
	sums    []parquetenc.Summary // per leaf column, from the encode pass
	numRows int
	cfg     statsConfig
	mode    deltalog.ColumnMappingMode
	indexed int64 // leaves counted so far against numIndexed
	// partition holds the lower-cased logical partition column names: they get no stats
	// (their values are in add.partitionValues) and do not count against numIndexed.
	partition map[string]bool
	// acc, when set, holds the leaves' statistics merged over the row groups of a
	// streamed file (DataFileWriter) and replaces cols and sums.
	acc []leafAcc
}

// statsFromSummaries returns the stats JSON from the per-column summaries of the encode
// pass (sums[i] for leaf column i); cols is read only for the values sums index and the
// null rows of arrays and maps.
func statsFromSummaries(schema *parquet.Schema, cols []column.Column, sums []parquetenc.Summary, numRows int, opts FileOptions) (string, error) {
	cfg, err := newStatsConfig(opts.Configuration)
	if err != nil {
		return "", err
	}
	mode := opts.ColumnMapping
	if mode == "" {
		mode = deltalog.ColumnMappingNone
	}
	b := &statsBuilder{schema: schema, cols: cols, sums: sums, numRows: numRows, cfg: cfg, mode: mode, partition: map[string]bool{}}
	return b.build(opts)
}

// build renders the stats JSON of the builder's file.
func (b *statsBuilder) build(opts FileOptions) (string, error) {
	numRows := b.numRows
	for _, c := range opts.PartitionColumns {
		b.partition[deltalog.NameKey(c)] = true
	}
	mins, maxs, nulls, err := b.structStats(opts.Schema, nil, "", 0)
	if err != nil {
		return "", err
	}
	doc := ordered{{"numRecords", numRows}, {"minValues", mins}, {"maxValues", maxs}, {"nullCount", nulls}}
	out, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encode stats: %w", err)
	}
	return string(out), nil
}

// structStats collects stats for the fields of st. phys is the physical path of st,
// logical its logical dotted path, def the definition level at which st is present.
func (b *statsBuilder) structStats(st *deltalog.StructType, phys []string, logical string, def int) (mins, maxs, nulls ordered, err error) {
	mins, maxs, nulls = ordered{}, ordered{}, ordered{}
	for _, f := range st.Fields {
		if logical == "" && b.partition[deltalog.NameKey(f.Name)] {
			continue
		}
		name := f.PhysicalName(b.mode)
		path := append(append([]string(nil), phys...), name)
		lpath := f.Name
		if logical != "" {
			lpath = logical + "." + f.Name
		}
		fdef := def + 1 // every field of an ingestd data file is optional (ParquetSchema)
		if n := b.node(path); n != nil && !n.Optional() {
			fdef = def
		}
		if sub, ok := f.Type.(*deltalog.StructType); ok {
			mi, ma, nu, err := b.structStats(sub, path, lpath, fdef)
			if err != nil {
				return nil, nil, nil, err
			}
			if len(mi) > 0 {
				mins = append(mins, kv{name, mi})
			}
			if len(ma) > 0 {
				maxs = append(maxs, kv{name, ma})
			}
			if len(nu) > 0 {
				nulls = append(nulls, kv{name, nu})
			}
			continue
		}
		if !b.wanted(lpath) {
			continue
		}
		col, ok := b.firstLeaf(path)
		if !ok { // column not in the file: all null
			nulls = append(nulls, kv{name, b.numRows})
			continue
		}
		switch f.Type.(type) {
		case *deltalog.ArrayType, *deltalog.MapType:
			nulls = append(nulls, kv{name, b.countNullRows(col, fdef)})
			continue
		}
		leaf, _ := b.schema.Lookup(path...)
		if leaf.MaxRepetitionLevel != 0 {
			continue
		}
		var nc int
		var lo, hi any
		if b.acc != nil {
			nc, lo, hi = b.accStats(f.Type, &b.acc[leaf.ColumnIndex])
		} else {
			nc, lo, hi = b.leafStats(f.Type, &b.cols[leaf.ColumnIndex], b.sums[leaf.ColumnIndex])
		}
		nulls = append(nulls, kv{name, nc})
		if lo != nil && hi != nil {
			mins = append(mins, kv{name, lo})
			maxs = append(maxs, kv{name, hi})
		}
	}
	return mins, maxs, nulls, nil
}

// wanted reports whether a non-struct column is indexed, counting it against
// delta.dataSkippingNumIndexedCols when no explicit stats column list is set.
func (b *statsBuilder) wanted(logical string) bool {
	if b.cfg.statsColumns != nil {
		l := deltalog.NameKey(logical)
		for {
			if b.cfg.statsColumns[l] {
				return true
			}
			i := strings.LastIndexByte(l, '.')
			if i < 0 {
				return false
			}
			l = l[:i]
		}
	}
	b.indexed++
	return b.cfg.numIndexed < 0 || b.indexed <= b.cfg.numIndexed
}

// node returns the Parquet node at path, or nil.
func (b *statsBuilder) node(path []string) parquet.Node {
	var n parquet.Node = b.schema
	for _, p := range path {
		var next parquet.Node
		for _, f := range n.Fields() {
			if f.Name() == p {
				next = f
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// firstLeaf returns the index of the first leaf column at or under path.
func (b *statsBuilder) firstLeaf(path []string) (int, bool) {
	for i, c := range b.schema.Columns() {
		if len(c) >= len(path) && equalStrings(c[:len(path)], path) {
			return i, true
		}
	}
	return 0, false
}

// countNullRows counts rows whose value at definition level def is null, looking at the
// first value of each row in column col (a dense column has every row at its leaf's
// maximum definition level).
func (b *statsBuilder) countNullRows(col, def int) int {
	if b.acc != nil {
		n := 0
		for d, rows := range b.acc[col].rowDefs {
			if d < def {
				n += rows
			}
		}
		return n
	}
	c := &b.cols[col]
	if c.IsDense() {
		if c.Leaf().MaxDef < def {
			return c.Len()
		}
		return 0
	}
	n := 0
	for _, v := range c.Values {
		if v.RepetitionLevel() == 0 && v.DefinitionLevel() < def {
			n++
		}
	}
	return n
}

// leafStats returns the null count and, when defined, the JSON-ready min and max of a
// non-repeated leaf column from its summary s (c is the column, whose entries s.Lo and
// s.Hi index). Min/max exist for numeric, date, timestamp, string and decimal
// columns, not for boolean and binary ones, nor for all-null columns or floating
// columns holding NaN or ±Inf.
func (b *statsBuilder) leafStats(t deltalog.DataType, c *column.Column, s parquetenc.Summary) (int, any, any) {
	if !orderedType(t) || !s.HasBounds || s.NonFinite {
		return s.Nulls, nil, nil
	}
	return b.bounds(t, s.Nulls, c.At(s.Lo), c.At(s.Hi))
}

// accStats is leafStats for a leaf's statistics merged over row groups.
func (b *statsBuilder) accStats(t deltalog.DataType, a *leafAcc) (int, any, any) {
	if !orderedType(t) || !a.has || a.nonFinite {
		return a.nulls, nil, nil
	}
	return b.bounds(t, a.nulls, a.lo, a.hi)
}

// bounds renders the min lo and max hi of a leaf of nulls nulls.
func (b *statsBuilder) bounds(t deltalog.DataType, nulls int, lo, hi parquet.Value) (int, any, any) {
	mn, mx := b.format(t, lo, false), b.format(t, hi, true)
	if mn == nil || mx == nil {
		return nulls, nil, nil
	}
	return nulls, mn, mx
}

// orderedType reports whether a leaf of type t gets a min and max in add.stats.
func orderedType(t deltalog.DataType) bool {
	ordered := false
	switch t := t.(type) {
	case deltalog.PrimitiveType:
		switch t {
		case deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Date, deltalog.Long, deltalog.Timestamp,
			deltalog.TimestampNtz, deltalog.Float, deltalog.Double, deltalog.String:
			ordered = true
		}
	case deltalog.DecimalType:
		ordered = true
	}
	return ordered
}

// format renders a min (isMax false) or max value for stats JSON, or nil when it has
// no valid representation.
func (b *statsBuilder) format(t deltalog.DataType, v parquet.Value, isMax bool) any {
	switch t := t.(type) {
	case deltalog.DecimalType:
		return json.Number(formatDecimal(unscaled(v), t.Scale))
	case deltalog.PrimitiveType:
		switch t {
		case deltalog.Byte, deltalog.Short, deltalog.Integer:
			return v.Int32()
		case deltalog.Long:
			return v.Int64()
		// A zero bound is "0" whatever its sign: -0.0 and 0.0 compare equal, and a Parquet
		// footer's min of a column holding 0.0 is -0.0 (parquet-format, "Statistics"),
		// so stats taken from a footer (OPTIMIZE's copies) and from the values agree.
		case deltalog.Float:
			if v.Float() == 0 {
				return json.Number("0")
			}
			return json.Number(strconv.FormatFloat(float64(v.Float()), 'g', -1, 32))
		case deltalog.Double:
			if v.Double() == 0 {
				return json.Number("0")
			}
			return json.Number(strconv.FormatFloat(v.Double(), 'g', -1, 64))
		case deltalog.Date:
			return time.Unix(int64(v.Int32())*86400, 0).UTC().Format("2006-01-02")
		case deltalog.Timestamp:
			return time.UnixMicro(v.Int64()).UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
		case deltalog.TimestampNtz:
			return time.UnixMicro(v.Int64()).UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000")
		case deltalog.String:
			s := string(v.ByteArray())
			if !utf8.ValidString(s) {
				return nil
			}
			if isMax {
				r, ok := truncateMax(s, b.cfg.prefixLen)
				if !ok {
					return nil
				}
				return r
			}
			return truncateMin(s, b.cfg.prefixLen)
		}
	}
	return nil
}

// Strings are truncated the way Delta does on the JVM: the prefix length counts UTF-16
// code units (Java String.length), and a surrogate pair is never split — when the cut
// falls inside one, the whole pair is kept (Delta's StatisticsCollection
// truncateMinStringAgg/truncateMaxStringAgg).

// utf16Prefix returns the byte length of the longest prefix of s that holds at most n
// UTF-16 code units, extended over a surrogate pair the cut would split, and whether
// anything was cut.
func utf16Prefix(s string, n int) (int, bool) {
	units, i := 0, 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units >= n {
			return i, true
		}
		if units+w > n { // the cut falls inside this surrogate pair: keep the pair
			return i + size, i+size < len(s)
		}
		units += w
		i += size
	}
	return i, false
}

// truncateMin keeps the first n UTF-16 code units: a prefix never sorts after the string.
func truncateMin(s string, n int) string {
	if n <= 0 {
		return ""
	}
	end, _ := utf16Prefix(s, n)
	return s[:end]
}

// truncateMax keeps the first n UTF-16 code units and appends a tie-breaker so the
// result still sorts at or after s: U+007F when the first dropped character is below it,
// else U+10FFFF (Delta's StatisticsCollection.truncateMaxStringAgg). ok is false when no
// bound exists (the dropped character is U+10FFFF itself, or n <= 0).
func truncateMax(s string, n int) (string, bool) {
	if n <= 0 {
		return "", false
	}
	end, cut := utf16Prefix(s, n)
	if !cut {
		return s, true
	}
	next, _ := utf8.DecodeRuneInString(s[end:])
	switch {
	case next < 0x7F:
		return s[:end] + "\u007f", true
	case next < utf8.MaxRune:
		return s[:end] + string(utf8.MaxRune), true
	default:
		return "", false
	}
}

// unscaled returns the unscaled integer of a decimal value stored as INT32, INT64 or a
// big-endian two's-complement byte array.
func unscaled(v parquet.Value) *big.Int {
	switch v.Kind() {
	case parquet.Int32:
		return big.NewInt(int64(v.Int32()))
	case parquet.Int64:
		return big.NewInt(v.Int64())
	default:
		b := v.ByteArray()
		n := new(big.Int).SetBytes(b)
		if len(b) > 0 && b[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		return n
	}
}

// formatDecimal renders unscaled × 10^-scale exactly, with scale digits after the point.
func formatDecimal(u *big.Int, scale int) string {
	neg := u.Sign() < 0
	digits := new(big.Int).Abs(u).String()
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		digits = "-" + digits
	}
	return digits
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// newUUID returns a random (version 4) UUID in 8-4-4-4-12 form, from crypto/rand.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate uuid: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
