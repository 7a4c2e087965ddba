package deltawriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/internal/tarzst"
)

// Conformance over the Delta tables of delta-kernel-rs in the repository's
// testdata/delta-kernel-rs (Apache-2.0, with its LICENSE and NOTICE): golden_data/<name>.tar.zst holds <name>/delta (the
// table) and, for most, <name>/expected (Spark's read of the latest version, as Parquet);
// data/ holds more tables, plain or as .tar.zst.
//
// The expected protocol, schema, partition columns, live files, row counts and txn
// versions come from testdata/golden_expect.json, produced by an independent
// implementation (delta-rs, via testdata/golden_expect.py). Row counts are checked a
// second time against the rows in expected/. Tables delta-rs cannot load are checked by
// hand below.

// kernelTestdata returns the repository's delta-kernel-rs test data directory.
func kernelTestdata(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "delta-kernel-rs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "golden_data")); err != nil {
		t.Fatalf("delta-kernel-rs test data not found at %s: %v", dir, err)
	}
	return dir
}

var (
	extractOnce sync.Once
	extractDir  string
	extractErr  error
)

// extractedTestdata extracts every .tar.zst of the test data once per test binary into a
// temporary directory: <tmp>/golden_data/<name>/... and <tmp>/data/<name>/....
func extractedTestdata(t *testing.T) string {
	t.Helper()
	src := kernelTestdata(t)
	extractOnce.Do(func() {
		extractDir, extractErr = os.MkdirTemp("", "ingestd-kernel-testdata-")
		if extractErr != nil {
			return
		}
		for _, sub := range []string{"golden_data", "data"} {
			archives, _ := filepath.Glob(filepath.Join(src, sub, "*.tar.zst"))
			for _, a := range archives {
				name := strings.TrimSuffix(filepath.Base(a), ".tar.zst")
				if err := tarzst.Extract(a, filepath.Join(extractDir, sub, name)); err != nil {
					extractErr = fmt.Errorf("extract %s: %w", a, err)
					return
				}
			}
		}
	})
	if extractErr != nil {
		t.Fatal(extractErr)
	}
	return extractDir
}

// goldenTable is one table of the suite: its root and, for golden_data, its expected/.
type goldenTable struct {
	key      string // "golden_data/<name>" or "data/<name>", as in golden_expect.json
	root     string
	expected string // "" when there is none
}

