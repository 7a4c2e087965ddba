package deltalog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Protocol is the protocol action (PROTOCOL.md, "Protocol Evolution"). ReaderFeatures is
// present only when MinReaderVersion is 3 and WriterFeatures only when MinWriterVersion
// is 7; both are omitted from JSON when nil.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// MarshalJSON writes readerFeatures exactly when MinReaderVersion >= 3 and
// writerFeatures exactly when MinWriterVersion >= 7 (as [] when empty), as the
// protocol requires.
func (p Protocol) MarshalJSON() ([]byte, error) {
	type withFeatures struct {
		MinReaderVersion int       `json:"minReaderVersion"`
		MinWriterVersion int       `json:"minWriterVersion"`
		ReaderFeatures   *[]string `json:"readerFeatures,omitempty"`
		WriterFeatures   *[]string `json:"writerFeatures,omitempty"`
	}
	w := withFeatures{MinReaderVersion: p.MinReaderVersion, MinWriterVersion: p.MinWriterVersion}
	if p.MinReaderVersion >= 3 {
		rf := append([]string{}, p.ReaderFeatures...)
		w.ReaderFeatures = &rf
	}
	if p.MinWriterVersion >= 7 {
		wf := append([]string{}, p.WriterFeatures...)
		w.WriterFeatures = &wf
	}
	return json.Marshal(w)
}

// Format is metaData.format: Provider is always "parquet" for Delta tables.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action (PROTOCOL.md, "Change Metadata"). A metaData action
// replaces the whole previous one; ID must stay the same for the life of the table.
// SchemaString is the table schema serialised as JSON (see ParseSchema);
// PartitionColumns are logical column names; Configuration holds table properties
// (string values only); CreatedTime is in milliseconds since the Unix epoch.
type Metadata struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// MarshalJSON writes the required collections as [] and {} rather than null.
func (m Metadata) MarshalJSON() ([]byte, error) {
	type plain Metadata
	p := plain(m)
	if p.PartitionColumns == nil {
		p.PartitionColumns = []string{}
	}
	if p.Configuration == nil {
		p.Configuration = map[string]string{}
	}
	if p.Format.Options == nil {
		p.Format.Options = map[string]string{}
	}
	return json.Marshal(p)
}

