package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// Optimize defaults: the target size of a compacted file, in bytes, and the small files a
// partition needs before it is compacted (docs/maintenance.md).
const (
	DefaultTargetFileSize = 256 << 20 // bytes
	DefaultMinFiles       = 10
	// MaxDeletedRowsRatio is the share of a file's rows its deletion vector may delete
	// before OPTIMIZE rewrites the file whatever its size (Spark's
	// delta.optimize.maxDeletedRowsRatio default).
	MaxDeletedRowsRatio = 0.05
)

// OptimizeOptions configures Optimize.
type OptimizeOptions struct {
	// TargetFileSize is the size in bytes the new files approach (default 256 MiB). Files
	// at least this large are never rewritten.
	TargetFileSize int64
	// MinFiles is the number of small files (< TargetFileSize) a partition needs before it
	// is compacted (default 10; at least 2).
	MinFiles int
	// Where is a Spark SQL predicate on partition columns only ("dt >= '2026-11-01'"),
	// evaluated on each file's partition values with deltawriter/expr; "" selects every
	// partition. A predicate on another column is refused, naming it.
	Where string
	// DryRun plans without writing anything: the result lists what would be compacted.
	DryRun bool
	// MaxRewriteRate bounds the bytes of source files read per second (0: no bound), so
	// compaction leaves the store's bandwidth to the pipelines writing the table.
	MaxRewriteRate int64
	// Auto marks a run by the background maintenance (commitInfo operationParameters.auto).
	Auto bool
	// EngineInfo is commitInfo.engineInfo ("ingestd/<version>").
	EngineInfo string
	// Logger receives one line per compacted or dropped partition (default slog.Default).
	Logger *slog.Logger
}

// PartitionPlan is what Optimize compacts in one partition.
type PartitionPlan struct {
	// Partition renders the partition values as "dt=2026-11-02" ("dt=NULL" for the null
	// value; "" for an unpartitioned table).
	Partition string `json:"partition"`
	// Values are the files' add.partitionValues (physical names).
	Values       map[string]*string `json:"partitionValues"`
	FilesRemoved int                `json:"filesRemoved"`
	BytesRemoved int64              `json:"bytesRemoved"`
	// FilesAdded and BytesAdded are 0 on a dry run; on a dry run FilesAdded is the planned
	// number of output files.
	FilesAdded int   `json:"filesAdded"`
	BytesAdded int64 `json:"bytesAdded"`
	// RowsWritten are the live rows rewritten (rows deleted by deletion vectors are not).
	RowsWritten            int64 `json:"rowsWritten"`
	DeletionVectorsRemoved int   `json:"deletionVectorsRemoved"`
}

// OptimizeResult is the outcome of one Optimize.
type OptimizeResult struct {
	// ReadVersion is the snapshot the plan was made on; Version the OPTIMIZE commit's
	// version, -1 when nothing was committed (dry run, nothing to do, every partition lost).
	ReadVersion int64 `json:"readVersion"`
	Version     int64 `json:"version"`
	// Partitions are the partitions compacted (or planned, on a dry run), sorted.
	Partitions []PartitionPlan `json:"partitions"`
	// Dropped are the partitions left out of the commit because a concurrent commit
	// removed files they would remove (another OPTIMIZE won them).
	Dropped []string `json:"dropped"`
	// Totals over Partitions.
	FilesRemoved           int   `json:"filesRemoved"`
	FilesAdded             int   `json:"filesAdded"`
	BytesRemoved           int64 `json:"bytesRemoved"`
	BytesAdded             int64 `json:"bytesAdded"`
	RowsWritten            int64 `json:"rowsWritten"`
	DeletionVectorsRemoved int   `json:"deletionVectorsRemoved"`
	// Duration is the run's wall time (JSON: nanoseconds, as VacuumResult's durations).
	Duration time.Duration `json:"durationNanos"`
}

