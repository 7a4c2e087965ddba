package expr

import (
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// BenchmarkUpper: upper(s) on a 12-character string, ASCII (Spark's fast path) and not
// (full Unicode case mapping, a Caser per call); docs/performance.md.
func BenchmarkUpper(b *testing.B) {
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "s", Type: deltalog.String, Nullable: true}}}
	e, err := Compile("upper(s)", schema, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, s string }{{"ascii", "order-shipped"}, {"unicode", "straße-größe"}} {
		b.Run(tc.name, func(b *testing.B) {
			row := []Value{Str(tc.s)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Eval(row); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
