package tableops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// WriteSchema prints the schema as a tree in Spark's printSchema style, with column
// mapping ids and physical names when the table has them, e.g.
//
//	root
//	 |-- order_id: long (nullable = true)
//	 |-- customer: struct (nullable = true)
//	 |    |-- name: string (nullable = true)
func WriteSchema(w io.Writer, s *deltalog.StructType, mode deltalog.ColumnMappingMode) {
	fmt.Fprintln(w, "root")
	writeFields(w, s, " |", mode)
}

func writeFields(w io.Writer, s *deltalog.StructType, indent string, mode deltalog.ColumnMappingMode) {
	for _, f := range s.Fields {
		line := fmt.Sprintf("%s-- %s: %s (nullable = %t)", indent, f.Name, typeName(f.Type), f.Nullable)
		if mode != deltalog.ColumnMappingNone {
			if id, ok := f.FieldID(); ok {
				line += fmt.Sprintf(" [id=%d physical=%s]", id, f.PhysicalName(mode))
			}
		}
		if tc, ok := f.Metadata[deltalog.MetaTypeChanges]; ok {
			line += " typeChanges=" + mustJSON(tc)
		}
		if g, ok := f.Metadata[deltalog.MetaGenerationExpression].(string); ok {
			line += " GENERATED ALWAYS AS (" + g + ")"
		}
		fmt.Fprintln(w, line)
		writeNested(w, f.Type, indent+"    |", mode)
	}
}

func writeNested(w io.Writer, t deltalog.DataType, indent string, mode deltalog.ColumnMappingMode) {
	switch t := t.(type) {
	case *deltalog.StructType:
		writeFields(w, t, indent, mode)
	case *deltalog.ArrayType:
		fmt.Fprintf(w, "%s-- element: %s (containsNull = %t)\n", indent, typeName(t.ElementType), t.ContainsNull)
		writeNested(w, t.ElementType, indent+"    |", mode)
	case *deltalog.MapType:
		fmt.Fprintf(w, "%s-- key: %s\n", indent, typeName(t.KeyType))
		fmt.Fprintf(w, "%s-- value: %s (valueContainsNull = %t)\n", indent, typeName(t.ValueType), t.ValueContainsNull)
		writeNested(w, t.ValueType, indent+"    |", mode)
	}
}

func typeName(t deltalog.DataType) string {
	switch t.(type) {
	case *deltalog.StructType:
		return "struct"
	case *deltalog.ArrayType:
		return "array"
	case *deltalog.MapType:
		return "map"
	}
	return t.String()
}

// HistoryEntry is one commit's commitInfo.
type HistoryEntry struct {
	Version    int64             `json:"version"`
	Timestamp  time.Time         `json:"timestamp"`
	Operation  string            `json:"operation"`
	Parameters map[string]string `json:"operationParameters,omitempty"`
	Metrics    map[string]string `json:"operationMetrics,omitempty"`
	Engine     string            `json:"engineInfo,omitempty"`
}

// History returns up to n commits (all when n <= 0), newest first, read from the JSON
// commit files still in _delta_log (older ones may have been cleaned up after a
// checkpoint). Commits without a commitInfo action get an empty Operation.
func History(ctx context.Context, st storage.Store, n int) ([]HistoryEntry, error) {
	versions, err := deltawriter.CommitVersions(ctx, st)
	if err != nil {
		return nil, err
	}
	slices.Reverse(versions)
	if n > 0 && len(versions) > n {
		versions = versions[:n]
	}
	var out []HistoryEntry
	for _, v := range versions {
		e, err := historyEntry(ctx, st, v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// historyEntry reads commit v's commitInfo.
func historyEntry(ctx context.Context, st storage.Store, v int64) (HistoryEntry, error) {
	commit, err := deltawriter.ReadCommit(ctx, st, v)
	if err != nil {
		return HistoryEntry{}, err
	}
	e := HistoryEntry{Version: v}
	for _, a := range commit.Actions {
		if a.CommitInfo == nil {
			continue
		}
		ci := a.CommitInfo
		switch ts := ci["timestamp"].(type) {
		case float64:
			e.Timestamp = time.UnixMilli(int64(ts)).UTC()
		case json.Number:
			if ms, err := ts.Int64(); err == nil {
				e.Timestamp = time.UnixMilli(ms).UTC()
			}
		}
		e.Operation, _ = ci["operation"].(string)
		e.Engine, _ = ci["engineInfo"].(string)
		e.Parameters = stringMap(ci["operationParameters"])
		e.Metrics = stringMap(ci["operationMetrics"])
	}
	return e, nil
}

func stringMap(v any) map[string]string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		} else {
			out[k] = mustJSON(x)
		}
	}
	return out
}

