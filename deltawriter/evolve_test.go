package deltawriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

func mustSchema(t *testing.T, s string) *deltalog.StructType {
	t.Helper()
	st, err := deltalog.ParseSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAssignColumnMappingEveryLevel(t *testing.T) {
	// "a" already mapped (id 7); maxColumnId says 9: new ids start at 10.
	s := mustSchema(t, `{"type":"struct","fields":[
{"name":"a","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":7,"delta.columnMapping.physicalName":"col-a"}},
{"name":"arr","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},
{"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"struct","fields":[{"name":"y","type":"long","nullable":true,"metadata":{}}]},"valueContainsNull":true},"nullable":true,"metadata":{}}]}`)
	conf := map[string]string{deltalog.PropColumnMappingMode: "name", deltalog.PropColumnMappingMaxColumnID: "9"}
	out, nconf, err := AssignColumnMapping(s, conf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var walk func(deltalog.DataType)
	walk = func(dt deltalog.DataType) {
		switch dt := dt.(type) {
		case *deltalog.StructType:
			for _, f := range dt.Fields {
				id, _ := f.FieldID()
				phys := f.PhysicalName(deltalog.ColumnMappingName)
				if f.Name != "a" && (!strings.HasPrefix(phys, "col-") || len(phys) != 40) {
					t.Errorf("field %s physical name %q", f.Name, phys)
				}
				got = append(got, fmt.Sprintf("%s=%d", f.Name, id))
				walk(f.Type)
			}
		case *deltalog.ArrayType:
			walk(dt.ElementType)
		case *deltalog.MapType:
			walk(dt.ValueType)
		}
	}
	walk(out)
	if strings.Join(got, ",") != "a=7,arr=10,x=11,m=12,y=13" {
		t.Errorf("ids %s, want a=7,arr=10,x=11,m=12,y=13", strings.Join(got, ","))
	}
	if nconf[deltalog.PropColumnMappingMaxColumnID] != "13" || conf[deltalog.PropColumnMappingMaxColumnID] != "9" {
		t.Errorf("maxColumnId %q (input %q), want 13 (input untouched)", nconf[deltalog.PropColumnMappingMaxColumnID], conf[deltalog.PropColumnMappingMaxColumnID])
	}
	if _, ok := s.Fields[1].Metadata[deltalog.MetaColumnMappingID]; ok {
		t.Error("input schema was modified")
	}
	// Physical names differ from each other; Parquet field ids follow.
	pq, err := ParquetSchema(out, deltalog.ColumnMappingID)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := pq.Lookup(out.Fields[1].PhysicalName(deltalog.ColumnMappingID), "list", "element", out.Fields[1].Type.(*deltalog.ArrayType).ElementType.(*deltalog.StructType).Fields[0].PhysicalName(deltalog.ColumnMappingID)); !ok || f.Node.ID() != 11 {
		t.Errorf("nested leaf lookup ok=%v id=%d, want field id 11", ok, f.Node.ID())
	}
	// Mode none: unchanged.
	if o, c, _ := AssignColumnMapping(s, nil); o != s || c != nil {
		t.Error("mode none changed the schema")
	}
}

// A widened field is found in the old schema the way Delta matches names (deltalog.NameKey):
// the ASCII-only fold used before missed "Écart" → "écart" and "ſum" → "SUM", and so
// recorded no delta.typeChanges for a widening the guard had accepted.
func TestEvolveTableMatchesNamesByNameKey(t *testing.T) {
	_, m := newTableMetadata("t", mustSchema(t, `{"type":"struct","fields":[{"name":"Écart","type":"integer","nullable":true,"metadata":{}},{"name":"SUM","type":"integer","nullable":true,"metadata":{}}]}`), nil,
		map[string]string{deltalog.PropEnableTypeWidening: "true"})
	p := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	_, ns, np, err := evolveTable(p, m, mustSchema(t, `{"type":"struct","fields":[{"name":"écart","type":"long","nullable":true,"metadata":{}},{"name":"ſum","type":"long","nullable":true,"metadata":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ns.Fields {
		if b, _ := json.Marshal(f.Metadata[deltalog.MetaTypeChanges]); string(b) != `[{"fromType":"integer","toType":"long"}]` {
			t.Errorf("%s typeChanges %s", f.Name, b)
		}
	}
	if np == nil || !slices.Contains(np.WriterFeatures, deltalog.FeatureTypeWidening) {
		t.Errorf("protocol %+v lacks typeWidening", np)
	}
}

func TestEvolveTableWideningAndProtocol(t *testing.T) {
	_, m := newTableMetadata("t", mustSchema(t, `{"type":"struct","fields":[{"name":"n","type":"integer","nullable":true,"metadata":{}},{"name":"arr","type":{"type":"array","elementType":"float","containsNull":true},"nullable":true,"metadata":{}}]}`), nil,
		map[string]string{deltalog.PropEnableTypeWidening: "true"})
	p := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	wide := mustSchema(t, `{"type":"struct","fields":[{"name":"n","type":"long","nullable":true,"metadata":{}},{"name":"arr","type":{"type":"array","elementType":"double","containsNull":true},"nullable":true,"metadata":{}},{"name":"new","type":"string","nullable":true,"metadata":{}}]}`)
	nm, ns, np, err := evolveTable(p, m, wide)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ns.Fields[0].Metadata[deltalog.MetaTypeChanges])
	if string(b) != `[{"fromType":"integer","toType":"long"}]` {
		t.Errorf("n typeChanges %s", b)
	}
	b, _ = json.Marshal(ns.Fields[1].Metadata[deltalog.MetaTypeChanges])
	if string(b) != `[{"fieldPath":"element","fromType":"float","toType":"double"}]` {
		t.Errorf("arr typeChanges %s", b)
	}
	if !strings.Contains(nm.SchemaString, `"delta.typeChanges":[{"fromType":"integer","toType":"long"}]`) {
		t.Errorf("schemaString lacks typeChanges: %s", nm.SchemaString)
	}
	if np == nil || np.MinReaderVersion != 3 || np.MinWriterVersion != 7 ||
		!slices.Equal(np.ReaderFeatures, []string{"typeWidening"}) ||
		!slices.Equal(np.WriterFeatures, []string{"appendOnly", "invariants", "typeWidening"}) {
		t.Errorf("protocol %+v, want (3,7) reader [typeWidening] writer [appendOnly invariants typeWidening]", np)
	}
	// The upgraded table is writable by us.
	if err := checkWritable(np, &nm, ns); err != nil {
		t.Errorf("checkWritable: %v", err)
	}
	// A second widening appends to the history; the protocol stays.
	_, ns2, np2, err := evolveTable(*np, nm, mustSchema(t, strings.Replace(mustJSON(t, ns), `"type":"long"`, `"type":"decimal(25,0)"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(ns2.Fields[0].Metadata[deltalog.MetaTypeChanges])
	if np2 != nil || string(b) != `[{"fromType":"integer","toType":"long"},{"fromType":"long","toType":"decimal(25,0)"}]` {
		t.Errorf("second widening: protocol %+v, history %s", np2, b)
	}
	// Without the property, or for a narrowing or a non-widening: refused.
	m.Configuration = map[string]string{}
	if _, _, _, err := evolveTable(p, m, wide); err == nil || !strings.Contains(err.Error(), deltalog.PropEnableTypeWidening) {
		t.Errorf("widening without %s: %v", deltalog.PropEnableTypeWidening, err)
	}
	m.Configuration = map[string]string{deltalog.PropEnableTypeWidening: "true"}
	if _, _, _, err := evolveTable(p, m, mustSchema(t, `{"type":"struct","fields":[{"name":"n","type":"string","nullable":true,"metadata":{}}]}`)); err == nil || !strings.Contains(err.Error(), "not a Delta type widening") {
		t.Errorf("integer→string: %v", err)
	}
	// A new timestamp_ntz column on a column-mapped (2,5) table: (3,7) with the implied
	// features, columnMapping in both lists.
	got := UpgradeProtocol(deltalog.Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, "timestampNtz")
	if fmt.Sprint(got) != "{3 7 [columnMapping timestampNtz] [appendOnly invariants checkConstraints changeDataFeed generatedColumns columnMapping timestampNtz]}" {
		t.Errorf("UpgradeProtocol(2,5)+timestampNtz = %v", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// flakyStore fails PutIfAbsent of commit files as configured.
type flakyStore struct {
	*storage.Local
	writeThenFail atomic.Int32 // puts that land but report an error
	failNoWrite   atomic.Int32 // puts that fail without writing
}

func (f *flakyStore) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	if strings.HasSuffix(p, ".json") && strings.Contains(p, "_delta_log/0") {
		if f.writeThenFail.Add(-1) >= 0 {
			if err := f.Local.PutIfAbsent(ctx, p, data); err != nil {
				return err
			}
			return errors.New("503 slow down (after the object was stored)")
		}
		if f.failNoWrite.Add(-1) >= 0 {
			return errors.New("connection reset")
		}
	}
	return f.Local.PutIfAbsent(ctx, p, data)
}

func TestCommitAmbiguousOutcome(t *testing.T) {
	ctx := context.Background()
	fs := &flakyStore{Local: newStore(t)}
	tbl, err := Open(ctx, fs)
	if err != nil {
		t.Fatal(err)
	}
	p, m := newTableMetadata("t", mustSchema(t, `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}`), nil, nil)
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: &p, Metadata: &m}); err != nil {
		t.Fatal(err)
	}
	// 1. The put landed but reported an error: the retry sees our own txnId → success,
	// exactly one commit.
	fs.writeThenFail.Store(1)
	v, err := tbl.Commit(ctx, Commit{ReadVersion: 0, Txns: []deltalog.Txn{{AppID: "app", Version: 5}}})
	if err != nil || v != 1 {
		t.Fatalf("Commit = %d, %v; want 1, nil", v, err)
	}
	// 2. The put failed without writing: the identical retry lands.
	fs.failNoWrite.Store(2)
	if v, err = tbl.Commit(ctx, Commit{ReadVersion: 1, Txns: []deltalog.Txn{{AppID: "app", Version: 6}}}); err != nil || v != 2 {
		t.Fatalf("Commit = %d, %v; want 2, nil", v, err)
	}
	// 3. Every put fails: outcome unknown, reported as such.
	fs.failNoWrite.Store(10)
	if _, err = tbl.Commit(ctx, Commit{ReadVersion: 2, Txns: []deltalog.Txn{{AppID: "app", Version: 7}}}); !errors.Is(err, ErrCommitOutcomeUnknown) {
		t.Fatalf("Commit error %v, want ErrCommitOutcomeUnknown", err)
	}
	fs.failNoWrite.Store(0)
	s, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 2 || s.Txns["app"] != 6 {
		t.Errorf("version %d txn %d, want 2 and 6", s.Version, s.Txns["app"])
	}
	ents, _ := os.ReadDir(filepath.Join(fs.Root(), "_delta_log"))
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d commit files, want 3", n)
	}
}

func TestStatsTruncationUTF16AndPartitionColumns(t *testing.T) {
	// 31 ASCII + "😀" (2 UTF-16 units) at the cut: the pair is kept whole.
	s31 := strings.Repeat("a", 31)
	if got := truncateMin(s31+"😀b", 32); got != s31+"😀" {
		t.Errorf("min %q", got)
	}
	if got, ok := truncateMax(s31+"😀b", 32); !ok || got != s31+"😀\u007f" {
		t.Errorf("max %q %v", got, ok)
	}
	// 16 emoji = 32 UTF-16 units = 16 code points: exactly at the limit, nothing cut; a
	// 17th is cut and the tie-breaker is U+10FFFF (the dropped unit is > U+007F).
	e16 := strings.Repeat("😀", 16)
	if got, ok := truncateMax(e16, 32); !ok || got != e16 {
		t.Errorf("max at limit %q", got)
	}
	if got, ok := truncateMax(e16+"😀", 32); !ok || got != e16+"\U0010FFFF" {
		t.Errorf("max over limit %q", got)
	}
	if got := truncateMin(e16+"x", 32); got != e16 {
		t.Errorf("min over limit %q", got)
	}
	// Partition columns get no stats and do not count against numIndexedCols.
	ctx := context.Background()
	st := newStore(t)
	schema := mustSchema(t, `{"type":"struct","fields":[{"name":"p","type":"string","nullable":true,"metadata":{}},{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"b","type":"long","nullable":true,"metadata":{}}]}`)
	data := &deltalog.StructType{Fields: schema.Fields[1:]}
	pq, err := ParquetSchema(data, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := shredRows(pq, []map[string]any{{"a": int64(1), "b": int64(2)}})
	if err != nil {
		t.Fatal(err)
	}
	v := "x"
	add, err := WriteDataFile(ctx, st, pq, cols, 1, FileOptions{Schema: schema, PartitionColumns: []string{"p"},
		Configuration: map[string]string{deltalog.PropNumIndexedCols: "1"}, Dir: "p=x", PartitionValues: map[string]*string{"p": &v}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"numRecords":1,"minValues":{"a":1},"maxValues":{"a":1},"nullCount":{"a":0}}`; add.Stats != want {
		t.Errorf("stats %s, want %s", add.Stats, want)
	}
}

func TestV2CheckpointWritten(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	_, m := newTableMetadata("t", mustSchema(t, `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}`), nil,
		map[string]string{deltalog.PropCheckpointInterval: "2", "delta.checkpointPolicy": "v2"})
	p := deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"v2Checkpoint"}, WriterFeatures: []string{"v2Checkpoint", "appendOnly", "invariants"}}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: &p, Metadata: &m}); err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v < 2; v++ {
		a := deltalog.Add{Path: fmt.Sprintf("f%d.parquet", v), Size: 1, ModificationTime: 1, DataChange: true}
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: v, Adds: []deltalog.Add{a}, Txns: []deltalog.Txn{{AppID: "app", Version: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := listLog(ctx, st, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.checkpoints[2]) != 1 || !strings.HasSuffix(l.checkpoints[2][0][0], ".json") || !isUUID(strings.Split(l.checkpoints[2][0][0], ".")[2]) {
		t.Fatalf("checkpoints %v, want one UUID-named JSON checkpoint at 2", l.checkpoints)
	}
	b, _ := st.Get(ctx, logDir+"/"+l.checkpoints[2][0][0])
	if !strings.HasPrefix(string(b), `{"checkpointMetadata":{"version":2}}`) {
		t.Errorf("checkpoint starts %q", strings.SplitN(string(b), "\n", 2)[0])
	}
	for v := int64(0); v <= 2; v++ {
		_ = removeFile(st, commitPath(v))
	}
	s, err := loadSnapshot(ctx, st, tbl.opts.now())
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 2 || s.Files.Len() != 2 || s.Txns["app"] != 1 || !slices.Contains(s.Protocol.WriterFeatures, "v2Checkpoint") {
		t.Errorf("from the V2 checkpoint: version %d files %d txns %v protocol %+v", s.Version, s.Files.Len(), s.Txns, s.Protocol)
	}
}
