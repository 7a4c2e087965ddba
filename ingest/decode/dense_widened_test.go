package decode

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// The words DecodeColumns appends to dense columns for values read through a lossless
// widening or a scale (the slow leaf path: an int into a long or a double, a float into a
// double, a date into a timestamp_ntz, timestamp-millis into a timestamp, a fixed decimal
// of a smaller scale into decimal(9,4) and decimal(18,6)), from several writers appending
// to the same columns, are checked against words computed here from the Avro values
// (column.Bits of the value the Delta type holds), not against Decode, which shares the
// code.

// The table: every column nullable, all fixed-width (dense while set).
func breakDecodeTable() *deltalog.StructType {
	return &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "l", Type: deltalog.Long, Nullable: true},
		{Name: "dbl", Type: deltalog.Double, Nullable: true},
		{Name: "dbl2", Type: deltalog.Double, Nullable: true},
		{Name: "ntz", Type: deltalog.TimestampNtz, Nullable: true},
		{Name: "ts", Type: deltalog.Timestamp, Nullable: true},
		{Name: "d9", Type: deltalog.DecimalType{Precision: 9, Scale: 4}, Nullable: true},
		{Name: "d18", Type: deltalog.DecimalType{Precision: 18, Scale: 6}, Nullable: true},
	}}
}

const (
	// wideA widens every field: int → long, int → double, float → double, date →
	// timestamp_ntz, timestamp-millis → timestamp, fixed decimals of scale 2 and 3.
	wideA = `{"type":"record","name":"w","fields":[{"name":"l","type":"int"},{"name":"dbl","type":"int"},
 {"name":"dbl2","type":"float"},{"name":"ntz","type":{"type":"int","logicalType":"date"}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"d9","type":{"type":"fixed","name":"f9","size":4,"logicalType":"decimal","precision":7,"scale":2}},
 {"name":"d18","type":{"type":"fixed","name":"f18","size":8,"logicalType":"decimal","precision":15,"scale":3}}]}`
	// wideB is the same fields in their own types, nullable (the union's set branch).
	wideB = `{"type":"record","name":"w","fields":[{"name":"l","type":["null","long"]},{"name":"dbl","type":["null","double"]},
 {"name":"dbl2","type":["double","null"]},{"name":"ntz","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]},
 {"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
 {"name":"d9","type":["null",{"type":"bytes","logicalType":"decimal","precision":9,"scale":4}]},
 {"name":"d18","type":["null",{"type":"bytes","logicalType":"decimal","precision":18,"scale":6}]}]}`
)

func TestBreakDecodeWidenedWords(t *testing.T) {
	table := breakDecodeTable()
	wa, wb := mustWriter(t, 1, wideA), mustWriter(t, 2, wideB)
	da, pq := mustCompile(t, wa, table, "none")
	db, _ := mustCompile(t, wb, table, "none")
	leaves := column.Leaves(pq)
	cols := make([]column.Column, len(leaves))
	for i := range cols {
		cols[i].Reset(leaves[i])
	}
	// pq's leaves are in name order: d18 d9 dbl dbl2 l ntz ts.
	idx := map[string]int{}
	for i, p := range pq.Columns() {
		idx[p[0]] = i
	}
	want := make([][]uint64, len(leaves))
	add := func(name string, w uint64) { want[idx[name]] = append(want[idx[name]], w) }
	const microsPerDay = 86_400_000_000
	i32 := []int32{math.MinInt32, -1, 0, math.MaxInt32, -123456}
	f32 := []float32{float32(math.Copysign(0, -1)), float32(math.Inf(-1)), 1.1, -3.4e38, float32(math.SmallestNonzeroFloat32)}
	days := []int32{-719162, -1, 0, 2932896, -25567}
	ms := []int64{-1, -62135596800000, 0, 253402300799999, 1700000000123} // Delta's range: 0001-01-01 .. 9999-12-31T23:59:59.999
	d9 := []int64{-9999999, -1, 0, 9999999, -12345}                       // unscaled at scale 2, precision 7
	d18 := []int64{-999999999999999, -1, 0, 999999999999999, -5}
	var payloads []struct {
		d *Decoder
		p []byte
	}
	for i := range i32 {
		// writer A: the widened values
		pa := mustMarshal(t, wa.Avro, map[string]any{"l": i32[i], "dbl": i32[i], "dbl2": f32[i], "ntz": days[i], "ts": ms[i],
			"d9": big.NewRat(d9[i], 100), "d18": big.NewRat(d18[i], 1000)})
		payloads = append(payloads, struct {
			d *Decoder
			p []byte
		}{da, pa})
		add("l", uint64(int64(i32[i])))
		add("dbl", math.Float64bits(float64(i32[i])))
		add("dbl2", math.Float64bits(float64(f32[i])))
		add("ntz", uint64(int64(days[i])*microsPerDay))
		add("ts", uint64(ms[i]*1000))
		add("d9", uint64(uint32(int32(d9[i]*100)))) // scale 2 → 4
		add("d18", uint64(d18[i]*1000))             // scale 3 → 6
		// writer B: the same columns in their own types, set
		l := int64(i32[i]) * 3
		u9, u18 := d9[i]*100-7, d18[i]*1000+11
		pb := mustMarshal(t, wb.Avro, map[string]any{"l": map[string]any{"long": l}, "dbl": map[string]any{"double": -float64(i)},
			"dbl2": map[string]any{"double": math.Copysign(0, -1)}, "ntz": map[string]any{"long.local-timestamp-micros": l},
			"ts": map[string]any{"long.timestamp-micros": -l}, "d9": map[string]any{"bytes.decimal": big.NewRat(u9, 10000)},
			"d18": map[string]any{"bytes.decimal": big.NewRat(u18, 1000000)}})
		payloads = append(payloads, struct {
			d *Decoder
			p []byte
		}{db, pb})
		add("l", uint64(l))
		add("dbl", math.Float64bits(-float64(i)))
		add("dbl2", math.Float64bits(math.Copysign(0, -1)))
		add("ntz", uint64(l))
		add("ts", uint64(-l))
		add("d9", uint64(uint32(int32(u9))))
		add("d18", uint64(u18))
	}
	var a Arena
	for j, p := range payloads {
		if err := p.d.DecodeColumns(&a, p.p, cols); err != nil {
			t.Fatalf("record %d: %v", j, err)
		}
	}
	for name, i := range idx {
		c := &cols[i]
		if !c.IsDense() {
			t.Errorf("column %s is levelled; want dense (every value set)", name)
			continue
		}
		if fmt.Sprint(c.Dense) != fmt.Sprint(want[i]) {
			t.Errorf("column %s words:\n got %#x\nwant %#x", name, c.Dense, want[i])
		}
	}
}
