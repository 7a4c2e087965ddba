package deltawriter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

func testSchema() *deltalog.StructType {
	return &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "a", Type: deltalog.Long, Nullable: true}}}
}

func createTable(t *testing.T, tbl *Table, conf map[string]string) {
	t.Helper()
	p, m := newTableMetadata("t", testSchema(), nil, conf)
	v, err := tbl.Commit(context.Background(), Commit{ReadVersion: -1, Protocol: &p, Metadata: &m, Operation: "CREATE TABLE"})
	if err != nil || v != 0 {
		t.Fatalf("create: %d, %v", v, err)
	}
}

func fakeAdd(path string) deltalog.Add {
	return deltalog.Add{Path: path, Size: 1, ModificationTime: 1, DataChange: true, Stats: `{"numRecords":2}`}
}

func TestCommitConflicts(t *testing.T) {
	ctx := context.Background()
	type step struct {
		winner Commit // committed by another Table after we read version 0
		ours   Commit
		want   error // nil = success
		wantV  int64
	}
	for _, tc := range []struct {
		name string
		step
	}{
		{"blind append retried at next version", step{
			winner: Commit{ReadVersion: 0, Adds: []deltalog.Add{fakeAdd("w")}, Txns: []deltalog.Txn{{AppID: "other", Version: 9}}},
			ours:   Commit{ReadVersion: 0, Adds: []deltalog.Add{fakeAdd("o")}, Txns: []deltalog.Txn{{AppID: "app-t-0", Version: 5}}},
			wantV:  2}},
		{"winner covers our txn", step{
			winner: Commit{ReadVersion: 0, Adds: []deltalog.Add{fakeAdd("w")}, Txns: []deltalog.Txn{{AppID: "app-t-0", Version: 5}}},
			ours:   Commit{ReadVersion: 0, Adds: []deltalog.Add{fakeAdd("o")}, Txns: []deltalog.Txn{{AppID: "app-t-0", Version: 5}}},
			want:   ErrTxnAlreadyCommitted}},
		{"winner has lower txn for our appId", step{
			winner: Commit{ReadVersion: 0, Txns: []deltalog.Txn{{AppID: "app-t-0", Version: 3}}},
			ours:   Commit{ReadVersion: 0, Txns: []deltalog.Txn{{AppID: "app-t-0", Version: 5}}},
			want:   ErrConcurrentTxn}},
		{"winner changed metadata", step{
			winner: Commit{ReadVersion: 0, Metadata: nil /* set below */},
			ours:   Commit{ReadVersion: 0, Adds: []deltalog.Add{fakeAdd("o")}},
			want:   ErrMetadataChanged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			ours, err := Open(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			createTable(t, ours, nil)
			other, err := Open(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			w := tc.winner
			if tc.want == ErrMetadataChanged {
				s, _ := other.Snapshot(ctx)
				m := s.Metadata
				m.Configuration = map[string]string{"delta.appendOnly": "true"}
				w.Metadata = &m
			}
			if v, err := other.Commit(ctx, w); err != nil || v != 1 {
				t.Fatalf("winner: %d, %v", v, err)
			}
			// ours still has version 0 cached: the first attempt at version 1 must collide.
			v, err := ours.Commit(ctx, tc.ours)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Commit = %d, %v; want %v", v, err, tc.want)
				}
				if _, gerr := st.Get(ctx, commitPath(2)); gerr == nil {
					t.Fatalf("version 2 written despite the conflict")
				}
				return
			}
			if err != nil || v != tc.wantV {
				t.Fatalf("Commit = %d, %v; want %d", v, err, tc.wantV)
			}
			s, err := ours.Snapshot(ctx)
			if err != nil || s.Version != 2 || s.Files.Len() != 2 || s.Txns["app-t-0"] != 5 || s.Txns["other"] != 9 {
				t.Fatalf("snapshot after retry: %+v, %v", s, err)
			}
		})
	}
}

