package deltawriter

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// SchemaChange is what a commit does to a table's schema and features: create the table
// with Schema, or change an existing table's schema to Schema (new fields, relaxed NOT
// NULL, widened types) and enable table features, in the same commit as the data
// (PROTOCOL.md, "Change Metadata", "Protocol Evolution", "Column Mapping", "Type
// Widening").
type SchemaChange struct {
	// Schema is the table's whole new logical schema, not a difference. Required to
	// create a table; nil on an existing table keeps its schema.
	Schema *deltalog.StructType
	// Enable lists the table features to turn on with this commit:
	// deltalog.FeatureTypeWidening (also sets delta.enableTypeWidening=true),
	// deltalog.FeatureDeletionVectors (also sets delta.enableDeletionVectors=true, so that
	// DeleteRows may write deletion vectors; PROTOCOL.md "Deletion Vectors"),
	// deltalog.FeatureTimestampNtz, and deltalog.FeatureColumnMapping, which only a new
	// table can get (mode name unless ColumnMapping says otherwise). A feature the table
	// already has is a no-op.
	Enable []string

	// Name, PartitionColumns, Properties and ColumnMapping describe a new table; they are
	// ignored when the table exists.
	Name             string            // metaData.name
	PartitionColumns []string          // logical names, in order
	Properties       map[string]string // table properties (copied, not modified)
	ColumnMapping    string            // delta.columnMapping.mode: "", "none", "name" or "id"
}

// SchemaDelta is the protocol and metaData a commit carries for a SchemaChange, to be put
// in Commit.Protocol and Commit.Metadata. A nil field leaves the table's as it is; both
// are nil when the change changes nothing.
type SchemaDelta struct {
	Protocol *deltalog.Protocol
	Metadata *deltalog.Metadata
}

// PrepareSchemaChange returns the protocol and metaData of a commit that makes change c
// to the table whose latest snapshot is snap, and the FileOptions to write that commit's
// data files with: the schema to write (column mapping ids and physical names assigned),
// the effective column mapping mode and the table properties after the change.
//
// A nil snap, or one with Version -1 (what Table.Snapshot returns with
// ErrTableNotFound), creates the table: properties are c.Properties plus
// delta.columnMapping.mode (c.ColumnMapping, or name when c.Enable has columnMapping),
// delta.enableTypeWidening=true when c.Enable has typeWidening and
// delta.enableDeletionVectors=true when it has deletionVectors; the protocol is the
// smallest that supports them, timestamp_ntz columns and c.Enable (newTableMetadata).
//
// On an existing table, a Schema equal to the snapshot's and an empty Enable change
// nothing (a zero SchemaDelta, the snapshot's FileOptions). Otherwise the metaData gets
// the new schema and properties: widened fields get delta.typeChanges entries (which
// need delta.enableTypeWidening, already set or enabled by c), new fields get column
// mapping ids and physical names and bump delta.columnMapping.maxColumnId, and the
// protocol is upgraded when the schema or c.Enable needs a feature it lacks
// (evolveTable); Protocol is nil when it does not change.
//
// It returns an error, and nothing to commit, for a feature it cannot enable (any but
// the four above, or column mapping on an existing table without it), a missing schema
// on create, a type change that is not a Delta type widening, or a widening on a table
// without delta.enableTypeWidening.
func PrepareSchemaChange(snap *Snapshot, c SchemaChange) (SchemaDelta, FileOptions, error) {
	for _, f := range c.Enable {
		switch f {
		case deltalog.FeatureTypeWidening, deltalog.FeatureTimestampNtz, deltalog.FeatureColumnMapping, deltalog.FeatureDeletionVectors,
			deltalog.FeatureDomainMetadata:
		default:
			return SchemaDelta{}, FileOptions{}, fmt.Errorf("prepare schema change: cannot enable table feature %q", f)
		}
	}
	if snap == nil || snap.Version < 0 {
		return prepareCreate(c)
	}
	schema := c.Schema
	if schema == nil {
		schema = snap.Schema
	}
	if len(c.Enable) == 0 && sameSchema(snap.Schema, schema) {
		return SchemaDelta{}, FileOptions{Schema: schema, ColumnMapping: snap.ColumnMapping, Configuration: snap.Metadata.Configuration,
			PartitionColumns: snap.Metadata.PartitionColumns}, nil
	}
	if slices.Contains(c.Enable, deltalog.FeatureColumnMapping) && snap.ColumnMapping == deltalog.ColumnMappingNone {
		return SchemaDelta{}, FileOptions{}, fmt.Errorf("evolve table: enabling column mapping on an existing table is not supported yet; "+
			"enable it with Spark (ALTER TABLE … SET TBLPROPERTIES ('%s'='name')) and ingestd follows", deltalog.PropColumnMappingMode)
	}
	meta := snap.Metadata
	meta.Configuration = maps.Clone(meta.Configuration)
	if meta.Configuration == nil {
		meta.Configuration = map[string]string{}
	}
	if slices.Contains(c.Enable, deltalog.FeatureTypeWidening) {
		meta.Configuration[deltalog.PropEnableTypeWidening] = "true"
	}
	if slices.Contains(c.Enable, deltalog.FeatureDeletionVectors) {
		meta.Configuration[deltalog.PropEnableDeletionVectors] = "true"
	}
	var enable []string // columnMapping is already on, or refused above
	for _, f := range c.Enable {
		if f != deltalog.FeatureColumnMapping {
			enable = append(enable, f)
		}
	}
	meta, schema, proto, err := evolveTable(snap.Protocol, meta, schema, enable...)
	if err != nil {
		return SchemaDelta{}, FileOptions{}, fmt.Errorf("evolve table metadata: %w", err)
	}
	mode, err := meta.ColumnMappingMode()
	if err != nil {
		return SchemaDelta{}, FileOptions{}, fmt.Errorf("read column mapping mode: %w", err)
	}
	return SchemaDelta{Protocol: proto, Metadata: &meta}, FileOptions{Schema: schema, ColumnMapping: mode, Configuration: meta.Configuration,
		PartitionColumns: meta.PartitionColumns}, nil
}