// UnmarshalJSON accepts null for name and description (delta-rs writes them as null).
func (m *Metadata) UnmarshalJSON(b []byte) error {
	type plain Metadata
	var p struct {
		plain
		Name        *string `json:"name"`
		Description *string `json:"description"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*m = Metadata(p.plain)
	if p.Name != nil {
		m.Name = *p.Name
	}
	if p.Description != nil {
		m.Description = *p.Description
	}
	return nil
}

// Schema parses SchemaString. It returns an error wrapping the parse failure.
func (m *Metadata) Schema() (*StructType, error) {
	return ParseSchema(m.SchemaString)
}

// ColumnMappingMode returns the table's delta.columnMapping.mode ("none" when unset).
// It returns an error for a value other than none, name or id.
func (m *Metadata) ColumnMappingMode() (ColumnMappingMode, error) {
	switch v := strings.ToLower(m.Configuration[PropColumnMappingMode]); v {
	case "", "none":
		return ColumnMappingNone, nil
	case "name":
		return ColumnMappingName, nil
	case "id":
		return ColumnMappingID, nil
	default:
		return "", fmt.Errorf("read %s: unknown mode %q", PropColumnMappingMode, v)
	}
}

// IntProperty returns the integer table property key, or def when it is unset.
// It returns an error when the value is not an integer.
func (m *Metadata) IntProperty(key string, def int64) (int64, error) {
	v, ok := m.Configuration[key]
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read table property %s: %w", key, err)
	}
	return n, nil
}

// DurationProperty returns the interval table property key (Delta writes intervals as
// "interval 7 days", "interval 1 week", "interval 30 days"; the "interval" word and the
// plural are optional; units week, day, hour, minute, second, millisecond, microsecond),
// or def when it is unset (delta.deletedFileRetentionDuration,
// delta.logRetentionDuration, delta.setTransactionRetentionDuration). It returns an error
// naming the key when the value does not parse.
func (m *Metadata) DurationProperty(key string, def time.Duration) (time.Duration, error) {
	v, ok := m.Configuration[key]
	if !ok {
		return def, nil
	}
	f := strings.Fields(strings.ToLower(strings.TrimSpace(v)))
	if len(f) == 3 && f[0] == "interval" {
		f = f[1:]
	}
	if len(f) != 2 {
		return 0, fmt.Errorf("read table property %s: cannot parse interval %q", key, v)
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read table property %s: %w", key, err)
	}
	unit := map[string]time.Duration{
		"week": 7 * 24 * time.Hour, "day": 24 * time.Hour, "hour": time.Hour, "minute": time.Minute,
		"second": time.Second, "millisecond": time.Millisecond, "microsecond": time.Microsecond,
	}[strings.TrimSuffix(f[1], "s")]
	if unit == 0 {
		return 0, fmt.Errorf("read table property %s: unknown unit in %q", key, v)
	}
	return time.Duration(n) * unit, nil
}

// Add is the add action (PROTOCOL.md, "Add File and Remove File"). Path is relative to
// the table root (URI-encoded) or an absolute URI. PartitionValues maps every partition
// column (physical name under column mapping) to its serialised value; a nil pointer is
// JSON null, the null partition value. Size is in bytes, ModificationTime in ms since the
// Unix epoch. Stats is the per-file statistics JSON document as a string
// (PROTOCOL.md, "Per-file Statistics").
type Add struct {
	Path                    string             `json:"path"`
	PartitionValues         map[string]*string `json:"partitionValues"`
	Size                    int64              `json:"size"`
	ModificationTime        int64              `json:"modificationTime"`
	DataChange              bool               `json:"dataChange"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
	ClusteringProvider      string             `json:"clusteringProvider,omitempty"`

	// StatsParsed holds the checkpoint column add.stats_parsed when a checkpoint carried
	// statistics only as a struct (delta.checkpoint.writeStatsAsStruct); it is never
	// written to JSON.
	StatsParsed map[string]any `json:"-"`
}

// NumRecords returns stats.numRecords (from the JSON stats, else from StatsParsed) and
// whether it is known.
func (a *Add) NumRecords() (int64, bool) {
	if a.Stats != "" {
		var st struct {
			NumRecords *json.Number `json:"numRecords"`
		}
		if json.Unmarshal([]byte(a.Stats), &st) == nil && st.NumRecords != nil {
			if n, err := st.NumRecords.Int64(); err == nil {
				return n, true
			}
		}
	}
	switch n := a.StatsParsed["numRecords"].(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case float64:
		return int64(n), true
	}
	return 0, false
}

// FileKey is the reconciliation key of an add or remove (PROTOCOL.md, "Action
// Reconciliation"): the canonical path plus the deletion vector's unique id.
func FileKey(path string, dv *DeletionVector) string {
	p := CanonicalPath(path)
	if dv != nil {
		return p + "\x00" + dv.UniqueID()
	}
	return p
}

// CanonicalPath decodes an add/remove path once (it is a URI, PROTOCOL.md "Add File and
// Remove File") and normalises absolute file URIs ("file:/p", "file:///p",
// "file://localhost/p") to "/p", so that differently spelled references to one file
// reconcile. A path that is not valid percent-encoding is returned unchanged.
func CanonicalPath(p string) string {
	for _, pre := range []string{"file://localhost/", "file:///", "file:/"} {
		if strings.HasPrefix(p, pre) {
			p = "/" + strings.TrimPrefix(p, pre)
			break
		}
	}
	if d, err := url.PathUnescape(p); err == nil {
		return d
	}
	return p
}

// MarshalJSON writes partitionValues as {} when nil (the field is required).
func (a Add) MarshalJSON() ([]byte, error) {
	type plain Add
	p := plain(a)
	if p.PartitionValues == nil {
		p.PartitionValues = map[string]*string{}
	}
	return json.Marshal(p)
}

// UnmarshalJSON accepts null for stats, tags and clusteringProvider.
func (a *Add) UnmarshalJSON(b []byte) error {
	type plain Add
	var p struct {
		plain
		Stats              *string `json:"stats"`
		ClusteringProvider *string `json:"clusteringProvider"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*a = Add(p.plain)
	if p.Stats != nil {
		a.Stats = *p.Stats
	}
	if p.ClusteringProvider != nil {
		a.ClusteringProvider = *p.ClusteringProvider
	}
	return nil
}

// DeletionVector is a deletion vector descriptor (PROTOCOL.md, "Deletion Vector
// Descriptor Schema"). StorageType is "u" (a file under the table root named by a Z85
// UUID in PathOrInlineDv), "i" (inline, Z85) or "p" (absolute path); Offset is the byte
// position of the vector in its file, SizeInBytes the serialised bitmap's bytes,
// Cardinality the rows it deletes.
type DeletionVector struct {
	StorageType    string `json:"storageType"`
	PathOrInlineDv string `json:"pathOrInlineDv"`
	Offset         *int32 `json:"offset,omitempty"`
	SizeInBytes    int32  `json:"sizeInBytes"`
	Cardinality    int64  `json:"cardinality"`
	MaxRowIndex    *int64 `json:"maxRowIndex,omitempty"`
}

// UniqueID is storageType + pathOrInlineDv (+ "@" + offset), the deletion vector part of
// a file's reconciliation key (PROTOCOL.md, "Deletion Vector Descriptor Schema").
func (d *DeletionVector) UniqueID() string {
	if d == nil {
		return ""
	}
	id := d.StorageType + d.PathOrInlineDv
	if d.Offset != nil {
		id += "@" + strconv.Itoa(int(*d.Offset))
	}
	return id
}

// Remove is the remove action (PROTOCOL.md, "Add File and Remove File").
// DeletionTimestamp is in ms since the Unix epoch; Size in bytes.
type Remove struct {
	Path                    string             `json:"path"`
	DeletionTimestamp       *int64             `json:"deletionTimestamp,omitempty"`
	DataChange              bool               `json:"dataChange"`
	ExtendedFileMetadata    *bool              `json:"extendedFileMetadata,omitempty"`
	PartitionValues         map[string]*string `json:"partitionValues,omitempty"`
	Size                    *int64             `json:"size,omitempty"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
}

// UnmarshalJSON accepts null for stats.
func (r *Remove) UnmarshalJSON(b []byte) error {
	type plain Remove
	var p struct {
		plain
		Stats *string `json:"stats"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = Remove(p.plain)
	if p.Stats != nil {
		r.Stats = *p.Stats
	}
	return nil
}

// Txn is the transaction identifier action (PROTOCOL.md, "Transaction Identifiers"):
// the application AppID has durably processed everything up to Version. LastUpdated is
// in ms since the Unix epoch.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// CommitInfo is the free-form commitInfo action (PROTOCOL.md, "Commit Provenance
// Information"). Keep operationParameters and operationMetrics string-valued: Spark
// cannot read history otherwise (delta-io/delta#2419).
type CommitInfo map[string]any

// DomainMetadata is the domainMetadata action (PROTOCOL.md, "Domain Metadata").
type DomainMetadata struct {
	Domain        string `json:"domain"`
	Configuration string `json:"configuration"`
	Removed       bool   `json:"removed"`
}

// Sidecar is the sidecar action of a V2 checkpoint (PROTOCOL.md, "Sidecar File
// Information"): Path names a Parquet file of add/remove actions, relative to
// _delta_log/_sidecars/ (or an absolute URI). It is only legal inside V2 checkpoints.
type Sidecar struct {
	Path             string            `json:"path"`
	SizeInBytes      int64             `json:"sizeInBytes"`
	ModificationTime int64             `json:"modificationTime"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// CheckpointMetadata is the checkpointMetadata action of a V2 checkpoint
// (PROTOCOL.md, "Checkpoint Metadata"): exactly one per V2 checkpoint, Version being the
// checkpoint's table version.
type CheckpointMetadata struct {
	Version int64             `json:"version"`
	Tags    map[string]string `json:"tags,omitempty"`
}

// Action is one line of a commit file: exactly one of the pointers is set. Action kinds
// this package does not model (cdc, future kinds) are kept verbatim in Other, keyed by
// their JSON name, and written back unchanged.
type Action struct {
	CommitInfo         CommitInfo
	Protocol           *Protocol
	Metadata           *Metadata
	Txn                *Txn
	Add                *Add
	Remove             *Remove
	DomainMetadata     *DomainMetadata
	Sidecar            *Sidecar
	CheckpointMetadata *CheckpointMetadata
	Other              map[string]json.RawMessage
}

// JSON names of the action kinds (PROTOCOL.md, "Actions").
const (
	kindCommitInfo     = "commitInfo"
	kindProtocol       = "protocol"
	kindMetadata       = "metaData"
	kindTxn            = "txn"
	kindAdd            = "add"
	kindRemove         = "remove"
	kindDomainMetadata = "domainMetadata"
	kindSidecar        = "sidecar"
	kindCheckpointMeta = "checkpointMetadata"
)

// MarshalJSON writes {"<kind>":{...}} for each set member (normally exactly one).
func (a Action) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	n := 0
	put := func(kind string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("marshal %s: %w", kind, err)
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(kind)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(b)
		return nil
	}
	var err error
	if a.CommitInfo != nil {
		err = put(kindCommitInfo, a.CommitInfo)
	}
	if err == nil && a.Protocol != nil {
		err = put(kindProtocol, a.Protocol)
	}
	if err == nil && a.Metadata != nil {
		err = put(kindMetadata, a.Metadata)
	}
	if err == nil && a.Txn != nil {
		err = put(kindTxn, a.Txn)
	}
	if err == nil && a.Add != nil {
		err = put(kindAdd, a.Add)
	}
	if err == nil && a.Remove != nil {
		err = put(kindRemove, a.Remove)
	}
	if err == nil && a.DomainMetadata != nil {
		err = put(kindDomainMetadata, a.DomainMetadata)
	}
	if err == nil && a.CheckpointMetadata != nil {
		err = put(kindCheckpointMeta, a.CheckpointMetadata)
	}
	if err == nil && a.Sidecar != nil {
		err = put(kindSidecar, a.Sidecar)
	}
	if err != nil {
		return nil, err
	}
	kinds := make([]string, 0, len(a.Other))
	for k := range a.Other {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if err := put(k, a.Other[k]); err != nil {
			return nil, err
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("marshal action: no action set")
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads one action object. A known kind whose value is JSON null is
// ignored; unknown kinds go to Other.
func (a *Action) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*a = Action{}
	for kind, v := range raw {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			continue
		}
		var err error
		switch kind {
		case kindCommitInfo:
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.UseNumber() // keep timestamps and metrics exact
			err = dec.Decode(&a.CommitInfo)
		case kindProtocol:
			a.Protocol = new(Protocol)
			err = json.Unmarshal(v, a.Protocol)
		case kindMetadata:
			a.Metadata = new(Metadata)
			err = json.Unmarshal(v, a.Metadata)
		case kindTxn:
			a.Txn = new(Txn)
			err = json.Unmarshal(v, a.Txn)
		case kindAdd:
			a.Add = new(Add)
			err = json.Unmarshal(v, a.Add)
		case kindRemove:
			a.Remove = new(Remove)
			err = json.Unmarshal(v, a.Remove)
		case kindDomainMetadata:
			a.DomainMetadata = new(DomainMetadata)
			err = json.Unmarshal(v, a.DomainMetadata)
		case kindSidecar:
			a.Sidecar = new(Sidecar)
			err = json.Unmarshal(v, a.Sidecar)
		case kindCheckpointMeta:
			a.CheckpointMetadata = new(CheckpointMetadata)
			err = json.Unmarshal(v, a.CheckpointMetadata)
		default:
			if a.Other == nil {
				a.Other = map[string]json.RawMessage{}
			}
			a.Other[kind] = append(json.RawMessage(nil), v...)
		}
		if err != nil {
			return fmt.Errorf("decode %s action: %w", kind, err)
		}
	}
	return nil
}

// ParseCommit reads a commit file: newline-delimited JSON, one action per line
// (PROTOCOL.md, "Delta Log Entries"). Blank lines are skipped. It returns an error
// naming the 1-based line of the first malformed action.
func ParseCommit(r io.Reader) ([]Action, error) {
	var out []Action
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			var a Action
			if uerr := json.Unmarshal(b, &a); uerr != nil {
				return nil, fmt.Errorf("parse commit line %d: %w", line, uerr)
			}
			out = append(out, a)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read commit: %w", err)
		}
	}
}

// EncodeCommit serialises actions as newline-delimited JSON, one action per line, each
// line ending in '\n'. It returns an error for an empty action.
func EncodeCommit(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	for i, a := range actions {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("encode action %d: %w", i, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}