func TestCommitStaleReadVersion(t *testing.T) {
	// The caller prepared against version 0 but the Table already knows version 1: the
	// known winner is checked without writing.
	ctx := context.Background()
	tbl, _ := Open(ctx, newStore(t))
	createTable(t, tbl, nil)
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: 0, Txns: []deltalog.Txn{{AppID: "a", Version: 7}}}); err != nil {
		t.Fatal(err)
	}
	_, err := tbl.Commit(ctx, Commit{ReadVersion: 0, Txns: []deltalog.Txn{{AppID: "a", Version: 7}}})
	if !errors.Is(err, ErrTxnAlreadyCommitted) {
		t.Fatalf("Commit = %v, want ErrTxnAlreadyCommitted", err)
	}
}

func TestCommitActionsOrderAndContent(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, _ := Open(ctx, st)
	p, m := newTableMetadata("orders", testSchema(), nil, map[string]string{"delta.appendOnly": "true"})
	if len(m.ID) != 36 || m.ID[14] != '4' || strings.Count(m.ID, "-") != 4 || m.CreatedTime == nil || m.Format.Provider != "parquet" {
		t.Fatalf("metadata: %+v", m)
	}
	if p.MinReaderVersion != 1 || p.MinWriterVersion != 2 {
		t.Fatalf("protocol: %+v", p)
	}
	_, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: &p, Metadata: &m, Operation: "CREATE TABLE",
		OperationParameters: map[string]string{"partitionBy": "[]"}, EngineInfo: "ingestd/test",
		Adds: []deltalog.Add{fakeAdd("x")}, Txns: []deltalog.Txn{{AppID: "a", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := st.Get(ctx, commitPath(0))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var kinds []string
	for _, l := range lines {
		kinds = append(kinds, l[2:strings.Index(l[2:], `"`)+2])
	}
	if got := strings.Join(kinds, ","); got != "commitInfo,protocol,metaData,txn,add" {
		t.Fatalf("action order %s", got)
	}
	for _, want := range []string{`"operation":"CREATE TABLE"`, `"operationParameters":{"partitionBy":"[]"}`, `"engineInfo":"ingestd/test"`, `"isBlindAppend":true`, `"numOutputRows":"2"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("commitInfo lacks %s: %s", want, lines[0])
		}
	}
	if !strings.Contains(lines[3], `"lastUpdated":`) {
		t.Errorf("txn without lastUpdated: %s", lines[3])
	}
	for _, bad := range []Commit{
		{ReadVersion: 0, Txns: []deltalog.Txn{{AppID: "a", Version: 1}, {AppID: "a", Version: 2}}},
		{ReadVersion: 0, Adds: []deltalog.Add{fakeAdd("y"), fakeAdd("y")}},
		{ReadVersion: -1},
		{ReadVersion: 5},
	} {
		if _, err := tbl.Commit(ctx, bad); err == nil {
			t.Errorf("Commit(%+v) succeeded", bad)
		}
	}
}

func TestProtocolGate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		protocol string
		conf     string
		field    string
		want     string
	}{
		{"unknown writer feature", `{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["appendOnly","rowTracking"]}`, `{}`, `{}`, `writer feature "rowTracking"`},
		{"future writer version", `{"minReaderVersion":1,"minWriterVersion":8}`, `{}`, `{}`, `writer version 8`},
		{"check constraint", `{"minReaderVersion":1,"minWriterVersion":3}`, `{"delta.constraints.positive":"regexp_like(CAST(a AS STRING), '^1')"}`, `{}`, `CHECK constraint "positive" (regexp_like(CAST(a AS STRING), '^1')) (feature checkConstraints): bind expression "regexp_like(CAST(a AS STRING), '^1')": function regexp_like in regexp_like(CAST(` + "`a`" + ` AS STRING), '^1'): not supported`},
		{"invariant", `{"minReaderVersion":1,"minWriterVersion":2}`, `{}`, `{"delta.invariants":"{\"expression\":{\"expression\":\"a || 'x' > 0\"}}"}`, `check invariant of column "a" (a || 'x' > 0) (feature invariants)`},
		{"generated column", `{"minReaderVersion":1,"minWriterVersion":4}`, `{}`, `{"delta.generationExpression":"rand() + 1"}`, `generatedColumns`},
		{"identity column", `{"minReaderVersion":1,"minWriterVersion":6}`, `{}`, `{"delta.identity.start":1}`, `identityColumns`},
		{"row tracking", `{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["rowTracking"]}`, `{}`, `{}`, `writer feature "rowTracking"`},
		{"default value metadata", `{"minReaderVersion":1,"minWriterVersion":2}`, `{}`, `{"CURRENT_DEFAULT":"0"}`, `allowColumnDefaults`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			schema := fmt.Sprintf(`{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":%s}]}`, tc.field)
			meta := fmt.Sprintf(`{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":%q,"partitionColumns":[],"configuration":%s}}`, schema, tc.conf)
			writeCommits(t, st, `{"protocol":`+tc.protocol+"}\n"+meta)
			tbl, err := Open(ctx, st) // reading is fine
			if err != nil {
				t.Fatal(err)
			}
			s, _ := tbl.Snapshot(ctx)
			if err := s.CheckWritable(); !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckWritable = %v, want %q", err, tc.want)
			}
			_, err = tbl.Commit(ctx, Commit{ReadVersion: 0, Adds: []deltalog.Add{fakeAdd("x")}})
			if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Commit = %v, want %q", err, tc.want)
			}
			if _, err := st.Get(ctx, commitPath(1)); err == nil {
				t.Fatalf("commit 1 written by a refused commit")
			}
		})
	}
}

