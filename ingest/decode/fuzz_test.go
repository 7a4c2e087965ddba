package decode

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// FuzzDecode feeds arbitrary bytes to a decoder of the rich schema: it must never panic,
// must return a reasoned *Error or exactly one row, and must roll back on failure.
func FuzzDecode(f *testing.F) {
	ws := mustWriter(f, 1, richSchema)
	d, pq := mustCompile(f, ws, ws.Delta, "none")
	ts := time.UnixMicro(1702771200123456).UTC()
	seed := map[string]any{
		"b": true, "i": 42, "l": int64(-5), "f": float32(1.5), "d": -2.25, "s": "héllo", "by": []byte{0, 255},
		"fx": [4]byte{1, 2, 3, 4}, "e": "GREEN", "u": "u", "dt": ts.Truncate(24 * time.Hour), "tm": time.Second, "tu": time.Microsecond,
		"tsm": ts.Truncate(time.Millisecond), "tsu": ts, "ltsm": ts.Truncate(time.Millisecond), "ltsu": ts,
		"dec9": rat(f, "-123.45"), "dec18": rat(f, "-0.0001"), "dec38": rat(f, "-12345678901234567890.0123456789"),
		"ns": nil, "sn": "x", "multi": int64(7), "nested": map[string]any{"x": 1, "y": "y"},
		"onested": map[string]any{"t.Inner": map[string]any{"x": 7, "y": nil}},
		"items":   []any{map[string]any{"sku": "a", "qty": 1}}, "tags": []any{"t1", nil},
		"m": map[string]any{"k1": map[string]any{"v": 0.5}}, "legacy": nil,
	}
	valid := mustMarshal(f, ws.Avro, seed)
	f.Add(valid)
	f.Add([]byte{})
	f.Add(valid[:len(valid)/2])
	f.Add(append(append([]byte(nil), valid...), 0))
	base, err := d.Decode(valid, nil)
	if err != nil {
		f.Fatal(err)
	}
	// Reused by every input, reset in between (nothing keeps their values): one copying,
	// one aliasing the payload (Arena.AliasPayloads).
	var arena, alias Arena
	alias.AliasPayloads()
	f.Fuzz(func(t *testing.T, payload []byte) {
		cols := make([][]parquet.Value, len(base))
		for i := range base {
			cols[i] = append([]parquet.Value(nil), base[i]...)
		}
		before := colLens(cols)
		rowsBefore := topLevelRows(cols)
		cols, err := d.Decode(payload, cols)
		for _, a := range []struct {
			name  string
			arena *Arena
		}{{"DecodeWith", &arena}, {"DecodeWith under AliasPayloads", &alias}} {
			acols := make([][]parquet.Value, len(base))
			for i := range base {
				acols[i] = append([]parquet.Value(nil), base[i]...)
			}
			a.arena.Reset()
			acols, aerr := d.DecodeWith(a.arena, payload, acols)
			if ReasonOf(err) != ReasonOf(aerr) || (err == nil) != (aerr == nil) {
				t.Fatalf("Decode: %v; %s: %v", err, a.name, aerr)
			}
			if !reflect.DeepEqual(renderCols(pq, cols), renderCols(pq, acols)) {
				t.Fatalf("Decode and %s values differ", a.name)
			}
			// DecodeColumns into columns holding the base record (dense where its
			// values are set): Decode's values, error and rollback.
			a.arena.Reset()
			if err := columnsAgree(d, a.arena, payload, base, cols, err); err != nil {
				t.Fatalf("%s arena: %v", a.name, err)
			}
		}
		if err != nil {
			var reason string
			if reason = ReasonOf(err); reason == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			if strings.Contains(err.Error(), "panic") {
				t.Fatalf("decoder panicked: %v", err)
			}
			for i, n := range before {
				if len(cols[i]) != n {
					t.Fatalf("column %d not rolled back: %d -> %d (%v)", i, n, len(cols[i]), err)
				}
			}
			return
		}
		for i, n := range topLevelRows(cols) {
			if n != rowsBefore[i]+1 {
				t.Fatalf("column %d gained %d rows, want 1", i, n-rowsBefore[i])
			}
		}
	})
}

// topLevelRows counts values with repetition level 0 (row starts) per column.
func topLevelRows(cols [][]parquet.Value) []int {
	out := make([]int, len(cols))
	for i, c := range cols {
		for _, v := range c {
			if v.RepetitionLevel() == 0 {
				out[i]++
			}
		}
	}
	return out
}