func goldenTables(t *testing.T) []goldenTable {
	src := kernelTestdata(t)
	ex := extractedTestdata(t)
	var out []goldenTable
	ents, _ := os.ReadDir(filepath.Join(ex, "golden_data"))
	for _, e := range ents {
		base := filepath.Join(ex, "golden_data", e.Name(), e.Name())
		gt := goldenTable{key: "golden_data/" + e.Name(), root: filepath.Join(base, "delta")}
		if fi, err := os.Stat(filepath.Join(base, "expected")); err == nil && fi.IsDir() {
			gt.expected = filepath.Join(base, "expected")
		}
		out = append(out, gt)
	}
	ents, _ = os.ReadDir(filepath.Join(src, "data"))
	for _, e := range ents {
		switch {
		case e.IsDir():
			out = append(out, goldenTable{key: "data/" + e.Name(), root: filepath.Join(src, "data", e.Name())})
		case strings.HasSuffix(e.Name(), ".tar.zst"):
			name := strings.TrimSuffix(e.Name(), ".tar.zst")
			root := filepath.Join(ex, "data", name, name)
			if _, err := os.Stat(root); err != nil {
				root = filepath.Join(ex, "data", name)
			}
			out = append(out, goldenTable{key: "data/" + name, root: root})
		}
	}
	// Folders of tables (partition_cm/{id,name,none}, stats-writing-all-types/delta).
	var expanded []goldenTable
	for _, gt := range out {
		if _, err := os.Stat(filepath.Join(gt.root, "_delta_log")); err == nil || strings.HasPrefix(gt.key, "golden_data/") {
			expanded = append(expanded, gt)
			continue
		}
		subs, _ := os.ReadDir(gt.root)
		n := 0
		for _, sub := range subs {
			if _, err := os.Stat(filepath.Join(gt.root, sub.Name(), "_delta_log")); err == nil {
				expanded = append(expanded, goldenTable{key: gt.key + "/" + sub.Name(), root: filepath.Join(gt.root, sub.Name())})
				n++
			}
		}
		if n == 0 {
			expanded = append(expanded, gt)
		}
	}
	out = expanded
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

type goldenExpect struct {
	Error            string            `json:"error"`
	Version          int64             `json:"version"`
	Protocol         deltalog.Protocol `json:"protocol"`
	PartitionColumns []string          `json:"partitionColumns"`
	Schema           json.RawMessage   `json:"schema"`
	Files            []string          `json:"files"`
	NumRecords       *int64            `json:"numRecords"`
	Txns             map[string]int64  `json:"txns"`
}

func loadGoldenExpect(t *testing.T) map[string]goldenExpect {
	b, err := os.ReadFile(filepath.Join("testdata", "golden_expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]goldenExpect
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func openGolden(root string) (*Snapshot, error) {
	st, err := storage.NewLocal(root)
	if err != nil {
		return nil, err
	}
	tbl, err := Open(context.Background(), st)
	if err != nil {
		return nil, err
	}
	return tbl.Snapshot(context.Background())
}

// negativeGolden are the tables every reader must refuse, with a piece of the error.
var negativeGolden = map[string]string{
	"golden_data/deltalog-invalid-protocol-version":                              "reader version 99",
	"golden_data/deltalog-state-reconstruction-from-checkpoint-missing-metadata": "no metaData action",
	"golden_data/deltalog-state-reconstruction-from-checkpoint-missing-protocol": "no protocol action",
	"golden_data/deltalog-state-reconstruction-without-metadata":                 "no metaData action",
	"golden_data/deltalog-state-reconstruction-without-protocol":                 "no protocol action",
	"golden_data/versions-not-contiguous":                                        "not contiguous",
	"golden_data/no-delta-log-folder":                                            ErrTableNotFound.Error(),
}

// invalidGolden are Delta-standalone log fixtures that are not valid tables for a
// writer: their metaData has no schemaString (or there is none). delta-rs refuses them
// too; ingestd refuses to load them, with an error naming the problem.
var invalidGolden = map[string]string{
	"golden_data/deltalog-commit-info":                     "parse schema",
	"golden_data/update-deleted-directory":                 "parse schema",
	"golden_data/data-reader-absolute-paths-escaped-chars": "no metaData action",
}

func TestConformanceGoldenTables(t *testing.T) {
	start := time.Now()
	expect := loadGoldenExpect(t)
	tables := goldenTables(t)
	if len(tables) < 140 {
		t.Fatalf("found %d tables, want the whole suite (143)", len(tables))
	}
	seen := map[string]bool{}
	var positive, withRows int
	for _, gt := range tables {
		seen[gt.key] = true
		t.Run(gt.key, func(t *testing.T) {
			s, err := openGolden(gt.root)
			if want, ok := negativeGolden[gt.key]; ok {
				if err == nil {
					t.Fatalf("loaded version %d, want an error containing %q", s.Version, want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not contain %q", err, want)
				}
				return
			}
			if want, ok := invalidGolden[gt.key]; ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one containing %q", err, want)
				}
				return
			}
			exp, ok := expect[gt.key]
			if !ok {
				if gt.key == "golden_data/hive" { // a folder of tables, checked below
					return
				}
				t.Fatalf("no expectation in golden_expect.json")
			}
			if exp.Error != "" {
				checkByHand(t, gt, s, err)
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			positive++
			if o, ok := expectOverrides[gt.key]; ok {
				o(&exp)
			}
			logical, known := compareWithExpect(t, s, exp)
			if gt.expected != "" && known {
				if n := parquetRowsIn(t, gt.expected); n != logical {
					t.Errorf("expected/ has %d rows, add.stats say %d (after deletion vectors)", n, logical)
				}
				withRows++
			}
		})
	}
	for k := range negativeGolden {
		if !seen[k] {
			t.Errorf("negative table %s not found", k)
		}
	}
	t.Logf("%d tables (%d compared with delta-rs, %d row counts checked against expected/) in %v", len(tables), positive, withRows, time.Since(start).Round(time.Millisecond))
}

// expectOverrides correct delta-rs where it disagrees with the Delta protocol and with
// Delta's own test of the table.
var expectOverrides = map[string]func(*goldenExpect){
	// Delta's DeltaLogSuite "paths should be canonicalized": the remove spelled
	// file:/... (or file:///...) deletes the add spelled /...; delta-rs compares raw
	// strings and keeps the file.
	"golden_data/canonicalized-paths-normal-a":  func(e *goldenExpect) { e.Files = nil; e.NumRecords = nil },
	"golden_data/canonicalized-paths-normal-b":  func(e *goldenExpect) { e.Files = nil; e.NumRecords = nil },
	"golden_data/canonicalized-paths-special-a": func(e *goldenExpect) { e.Files = nil; e.NumRecords = nil },
	"golden_data/canonicalized-paths-special-b": func(e *goldenExpect) { e.Files = nil; e.NumRecords = nil },
}

// compareWithExpect checks s against delta-rs' view and returns the logical row count
// (numRecords minus deletion vector cardinalities) and whether every file had stats.
func compareWithExpect(t *testing.T, s *Snapshot, exp goldenExpect) (int64, bool) {
	t.Helper()
	if s.Version != exp.Version {
		t.Errorf("version %d, want %d", s.Version, exp.Version)
	}
	gotP := s.Protocol
	gotP.ReaderFeatures = slices.Sorted(slices.Values(gotP.ReaderFeatures))
	gotP.WriterFeatures = slices.Sorted(slices.Values(gotP.WriterFeatures))
	if gotP.ReaderFeatures == nil {
		gotP.ReaderFeatures = []string{}
	}
	if gotP.WriterFeatures == nil {
		gotP.WriterFeatures = []string{}
	}
	if !reflect.DeepEqual(gotP, exp.Protocol) {
		t.Errorf("protocol %+v, want %+v", gotP, exp.Protocol)
	}
	if !slices.Equal(s.Metadata.PartitionColumns, exp.PartitionColumns) {
		t.Errorf("partition columns %q, want %q", s.Metadata.PartitionColumns, exp.PartitionColumns)
	}
	want, err := deltalog.ParseSchema(string(exp.Schema))
	if err != nil {
		t.Fatalf("expected schema: %v", err)
	}
	if g, w := schemaJSON(t, s.Schema), schemaJSON(t, want); !reflect.DeepEqual(g, w) {
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		t.Errorf("schema\n got %s\nwant %s", gb, wb)
	}
	var files []string
	var rows, logical int64
	rowsKnown := true
	for _, a := range s.Files.All() {
		files = append(files, deltalog.CanonicalPath(a.Path))
		n, ok := a.NumRecords()
		if !ok {
			rowsKnown = false
		}
		rows += n
		logical += n
		if a.DeletionVector != nil {
			logical -= a.DeletionVector.Cardinality
		}
	}
	sort.Strings(files)
	wantFiles := append([]string{}, exp.Files...)
	for i, f := range wantFiles {
		wantFiles[i] = deltalog.CanonicalPath(f)
	}
	sort.Strings(wantFiles)
	if len(files) != len(wantFiles) || (len(files) > 0 && !slices.Equal(files, wantFiles)) {
		t.Errorf("live files\n got %q\nwant %q", files, wantFiles)
	}
	switch {
	case exp.NumRecords == nil:
	case !rowsKnown:
		t.Errorf("numRecords unknown for some file, delta-rs says %d rows", *exp.NumRecords)
	case rows != *exp.NumRecords:
		t.Errorf("rows from add stats %d, want %d", rows, *exp.NumRecords)
	}
	if exp.Txns == nil {
		exp.Txns = map[string]int64{}
	}
	if !reflect.DeepEqual(s.Txns, exp.Txns) {
		t.Errorf("txns %v, want %v", s.Txns, exp.Txns)
	}
	return logical, rowsKnown
}

// schemaJSON is the schema as generic JSON, for comparison independent of key order and
// number formatting.
func schemaJSON(t *testing.T, s *deltalog.StructType) any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkByHand covers the tables delta-rs cannot load.
func checkByHand(t *testing.T, gt goldenTable, s *Snapshot, err error) {
	t.Helper()
	switch gt.key {
	case "golden_data/hive": // a folder of small tables, not a table itself
		if !errors.Is(err, ErrTableNotFound) {
			t.Errorf("load = %v, want ErrTableNotFound", err)
		}
		subs, _ := filepath.Glob(filepath.Join(filepath.Dir(gt.root), "delta", "*", "_delta_log"))
		if len(subs) < 10 {
			t.Fatalf("found %d hive tables, want >= 10", len(subs))
		}
		for _, sub := range subs {
			s, err := openGolden(filepath.Dir(sub))
			if err != nil {
				t.Errorf("hive table %s: %v", filepath.Base(filepath.Dir(sub)), err)
				continue
			}
			if s.Files.Len() == 0 || len(s.Schema.Fields) == 0 {
				t.Errorf("hive table %s: %d files, schema %s", filepath.Base(filepath.Dir(sub)), s.Files.Len(), s.Schema)
			}
		}
	case "data/table-with-geo": // delta-rs does not know the geometry type
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		if !slices.Contains(s.Protocol.ReaderFeatures, "geospatial") {
			t.Errorf("protocol %+v lacks geospatial", s.Protocol)
		}
		if !strings.Contains(s.Schema.String(), "geometry(OGC:CRS84)") {
			t.Errorf("schema %s lacks the geometry column", s.Schema)
		}
		if werr := s.CheckWritable(); !errors.Is(werr, ErrUnsupportedFeature) || !strings.Contains(werr.Error(), "geospatial") {
			t.Errorf("CheckWritable = %v, want a refusal naming geospatial", werr)
		}
	case "data/crc-malformed": // only a .crc file, no commit: not a table
		if !errors.Is(err, ErrTableNotFound) {
			t.Errorf("load = %v, want ErrTableNotFound", err)
		}
	default:
		t.Fatalf("delta-rs could not load this table and there is no hand check: load error %v", err)
	}
}

// parquetRowsIn counts the rows of the Parquet files in dir (from their footers).
func parquetRowsIn(t *testing.T, dir string) int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	var n int64
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := fh.Stat()
		pf, err := parquet.OpenFile(fh, fi.Size())
		if err != nil {
			fh.Close()
			t.Fatalf("open %s: %v", f, err)
		}
		n += pf.NumRows()
		fh.Close()
	}
	return n
}

// Named delta-kernel-rs tables (app transactions and their retention, V2 checkpoints,
// stats_parsed, column mapping), with values read off their logs by hand.
func TestConformanceNamedDataTables(t *testing.T) {
	ex := extractedTestdata(t)
	src := kernelTestdata(t)
	root := func(name string) string {
		if fi, err := os.Stat(filepath.Join(src, "data", name)); err == nil && fi.IsDir() {
			return filepath.Join(src, "data", name)
		}
		return filepath.Join(ex, "data", name, name)
	}
	t.Run("app-txn-checkpoint", func(t *testing.T) {
		s, err := openGolden(root("app-txn-checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		if s.Version != 1 || fmt.Sprint(s.Txns) != "map[my-app:3 my-app2:2]" {
			t.Errorf("version %d txns %v, want 1 map[my-app:3 my-app2:2]", s.Version, s.Txns)
		}
	})
	t.Run("app-txn-with-last-updated retention", func(t *testing.T) {
		st, _ := storage.NewLocal(root("app-txn-with-last-updated"))
		// At t = 1747935650 ms + 12 h the 1-day retention keeps old_app (lastUpdated
		// 1747935650) and drops new_app_1/2 (lastUpdated 1000, 1002); new_app_0 has no
		// lastUpdated and never expires.
		clock := func() time.Time { return time.UnixMilli(1747935650).Add(12 * time.Hour) }
		tbl, err := Open(context.Background(), st, WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := tbl.Snapshot(context.Background())
		if got := fmt.Sprint(s.Txns); got != "map[new_app_0:1 old_app:1]" {
			t.Errorf("txns %s, want map[new_app_0:1 old_app:1]", got)
		}
		if s.TxnRetention != 24*time.Hour {
			t.Errorf("TxnRetention %v, want 24h", s.TxnRetention)
		}
		// Just after the oldest txn was written, every txn is live.
		tbl2, _ := Open(context.Background(), st, WithClock(func() time.Time { return time.UnixMilli(1002) }))
		s2, _ := tbl2.Snapshot(context.Background())
		if len(s2.Txns) != 4 {
			t.Errorf("txns %v, want all 4", s2.Txns)
		}
	})
	for _, name := range []string{
		"v2-checkpoints-json-with-sidecars", "v2-checkpoints-parquet-with-sidecars",
		"v2-checkpoints-json-without-sidecars", "v2-checkpoints-parquet-without-sidecars",
		"v2-checkpoints-json-with-last-checkpoint", "v2-checkpoints-parquet-with-last-checkpoint",
		"v2-classic-checkpoint-json", "v2-classic-checkpoint-parquet",
	} {
		t.Run(name+" uses its V2 checkpoint", func(t *testing.T) {
			// Delete every commit the newest checkpoint covers: the snapshot must then come
			// from the checkpoint (and its sidecars) alone.
			dir := copyTree(t, root(name))
			l, err := listLog(context.Background(), mustLocal(t, dir), "")
			if err != nil {
				t.Fatal(err)
			}
			var newest int64 = -1
			for v := range l.checkpoints {
				newest = max(newest, v)
			}
			if newest < 0 {
				t.Fatal("no checkpoint listed")
			}
			full, err := openGolden(dir)
			if err != nil {
				t.Fatal(err)
			}
			for v := int64(0); v <= newest; v++ {
				_ = os.Remove(filepath.Join(dir, filepath.FromSlash(commitPath(v))))
			}
			s, err := openGolden(dir)
			if err != nil {
				t.Fatalf("load from checkpoint %d only: %v", newest, err)
			}
			if s.Version != full.Version || s.Files.Len() != full.Files.Len() || s.Files.Len() == 0 {
				t.Errorf("from checkpoint: version %d with %d files; full log: version %d with %d files", s.Version, s.Files.Len(), full.Version, full.Files.Len())
			}
		})
	}
	for _, name := range []string{"v1-single-part-struct-stats-only", "v1-multi-part-struct-stats-only", "v2-classic-parquet-struct-stats-only", "v2-json-sidecars-struct-stats-only"} {
		t.Run(name+" stats_parsed", func(t *testing.T) {
			s, err := openGolden(root(name))
			if err != nil {
				t.Fatal(err)
			}
			parsed := 0
			for _, a := range s.Files.All() {
				if a.StatsParsed != nil {
					if _, ok := a.NumRecords(); !ok {
						t.Errorf("%s: stats_parsed without numRecords", a.Path)
					}
					parsed++
				}
			}
			if parsed == 0 {
				t.Errorf("no file carried stats_parsed")
			}
		})
	}
	t.Run("column mapping", func(t *testing.T) {
		s, err := openGolden(filepath.Join(src, "data", "partition_cm", "name"))
		if err != nil {
			t.Fatal(err)
		}
		if s.ColumnMapping == deltalog.ColumnMappingNone {
			t.Errorf("column mapping mode %q, want name or id", s.ColumnMapping)
		}
		for _, f := range s.Schema.Fields {
			if f.PhysicalName(s.ColumnMapping) == f.Name {
				t.Errorf("field %q has no physical name", f.Name)
			}
		}
	})
}

func mustLocal(t *testing.T, dir string) *storage.Local {
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// copyTree copies the _delta_log (with _sidecars) of a table into a temporary
// directory; data files are not needed to load a snapshot.
func copyTree(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(filepath.Join(root, "_delta_log"), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
