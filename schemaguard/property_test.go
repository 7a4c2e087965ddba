package schemaguard

import (
	"fmt"
	"math/rand/v2"
	"testing"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
)

var primitives = []dl.DataType{dl.Byte, dl.Short, dl.Integer, dl.Long, dl.Float, dl.Double, dl.String,
	dl.Boolean, dl.Binary, dl.Date, dl.Timestamp, dl.DecimalType{Precision: 10, Scale: 2}, dl.DecimalType{Precision: 12, Scale: 3}}

var names = []string{"a", "B", "c", "d", "E", "f", "g", "A", "b"}

func randType(r *rand.Rand, depth int) dl.DataType {
	switch n := r.IntN(10); {
	case depth < 3 && n == 0:
		return randStruct(r, depth+1)
	case depth < 3 && n == 1:
		return &dl.ArrayType{ElementType: randType(r, depth+1), ContainsNull: r.IntN(2) == 0}
	case depth < 3 && n == 2:
		return &dl.MapType{KeyType: dl.String, ValueType: randType(r, depth+1), ValueContainsNull: r.IntN(2) == 0}
	default:
		return primitives[r.IntN(len(primitives))]
	}
}

// randStruct makes a struct whose names are unique ignoring case (as a Delta table's are).
func randStruct(r *rand.Rand, depth int) *dl.StructType {
	s := &dl.StructType{}
	seen := map[string]bool{}
	for range r.IntN(5) + 1 {
		n := names[r.IntN(len(names))]
		if seen[dl.NameKey(n)] {
			continue
		}
		seen[dl.NameKey(n)] = true
		s.Fields = append(s.Fields, &dl.StructField{Name: n, Type: randType(r, depth), Nullable: r.IntN(2) == 0, Metadata: map[string]any{}})
	}
	return s
}

// leafTypes maps every path of s to its type string.
func leafTypes(out map[string]string, prefix string, t dl.DataType) {
	switch t := t.(type) {
	case *dl.StructType:
		for _, f := range t.Fields {
			leafTypes(out, prefix+"."+dl.NameKey(f.Name), f.Type)
		}
	case *dl.ArrayType:
		leafTypes(out, prefix+"[]", t.ElementType)
	case *dl.MapType:
		leafTypes(out, prefix+"{}", t.ValueType)
	default:
		out[prefix] = t.String()
	}
}

func uniqueNames(t dl.DataType) error {
	switch t := t.(type) {
	case *dl.StructType:
		seen := map[string]bool{}
		for _, f := range t.Fields {
			if seen[dl.NameKey(f.Name)] {
				return fmt.Errorf("two fields named %q ignoring case", f.Name)
			}
			seen[dl.NameKey(f.Name)] = true
			if err := uniqueNames(f.Type); err != nil {
				return err
			}
		}
	case *dl.ArrayType:
		return uniqueNames(t.ElementType)
	case *dl.MapType:
		return uniqueNames(t.ValueType)
	}
	return nil
}

// TestApplyProperties: for random table and writer schemas, whatever Decide lets evolve,
// Apply is idempotent, keeps every old path, changes types only along Delta's widenings,
// and never produces two names equal ignoring case.
func TestApplyProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	evolved := 0
	for i := range 3000 {
		table, writer := randStruct(r, 0), randStruct(r, 0)
		widen := r.IntN(2) == 0
		d := Decide(Diff(table, writer), Options{Policy: Evolve, OnIncompatible: Halt, Table: TableState{TypeWidening: widen}})
		if d.Action != EvolveAndWrite {
			continue
		}
		evolved++
		got, _ := Apply(table, writer, widen)
		again, applied := Apply(got, writer, widen)
		if again != got || len(applied) != 0 {
			t.Fatalf("case %d: Apply not idempotent: %v", i, applied)
		}
		before, after := map[string]string{}, map[string]string{}
		leafTypes(before, "", table)
		leafTypes(after, "", got)
		for path, typ := range before {
			nt, ok := after[path]
			if !ok {
				t.Fatalf("case %d: path %s dropped\ntable %s\nafter %s", i, path, table, got)
			}
			if nt != typ && !(widen && widensByName(typ, nt)) {
				t.Fatalf("case %d: %s changed %s → %s", i, path, typ, nt)
			}
		}
		if err := uniqueNames(got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if d2 := Decide(Diff(got, writer), Options{Policy: Evolve, Table: TableState{TypeWidening: widen}}); d2.Action != Write {
			t.Fatalf("case %d: after Apply the writer still needs %v: %v", i, d2.Action, d2.Changes)
		}
	}
	if evolved < 100 {
		t.Fatalf("only %d random cases evolved: the generator is too narrow", evolved)
	}
}

func widensByName(from, to string) bool {
	f, err1 := dl.ParsePrimitive(from)
	tt, err2 := dl.ParsePrimitive(to)
	return err1 == nil && err2 == nil && dl.Widening(f, tt) == dl.WideningAutomatic
}
