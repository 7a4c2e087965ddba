package maintain

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

// TestLogCleanupKeepsWhatReplayNeeds is the replay safeguard: a dead letter whose flush
// never committed (commit id "crashed-flush") names table version 1; the commit that
// later moved its txn past it (version 2) has another id, so replay must call it an
// orphan. The table's delta.logRetentionDuration is 1 second and every log file is an hour
// old, so cleanup after checkpoint 10 would delete versions 0..9 and, with them, what
// replay needs: the dead letter would then look real (AckIndex.Classify has no commits
// after its version) and be landed a second time. With the dead-letter topic's
// retention (1 h + 10 min segments, read from the broker in production) as the hold,
// cleanup keeps the log, and the dead letter stays an orphan.
func TestLogCleanupKeepsWhatReplayNeeds(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st, _ := storage.NewLocal(root)
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	ss := `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}`
	p := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	m := deltalog.Metadata{ID: "t", Format: deltalog.Format{Provider: "parquet", Options: map[string]string{}}, SchemaString: ss, PartitionColumns: []string{},
		Configuration: map[string]string{deltalog.PropCheckpointInterval: "5", deltalog.PropLogRetentionDuration: "interval 1 seconds"}}
	commit := func(c deltawriter.Commit) {
		t.Helper()
		if _, err := tbl.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	commit(deltawriter.Commit{ReadVersion: -1, Protocol: &p, Metadata: &m})
	commit(deltawriter.Commit{ReadVersion: 0, TxnID: "flush-1", Txns: []deltalog.Txn{{AppID: "p-orders-0", Version: 10}}})
	commit(deltawriter.Commit{ReadVersion: 1, TxnID: "flush-3", Txns: []deltalog.Txn{{AppID: "p-orders-0", Version: 20}}})
	for v := int64(3); v <= 11; v++ {
		commit(deltawriter.Commit{ReadVersion: v - 1, Txns: []deltalog.Txn{{AppID: "p-orders-0", Version: 20 + v}}})
	}
	old := time.Now().Add(-time.Hour)
	ents, _ := os.ReadDir(filepath.Join(root, "_delta_log"))
	for _, e := range ents {
		_ = os.Chtimes(filepath.Join(root, "_delta_log", e.Name()), old, old)
	}
	orphan := &kgo.Record{Headers: []kgo.RecordHeader{
		{Key: dlq.HeaderCommitID, Value: []byte("crashed-flush")},
		{Key: dlq.HeaderTxnAppID, Value: []byte("p-orders-0")},
		{Key: dlq.HeaderTxnVersion, Value: []byte("15")},
		{Key: dlq.HeaderTableVersion, Value: []byte("1")},
	}}
	classify := func() dlq.AckState {
		t.Helper()
		x, err := dlq.NewAckIndex(ctx, st, []*kgo.Record{orphan})
		if err != nil {
			t.Fatal(err)
		}
		return x.Classify(orphan)
	}
	if got := classify(); got != dlq.AckOrphan {
		t.Fatalf("before cleanup the dead letter is %s, want orphan", got)
	}
	retention, segment := "3600000", "600000"
	hold, err := holdFromConfigs([]kadm.Config{{Key: "retention.ms", Value: &retention}, {Key: "segment.ms", Value: &segment}})
	if err != nil {
		t.Fatal(err)
	}
	c := &LogCleaner{cfg: &config.Config{Name: "p", DeadLetter: config.DeadLetter{Topic: "orders.dlq"}}, log: slog.New(slog.DiscardHandler), hold: hold, holdAt: time.Now()}
	c.AfterCheckpoint(ctx, tbl, 10)
	if _, err := st.Stat(ctx, fmt.Sprintf("_delta_log/%020d.json", 2)); err != nil {
		t.Errorf("log cleanup deleted commit 2, which replay needs: %v", err)
	}
	if got := classify(); got != dlq.AckOrphan {
		t.Fatalf("after log cleanup the orphaned dead letter is %s: it would be landed twice", got)
	}
	// Without a dead-letter topic nothing holds the log: cleanup deletes 0..9.
	c = &LogCleaner{cfg: &config.Config{Name: "p"}, log: slog.New(slog.DiscardHandler)}
	c.AfterCheckpoint(ctx, tbl, 10)
	if _, err := st.Stat(ctx, fmt.Sprintf("_delta_log/%020d.json", 9)); !storage.IsNotExist(err) {
		t.Errorf("log cleanup without a dead-letter topic kept commit 9 (%v)", err)
	}
}
