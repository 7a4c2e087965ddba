package deltawriter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

func TestCommits(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, tbl, nil)
	ids := []string{""}
	for i := 1; i <= 4; i++ {
		id := NewTxnID()
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), TxnID: id, Txns: []deltalog.Txn{{AppID: "app", Version: int64(10 * i)}}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Not commits: a checkpoint-like name, a temp file, a .crc file.
	for _, name := range []string{"00000000000000000002.checkpoint.parquet", ".00000000000000000005.json.tmp", "00000000000000000001.crc"} {
		if err := os.WriteFile(filepath.Join(st.Root(), "_delta_log", name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Log cleanup removed commit 1.
	if err := os.Remove(filepath.Join(st.Root(), "_delta_log", "00000000000000000001.json")); err != nil {
		t.Fatal(err)
	}
	if vs, err := CommitVersions(ctx, st); err != nil || !slices.Equal(vs, []int64{0, 2, 3, 4}) {
		t.Fatalf("CommitVersions = %v, %v", vs, err)
	}
	var got []int64
	for c, err := range tbl.Commits(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if c.TxnID != ids[c.Version] || c.TxnID != CommitTxnID(c.Actions) {
			t.Errorf("version %d: txnId %q, want %q", c.Version, c.TxnID, ids[c.Version])
		}
		if len(c.Actions) != 2 || c.Actions[1].Txn == nil || c.Actions[1].Txn.Version != 10*c.Version {
			t.Errorf("version %d: actions %+v", c.Version, c.Actions)
		}
		got = append(got, c.Version)
	}
	if !slices.Equal(got, []int64{2, 3, 4}) {
		t.Errorf("Commits after 0 = %v, want [2 3 4]", got)
	}
	got = got[:0]
	for c := range Commits(ctx, st, -1) { // stopping early ends the iteration
		got = append(got, c.Version)
		if len(got) == 2 {
			break
		}
	}
	if !slices.Equal(got, []int64{0, 2}) {
		t.Errorf("Commits after -1, two taken = %v", got)
	}
	for range Commits(ctx, st, 4) {
		t.Error("a commit after the last version")
	}
	if e, err := ReadCommit(ctx, st, 1); !errors.Is(err, storage.ErrNotExist) || e.Version != 0 {
		t.Errorf("ReadCommit of a removed commit: %+v, %v", e, err)
	}
	// A commit that cannot be read is yielded once as an error, and ends the iteration.
	if err := os.WriteFile(filepath.Join(st.Root(), "_delta_log", "00000000000000000003.json"), []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var errs, seen int
	for _, err := range Commits(ctx, st, 0) {
		seen++
		if err != nil {
			errs++
		}
	}
	if seen != 2 || errs != 1 {
		t.Errorf("corrupt commit 3: %d yielded, %d errors; want 2 and 1", seen, errs)
	}
}

func TestCommitTxnID(t *testing.T) {
	for _, tc := range []struct {
		actions []deltalog.Action
		want    string
	}{
		{nil, ""},
		{[]deltalog.Action{{Txn: &deltalog.Txn{AppID: "a"}}}, ""},
		{[]deltalog.Action{{CommitInfo: deltalog.CommitInfo{"operation": "WRITE"}}}, ""},
		{[]deltalog.Action{{CommitInfo: deltalog.CommitInfo{"txnId": 7.0}}}, ""},
		{[]deltalog.Action{{CommitInfo: deltalog.CommitInfo{"txnId": "x"}}, {Txn: &deltalog.Txn{AppID: "a"}}}, "x"},
	} {
		if got := CommitTxnID(tc.actions); got != tc.want {
			t.Errorf("CommitTxnID(%+v) = %q, want %q", tc.actions, got, tc.want)
		}
	}
}