// Detail is what `ingestd table describe` shows.
type Detail struct {
	Location         string   `json:"location"`
	Version          int64    `json:"version"`
	ID               string   `json:"id"`
	Name             string   `json:"name,omitempty"`
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
	PartitionColumns []string `json:"partitionColumns"`
	// GeneratedColumns are the top-level generated columns: name → generation expression
	// (delta.generationExpression; PROTOCOL.md, "Generated Columns").
	GeneratedColumns map[string]string `json:"generatedColumns,omitempty"`
	// UnsupportedGenerated are the generated columns ingestd cannot compute, name → the
	// reason a pipeline refuses the table at start-up (deltawriter.UnsupportedGenerated).
	UnsupportedGenerated map[string]string `json:"unsupportedGeneratedColumns,omitempty"`
	Properties           map[string]string `json:"properties"`
	NumFiles             int               `json:"numFiles"`
	SizeInBytes          int64             `json:"sizeInBytes"`
	// SmallFiles counts the live files smaller than SmallFileThreshold bytes: what
	// OPTIMIZE would compact.
	SmallFiles         int   `json:"smallFiles"`
	SmallFileThreshold int64 `json:"smallFileThresholdBytes"`
	// LastOptimize is the newest OPTIMIZE commit and LastVacuum the newest VACUUM END (or,
	// when a vacuum did not finish, VACUUM START) commit among the newest MaintenanceScan
	// commits (AddMaintenance); nil when there is none.
	LastOptimize *HistoryEntry    `json:"lastOptimize,omitempty"`
	LastVacuum   *HistoryEntry    `json:"lastVacuum,omitempty"`
	Txns         map[string]int64 `json:"txnVersions"`
	// Partitions are the table's partition value tuples with their live files, in value
	// order; nil for an unpartitioned table.
	Partitions []Partition `json:"partitions,omitempty"`
}

// Partition is one partition value tuple of a partitioned table and its live files.
// Values are keyed by logical column name and normalised
// (deltawriter.NormalizePartitionValue): a timestamp in the UTC ISO form whichever form
// the writer used (a legacy zone-less value read in the table's
// deltalog.PropLegacyTimestampZone, UTC by default), so that one partition written
// by old and new writers is one entry; nil is the null partition.
type Partition struct {
	Values map[string]*string `json:"values"`
	Files  int                `json:"files"`
	Bytes  int64              `json:"bytes"`
}

// SmallFileThreshold is the size in bytes under which describe counts a file as small:
// 32 MiB, an eighth of OPTIMIZE's default 256 MiB target (Databricks' auto compaction
// treats files under that size as candidates too).
const SmallFileThreshold = 32 << 20

// MaintenanceScan bounds how many of the newest commits AddMaintenance reads.
const MaintenanceScan = 500

