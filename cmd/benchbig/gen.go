package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// genLayout is what gen wrote.
type genLayout struct {
	Dir        string  `json:"dir"`
	Live       int     `json:"liveFiles"`
	Partitions int     `json:"partitions"`
	V2         bool    `json:"v2Checkpoint,omitempty"`
	Commits    int     `json:"commits"`
	Checkpoint int64   `json:"checkpointVersion"`
	Version    int64   `json:"version"`
	Expired    int     `json:"tombstonesExpired"`
	Retained   int     `json:"tombstonesRetained"`
	Orphans    int     `json:"orphans"`
	Rows       int64   `json:"rows"`
	Seconds    float64 `json:"seconds"`
}

// stubRow is the one row of every generated data file.
type stubRow struct {
	ID int64 `parquet:"id"`
}

const (
	stubID        = 7
	stubStats     = `{"numRecords":1,"minValues":{"id":7},"maxValues":{"id":7},"nullCount":{"id":0}}`
	benchApp      = "bench-bench-0"
	addsPerCommit = 10_000
	stubLinks     = 50_000
)

func genCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	dir := fs.String("dir", "", "table directory (created; must not exist)")
	files := fs.Int("files", 10_000, "live files")
	parts := fs.Int("partitions", 0, "Hive partitions (date=…); 0: unpartitioned")
	tail := fs.Int("tail", 10, "commits of 10 files after the checkpoint")
	v2 := fs.Bool("v2", false, "a table with the v2Checkpoint feature (protocol 3/7, the feature in both lists): V2 checkpoints")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("gen: -dir is required")
	}
	start := time.Now()
	lay, err := generate(context.Background(), *dir, *files, *parts, *tail, *v2, start)
	if err != nil {
		return err
	}
	lay.Seconds = time.Since(start).Seconds()
	return json.NewEncoder(stdout).Encode(lay)
}

