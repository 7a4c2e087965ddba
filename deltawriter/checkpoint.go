package deltawriter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// Classic checkpoints (PROTOCOL.md, "Checkpoints" and "Last Checkpoint File"): one
// Parquet file <v>.checkpoint.parquet, one row per action, each
// action a nullable top-level struct column named like its JSON key.

const lastCheckpointPath = logDir + "/_last_checkpoint"

func checkpointPath(v int64) string { return fmt.Sprintf("%s/%020d.checkpoint.parquet", logDir, v) }

// lastCheckpoint is the content of _delta_log/_last_checkpoint.
type lastCheckpoint struct {
	Version       int64 `json:"version"`
	Size          int64 `json:"size"`
	SizeInBytes   int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles int64 `json:"numOfAddFiles,omitempty"`
	Parts         *int  `json:"parts,omitempty"`
}

// readLastCheckpoint returns the version in _last_checkpoint, or -1 when it is missing,
// empty or unreadable (readers must then fall back to listing).
func readLastCheckpoint(ctx context.Context, st storage.Store) int64 {
	b, err := st.Get(ctx, lastCheckpointPath)
	if err != nil {
		return -1
	}
	var lc lastCheckpoint
	if err := json.Unmarshal(b, &lc); err != nil || lc.Version < 0 {
		return -1
	}
	return lc.Version
}

// readCheckpoint reads a complete checkpoint at version v: classic (single or
// multi-part Parquet) or V2 (UUID-named JSON or Parquet, or classic-named with V2
// content), following sidecar actions into _delta_log/_sidecars/. Columns are looked up
// by name; unknown columns are ignored; add.stats_parsed is kept in Add.StatsParsed. A
// missing part or sidecar, or a V2 checkpoint whose checkpointMetadata names another
// version, makes the whole checkpoint unreadable (an error).
func readCheckpoint(ctx context.Context, st storage.Store, v int64, names []string) (*Snapshot, error) {
	b := newFileTableBuilder(0)
	var actions []deltalog.Action
	for _, name := range names {
		if err := readCheckpointInto(ctx, st, logDir+"/"+name, b, &actions); err != nil {
			return nil, fmt.Errorf("read checkpoint %s: %w", name, err)
		}
	}
	var files []deltalog.Action
	for _, a := range actions {
		switch {
		case a.CheckpointMetadata != nil:
			if a.CheckpointMetadata.Version != v {
				return nil, fmt.Errorf("read checkpoint %d: checkpointMetadata says version %d", v, a.CheckpointMetadata.Version)
			}
		case a.Sidecar != nil:
			p := a.Sidecar.Path
			if strings.Contains(p, ":") || strings.HasPrefix(p, "/") {
				return nil, fmt.Errorf("read checkpoint %d: sidecar %q: absolute sidecar paths are not supported", v, p)
			}
			dec, err := url.PathUnescape(p)
			if err != nil {
				dec = p
			}
			var as []deltalog.Action
			if err := readCheckpointInto(ctx, st, sidecarDir+"/"+dec, b, &as); err != nil {
				return nil, fmt.Errorf("read checkpoint %d: sidecar %s: %w", v, p, err)
			}
			for _, sa := range as {
				if sa.Remove != nil {
					files = append(files, sa)
				}
			}
		}
	}
	s := emptySnapshot()
	s.apply(actions)
	s.apply(files)
	s.Files = &FileSet{base: b.build()}
	s.Version = v
	return s, nil
}

