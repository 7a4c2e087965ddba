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
	"golang.org/x/sync/errgroup"

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
	DataFiles  int     `json:"dataFiles"` // data files and orphans written (hard links or uploads)
	Seconds    float64 `json:"seconds"`
	CPU        float64 `json:"cpuS"` // of the whole process
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
	dir := fs.String("dir", "", "table directory on local disk (created; must not exist)")
	uri := fs.String("uri", "", "table URI instead of -dir (s3://bucket/prefix, gs://…, az://…, file:///path): the bucket is created if missing, the prefix must hold nothing")
	files := fs.Int("files", 10_000, "live files")
	parts := fs.Int("partitions", 0, "Hive partitions (date=…); 0: unpartitioned")
	tail := fs.Int("tail", 10, "commits of 10 files after the checkpoint")
	data := fs.Bool("data", true, "write the data files and orphans (VACUUM lists them); false: the log only, which is all that load, checkpoint, refresh, commits and startup read")
	workers := fs.Int("workers", 16, "uploads of data files in flight on an object store")
	v2 := fs.Bool("v2", false, "a table with the v2Checkpoint feature (protocol 3/7, the feature in both lists): V2 checkpoints")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := tableURI(*dir, *uri)
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	ctx := context.Background()
	start := time.Now()
	st, err := openStore(ctx, u, true)
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	lay, err := generate(ctx, st, genOptions{files: *files, parts: *parts, tail: *tail, data: *data, workers: *workers, v2: *v2}, start)
	if err != nil {
		return err
	}
	lay.Seconds, lay.CPU = time.Since(start).Seconds(), cpuSeconds()
	return json.NewEncoder(stdout).Encode(lay)
}

// genOptions are gen's flags.
type genOptions struct {
	files, parts, tail int
	data               bool // write the data files and orphans
	workers            int  // uploads in flight (object stores)
	v2                 bool // the v2Checkpoint feature: V2 checkpoints
}

// dataWriter writes the generated data files, all with the stub's bytes: hard links of
// stub files on local disk, uploads (at most workers in flight) on an object store.
type dataWriter struct {
	st    storage.Store
	root  string // the local table directory; "" on an object store
	stub  []byte
	old   time.Time // the stubs' modification time on local disk
	links int
	path  string // the current local stub
	dirs  map[string]bool
	up    *errgroup.Group
	upCtx context.Context
	n     int // files written or uploading
}

func newDataWriter(ctx context.Context, st storage.Store, stub []byte, old time.Time, workers int) (*dataWriter, error) {
	w := &dataWriter{st: st, stub: stub, old: old, dirs: map[string]bool{}}
	if l, ok := st.(*storage.Local); ok {
		w.root = l.Root()
		if err := os.MkdirAll(w.root, 0o755); err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		return w, nil
	}
	w.up, w.upCtx = errgroup.WithContext(ctx)
	w.up.SetLimit(max(workers, 1))
	return w, nil
}

// write creates the data file at p (slash-separated, relative to the table root). On an
// object store it returns once the upload is started (an earlier upload's error stops
// the next ones; wait returns it).
func (w *dataWriter) write(p string) error {
	w.n++
	if w.root == "" {
		if w.upCtx.Err() != nil {
			return w.wait()
		}
		w.up.Go(func() error { return w.st.Put(w.upCtx, p, w.stub) })
		return nil
	}
	// Hard links of stubs (hidden: VACUUM never lists them), a new stub every stubLinks
	// links (file systems bound an inode's links: 65,000 on ext4).
	if w.links%stubLinks == 0 {
		w.path = filepath.Join(w.root, fmt.Sprintf(".stub-%04d.parquet", w.links/stubLinks))
		if err := os.WriteFile(w.path, w.stub, 0o644); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
		if err := os.Chtimes(w.path, w.old, w.old); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
	}
	w.links++
	full := filepath.Join(w.root, filepath.FromSlash(p))
	if pd := filepath.Dir(full); !w.dirs[pd] {
		if err := os.MkdirAll(pd, 0o755); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
		w.dirs[pd] = true
	}
	if err := os.Link(w.path, full); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	return nil
}

// wait waits for the uploads in flight and returns the first error.
func (w *dataWriter) wait() error {
	if w.up == nil {
		return nil
	}
	if err := w.up.Wait(); err != nil {
		return fmt.Errorf("gen: upload data files: %w", err)
	}
	return nil
}

// generate writes the table (see the package doc) into st, which must hold nothing.
func generate(ctx context.Context, st storage.Store, o genOptions, now time.Time) (genLayout, error) {
	files, parts, tail := o.files, o.parts, o.tail
	lay := genLayout{Dir: st.URI(), Partitions: parts, V2: o.v2}
	if ents, err := st.List(ctx, ""); err != nil {
		return lay, fmt.Errorf("gen: %w", err)
	} else if len(ents) > 0 {
		return lay, fmt.Errorf("gen: %s exists and holds %s", st.URI(), ents[0].Name)
	}
	var stub bytes.Buffer
	pw := parquet.NewGenericWriter[stubRow](&stub)
	if _, err := pw.Write([]stubRow{{ID: stubID}}); err != nil {
		return lay, fmt.Errorf("gen: write stub: %w", err)
	}
	if err := pw.Close(); err != nil {
		return lay, fmt.Errorf("gen: write stub: %w", err)
	}
	// Old enough for VACUUM to delete what nothing references (on local disk; an object
	// store sets the time of an upload itself).
	old := now.Add(-30 * 24 * time.Hour)
	upCtx, cancel := context.WithCancel(ctx)
	dw, err := newDataWriter(upCtx, st, stub.Bytes(), old, o.workers)
	if err != nil {
		cancel()
		return lay, err
	}
	// The uploads in flight end before generate returns, whatever happens (on an error,
	// cancelled).
	defer func() {
		cancel()
		_ = dw.wait()
	}()
	size := int64(stub.Len())
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
		if !o.data {
			return a, nil
		}
		return a, dw.write(a.Path)
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
		if err := st.PutIfAbsent(ctx, fmt.Sprintf("_delta_log/%020d.json", version), data); err != nil {
			return fmt.Errorf("gen: commit %d: %w", version, err)
		}
		version++
		return nil
	}
	tailFiles := tail * 10
	removed := files / 50
	proto := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	if o.v2 {
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
	if o.data {
		for i := range max(files/1000, 1) {
			p := fmt.Sprintf("orphan-%06d.parquet", i)
			if parts > 0 {
				p = "date=" + old.Format("2006-01-02") + "/" + p
			}
			if err := dw.write(p); err != nil {
				return lay, err
			}
			lay.Orphans++
		}
	}
	if err := dw.wait(); err != nil {
		return lay, err
	}
	lay.Live, lay.Rows, lay.Commits, lay.Version = files, int64(files), int(version), version-1
	lay.DataFiles = dw.n
	return lay, nil
}
