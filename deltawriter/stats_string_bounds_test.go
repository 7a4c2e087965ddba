package deltawriter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
)

// Byte-form string columns of random strings from an alphabet of 1- to 4-byte characters
// (U+007E/U+007F around the max's tie-breakers, é, €, U+FFFF, an emoji, U+10FFFF),
// their lengths around the stats prefix (prefix lengths 1, 2, 5 and 32): add.stats of
// s hold valid UTF-8 bounds in bytewise order (Delta compares strings as UTF-8 bytes)
// with min ≤ every value and max ≥ every value, or no bounds when none exists (a value
// whose cut drops U+10FFFF) — and the same stats and bytes as the levelled pass.
func TestDenseStringStatsBoundRandom(t *testing.T) {
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	pq, err := ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	alphabet := []string{"a", "~", "\u007f", "é", "€", "\uffff", "😀", "\U0010FFFF"}
	r := rand.New(rand.NewPCG(7, 15))
	bounded := 0
	for iter := range 400 {
		prefix := []int{1, 2, 5, 32}[iter%4]
		n := 1 + r.IntN(6)
		vals := make([]string, n)
		rows := make([]map[string]any, n)
		for i := range vals {
			var b strings.Builder
			for range max(0, prefix-2+r.IntN(5)) {
				b.WriteString(alphabet[r.IntN(len(alphabet)-1+iter%2)]) // U+10FFFF in every other batch
			}
			vals[i] = b.String()
			rows[i] = map[string]any{"s": vals[i]}
		}
		lvals, err := shredRows(pq, rows)
		if err != nil {
			t.Fatal(err)
		}
		cols := deltatest.ColumnsOf(pq, lvals)
		if !cols[0].IsDense() {
			t.Fatal("s is not in the byte form")
		}
		opts := FileOptions{Schema: schema, Configuration: map[string]string{deltalog.PropStringPrefixLength: fmt.Sprint(prefix)}}
		var lbuf, dbuf bytes.Buffer
		ladd, err := WriteDataFile(context.Background(), deltatest.NewMemStore(&lbuf), pq, lvals, n, opts)
		if err != nil {
			t.Fatal(err)
		}
		add, err := WriteColumns(context.Background(), deltatest.NewMemStore(&dbuf), pq, cols, n, opts)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("batch %d (prefix %d) %q", iter, prefix, vals)
		if add.Stats != ladd.Stats || !bytes.Equal(dbuf.Bytes(), lbuf.Bytes()) {
			t.Fatalf("%s: dense stats %s differ from levelled %s (or the bytes)", name, add.Stats, ladd.Stats)
		}
		var st struct {
			Min map[string]string `json:"minValues"`
			Max map[string]string `json:"maxValues"`
		}
		if err := json.Unmarshal([]byte(add.Stats), &st); err != nil {
			t.Fatal(err)
		}
		lo, hasLo := st.Min["s"]
		hi, hasHi := st.Max["s"]
		if hasLo != hasHi {
			t.Fatalf("%s: one bound only: %s", name, add.Stats)
		}
		if !hasLo {
			// No bound only when the max's cut drops U+10FFFF.
			if iter%2 == 0 {
				t.Fatalf("%s: no bounds without U+10FFFF: %s", name, add.Stats)
			}
			continue
		}
		bounded++
		if !utf8.ValidString(lo) || !utf8.ValidString(hi) || strings.ContainsRune(add.Stats, utf8.RuneError) {
			t.Fatalf("%s: bounds not valid UTF-8: %s", name, add.Stats)
		}
		for _, v := range vals {
			if lo > v || hi < v {
				t.Fatalf("%s: bounds %q..%q exclude %q", name, lo, hi, v)
			}
		}
		if !strings.HasPrefix(minOf(vals), lo) {
			t.Fatalf("%s: min %q is not a prefix of the smallest value %q", name, lo, minOf(vals))
		}
	}
	if bounded < 250 {
		t.Errorf("only %d of 400 batches had bounds", bounded)
	}
}

func minOf(vals []string) string {
	m := vals[0]
	for _, v := range vals[1:] {
		m = min(m, v)
	}
	return m
}