// Optimize bin-packs the small files (size < TargetFileSize) of each partition of t into
// files near TargetFileSize, in one commit (Spark's OPTIMIZE, PROTOCOL.md "Add File and
// Remove File"). Files of different partitions are never mixed (null-partition files are
// compacted among themselves); a partition is compacted only when it has at least
// MinFiles small files or a file with deleted rows to purge. Within a partition, files
// are sorted by size and packed greedily into bins of at most TargetFileSize bytes; a
// bin of one file is left alone unless that file's deletion vector deletes more than
// MaxDeletedRowsRatio of its rows (such a file is rewritten whatever its size, as Spark
// does). Each bin becomes one new file of the table's codec, streamed to the store row
// group by row group (deltawriter.DataFileWriter; add.stats merged exactly over the row
// groups). The bin's files are read one row group at a time (deltawriter.DataFileReader):
// a row group of at least CopyRowGroupBytes of a file ingestd wrote, with no deletion
// vector, the table's leaves and codec, is copied as its encoded column chunks; any other
// is appended to the output row group being filled, written at RowGroupBytes (a bin with
// no row left becomes no file): column by column, its chunk's data pages copied as they
// are where deltawriter.PageCopy allows it (no dictionary, the table's codec, no deletion
// vector, a file ingestd wrote), else decoded into column buffers (row by row, conformed
// to the table's column mapping and widened types, for a file whose leaves differ) with
// the rows its deletion vector deletes dropped. A bin's files with deletion vectors are
// read after the others, so that the columns copied as pages before them are cut once. A file whose
// deletion vector deletes every row is removed without being read. Memory is one source
// row group and one output row group (about RowGroupBytes of values, and its encoded
// pages, and the data pages copied into it), never a whole file.
//
// The commit has, per source file, a remove with dataChange false, extendedFileMetadata
// true, its partitionValues, size, stats and deletionVector, and per new file an add with
// dataChange false; no txn and no metaData; commitInfo operation "OPTIMIZE" with Spark's
// operationParameters (predicate, zOrderBy, clusterBy, auto, plus targetSize and
// minFiles) and operationMetrics as strings (numRemovedFiles, numAddedFiles,
// numRemovedBytes, numAddedBytes, minFileSize, maxFileSize, p25/p50/p75FileSize,
// numDeletionVectorsRemoved).
//
// Concurrency (Delta's conflict rules, no coordinator): appends committed meanwhile never
// conflict, the commit moves to the next free version. A winner that removed a file this
// run removes (another OPTIMIZE, a DELETE) makes Optimize drop that file's partition from
// the commit (OptimizeResult.Dropped) and commit the rest; the new files of a dropped
// partition stay as uncommitted files for VACUUM. This never loops: every retry drops at
// least one partition.
//
// Errors: no table, a table ingestd cannot write (deltawriter.ErrUnsupportedFeature,
// before any byte is written), a bad Where (syntax, or a non-partition column named), a
// file that cannot be read or conformed, a store failure, or a concurrent metadata or
// protocol change (deltawriter.ErrMetadataChanged: run again).
func Optimize(ctx context.Context, t *deltawriter.Table, o OptimizeOptions) (OptimizeResult, error) {
	start := time.Now()
	res := OptimizeResult{Version: -1}
	if o.TargetFileSize <= 0 {
		o.TargetFileSize = DefaultTargetFileSize
	}
	if o.MinFiles == 0 {
		o.MinFiles = DefaultMinFiles
	}
	if o.MinFiles < 2 {
		return res, fmt.Errorf("optimize: min files %d is below 2", o.MinFiles)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("table", t.String(), "job", "optimize")
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return res, fmt.Errorf("optimize: %w", err)
	}
	res.ReadVersion = snap.Version
	if err := snap.CheckWritable(); err != nil {
		return res, fmt.Errorf("optimize: %w", err)
	}
	keep, err := partitionFilter(snap, o.Where)
	if err != nil {
		return res, fmt.Errorf("optimize: %w", err)
	}
	groups, err := plan(snap, keep, o)
	if err != nil {
		return res, fmt.Errorf("optimize: %w", err)
	}
	if o.DryRun || len(groups) == 0 {
		for _, g := range groups {
			p := g.summary()
			p.FilesAdded = len(g.bins)
			res.Partitions = append(res.Partitions, p)
		}
		res.total()
		res.Duration = time.Since(start)
		return res, nil
	}
	pq, err := snap.DataFileSchema()
	if err != nil {
		return res, fmt.Errorf("optimize: %w", err)
	}
	thr := &throttle{rate: o.MaxRewriteRate, start: time.Now()}
	for _, g := range groups {
		if err := g.rewrite(ctx, t, snap, pq, thr); err != nil {
			return res, fmt.Errorf("optimize partition %s: %w", g.name, err)
		}
	}

	c := deltawriter.Commit{
		ReadVersion:    snap.Version,
		Operation:      "OPTIMIZE",
		IsolationLevel: "SnapshotIsolation",
		EngineInfo:     o.EngineInfo,
		OperationParameters: map[string]string{
			"predicate":  predicateParam(o.Where),
			"zOrderBy":   "[]",
			"clusterBy":  "[]",
			"auto":       strconv.FormatBool(o.Auto),
			"targetSize": strconv.FormatInt(o.TargetFileSize, 10),
			"minFiles":   strconv.Itoa(o.MinFiles),
		},
	}
	for {
		c.Removes, c.Adds = nil, nil
		for _, g := range groups {
			c.Removes = append(c.Removes, g.removes...)
			c.Adds = append(c.Adds, g.adds...)
		}
		c.OperationMetrics = optimizeMetrics(groups)
		v, err := t.Commit(ctx, c)
		if err == nil {
			res.Version = v
			break
		}
		var cde *deltawriter.ConcurrentDeleteError
		if !errors.As(err, &cde) {
			return res, fmt.Errorf("optimize: %w", err)
		}
		// Another commit removed files we remove: drop their partitions, keep the rest
		// (every remaining remove is checked against the latest snapshot).
		latest, serr := t.Snapshot(ctx)
		if serr != nil {
			return res, fmt.Errorf("optimize: %w", serr)
		}
		var left []*group
		for _, g := range groups {
			if g.allLive(latest) {
				left = append(left, g)
				continue
			}
			res.Dropped = append(res.Dropped, g.name)
			log.Info("optimize partition dropped: a concurrent commit removed its files first", "partition", g.name,
				"winner_version", cde.Version, "uncommitted_files", len(g.adds))
		}
		groups = left
		if len(groups) == 0 {
			break
		}
		// ReadVersion stays the version planned on: Commit checks every winner since then
		// again, and the one that removed our files no longer conflicts.
	}
	for _, g := range groups {
		res.Partitions = append(res.Partitions, g.summary())
		log.Info("optimize partition compacted", "partition", g.name, "version", res.Version,
			"files_removed", len(g.removes), "files_added", len(g.adds), "bytes_removed", g.bytesRemoved(), "bytes_added", g.bytesAdded())
	}
	res.total()
	res.Duration = time.Since(start)
	return res, nil
}

