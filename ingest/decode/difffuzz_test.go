package decode

import (
	"math/rand/v2"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
)

// diffCase builds the schema of one seed and a payload: valid bytes (mode%3 == 0), valid
// bytes with raw XORed over them (mode%3 == 1), or raw itself (mode%3 == 2).
func diffCase(t testing.TB, seed uint64, mode byte, raw []byte) (text string, payload []byte, strict bool) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	text = (&schemaGen{r: r}).schema()
	switch mode % 3 {
	case 2:
		return text, raw, false
	}
	ws, err := ParseWriterSchema(1, text)
	if err != nil {
		t.Fatalf("generated schema does not parse: %v\n%s", err, text)
	}
	vg := &valueGen{r: r}
	vg.value(ws.Avro, 0)
	payload = vg.out
	if mode%3 == 1 && len(payload) > 0 {
		for i, b := range raw {
			payload[i%len(payload)] ^= b
		}
		return text, payload, false
	}
	return text, payload, true
}

func runDifferential(t testing.TB, seed uint64, mode byte, raw []byte) {
	text, payload, strict := diffCase(t, seed, mode, raw)
	ws, err := ParseWriterSchema(1, text)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	if ws.DeltaErr != nil {
		t.Fatalf("generated schema not representable: %v\n%s", ws.DeltaErr, text)
	}
	pq, err := deltawriter.ParquetSchema(ws.Delta, "none")
	if err != nil {
		t.Fatalf("parquet schema: %v\n%s", err, text)
	}
	d, err := Compile(ws, ws.Delta, "none", pq)
	if err != nil {
		t.Fatalf("compile: %v\n%s", err, text)
	}
	ourErr, diff := differential(ws, d, pq, payload, strict)
	if diff != nil {
		t.Fatalf("seed %d mode %d\nschema %s\npayload %x\n%v", seed, mode, text, payload, diff)
	}
	if ourErr != nil && ReasonOf(ourErr) == "" && ourErr != ErrNullRecord {
		t.Fatalf("error without a reason code: %v", ourErr)
	}
}

// FuzzDifferential compares our decoder with hamba/avro's generic decoding over random
// schemas: on valid bytes both must agree exactly; on mutated or random bytes whatever we
// accept hamba must accept with the same values (we are stricter: trailing bytes, booleans
// other than 0/1, ints beyond 32 bits, decimals beyond their precision).
func FuzzDifferential(f *testing.F) {
	for seed := uint64(0); seed < 16; seed++ {
		f.Add(seed, byte(0), []byte{})
		f.Add(seed, byte(1), []byte{0x80, 0x01})
		f.Add(seed, byte(2), []byte{0x02, 0x04, 0x06})
	}
	f.Fuzz(func(t *testing.T, seed uint64, mode byte, raw []byte) {
		runDifferential(t, seed, mode, raw)
	})
}

// TestDifferentialSeeds runs the differential on a fixed range of seeds in every mode, so
// plain `go test` covers it without -fuzz.
func TestDifferentialSeeds(t *testing.T) {
	n := uint64(400)
	if testing.Short() {
		n = 50
	}
	for seed := uint64(0); seed < n; seed++ {
		runDifferential(t, seed, 0, nil)
		runDifferential(t, seed, 1, []byte{byte(seed), byte(seed >> 3)})
		runDifferential(t, seed, 2, []byte{byte(seed), 0x02, 0x81, 0x01})
	}
}
