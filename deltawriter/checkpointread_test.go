package deltawriter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestCheckpointColumnarMatchesRows reads checkpoints with the columnar reader and with
// the row-wise one it replaces (a row tree and a JSON round trip per action) and
// requires the same actions: ingestd's own (every action kind and optional field; and
// 66,000 files, so two row groups and pages) and the checkpoints of the Spark and
// delta-rs tables of testdata.
func TestCheckpointColumnarMatchesRows(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var files [][]byte
	for _, s := range []*Snapshot{richSnapshot(now), bigSnapshot(66_000)} {
		st := newStore(t)
		if err := writeCheckpoint(ctx, st, s, now); err != nil {
			t.Fatal(err)
		}
		b, err := st.Get(ctx, checkpointPath(s.Version))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	err := filepath.WalkDir("../testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.Contains(d.Name(), ".checkpoint") && strings.HasSuffix(d.Name(), ".parquet") || strings.Contains(p, "_sidecars") && strings.HasSuffix(p, ".parquet") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("only %d checkpoints to compare", len(files))
	}
	compared := 0
	for i, data := range files {
		b := newFileTableBuilder(0)
		var got []deltalog.Action
		err := readCheckpointParquet(bytes.NewReader(data), int64(len(data)), b, &got)
		if err == errRowPath {
			continue // add.stats_parsed: read row-wise anyway
		}
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		for _, a := range (&FileSet{base: b.build()}).All() {
			got = append(got, deltalog.Action{Add: &a})
		}
		var want []deltalog.Action
		err = readParquetRows(data, func(row map[string]any) error {
			a, err := checkpointAction(row)
			if a != nil {
				want = append(want, *a)
			}
			return err
		})
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		if g, w := actionLines(t, got), actionLines(t, want); !slices.Equal(g, w) {
			t.Fatalf("file %d: %d actions, want %d; first difference:\n%s", i, len(g), len(w), firstDiff(g, w))
		}
		compared++
	}
	if compared < 9 {
		t.Fatalf("compared %d checkpoints of %d (the others carry add.stats_parsed)", compared, len(files))
	}
}

func actionLines(t *testing.T, as []deltalog.Action) []string {
	t.Helper()
	var out []string
	for _, a := range as {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

func firstDiff(g, w []string) string {
	for i := range max(len(g), len(w)) {
		var x, y string
		if i < len(g) {
			x = g[i]
		}
		if i < len(w) {
			y = w[i]
		}
		if x != y {
			return fmt.Sprintf(" got %s\nwant %s", x, y)
		}
	}
	return ""
}