func (r *OptimizeResult) total() {
	for _, p := range r.Partitions {
		r.FilesRemoved += p.FilesRemoved
		r.FilesAdded += p.FilesAdded
		r.BytesRemoved += p.BytesRemoved
		r.BytesAdded += p.BytesAdded
		r.RowsWritten += p.RowsWritten
		r.DeletionVectorsRemoved += p.DeletionVectorsRemoved
	}
}

// group is one partition's plan and, after rewrite, its actions.
type group struct {
	name    string
	values  map[string]*string
	bins    [][]deltalog.Add
	dead    []deltalog.Add // files whose every row is deleted: removed, not read
	removes []deltalog.Remove
	adds    []deltalog.Add
	rows    int64
	dvs     int
}

func (g *group) files() (n int, bytes int64) {
	for _, a := range g.sources() {
		n++
		bytes += a.Size
	}
	return n, bytes
}

// sources are the files g removes: those of its bins and the dead ones.
func (g *group) sources() []deltalog.Add {
	var out []deltalog.Add
	for _, b := range g.bins {
		out = append(out, b...)
	}
	return append(out, g.dead...)
}

func (g *group) bytesRemoved() int64 { _, b := g.files(); return b }

func (g *group) bytesAdded() int64 {
	var n int64
	for _, a := range g.adds {
		n += a.Size
	}
	return n
}

func (g *group) summary() PartitionPlan {
	n, b := g.files()
	dvs := 0
	for _, a := range g.sources() {
		if a.DeletionVector != nil {
			dvs++
		}
	}
	return PartitionPlan{Partition: g.name, Values: g.values, FilesRemoved: n, BytesRemoved: b,
		FilesAdded: len(g.adds), BytesAdded: g.bytesAdded(), RowsWritten: g.rows, DeletionVectorsRemoved: dvs}
}