// prepareCreate is PrepareSchemaChange for a table that does not exist yet.
func prepareCreate(c SchemaChange) (SchemaDelta, FileOptions, error) {
	if c.Schema == nil {
		return SchemaDelta{}, FileOptions{}, fmt.Errorf("create table metadata: no schema")
	}
	conf := maps.Clone(c.Properties)
	if conf == nil {
		conf = map[string]string{}
	}
	if cm := c.ColumnMapping; cm != "" && cm != string(deltalog.ColumnMappingNone) {
		conf[deltalog.PropColumnMappingMode] = cm
	} else if slices.Contains(c.Enable, deltalog.FeatureColumnMapping) {
		conf[deltalog.PropColumnMappingMode] = string(deltalog.ColumnMappingName)
	}
	if slices.Contains(c.Enable, deltalog.FeatureTypeWidening) {
		conf[deltalog.PropEnableTypeWidening] = "true"
	}
	if slices.Contains(c.Enable, deltalog.FeatureDeletionVectors) {
		conf[deltalog.PropEnableDeletionVectors] = "true"
	}
	// Partition columns are checked before anything is written, and recorded with the
	// schema's spelling (PROTOCOL.md, "Change Metadata": partitionColumns name columns).
	if err := CheckPartitionColumns(c.Schema, c.PartitionColumns); err != nil {
		return SchemaDelta{}, FileOptions{}, fmt.Errorf("create table metadata: %w", err)
	}
	var partitionColumns []string
	for _, name := range c.PartitionColumns {
		partitionColumns = append(partitionColumns, PartitionField(c.Schema, name).Name)
	}
	proto, meta := newTableMetadata(c.Name, c.Schema, partitionColumns, conf, c.Enable...)
	meta, schema, err := evolveMetadata(meta, c.Schema)
	if err != nil {
		return SchemaDelta{}, FileOptions{}, fmt.Errorf("create table metadata: %w", err)
	}
	mode, err := meta.ColumnMappingMode()
	if err != nil {
		return SchemaDelta{}, FileOptions{}, fmt.Errorf("read column mapping mode: %w", err)
	}
	return SchemaDelta{Protocol: &proto, Metadata: &meta}, FileOptions{Schema: schema, ColumnMapping: mode, Configuration: meta.Configuration,
		PartitionColumns: meta.PartitionColumns}, nil
}

// sameSchema reports whether a and b are the same schema: the same object, or the same
// JSON (names, types, nullability and field metadata).
func sameSchema(a, b *deltalog.StructType) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// newTableMetadata returns the protocol and metadata of a new table: metadata with a
// random UUID id, the schema as schemaString, format parquet, createdTime now (ms) and the
// given properties; protocol (1,2) for plain tables, (2,5) when configuration enables
// column mapping (the schema must then carry ids and physical names: pass the result
// through evolveMetadata, and build the Parquet schema from that), and (3,7) with the
// timestampNtz feature (plus appendOnly and invariants, implied by writer version 2) when
// the schema has a timestamp_ntz column, with typeWidening when configuration sets
// delta.enableTypeWidening, and with the given features. A schema that cannot be
// serialised leaves SchemaString empty, which Commit rejects.
func newTableMetadata(name string, schema *deltalog.StructType, partitionColumns []string, configuration map[string]string, enable ...string) (deltalog.Protocol, deltalog.Metadata) {
	id, _ := newUUID() // crypto/rand does not fail on supported platforms
	var schemaString string
	if schema != nil {
		if b, err := json.Marshal(schema); err == nil {
			schemaString = string(b)
		}
	}
	now := nowMillis()
	if partitionColumns == nil {
		partitionColumns = []string{}
	}
	conf := map[string]string{}
	for k, v := range configuration {
		conf[k] = v
	}
	md := deltalog.Metadata{
		ID:               id,
		Name:             name,
		Format:           deltalog.Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     schemaString,
		PartitionColumns: partitionColumns,
		Configuration:    conf,
		CreatedTime:      &now,
	}
	p := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	mode, _ := md.ColumnMappingMode()
	cm := mode == deltalog.ColumnMappingName || mode == deltalog.ColumnMappingID
	if cm {
		p = deltalog.Protocol{MinReaderVersion: 2, MinWriterVersion: 5}
	}
	var features []string
	if hasGenerated(schema) {
		// As Delta 4 writes it: writer table features (appendOnly, invariants,
		// generatedColumns), not the legacy writer version 4.
		features = append(features, deltalog.FeatureGeneratedColumns)
	}
	if schema != nil && hasType(schema, deltalog.TimestampNtz) {
		features = append(features, deltalog.FeatureTimestampNtz)
	}
	if conf[deltalog.PropEnableTypeWidening] == "true" {
		features = append(features, deltalog.FeatureTypeWidening) // the property needs the table feature
	}
	for _, f := range enable {
		if !slices.Contains(features, f) {
			features = append(features, f)
		}
	}
	return UpgradeProtocol(p, features...), md
}
