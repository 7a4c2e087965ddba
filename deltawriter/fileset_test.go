package deltawriter

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestFileSetMatchesMap applies random adds, re-adds and removes to a FileSet through
// clones (as commits advance snapshots), past several compactions, and checks after
// every step that it holds exactly what a plain map holds, in key order, and that the
// clones taken before are unchanged.
func TestFileSetMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	day := func(i int) *string { s := fmt.Sprintf("2026-12-%02d", i%3+1); return &s }
	mk := func(i int, dv bool) deltalog.Add {
		a := deltalog.Add{Path: fmt.Sprintf("d=%s/part-%06d.parquet", *day(i), i), PartitionValues: map[string]*string{"d": day(i)},
			Size: int64(i), ModificationTime: int64(2 * i), DataChange: i%2 == 0, Stats: fmt.Sprintf(`{"numRecords":%d}`, i)}
		if i%7 == 0 {
			a.PartitionValues = map[string]*string{"d": nil}
			a.Path = fmt.Sprintf("d=__HIVE_DEFAULT_PARTITION__/part%%20%06d.parquet", i)
		}
		if dv {
			a.DeletionVector = &deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: fmt.Sprintf("ab^-aqEH.-t@S}K{vb[%03d", i%1000), SizeInBytes: 40, Cardinality: 1}
		}
		return a
	}
	var initial []deltalog.Add
	want := map[string]deltalog.Add{}
	for i := range 6000 {
		a := mk(i, i%11 == 0)
		initial = append(initial, a)
		want[deltalog.FileKey(a.Path, a.DeletionVector)] = a
	}
	r.Shuffle(len(initial), func(i, j int) { initial[i], initial[j] = initial[j], initial[i] })
	f := NewFileSet(initial...)
	type frozen struct {
		f    *FileSet
		want map[string]deltalog.Add
	}
	var old []frozen
	check := func(step int, f *FileSet, want map[string]deltalog.Add) {
		t.Helper()
		if f.Len() != len(want) {
			t.Fatalf("step %d: Len %d, want %d", step, f.Len(), len(want))
		}
		var keys []string
		for k, a := range f.All() {
			keys = append(keys, k)
			w, ok := want[k]
			if !ok || addJSON(t, a) != addJSON(t, w) {
				t.Fatalf("step %d: %s = %+v, want %+v (%v)", step, k, a, w, ok)
			}
		}
		if !slices.IsSorted(keys) || len(keys) != len(want) {
			t.Fatalf("step %d: All yielded %d keys, sorted %v", step, len(keys), slices.IsSorted(keys))
		}
	}
	check(0, f, want)
	next := 6000
	for step := 1; step <= 400; step++ {
		f = f.clone()
		ks := slices.Collect(maps.Keys(want))
		for range 40 {
			switch op := r.IntN(3); op {
			case 0: // a new file
				a := mk(next, false)
				next++
				k := deltalog.FileKey(a.Path, a.DeletionVector)
				f.put(k, a)
				want[k] = a
			case 1: // remove a file, live or not
				k := ks[r.IntN(len(ks))]
				f.del(k)
				delete(want, k)
			case 2: // re-add a key with other content
				k := ks[r.IntN(len(ks))]
				a, ok := want[k]
				if !ok {
					continue
				}
				a.Size += 1000
				f.put(k, a)
				want[k] = a
			}
		}
		f.maybeCompact()
		for _, k := range []string{"nope", "d=2026-12-01/part-000000.parquet"} {
			a, ok := f.Get(k)
			w, wok := want[k]
			if ok != wok || addJSON(t, a) != addJSON(t, w) || f.Has(k) != wok {
				t.Fatalf("step %d: Get(%s) = %v %v, want %v %v", step, k, a, ok, w, wok)
			}
		}
		if step%50 == 0 {
			check(step, f, want)
			old = append(old, frozen{f, maps.Clone(want)})
		}
	}
	for i, o := range old {
		check(1000+i, o.f, o.want)
	}
}

func addJSON(t *testing.T, a deltalog.Add) string {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFileRowSize pins the heap cost of a live file's row, the fixed part of the
// per-file figure in docs/performance.md ("Big tables").
func TestFileRowSize(t *testing.T) {
	if n := unsafe.Sizeof(fileRow{}); n != 64 {
		t.Fatalf("fileRow is %d bytes, docs/performance.md says 64", n)
	}
}

// A compaction re-indexes the base's interned partition values by their canonical key;
// each key must be a copy, not the builder's scratch buffer that the next key overwrites:
// else a file of one partition, added after the compaction, is given another partition's
// values (every key in the index then reads as the last one written).
func TestFileSetCompactKeepsPartitionValues(t *testing.T) {
	pv := func(d string) map[string]*string { return map[string]*string{"d": &d} }
	var adds []deltalog.Add
	days := []string{"2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04", "2026-12-05"}
	for i := range 50 {
		d := days[i%len(days)]
		adds = append(adds, deltalog.Add{Path: fmt.Sprintf("d=%s/a-%03d.parquet", d, i), PartitionValues: pv(d), Size: int64(i)})
	}
	f := NewFileSet(adds...)
	for round := range 3 {
		f = f.clone()
		for i, d := range days {
			a := deltalog.Add{Path: fmt.Sprintf("d=%s/r%d-%03d.parquet", d, round, i), PartitionValues: pv(d), Size: int64(i)}
			f.put(a.Path, a)
		}
		f.compact()
		for k, a := range f.All() {
			want := k[len("d=") : len("d=")+len("2026-12-01")]
			if got := a.PartitionValues["d"]; got == nil || *got != want {
				t.Fatalf("round %d: %s has partition value %v, want %s", round, k, deref(got), want)
			}
		}
	}
}