// allLive reports whether every file g removes is still in s.
func (g *group) allLive(s *deltawriter.Snapshot) bool {
	for _, r := range g.removes {
		if !s.Files.Has(deltalog.FileKey(r.Path, r.DeletionVector)) {
			return false
		}
	}
	return true
}

// deletedRows returns the rows a's deletion vector deletes and the file's rows (0 when
// stats.numRecords is unknown).
func deletedRows(a deltalog.Add) (deleted, records int64) {
	if a.DeletionVector == nil {
		return 0, 0
	}
	n, _ := a.NumRecords()
	return a.DeletionVector.Cardinality, n
}

// plan groups the live files of s by partition, keeps the partitions keep accepts that
// have at least o.MinFiles small files or a file to purge (deletion vector over
// MaxDeletedRowsRatio, or deleting every row), and bin-packs the small and purged files.
func plan(s *deltawriter.Snapshot, keep func(map[string]*string) (bool, error), o OptimizeOptions) ([]*group, error) {
	cols := partitionColumns(s)
	byKey := map[string]*group{}
	small := map[string][]deltalog.Add{}
	purge := map[string]bool{} // the file keys of files rewritten for their deleted rows
	for _, a := range s.Files.All() {
		del, records := deletedRows(a)
		dead := records > 0 && del >= records
		heavy := records > 0 && float64(del) > MaxDeletedRowsRatio*float64(records)
		if a.Size >= o.TargetFileSize && !heavy {
			continue
		}
		k, name, err := partitionKey(s, cols, a.PartitionValues)
		if err != nil {
			return nil, err
		}
		if _, seen := byKey[k]; !seen {
			ok, err := keep(a.PartitionValues)
			if err != nil {
				return nil, err
			}
			if !ok {
				byKey[k] = nil
				continue
			}
			byKey[k] = &group{name: name, values: a.PartitionValues}
		}
		switch {
		case byKey[k] == nil:
		case dead:
			byKey[k].dead = append(byKey[k].dead, a)
		default:
			small[k] = append(small[k], a)
			if heavy {
				purge[deltalog.FileKey(a.Path, a.DeletionVector)] = true
			}
		}
	}
	var out []*group
	for k, g := range byKey {
		if g == nil {
			continue
		}
		files := small[k]
		purging := false
		for _, a := range files {
			purging = purging || purge[deltalog.FileKey(a.Path, a.DeletionVector)]
		}
		if len(files) < o.MinFiles && !purging {
			if len(g.dead) > 0 {
				out = append(out, g)
			}
			continue
		}
		sort.Slice(files, func(i, j int) bool {
			if files[i].Size != files[j].Size {
				return files[i].Size < files[j].Size
			}
			return files[i].Path < files[j].Path
		})
		var bin []deltalog.Add
		var size int64
		flush := func() {
			if len(bin) > 1 || (len(bin) == 1 && purge[deltalog.FileKey(bin[0].Path, bin[0].DeletionVector)]) {
				g.bins = append(g.bins, bin)
			}
			bin, size = nil, 0
		}
		for _, a := range files {
			if len(bin) > 0 && size+a.Size > o.TargetFileSize {
				flush()
			}
			bin = append(bin, a)
			size += a.Size
		}
		flush()
		if len(g.bins) > 0 || len(g.dead) > 0 {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

type partCol struct {
	field *deltalog.StructField
	phys  string
}

func partitionColumns(s *deltawriter.Snapshot) []partCol {
	var cols []partCol
	for _, c := range s.Metadata.PartitionColumns {
		f := deltawriter.PartitionField(s.Schema, c)
		if f == nil {
			continue
		}
		cols = append(cols, partCol{field: f, phys: f.PhysicalName(s.ColumnMapping)})
	}
	return cols
}

// partitionKey returns a file's partition as a comparison key (normalised values, so
// that differently spelled equal values — timestamps, booleans — group together) and as
// a display name.
func partitionKey(s *deltawriter.Snapshot, cols []partCol, pv map[string]*string) (string, string, error) {
	var key, name strings.Builder
	for i, c := range cols {
		v, err := deltawriter.NormalizePartitionValue(c.field.Type, pv[c.phys], time.UTC)
		if err != nil {
			return "", "", fmt.Errorf("read partition value of %s: %w", c.field.Name, err)
		}
		if i > 0 {
			name.WriteByte('/')
		}
		name.WriteString(c.field.Name + "=")
		if v == nil {
			key.WriteString("\x00N")
			name.WriteString("NULL")
		} else {
			key.WriteString("\x00V" + *v)
			name.WriteString(*v)
		}
	}
	return key.String(), name.String(), nil
}

// partitionFilter compiles Where into a test on partition values.
func partitionFilter(s *deltawriter.Snapshot, where string) (func(map[string]*string) (bool, error), error) {
	all := func(map[string]*string) (bool, error) { return true, nil }
	if strings.TrimSpace(where) == "" {
		return all, nil
	}
	n, err := expr.Parse(where)
	if err != nil {
		return nil, fmt.Errorf("parse --where %q: %w", where, err)
	}
	cols := partitionColumns(s)
	schema := &deltalog.StructType{}
	for _, c := range cols {
		schema.Fields = append(schema.Fields, c.field)
	}
	var bad []string
	for _, name := range expr.Columns(n) {
		if deltawriter.PartitionField(schema, name) == nil {
			bad = append(bad, name)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("--where %q uses %s, which are not partition columns (partition columns: %v): OPTIMIZE selects whole partitions only", where, strings.Join(bad, ", "), s.Metadata.PartitionColumns)
	}
	e, err := expr.Bind(where, n, schema, expr.Options{})
	if err != nil {
		return nil, fmt.Errorf("--where: %w", err)
	}
	if e.Type() != deltalog.Boolean {
		return nil, fmt.Errorf("--where %q is of type %s, not boolean", where, e.Type())
	}
	phys := map[*deltalog.StructField]string{}
	for _, c := range cols {
		phys[c.field] = c.phys
	}
	return func(pv map[string]*string) (bool, error) {
		args := make([]expr.Value, len(e.Columns()))
		for i, f := range e.Columns() {
			v, err := partitionExprValue(f.Type, pv[phys[f]])
			if err != nil {
				return false, fmt.Errorf("--where on partition value of %s: %w", f.Name, err)
			}
			args[i] = v
		}
		v, err := e.Eval(args)
		if err != nil {
			return false, err
		}
		return !v.Null && v.Int != 0, nil
	}, nil
}

// partitionExprValue converts a serialised partition value (PROTOCOL.md, "Partition
// Value Serialization") of type t to an expression value.
func partitionExprValue(t deltalog.DataType, pv *string) (expr.Value, error) {
	if pv == nil || *pv == "" {
		return expr.Null(t), nil
	}
	s := *pv
	switch t {
	case deltalog.String, deltalog.Binary:
		return expr.Value{Type: t, Str: s}, nil
	case deltalog.Long, deltalog.Integer, deltalog.Short, deltalog.Byte:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return expr.Value{}, err
		}
		return expr.Int(t, n), nil
	case deltalog.Boolean:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return expr.Value{}, err
		}
		if b {
			return expr.Int(t, 1), nil
		}
		return expr.Int(t, 0), nil
	case deltalog.Date:
		d, err := time.Parse("2006-01-02", s)
		if err != nil {
			return expr.Value{}, err
		}
		return expr.Int(t, d.Unix()/86400), nil
	case deltalog.Timestamp, deltalog.TimestampNtz:
		us, err := deltawriter.ParsePartitionTimestamp(s, time.UTC)
		if err != nil {
			return expr.Value{}, err
		}
		return expr.Int(t, us), nil
	}
	return expr.Value{}, fmt.Errorf("a %v partition column is not supported in --where", t)
}

func predicateParam(where string) string {
	if strings.TrimSpace(where) == "" {
		return "[]"
	}
	b, _ := json.Marshal([]string{where})
	return string(b)
}

// RowGroupBytes is the memory of decoded values (8 bytes a dense word, 24 a levelled
// value, plus the bytes of byte values) and of copied data pages (their uncompressed
// size) at which OPTIMIZE writes the output row group it is filling.
const RowGroupBytes = 32 << 20

// CopyRowGroupBytes is the compressed size from which a source row group is copied into
// the output as its encoded column chunks, not decoded, where that is valid
// (deltawriter.DataFileWriter.CopyRowGroup: no deletion vector, the table's leaves and
// codec, a file ingestd wrote); smaller row groups are decoded and merged into output row
// groups of up to RowGroupBytes, so that compacting many tiny files does not leave a
// file of tiny row groups.
const CopyRowGroupBytes = 1 << 20

// rowGroupBytes and copyRowGroupBytes are RowGroupBytes and CopyRowGroupBytes, smaller
// in tests.
var rowGroupBytes, copyRowGroupBytes int64 = RowGroupBytes, CopyRowGroupBytes

// rewrite reads each bin's files and writes one new file per bin, streaming: the files
// are read one row group at a time (deltawriter.DataFileReader), each copied as its
// encoded chunks or appended to the output row group column by column (data pages copied,
// deltawriter.PageCopy, or live rows decoded into the output's columns), which is written
// each time its values and copied pages reach RowGroupBytes (deltawriter.DataFileWriter),
// so the memory is one source row group and one output row group, never a whole file.
func (g *group) rewrite(ctx context.Context, t *deltawriter.Table, snap *deltawriter.Snapshot, pq *parquet.Schema, thr *throttle) error {
	st := t.Store()
	opts := snap.FileOptions()
	opts.PartitionValues = g.values
	leaves := column.Leaves(pq)
	out := make([]column.Column, len(leaves))
	for _, bin := range g.bins {
		opts.Dir = ""
		if d := path.Dir(deltalog.CanonicalPath(bin[0].Path)); d != "." && !strings.HasPrefix(d, "/") {
			opts.Dir = d
		}
		w, err := deltawriter.NewDataFileWriter(ctx, st, pq, opts)
		if err != nil {
			return err
		}
		b := binWriter{ctx: ctx, leaves: leaves, out: out, w: w, pages: w.NewPageCopy()}
		b.pages.MinChunkBytes = minCopiedChunkBytes
		if err := b.copyFiles(snap, st, pq, bin, thr); err != nil {
			b.abort()
			return err
		}
		for _, a := range bin {
			if a.DeletionVector != nil {
				g.dvs++
			}
		}
		add, rows, err := b.close()
		if err != nil {
			return err
		}
		if rows > 0 { // a bin whose rows are all deleted becomes no file
			add.DataChange = false
			g.adds = append(g.adds, add)
			g.rows += rows
		}
		for _, a := range bin {
			g.removes = append(g.removes, compactedRemove(a))
		}
	}
	for _, a := range g.dead {
		g.removes = append(g.removes, compactedRemove(a))
	}
	return nil
}

// binWriter writes one bin's output file w: out holds the row group being filled (rows
// rows).
type binWriter struct {
	ctx    context.Context
	leaves []column.Leaf
	out    []column.Column
	rows   int
	w      *deltawriter.DataFileWriter
	pages  *deltawriter.PageCopy
}

// binWritten, when not nil, is called with each bin's output once written: the column
// chunks it wrote from copied pages (tests).
var binWritten func(copiedChunks int)

// minCopiedChunkBytes is the PageCopy.MinChunkBytes of OPTIMIZE's output files; tests of
// page copying on small tables lower it.
var minCopiedChunkBytes int64 = deltawriter.DefaultMinCopiedChunkBytes

// copyFiles appends the live rows of the files of bin to the output, row group by row
// group: a row group of at least copyRowGroupBytes is copied as its encoded chunks where
// valid (ahead of the output row group being filled: OPTIMIZE keeps no row order), any
// other is appended to the output row group, its chunks' pages copied where b.pages
// allows it, the other columns decoded.
func (b *binWriter) copyFiles(snap *deltawriter.Snapshot, st storage.Store, pq *parquet.Schema, bin []deltalog.Add, thr *throttle) error {
	for i := range b.out {
		b.out[i].Reset(b.leaves[i])
	}
	// the files with deletion vectors last, which decode every leaf: the leaves copied as
	// pages before them are cut from the files' rows once, not file after file
	order := make([]deltalog.Add, 0, len(bin))
	for _, dv := range []bool{false, true} {
		for _, a := range bin {
			if (a.DeletionVector != nil) == dv {
				order = append(order, a)
			}
		}
	}
	for _, a := range order {
		r, err := snap.OpenDataFile(b.ctx, st, a, pq)
		if err != nil {
			return err
		}
		for {
			if r.NextRowGroupBytes() >= copyRowGroupBytes {
				copied, err := b.w.CopyRowGroup(r)
				if err != nil {
					return err
				}
				if copied {
					continue
				}
			}
			if b.pages.Plan(r, b.rows > 0) {
				if err := b.flush(); err != nil {
					return err
				}
				b.pages.Plan(r, false)
			}
			n, err := b.pages.AppendRowGroup(r, b.out)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			b.rows += n
			if int64(columnsBytes(b.out))+b.pages.Bytes() >= rowGroupBytes {
				if err := b.flush(); err != nil {
					return err
				}
			}
		}
		if err := thr.wait(b.ctx, a.Size); err != nil {
			return err
		}
	}
	return b.flush()
}

// columnsBytes is the memory of the values cols hold (see RowGroupBytes).
func columnsBytes(cols []column.Column) int {
	n := 0
	for i := range cols {
		c := &cols[i]
		n += 8*len(c.Dense) + 24*len(c.Values) + c.ByteSize()
	}
	return n
}

// flush writes the output row group being filled, if any.
func (b *binWriter) flush() error {
	if b.rows == 0 {
		return nil
	}
	if err := b.pages.WriteRowGroup(b.out, b.rows); err != nil {
		return err
	}
	for i := range b.out {
		b.out[i].Reset(b.leaves[i])
	}
	b.rows = 0
	return nil
}

// close publishes the output file and returns its add and rows, or discards it and
// returns 0 rows and no add when no row was live.
func (b *binWriter) close() (deltalog.Add, int64, error) {
	if binWritten != nil {
		binWritten(b.pages.CopiedChunks())
	}
	rows := b.w.NumRows()
	if rows == 0 {
		return deltalog.Add{}, 0, b.w.Abort()
	}
	add, err := b.w.Close()
	return add, rows, err
}

// abort discards the output file after a failure.
func (b *binWriter) abort() { _ = b.w.Abort() }

// compactedRemove is the remove of a file OPTIMIZE replaces: dataChange false, with the
// file's metadata and deletion vector.
func compactedRemove(a deltalog.Add) deltalog.Remove {
	size := a.Size
	return deltalog.Remove{
		Path: a.Path, DataChange: false, ExtendedFileMetadata: ptr(true), PartitionValues: a.PartitionValues,
		Size: &size, Stats: a.Stats, Tags: a.Tags, DeletionVector: a.DeletionVector,
		BaseRowID: a.BaseRowID, DefaultRowCommitVersion: a.DefaultRowCommitVersion,
	}
}

func ptr[T any](v T) *T { return &v }

// optimizeMetrics are Spark's OPTIMIZE operationMetrics, as strings.
func optimizeMetrics(groups []*group) map[string]string {
	var removedBytes, addedBytes int64
	var removed, dvs int
	var sizes []int64
	for _, g := range groups {
		removed += len(g.removes)
		for _, r := range g.removes {
			removedBytes += *r.Size
			if r.DeletionVector != nil {
				dvs++
			}
		}
		for _, a := range g.adds {
			addedBytes += a.Size
			sizes = append(sizes, a.Size)
		}
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	pct := func(p float64) string {
		if len(sizes) == 0 {
			return "0"
		}
		return strconv.FormatInt(sizes[int(p*float64(len(sizes)-1))], 10)
	}
	m := map[string]string{
		"numRemovedFiles":           strconv.Itoa(removed),
		"numRemovedBytes":           strconv.FormatInt(removedBytes, 10),
		"numAddedFiles":             strconv.Itoa(len(sizes)),
		"numAddedBytes":             strconv.FormatInt(addedBytes, 10),
		"numDeletionVectorsRemoved": strconv.Itoa(dvs),
		"minFileSize":               pct(0),
		"p25FileSize":               pct(0.25),
		"p50FileSize":               pct(0.5),
		"p75FileSize":               pct(0.75),
		"maxFileSize":               pct(1),
	}
	return m
}

// throttle spaces reads so that bytes/elapsed stays at or below rate (bytes per second).
type throttle struct {
	rate  int64
	start time.Time
	done  int64
}

func (t *throttle) wait(ctx context.Context, n int64) error {
	if t.rate <= 0 {
		return nil
	}
	t.done += n
	due := t.start.Add(time.Duration(float64(t.done) / float64(t.rate) * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