// AddMaintenance fills d.LastOptimize and d.LastVacuum from the history: the newest
// commits with commitInfo.operation OPTIMIZE, and VACUUM END (or VACUUM START when no END
// follows it), reading at most MaintenanceScan commits newest first. Errors: listing or
// reading the log.
func AddMaintenance(ctx context.Context, st storage.Store, d *Detail) error {
	versions, err := deltawriter.CommitVersions(ctx, st)
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	slices.Reverse(versions)
	if len(versions) > MaintenanceScan {
		versions = versions[:MaintenanceScan]
	}
	for _, v := range versions {
		if d.LastOptimize != nil && d.LastVacuum != nil {
			break
		}
		h, err := historyEntry(ctx, st, v)
		if err != nil {
			return err
		}
		switch h.Operation {
		case "OPTIMIZE":
			if d.LastOptimize == nil {
				d.LastOptimize = &h
			}
		case "VACUUM END", "VACUUM START":
			if d.LastVacuum == nil {
				d.LastVacuum = &h
			}
		}
	}
	return nil
}

// Describe summarises a snapshot like Spark's DESCRIBE DETAIL, plus txn versions by appId.
func Describe(location string, s *deltawriter.Snapshot) Detail {
	d := Detail{Location: location, Version: s.Version, ID: s.Metadata.ID, Name: s.Metadata.Name,
		MinReaderVersion: s.Protocol.MinReaderVersion, MinWriterVersion: s.Protocol.MinWriterVersion,
		ReaderFeatures: s.Protocol.ReaderFeatures, WriterFeatures: s.Protocol.WriterFeatures,
		PartitionColumns: s.Metadata.PartitionColumns, Properties: s.Metadata.Configuration,
		NumFiles: s.Files.Len(), Txns: s.Txns, SmallFileThreshold: SmallFileThreshold}
	for _, f := range s.Files.All() {
		d.SizeInBytes += f.Size
		if f.Size < SmallFileThreshold {
			d.SmallFiles++
		}
	}
	d.Partitions = partitions(s)
	if s.Schema != nil {
		for _, f := range s.Schema.Fields {
			if g, ok := f.Metadata[deltalog.MetaGenerationExpression].(string); ok {
				if d.GeneratedColumns == nil {
					d.GeneratedColumns = map[string]string{}
				}
				d.GeneratedColumns[f.Name] = g
			}
		}
		for name, err := range deltawriter.UnsupportedGenerated(s.Schema, s.Metadata.Configuration) {
			if d.UnsupportedGenerated == nil {
				d.UnsupportedGenerated = map[string]string{}
			}
			d.UnsupportedGenerated[name] = err.Error()
		}
	}
	return d
}

// partitions groups the snapshot's live files by normalised partition values
// (partitionValues are keyed by physical names under column mapping).
func partitions(s *deltawriter.Snapshot) []Partition {
	cols := s.Metadata.PartitionColumns
	if len(cols) == 0 {
		return nil
	}
	type col struct {
		name, phys string
		t          deltalog.DataType
	}
	var cs []col
	for _, c := range cols {
		f := deltawriter.PartitionField(s.Schema, c)
		if f == nil {
			cs = append(cs, col{name: c, phys: c})
			continue
		}
		cs = append(cs, col{name: f.Name, phys: f.PhysicalName(s.ColumnMapping), t: f.Type})
	}
	loc := time.UTC
	if z := s.Metadata.Configuration[deltalog.PropLegacyTimestampZone]; z != "" {
		if l, err := time.LoadLocation(z); err == nil {
			loc = l
		}
	}
	byKey := map[string]*Partition{}
	for _, f := range s.Files.All() {
		p := Partition{Values: map[string]*string{}}
		key := ""
		for _, c := range cs {
			v, ok := f.PartitionValues[c.phys]
			if !ok {
				v = f.PartitionValues[c.name]
			}
			if c.t != nil {
				if n, err := deltawriter.NormalizePartitionValue(c.t, v, loc); err == nil {
					v = n
				}
			}
			p.Values[c.name] = v
			if v == nil {
				key += "\x00\xff"
			} else {
				key += "\x01" + *v + "\xff"
			}
		}
		e := byKey[key]
		if e == nil {
			e = &p
			byKey[key] = e
		}
		e.Files++
		e.Bytes += f.Size
	}
	out := make([]Partition, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, *byKey[k])
	}
	return out
}