// generate writes the table (see the package doc).
func generate(ctx context.Context, dir string, files, parts, tail int, v2 bool, now time.Time) (genLayout, error) {
	lay := genLayout{Dir: dir, Partitions: parts, V2: v2}
	if _, err := os.Stat(dir); err == nil {
		return lay, fmt.Errorf("gen: %s exists", dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o755); err != nil {
		return lay, fmt.Errorf("gen: %w", err)
	}
	var stub bytes.Buffer
	w := parquet.NewGenericWriter[stubRow](&stub)
	if _, err := w.Write([]stubRow{{ID: stubID}}); err != nil {
		return lay, fmt.Errorf("gen: write stub: %w", err)
	}
	if err := w.Close(); err != nil {
		return lay, fmt.Errorf("gen: write stub: %w", err)
	}
	// Old enough for VACUUM to delete what nothing references.
	old := now.Add(-30 * 24 * time.Hour)
	// Data files are hard links of stubs (hidden: VACUUM never lists them), a new stub
	// every stubLinks links (file systems bound an inode's links: 65,000 on ext4).
	links, stubPath := 0, ""
	link := func(p string) error {
		if links%stubLinks == 0 {
			stubPath = filepath.Join(dir, fmt.Sprintf(".stub-%04d.parquet", links/stubLinks))
			if err := os.WriteFile(stubPath, stub.Bytes(), 0o644); err != nil {
				return fmt.Errorf("gen: %w", err)
			}
			if err := os.Chtimes(stubPath, old, old); err != nil {
				return fmt.Errorf("gen: %w", err)
			}
		}
		links++
		if err := os.Link(stubPath, p); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
		return nil
	}
	size := int64(stub.Len())
	madeDirs := map[string]bool{}
	n := 0
	newFile := func() (deltalog.Add, error) {
		i := n
		n++
		name := fmt.Sprintf("part-%05d-%08x-0000-4000-8000-%012x-c000.snappy.parquet", i%1000, i, i)
		a := deltalog.Add{Path: name, PartitionValues: map[string]*string{}, Size: size, ModificationTime: old.UnixMilli(),
			DataChange: true, Stats: stubStats}
		if parts > 0 {
			d := old.AddDate(0, 0, i%parts).Format("2006-01-02")
			a.PartitionValues["date"] = &d
			a.Path = "date=" + d + "/" + name
		}
		full := filepath.Join(dir, filepath.FromSlash(a.Path))
		if pd := filepath.Dir(full); !madeDirs[pd] {
			if err := os.MkdirAll(pd, 0o755); err != nil {
				return a, fmt.Errorf("gen: %w", err)
			}
			madeDirs[pd] = true
		}
		return a, link(full)
	}
	fields := []*deltalog.StructField{{Name: "id", Type: deltalog.PrimitiveType("long"), Nullable: true, Metadata: map[string]any{}}}
	var partCols []string
	if parts > 0 {
		fields = append(fields, &deltalog.StructField{Name: "date", Type: deltalog.PrimitiveType("string"), Nullable: true, Metadata: map[string]any{}})
		partCols = []string{"date"}
	}
	schema, err := json.Marshal(&deltalog.StructType{Fields: fields})
	if err != nil {
		return lay, fmt.Errorf("gen: %w", err)
	}
	created := old.UnixMilli()
	meta := deltalog.Metadata{ID: "00000000-0000-4000-8000-00000000b16b", Format: deltalog.Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString: string(schema), PartitionColumns: partCols, Configuration: map[string]string{}, CreatedTime: &created}
	version := int64(0)
	put := func(actions []deltalog.Action) error {
		ts := now.UnixMilli()
		actions = append(actions, deltalog.Action{Txn: &deltalog.Txn{AppID: benchApp, Version: version, LastUpdated: &ts}})
		data, err := deltalog.EncodeCommit(actions)
		if err != nil {
			return fmt.Errorf("gen: commit %d: %w", version, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.json", version)), data, 0o644); err != nil {
			return fmt.Errorf("gen: commit %d: %w", version, err)
		}
		version++
		return nil
	}
	tailFiles := tail * 10
	removed := files / 50
	proto := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	if v2 {
		proto = deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
			ReaderFeatures: []string{deltalog.FeatureV2Checkpoint}, WriterFeatures: []string{deltalog.FeatureV2Checkpoint}}
	}
	actions := []deltalog.Action{{Protocol: &proto}, {Metadata: &meta}}
	var toRemove []deltalog.Add
	for made := 0; made < files-tailFiles+removed; {
		for k := 0; k < addsPerCommit && made < files-tailFiles+removed; k++ {
			a, err := newFile()
			if err != nil {
				return lay, err
			}
			if made < removed {
				toRemove = append(toRemove, a)
			}
			actions = append(actions, deltalog.Action{Add: &a})
			made++
		}
		if err := put(actions); err != nil {
			return lay, err
		}
		actions = nil
	}
	expiredAt, recentAt := now.Add(-30*24*time.Hour).UnixMilli(), now.Add(-time.Hour).UnixMilli()
	for i, a := range toRemove {
		at := recentAt
		if i%2 == 0 {
			at = expiredAt
			lay.Expired++
		} else {
			lay.Retained++
		}
		actions = append(actions, deltalog.Action{Remove: &deltalog.Remove{Path: a.Path, DeletionTimestamp: &at, DataChange: true,
			PartitionValues: a.PartitionValues, Size: &a.Size}})
	}
	if err := put(actions); err != nil {
		return lay, err
	}
	st, err := storage.NewLocal(dir)
	if err != nil {
		return lay, fmt.Errorf("gen: %w", err)
	}
	tbl, err := deltawriter.Open(ctx, st, deltawriter.WithClock(func() time.Time { return now }))
	if err != nil {
		return lay, fmt.Errorf("gen: %w", err)
	}
	if lay.Checkpoint, err = tbl.Checkpoint(ctx); err != nil {
		return lay, fmt.Errorf("gen: %w", err)
	}
	for range tail {
		actions = nil
		for range 10 {
			a, err := newFile()
			if err != nil {
				return lay, err
			}
			actions = append(actions, deltalog.Action{Add: &a})
		}
		if err := put(actions); err != nil {
			return lay, err
		}
	}
	for i := range max(files/1000, 1) {
		p := filepath.Join(dir, fmt.Sprintf("orphan-%06d.parquet", i))
		if parts > 0 {
			p = filepath.Join(dir, "date="+old.Format("2006-01-02"), fmt.Sprintf("orphan-%06d.parquet", i))
		}
		if err := link(p); err != nil {
			return lay, err
		}
		lay.Orphans++
	}
	lay.Live, lay.Rows, lay.Commits, lay.Version = files, int64(files), int(version), version-1
	return lay, nil
}