func TestCheckpointEveryInterval(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, _ := Open(ctx, st)
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "3"})
	for i := 1; i <= 7; i++ {
		c := Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprintf("f%d", i))},
			Txns: []deltalog.Txn{{AppID: fmt.Sprintf("app-%d", i%2), Version: int64(i)}}}
		if v, err := tbl.Commit(ctx, c); err != nil || v != int64(i) {
			t.Fatalf("commit %d: %d, %v", i, v, err)
		}
	}
	for _, v := range []int64{3, 6} {
		if _, err := st.Get(ctx, checkpointPath(v)); err != nil {
			t.Fatalf("checkpoint %d: %v", v, err)
		}
	}
	if _, err := st.Get(ctx, checkpointPath(5)); err == nil {
		t.Fatalf("unexpected checkpoint at 5")
	}
	if got := readLastCheckpoint(ctx, st); got != 6 {
		t.Fatalf("_last_checkpoint version = %d", got)
	}
	want, _ := tbl.Snapshot(ctx)
	// Read from the checkpoint alone: remove commits 0..6.
	for v := int64(0); v <= 6; v++ {
		if err := removeFile(st, commitPath(v)); err != nil {
			t.Fatal(err)
		}
	}
	tbl2, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tbl2.Snapshot(ctx)
	if got.Version != 7 || got.Files.Len() != want.Files.Len() || fmt.Sprint(got.Txns) != fmt.Sprint(want.Txns) ||
		got.Metadata.ID != want.Metadata.ID || got.Schema.String() != want.Schema.String() || got.Protocol.MinWriterVersion != 2 {
		t.Fatalf("from checkpoint: version %d files %d txns %v; want %d %d %v", got.Version, got.Files.Len(), got.Txns, want.Version, want.Files.Len(), want.Txns)
	}
	for p, a := range want.Files.All() {
		if g, _ := got.Files.Get(p); g.Size != a.Size || g.Stats != a.Stats || g.ModificationTime != a.ModificationTime || !g.DataChange {
			t.Errorf("file %s: %+v, want %+v", p, g, a)
		}
	}
	if lu := got.txns["app-1"].LastUpdated; lu == nil || *lu <= 0 {
		t.Errorf("txn lastUpdated lost in checkpoint")
	}
}

func TestCorruptLastCheckpoint(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, _ := Open(ctx, st)
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "2"})
	for i := 1; i <= 2; i++ {
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, content := range []string{"", "{not json", `{"version":99,"size":1}`} {
		if err := st.Put(ctx, lastCheckpointPath, []byte(content)); err != nil {
			t.Fatal(err)
		}
		tbl2, err := Open(ctx, st)
		if err != nil {
			t.Fatalf("_last_checkpoint %q: %v", content, err)
		}
		s, _ := tbl2.Snapshot(ctx)
		if s.Version != 2 || s.Files.Len() != 2 {
			t.Fatalf("_last_checkpoint %q: version %d files %d", content, s.Version, s.Files.Len())
		}
	}
}