// partitionLabel renders a partition's values as col=value pairs in cols order.
func partitionLabel(cols []string, p Partition) string {
	s := ""
	for i, c := range cols {
		if i > 0 {
			s += ", "
		}
		v := "null"
		if pv := p.Values[c]; pv != nil {
			v = *pv
		}
		s += c + "=" + v
	}
	return s
}

// WriteDetail prints d for a person: one "key: value" line each, txns sorted by appId.
func WriteDetail(w io.Writer, d Detail) {
	fmt.Fprintf(w, "location:          %s\n", d.Location)
	fmt.Fprintf(w, "version:           %d\n", d.Version)
	fmt.Fprintf(w, "id:                %s\n", d.ID)
	fmt.Fprintf(w, "protocol:          reader %d, writer %d\n", d.MinReaderVersion, d.MinWriterVersion)
	if len(d.ReaderFeatures)+len(d.WriterFeatures) > 0 {
		fmt.Fprintf(w, "features:          reader %v, writer %v\n", d.ReaderFeatures, d.WriterFeatures)
	}
	fmt.Fprintf(w, "partition columns: %v\n", d.PartitionColumns)
	if len(d.GeneratedColumns) > 0 {
		fmt.Fprintf(w, "generated columns: %d\n", len(d.GeneratedColumns))
		for _, k := range slices.Sorted(maps.Keys(d.GeneratedColumns)) {
			fmt.Fprintf(w, "  %s GENERATED ALWAYS AS (%s)\n", k, d.GeneratedColumns[k])
			if why, ok := d.UnsupportedGenerated[k]; ok {
				fmt.Fprintf(w, "    UNSUPPORTED by ingestd (a pipeline refuses this table): %s\n", why)
			}
		}
	}
	keys := slices.Sorted(maps.Keys(d.Properties))
	fmt.Fprintf(w, "properties:        %d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(w, "  %s = %s\n", k, d.Properties[k])
	}
	fmt.Fprintf(w, "files:             %d (%d bytes)\n", d.NumFiles, d.SizeInBytes)
	fmt.Fprintf(w, "small files:       %d (under %d MiB)\n", d.SmallFiles, d.SmallFileThreshold>>20)
	for _, m := range []struct {
		label string
		e     *HistoryEntry
		keys  []string
	}{
		{"last OPTIMIZE:     ", d.LastOptimize, []string{"numRemovedFiles", "numAddedFiles", "numRemovedBytes", "numAddedBytes"}},
		{"last VACUUM:       ", d.LastVacuum, []string{"numDeletedFiles", "numFilesToDelete", "sizeOfDataToDelete"}},
	} {
		if m.e == nil {
			fmt.Fprintf(w, "%snone in the newest %d commits\n", m.label, MaintenanceScan)
			continue
		}
		line := fmt.Sprintf("%sversion %d at %s (%s", m.label, m.e.Version, m.e.Timestamp.Format(time.RFC3339), m.e.Operation)
		if st := m.e.Parameters["status"]; st != "" {
			line += " " + st
		}
		for _, k := range m.keys {
			if v, ok := m.e.Metrics[k]; ok {
				line += ", " + k + "=" + v
			}
		}
		fmt.Fprintln(w, line+")")
	}
	if d.Partitions != nil {
		const show = 50
		fmt.Fprintf(w, "partitions:        %d\n", len(d.Partitions))
		for i, p := range d.Partitions {
			if i == show {
				fmt.Fprintf(w, "  … %d more (--json lists all)\n", len(d.Partitions)-show)
				break
			}
			fmt.Fprintf(w, "  %s: %d files (%d bytes)\n", partitionLabel(d.PartitionColumns, p), p.Files, p.Bytes)
		}
	}
	apps := make([]string, 0, len(d.Txns))
	for k := range d.Txns {
		apps = append(apps, k)
	}
	sort.Strings(apps)
	fmt.Fprintf(w, "txn versions:      %d app ids\n", len(apps))
	for _, a := range apps {
		fmt.Fprintf(w, "  %s = %d\n", a, d.Txns[a])
	}
}