// CheckpointSidecars returns the sidecar files that the checkpoint file name (in
// _delta_log) references, as paths relative to _delta_log/_sidecars, URL-decoded
// (PROTOCOL.md, "Sidecar File Information"). A sidecar named by an absolute URI gives its
// file name: the protocol puts every sidecar in the table's own _delta_log/_sidecars and
// only encourages writers to store the bare name, so log cleanup must keep that file
// too. A JSON checkpoint is scanned line by line and only its
// lines naming "sidecar" are decoded; of a Parquet one only the footer and the
// sidecar.path column are read, so a classic checkpoint (no sidecar column) costs one
// footer read. On a store with ranged reads (storage.RangeGetter) neither is held whole:
// an inline V2 checkpoint of a big table can be hundreds of MB of JSON. Log cleanup uses
// it to keep the sidecars of the checkpoints it keeps. Errors: the store's, or a
// malformed file.
func CheckpointSidecars(ctx context.Context, st storage.Store, name string) ([]string, error) {
	p := logDir + "/" + name
	var paths []string
	keep := func(sp string) {
		if sp == "" {
			return
		}
		if strings.Contains(sp, ":") || strings.HasPrefix(sp, "/") {
			if u, err := url.Parse(sp); err == nil {
				sp = u.Path
			}
			paths = append(paths, path.Base(sp))
			return
		}
		if dec, err := url.PathUnescape(sp); err == nil {
			sp = dec
		}
		paths = append(paths, sp)
	}
	var r io.ReaderAt
	var size int64
	if rg, ok := st.(storage.RangeGetter); ok {
		fi, err := st.Stat(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("read sidecars of %s: %w", name, err)
		}
		r, size = storage.NewObjectReader(ctx, rg, p, fi.Size), fi.Size
	} else {
		data, err := st.Get(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("read sidecars of %s: %w", name, err)
		}
		r, size = bytes.NewReader(data), int64(len(data))
	}
	if strings.HasSuffix(name, ".json") {
		sc := bufio.NewScanner(io.NewSectionReader(r, 0, size))
		sc.Buffer(make([]byte, 0, 64<<10), maxCheckpointLine)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.Contains(line, []byte(`"sidecar"`)) {
				continue
			}
			var a struct {
				Sidecar *deltalog.Sidecar `json:"sidecar"`
			}
			if err := json.Unmarshal(line, &a); err != nil {
				return nil, fmt.Errorf("read sidecars of %s: %w", name, err)
			}
			if a.Sidecar != nil {
				keep(a.Sidecar.Path)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read sidecars of %s: %w", name, err)
		}
		return paths, nil
	}
	f, err := parquet.OpenFile(r, size, parquet.SkipMagicBytes(true), parquet.OptimisticRead(true),
		parquet.ReadBufferSize(parquetReadBuffer), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("read sidecars of %s: %w", name, err)
	}
	leaf, ok := f.Schema().Lookup("sidecar", "path")
	if !ok {
		return nil, nil
	}
	buf := make([]parquet.Value, cpReadBatch)
	for _, rgp := range f.RowGroups() {
		rd := parquet.NewColumnChunkValueReader(rgp.ColumnChunks()[leaf.ColumnIndex])
		for {
			n, err := rd.ReadValues(buf)
			for _, v := range buf[:n] {
				if v.DefinitionLevel() == leaf.MaxDefinitionLevel {
					keep(string(v.ByteArray()))
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = rd.Close()
				return nil, fmt.Errorf("read sidecars of %s: %w", name, err)
			}
		}
		_ = rd.Close()
	}
	return paths, nil
}

// maxCheckpointLine bounds one line of a JSON checkpoint scanned by CheckpointSidecars
// (a metaData line carries the whole schema).
const maxCheckpointLine = 64 << 20

// readCheckpointInto reads one checkpoint or sidecar file: NDJSON when the name ends in
// .json, Parquet otherwise; its add actions go to b, the others are appended to
// *actions. A Parquet file on a store with ranged reads (storage.RangeGetter: every
// store of package storage) is read through a storage.ObjectReader — its size from
// Stat, then the footer and the column chunks in blocks of storage.ReadBlockSize, at
// most storage.ReadBlocks held — so a checkpoint of any size is never held whole
// (PROTOCOL.md, "Checkpoints": readers may read only the columns they need); other
// stores read it whole. Add rows are decoded column by column (readCheckpointParquet),
// unless the file carries add.stats_parsed.
func readCheckpointInto(ctx context.Context, st storage.Store, p string, b *fileTableBuilder, actions *[]deltalog.Action) error {
	keep := func(as []deltalog.Action) {
		for i := range as {
			if as[i].Add != nil {
				b.addAction(as[i].Add)
			} else {
				*actions = append(*actions, as[i])
			}
		}
	}
	var r io.ReaderAt
	var size int64
	if rg, ok := st.(storage.RangeGetter); ok && !strings.HasSuffix(p, ".json") {
		fi, err := st.Stat(ctx, p)
		if err != nil {
			return err
		}
		r, size = storage.NewObjectReader(ctx, rg, p, fi.Size), fi.Size
	} else {
		data, err := st.Get(ctx, p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".json") {
			as, err := deltalog.ParseCommit(bytes.NewReader(data))
			if err != nil {
				return err
			}
			keep(as)
			return nil
		}
		r, size = bytes.NewReader(data), int64(len(data))
	}
	err := readCheckpointParquet(r, size, b, actions)
	if !errors.Is(err, errRowPath) {
		return err
	}
	var as []deltalog.Action
	err = readParquetRowsAt(r, size, func(row map[string]any) error {
		a, err := checkpointAction(row)
		if err != nil {
			return err
		}
		if a != nil {
			as = append(as, *a)
		}
		return nil
	})
	keep(as)
	return err
}

// readParquetRows calls fn with every row of a Parquet file in memory (readParquetRowsAt).
func readParquetRows(data []byte, fn func(map[string]any) error) error {
	return readParquetRowsAt(bytes.NewReader(data), int64(len(data)), fn)
}

// parquetReadBuffer is parquet-go's read buffer per column and the size of the optimistic
// footer read (one request for the footer of a checkpoint).
const parquetReadBuffer = 64 << 10

// readParquetRowsAt calls fn with every row of the Parquet file of size bytes at r,
// assembled as a tree. The footer is read with one optimistic read from the end, the page
// index and bloom filters are skipped (a checkpoint reader scans every row).
func readParquetRowsAt(r io.ReaderAt, size int64, fn func(map[string]any) error) error {
	f, err := parquet.OpenFile(r, size, parquet.SkipMagicBytes(true), parquet.OptimisticRead(true),
		parquet.ReadBufferSize(parquetReadBuffer), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return err
	}
	schema := f.Schema()
	buf := make([]parquet.Row, 64)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				if ferr := fn(assembleRow(schema, r)); ferr != nil {
					_ = rows.Close()
					return ferr
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = rows.Close()
				return err
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}

var checkpointKinds = []string{"protocol", "metaData", "txn", "add", "remove", "domainMetadata", "sidecar", "checkpointMetadata"}

// checkpointAction converts one checkpoint row into an action through its JSON form
// (the column names are the JSON keys). Rows with no known action are skipped.
func checkpointAction(row map[string]any) (*deltalog.Action, error) {
	for _, k := range checkpointKinds {
		v, ok := row[k].(map[string]any)
		if !ok {
			continue
		}
		if (k == "add" || k == "remove" || k == "sidecar") && v["path"] == nil {
			continue
		}
		var parsed map[string]any
		if k == "add" {
			parsed, _ = v["stats_parsed"].(map[string]any)
			v = maps.Clone(v)
			delete(v, "stats_parsed")
			delete(v, "partitionValues_parsed")
		}
		b, err := json.Marshal(map[string]any{k: v})
		if err != nil {
			return nil, fmt.Errorf("decode checkpoint %s: %w", k, err)
		}
		var a deltalog.Action
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, fmt.Errorf("decode checkpoint %s: %w", k, err)
		}
		if a.Add != nil && parsed != nil {
			a.Add.StatsParsed = parsed
		}
		return &a, nil
	}
	return nil, nil
}

// checkpointSchema mirrors the schema Spark/Delta 3.x writes (PROTOCOL.md, "Checkpoint
// Schema"): every field optional, 3-level lists, key_value maps with required keys.
// Checkpoints of other writers that differed from it were unreadable to Photon, Trino
// or newer delta-rs.
var checkpointSchema = func() *parquet.Schema {
	str := func() parquet.Node { return parquet.Optional(parquet.String()) }
	i32 := func() parquet.Node { return parquet.Optional(parquet.Leaf(parquet.Int32Type)) }
	i64 := func() parquet.Node { return parquet.Optional(parquet.Leaf(parquet.Int64Type)) }
	boolean := func() parquet.Node { return parquet.Optional(parquet.Leaf(parquet.BooleanType)) }
	strMap := func() parquet.Node {
		return parquet.Optional(parquet.Map(parquet.Required(parquet.String()), parquet.Optional(parquet.String())))
	}
	strList := func() parquet.Node { return parquet.Optional(parquet.List(parquet.Optional(parquet.String()))) }
	dv := func() parquet.Node {
		return parquet.Optional(parquet.Group{
			"storageType": str(), "pathOrInlineDv": str(), "offset": i32(),
			"sizeInBytes": i32(), "cardinality": i64(), "maxRowIndex": i64(),
		})
	}
	return parquet.NewSchema("spark_schema", parquet.Group{
		"txn": parquet.Optional(parquet.Group{"appId": str(), "version": i64(), "lastUpdated": i64()}),
		"add": parquet.Optional(parquet.Group{
			"path": str(), "partitionValues": strMap(), "size": i64(), "modificationTime": i64(),
			"dataChange": boolean(), "tags": strMap(), "deletionVector": dv(), "baseRowId": i64(),
			"defaultRowCommitVersion": i64(), "stats": str(),
		}),
		"remove": parquet.Optional(parquet.Group{
			"path": str(), "deletionTimestamp": i64(), "dataChange": boolean(),
			"extendedFileMetadata": boolean(), "partitionValues": strMap(), "size": i64(),
			"deletionVector": dv(), "baseRowId": i64(), "defaultRowCommitVersion": i64(),
		}),
		"metaData": parquet.Optional(parquet.Group{
			"id": str(), "name": str(), "description": str(),
			"format":       parquet.Optional(parquet.Group{"provider": str(), "options": strMap()}),
			"schemaString": str(), "partitionColumns": strList(), "configuration": strMap(),
			"createdTime": i64(),
		}),
		"protocol": parquet.Optional(parquet.Group{
			"minReaderVersion": i32(), "minWriterVersion": i32(),
			"readerFeatures": strList(), "writerFeatures": strList(),
		}),
		"domainMetadata": parquet.Optional(parquet.Group{"domain": str(), "configuration": str(), "removed": boolean()}),
	})
}()

// sidecarSchema is the schema of a V2 checkpoint's sidecar files: the add and remove
// columns of checkpointSchema, nothing else. The protocol allows only add and remove
// entries in a sidecar (PROTOCOL.md, "Sidecar Files"), and Spark writes its sidecars
// with exactly these two columns (those of the delta-kernel-rs conformance tables), so
// the other actions' columns, which would be null on every row, are left out. Spark
// (Delta 3.x) and delta-rs 1.6.6 read ingestd's sidecars (integration,
// TestV2SidecarCheckpointReaders).
var sidecarSchema = func() *parquet.Schema {
	g := parquet.Group{}
	for _, f := range checkpointSchema.Fields() {
		if n := f.Name(); n == "add" || n == "remove" {
			g[n] = f
		}
	}
	return parquet.NewSchema("spark_schema", g)
}()

// writeCheckpoint writes the checkpoint of snapshot s with a fresh checkpointWriter.
func writeCheckpoint(ctx context.Context, st storage.Store, s *Snapshot, now time.Time) error {
	var w checkpointWriter
	return w.write(ctx, st, s, now)
}

// checkpointWriter writes checkpoints, keeping its chunk's column buffers for the next
// one. It is not safe for concurrent use.
type checkpointWriter struct {
	chunk checkpointChunk
	yield func() // when not nil, called between steps (background checkpoints)
	// sidecarFiles is the most file actions per sidecar of a V2 checkpoint (0:
	// v2SidecarFiles; WithV2SidecarFiles).
	sidecarFiles int
}

// cpChunkRows is the number of rows of one row group of a classic checkpoint: the rows
// whose column values are held at a time while it is written (per add row about 53
// level bytes, 10 words and its path and stats: ~25 MiB for 65,536 rows of 250-byte
// stats, however many files the table has). A variable for tests.
var cpChunkRows = 1 << 16

// write streams <v>.checkpoint.parquet for snapshot s (classic, single file, Spark's
// schema; a row group per cpChunkRows rows, encoded by parquetenc from the levels form:
// DataPage V1, PLAIN, SNAPPY, no page index) to the store (Store.Create: visible
// atomically once complete, replacing an existing one: two writers checkpointing the
// same version write equivalent content), then replaces _last_checkpoint atomically
// (Store.Put; without "parts", which Trino refuses for a single-file checkpoint). Time
// is linear in the live files (they are already in key order) and memory bounded by a
// chunk of rows plus the encoder's buffers (one encoded row group). With w.yield set
// (background checkpoints) it yields every yieldRows rows built and after every page
// encoded, on one goroutine.
//
// A single file rather than a multi-part checkpoint: the protocol deprecates multi-part
// checkpoints (PROTOCOL.md, "Checkpoints"; they are forbidden with v2Checkpoint), and
// Spark, delta-rs and Kernel read a large single file row group by row group.
// A table with the v2Checkpoint writer feature gets a V2 checkpoint instead
// (writeV2).
func (w *checkpointWriter) write(ctx context.Context, st storage.Store, s *Snapshot, now time.Time) error {
	if s.Protocol.MinWriterVersion >= 7 && slices.Contains(s.Protocol.WriterFeatures, deltalog.FeatureV2Checkpoint) {
		return w.writeV2(ctx, st, s, now)
	}
	src, err := newCPSource(s, now)
	if err != nil {
		return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	defer src.close()
	out, err := st.Create(ctx, checkpointPath(s.Version))
	if err != nil {
		return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	cw := &countingWriter{w: out}
	if err := w.writeRowGroups(ctx, cw, src); err != nil {
		_ = out.Abort()
		return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	lc, err := json.Marshal(lastCheckpoint{Version: s.Version, Size: int64(src.rows), SizeInBytes: cw.n, NumOfAddFiles: int64(src.numAdds)})
	if err != nil {
		return fmt.Errorf("write _last_checkpoint: %w", err)
	}
	if err := st.Put(ctx, lastCheckpointPath, lc); err != nil {
		return fmt.Errorf("write _last_checkpoint: %w", err)
	}
	return nil
}

// cpPageBytes is the page size of a checkpoint's columns (parquetenc.Writer's page
// target, in PLAIN bytes): a background checkpoint yields after each page, and encoding
// and compressing 64 KiB takes about 0.1 ms, as long as the commit that shares its core
// may wait (a page header each: the checkpoint of the 10⁶-file benchmark table is
// 17.0 MB, 19.1 MB with parquet-go's column writers and their page index).
const cpPageBytes = 64 << 10

// writeRowGroups writes the Parquet file of src's rows to out: a row group per chunk of
// cpChunkRows rows, then the footer. It stops with ctx's error between chunks.
func (w *checkpointWriter) writeRowGroups(ctx context.Context, out io.Writer, src *cpSource) error {
	pw, err := parquetenc.NewWriter(out, checkpointSchema, parquetenc.Snappy())
	if err != nil {
		return err
	}
	pw.SetYield(w.yield)
	pw.SetPageTarget(cpPageBytes)
	for !src.done() {
		n := src.fill(&w.chunk, cpClassic, cpChunkRows, w.yield)
		if _, err := pw.WriteRowGroup(w.chunk.cols, n); err != nil {
			_ = pw.Close()
			return err
		}
		if err := ctx.Err(); err != nil {
			_ = pw.Close()
			return err
		}
	}
	return pw.Close()
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// v2SidecarFiles is the default number of file actions per sidecar of a V2 checkpoint
// (WithV2SidecarFiles): 4 row groups of cpChunkRows, 4.4 MB per sidecar on the
// big-table benchmark's files (78-byte stats), so a table of 10⁶ live files gets 4
// sidecars, which Spark reads in parallel tasks and delta-kernel-rs one after the other.
// A variable for tests.
var v2SidecarFiles = 4 * cpChunkRows

// v2InlineFiles is the most file actions a V2 checkpoint keeps inline, in its top-level
// JSON file, instead of in sidecars (0.3 MB of JSON on the big-table benchmark's
// files). A variable for tests.
var v2InlineFiles = 1000

// v2Sidecar is one sidecar being written.
type v2Sidecar struct {
	name string // <uuid>.parquet, relative to _delta_log/_sidecars
	out  storage.Writer
	cw   *countingWriter
	pw   *parquetenc.Writer
	rows int
}

// writeV2 writes the checkpoint of a table with the v2Checkpoint feature as a V2
// UUID-named checkpoint (PROTOCOL.md, "V2 Spec", "UUID-named checkpoint", "Sidecar
// Files"), then replaces _last_checkpoint. Classic-named checkpoints must carry
// checkpointMetadata on such tables, so the classic layout is not used.
//
// The file actions (live adds in key order, then the tombstones not expired at now,
// with the same content as the classic checkpoint's rows) go:
//   - when there are more than min(v2InlineFiles, the sidecar size) of them, to Parquet
//     sidecars _delta_log/_sidecars/<uuid>.parquet (sidecarSchema: add and remove
//     columns only), each of at most w.sidecarFiles (v2SidecarFiles) rows, streamed from
//     the levels form as the classic checkpoint is (row groups of cpChunkRows, parquetenc,
//     SNAPPY; memory bounded by a chunk plus the encoder's buffers, yielding when
//     w.yield is set). The top-level file <v>.checkpoint.<uuid>.json then holds
//     checkpointMetadata, protocol, metaData, txns, domains and one sidecar action per
//     sidecar (path relative to _sidecars, sizeInBytes, modificationTime from the
//     store's Stat);
//   - otherwise inline in the top-level JSON file, one action per line: a small table
//     keeps one object per checkpoint and nothing in _sidecars.
//
// The top-level file is JSON (Spark's default for V2 checkpoints): it is small once the
// file actions are in sidecars. Write order: the sidecars (Store.Create), then the
// top-level file (Store.PutIfAbsent: a UUID name is never overwritten), then
// _last_checkpoint, so a reader never finds a checkpoint whose sidecars are missing. A
// failure after some sidecars leaves them unreferenced; log cleanup deletes them once
// they are older than the log retention (maintenance.CleanupLog).
//
// _last_checkpoint keeps the classic fields: version, size (every action of the
// checkpoint, sidecar rows included), sizeInBytes (the top-level file plus its sidecars)
// and numOfAddFiles. The protocol's "Last Checkpoint File Schema" has no field for V2
// checkpoints, so Spark's optional v2Checkpoint extension is not written; readers find the
// UUID-named file by listing from the version.
func (w *checkpointWriter) writeV2(ctx context.Context, st storage.Store, s *Snapshot, now time.Time) error {
	src, err := newCPSource(s, now)
	if err != nil {
		return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	defer src.close()
	per := w.sidecarFiles
	if per <= 0 {
		per = v2SidecarFiles
	}
	p, m := s.Protocol, s.Metadata
	actions := []deltalog.Action{
		{CheckpointMetadata: &deltalog.CheckpointMetadata{Version: s.Version}},
		{Protocol: &p}, {Metadata: &m},
	}
	for _, id := range src.txnIDs {
		x := s.txns[id]
		actions = append(actions, deltalog.Action{Txn: &x})
	}
	for _, d := range src.domains {
		dm := s.domains[d]
		actions = append(actions, deltalog.Action{DomainMetadata: &dm})
	}
	numFiles := src.numAdds + len(src.removeKeys)
	var sidecarBytes int64
	if numFiles <= min(v2InlineFiles, per) {
		for _, a := range s.Files.All() {
			actions = append(actions, deltalog.Action{Add: &a})
		}
		for _, k := range src.removeKeys {
			r, _ := s.tombstones.get(k)
			r.Stats, r.Tags = "", nil
			actions = append(actions, deltalog.Action{Remove: &r})
		}
	} else {
		src.filesOnly()
		scs, err := w.writeSidecars(ctx, st, src, per)
		if err != nil {
			return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
		}
		for i := range scs {
			actions = append(actions, deltalog.Action{Sidecar: &scs[i]})
			sidecarBytes += scs[i].SizeInBytes
		}
	}
	data, err := deltalog.EncodeCommit(actions)
	if err != nil {
		return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	u, err := newUUID()
	if err != nil {
		return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	name := fmt.Sprintf("%s/%020d.checkpoint.%s.json", logDir, s.Version, u)
	if err := st.PutIfAbsent(ctx, name, data); err != nil {
		return fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	size := len(actions)
	if sidecarBytes > 0 {
		size += numFiles
	}
	lc, err := json.Marshal(lastCheckpoint{Version: s.Version, Size: int64(size), SizeInBytes: int64(len(data)) + sidecarBytes, NumOfAddFiles: int64(src.numAdds)})
	if err != nil {
		return fmt.Errorf("write _last_checkpoint: %w", err)
	}
	if err := st.Put(ctx, lastCheckpointPath, lc); err != nil {
		return fmt.Errorf("write _last_checkpoint: %w", err)
	}
	return nil
}

// writeSidecars streams src's file actions into sidecars of at most per rows each and
// returns their sidecar actions, in order. On error the sidecar being written is
// aborted; those already complete stay, unreferenced.
func (w *checkpointWriter) writeSidecars(ctx context.Context, st storage.Store, src *cpSource, per int) ([]deltalog.Sidecar, error) {
	var out []deltalog.Sidecar
	var cur *v2Sidecar
	abort := func() {
		if cur != nil {
			_ = cur.pw.Close()
			_ = cur.out.Abort()
		}
	}
	for {
		room := per
		if cur != nil {
			room -= cur.rows
		}
		n := src.fill(&w.chunk, cpSidecar, min(cpChunkRows, room), w.yield)
		if n == 0 {
			break
		}
		if cur == nil {
			var err error
			if cur, err = w.openSidecar(ctx, st); err != nil {
				return nil, err
			}
		}
		if _, err := cur.pw.WriteRowGroup(w.chunk.cols, n); err != nil {
			abort()
			return nil, fmt.Errorf("write sidecar %s: %w", cur.name, err)
		}
		cur.rows += n
		if err := ctx.Err(); err != nil {
			abort()
			return nil, err
		}
		if cur.rows >= per {
			sc, err := closeSidecar(ctx, st, cur)
			if err != nil {
				return nil, err
			}
			out, cur = append(out, sc), nil
		}
	}
	if cur != nil {
		sc, err := closeSidecar(ctx, st, cur)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// openSidecar starts a sidecar file with a fresh UUID name (the protocol requires unique
// sidecar names: one is never overwritten, nor reused by another checkpoint).
func (w *checkpointWriter) openSidecar(ctx context.Context, st storage.Store) (*v2Sidecar, error) {
	u, err := newUUID()
	if err != nil {
		return nil, err
	}
	sc := &v2Sidecar{name: u + ".parquet"}
	if sc.out, err = st.Create(ctx, sidecarDir+"/"+sc.name); err != nil {
		return nil, fmt.Errorf("write sidecar %s: %w", sc.name, err)
	}
	sc.cw = &countingWriter{w: sc.out}
	if sc.pw, err = parquetenc.NewWriter(sc.cw, sidecarSchema, parquetenc.Snappy()); err != nil {
		_ = sc.out.Abort()
		return nil, fmt.Errorf("write sidecar %s: %w", sc.name, err)
	}
	sc.pw.SetYield(w.yield)
	sc.pw.SetPageTarget(cpPageBytes)
	return sc, nil
}

// closeSidecar finishes sc (footer, then the store makes it visible) and returns its
// sidecar action; modificationTime is the store's (Stat), which log cleanup compares
// with the retention.
func closeSidecar(ctx context.Context, st storage.Store, sc *v2Sidecar) (deltalog.Sidecar, error) {
	if err := sc.pw.Close(); err != nil {
		_ = sc.out.Abort()
		return deltalog.Sidecar{}, fmt.Errorf("write sidecar %s: %w", sc.name, err)
	}
	if err := sc.out.Close(); err != nil {
		return deltalog.Sidecar{}, fmt.Errorf("write sidecar %s: %w", sc.name, err)
	}
	fi, err := st.Stat(ctx, sidecarDir+"/"+sc.name)
	if err != nil {
		return deltalog.Sidecar{}, fmt.Errorf("write sidecar %s: %w", sc.name, err)
	}
	return deltalog.Sidecar{Path: sc.name, SizeInBytes: sc.cw.n, ModificationTime: fi.ModTime.UnixMilli()}, nil
}

// Checkpoint writes a checkpoint of the table's latest snapshot now, on the calling
// goroutine (classic, or V2 on tables with the v2Checkpoint feature; PROTOCOL.md,
// "Checkpoints"), and returns its version. It returns an error wrapping
// ErrTableNotFound when the table has no commit, or the store's error.
func (t *Table) Checkpoint(ctx context.Context) (int64, error) {
	s, err := t.Snapshot(ctx)
	if err != nil {
		return -1, err
	}
	w := checkpointWriter{sidecarFiles: t.opts.v2SidecarFiles}
	if err := w.write(ctx, t.store, s, t.opts.now()); err != nil {
		return -1, err
	}
	return s.Version, nil
}
