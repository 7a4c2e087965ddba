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

// BenchmarkSnapshotAdvance times what advancing a handed-out snapshot by a commit that
// replaces one file (a remove and an add: an upsert's or a compaction's commit) costs
// its file set and tombstones (Snapshot.clone, then apply), on a table of 10⁶ live files
// and 10⁵ tombstones whose overlay holds k files from the commits since its base was
// built, up to just below the compaction bound (compactRatio of 10⁶). "maps" is the same step with
// the overlay and the tombstones as Go maps copied per commit, as the snapshot had them
// before their copy-on-write B-trees: the baseline, in the same process.
func BenchmarkSnapshotAdvance(b *testing.B) {
	const n, tombs = 1_000_000, 100_000
	name := func(i int) string {
		return fmt.Sprintf("part-%07d-0b0c3a2e-dead-4000-8000-00000000c0de-c000.snappy.parquet", i)
	}
	file := func(i int) deltalog.Add {
		return deltalog.Add{Path: name(i), Size: 1000, ModificationTime: 1, DataChange: true, Stats: `{"numRecords":1}`}
	}
	ts := int64(1)
	adds := make([]deltalog.Add, n)
	for i := range adds {
		adds[i] = file(i)
	}
	base := emptySnapshot()
	base.Files = NewFileSet(adds...)
	tombMap := map[string]deltalog.Remove{}
	for i := range tombs {
		r := deltalog.Remove{Path: name(n + i), DeletionTimestamp: &ts, DataChange: true}
		base.tombstones.put(r.Path, r)
		tombMap[r.Path] = r
	}
	for _, k := range []int{0, 1000, n/compactRatio - 100} { // below the bound: no compaction
		s := base.clone()
		overMap := map[string]deltalog.Add{}
		for i := range k {
			a := file(2*n + i)
			s.Files.put(a.Path, a)
			overMap[a.Path] = a
		}
		b.Run(fmt.Sprintf("btrees/overlay=%d", k), func(b *testing.B) {
			i := 0
			for b.Loop() {
				c := s.clone()
				a := file(3*n + i)
				c.apply([]deltalog.Action{{Remove: &deltalog.Remove{Path: name(i % n), DeletionTimestamp: &ts, DataChange: true}}, {Add: &a}})
				i++
			}
		})
		b.Run(fmt.Sprintf("maps/overlay=%d", k), func(b *testing.B) {
			i := 0
			for b.Loop() {
				over, tomb := maps.Clone(overMap), maps.Clone(tombMap)
				a := file(3*n + i)
				tomb[name(i%n)] = deltalog.Remove{Path: name(i % n), DeletionTimestamp: &ts, DataChange: true}
				over[a.Path] = a
				i++
			}
		})
	}
}

// TestFileSetDeadPagesCopyOnWrite: a base of four pages of the dead-row bitset; removes
// through a chain of clones, and into a set after it was cloned, change only the set
// they were made in.
func TestFileSetDeadPagesCopyOnWrite(t *testing.T) {
	n := 3*deadPageRows + 10
	name := func(i int) string { return fmt.Sprintf("part-%07d.parquet", i) }
	adds := make([]deltalog.Add, n)
	for i := range adds {
		adds[i] = deltalog.Add{Path: name(i), Size: int64(i)}
	}
	f0 := NewFileSet(adds...)
	f1 := f0.clone()
	f1.del(name(5))
	f1.del(name(2*deadPageRows + 7))
	f2 := f1.clone()
	f2.del(name(deadPageRows + 1))
	f2.del(name(6))
	f1.del(name(3 * deadPageRows)) // a change to f1 after f2 was cloned from it
	f3 := f2.clone()
	f3.put(name(5), deltalog.Add{Path: name(5), Size: -5}) // re-added: in the overlay
	gone := map[*FileSet][]int{
		f0: nil,
		f1: {5, 2*deadPageRows + 7, 3 * deadPageRows},
		f2: {5, 2*deadPageRows + 7, deadPageRows + 1, 6},
		f3: {2*deadPageRows + 7, deadPageRows + 1, 6},
	}
	for f, g := range gone {
		if f.Len() != n-len(g) {
			t.Errorf("Len %d, want %d (removed %v)", f.Len(), n-len(g), g)
		}
		for _, i := range []int{5, 6, deadPageRows + 1, 2*deadPageRows + 7, 3 * deadPageRows, 3*deadPageRows + 9} {
			if got, want := f.Has(name(i)), !slices.Contains(g, i); got != want {
				t.Errorf("set removing %v: Has(%d) = %v, want %v", g, i, got, want)
			}
		}
	}
	if a, ok := f3.Get(name(5)); !ok || a.Size != -5 {
		t.Errorf("re-added file: %+v, %v", a, ok)
	}
	if a, ok := f2.Get(name(5)); ok {
		t.Errorf("f2 sees the file f3 re-added: %+v", a)
	}
}
