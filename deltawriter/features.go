package deltawriter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// This file is the one place that says which Delta protocol versions and table features
// ingestd supports (PROTOCOL.md, "Protocol Evolution" and "Table Features"). Add a
// feature here only together with its implementation.

// Highest legacy protocol versions understood. Reader 3 / writer 7 mean "explicit
// feature lists".
const (
	maxReaderVersion = 3
	maxWriterVersion = 7
)

// supportedReaderFeatures are the reader features whose log this package replays
// correctly. ingestd reads a table only to append to it: features that change how data
// files are read (deletion vectors, widened types, variant, geospatial) do not change the
// log replay, and whether we may write is decided by supportedWriterFeatures.
var supportedReaderFeatures = map[string]bool{
	deltalog.FeatureColumnMapping:       true, // physical names and field ids (ParquetSchema, stats keys)
	deltalog.FeatureTimestampNtz:        true, // timestamp_ntz type: INT64 MICROS isAdjustedToUTC=false, stats without zone
	deltalog.FeatureDeletionVectors:     true, // files keyed by (path, dv id) in replay
	deltalog.FeatureV2Checkpoint:        true, // UUID-named JSON/Parquet checkpoints, sidecars
	deltalog.FeatureTypeWidening:        true, // delta.typeChanges field metadata
	deltalog.FeatureTypeWideningPreview: true,
	deltalog.FeatureVacuumProtocolCheck: true, // only constrains VACUUM, which ingestd never runs
	deltalog.FeatureVariantType:         true, // log replay only; writing is refused (variant columns)
	deltalog.FeatureVariantTypePreview:  true,
	deltalog.FeatureGeospatial:          true, // log replay only; writing is refused (geo columns)
}

// supportedWriterFeatures are the writer features this package honours when writing.
// Features marked "inactive only" are accepted while the table does not use them; the
// metadata/schema checks in checkWritable refuse the table as soon as it does.
var supportedWriterFeatures = map[string]bool{
	deltalog.FeatureAppendOnly:          true, // we only ever add files
	deltalog.FeatureInvariants:          true, // top-level invariants in expr.Supported, checked per record by ingest (Constraints)
	deltalog.FeatureCheckConstraints:    true, // delta.constraints.* in expr.Supported, checked per record by ingest (Constraints)
	deltalog.FeatureGeneratedColumns:    true, // top-level expressions in expr.Supported, computed and checked by the writer (GeneratedColumns)
	deltalog.FeatureIdentityColumns:     true, // inactive only (no delta.identity.* metadata)
	deltalog.FeatureAllowColumnDefaults: true, // inactive only (no CURRENT_DEFAULT metadata)
	deltalog.FeatureColumnMapping:       true, // writes physical names and field ids; new fields get new ids
	deltalog.FeatureTimestampNtz:        true,
	// changeDataFeed: commits with only add actions need no cdc files
	// (PROTOCOL.md, "Add CDC File": data-only inserts are read from add actions).
	deltalog.FeatureChangeDataFeed: true,
	// deletionVectors: appended files carry no deletion vector, which is always valid;
	// existing DVs are carried through replay and checkpoints; DeleteRows writes new ones
	// (with delta.enableDeletionVectors=true, checked by Commit).
	deltalog.FeatureDeletionVectors: true,
	// v2Checkpoint: checkpoints of such tables are written as V2 UUID-named JSON files
	// with a checkpointMetadata action (writeCheckpoint).
	deltalog.FeatureV2Checkpoint: true,
	// vacuumProtocolCheck: a constraint on VACUUM only.
	deltalog.FeatureVacuumProtocolCheck: true,
	// typeWidening: widened fields get delta.typeChanges metadata (WidenField).
	deltalog.FeatureTypeWidening:        true,
	deltalog.FeatureTypeWideningPreview: true,
	// domainMetadata: domains are preserved in checkpoints; Commit.Domains writes them
	// (a keyed table's remembered deletes under copy-on-write).
	deltalog.FeatureDomainMetadata: true,
	// materializePartitionColumns: partition columns are written into the data files too
	// (ingest's partitioner keeps them in the files' Parquet schema).
	deltalog.FeatureMaterializePartitionColumns: true,
}

// Features that are refused outright (reader or writer), with the reason shown to the user.
var refusedFeatures = map[string]string{
	deltalog.FeatureCatalogManaged:      "commits are owned by a catalog; ingestd writes only filesystem-managed tables",
	deltalog.FeatureCatalogOwnedPreview: "commits are owned by a catalog; ingestd writes only filesystem-managed tables",
}

// ErrUnsupportedFeature is wrapped by the errors that refuse a table because its
// protocol or metadata needs something ingestd does not implement.
var ErrUnsupportedFeature = errors.New("unsupported Delta table feature")

// checkReadable refuses a protocol whose reader requirements we do not meet.
func checkReadable(p *deltalog.Protocol) error {
	if p == nil {
		return fmt.Errorf("check protocol: table has no protocol action")
	}
	if p.MinReaderVersion > maxReaderVersion {
		return fmt.Errorf("check protocol: reader version %d > %d: %w", p.MinReaderVersion, maxReaderVersion, ErrUnsupportedFeature)
	}
	if p.MinReaderVersion == 3 {
		for _, f := range p.ReaderFeatures {
			if why, ok := refusedFeatures[f]; ok {
				return fmt.Errorf("check protocol: reader feature %q (%s): %w", f, why, ErrUnsupportedFeature)
			}
		}
		if f := firstUnsupported(p.ReaderFeatures, supportedReaderFeatures); f != "" {
			return fmt.Errorf("check protocol: unknown reader feature %q: %w", f, ErrUnsupportedFeature)
		}
	}
	return nil
}

// checkWritable refuses, before anything is written, a table whose protocol or metadata
// requires writer behaviour we do not implement: unknown writer features, identity
// columns, column defaults, and CHECK constraints, invariants (Constraints) and generated
// columns (GeneratedColumns) whose expression is outside the evaluator's set.
func checkWritable(p *deltalog.Protocol, m *deltalog.Metadata, schema *deltalog.StructType) error {
	if err := checkReadable(p); err != nil {
		return err
	}
	if p.MinWriterVersion > maxWriterVersion {
		return fmt.Errorf("check protocol: writer version %d > %d: %w", p.MinWriterVersion, maxWriterVersion, ErrUnsupportedFeature)
	}
	if p.MinWriterVersion == 7 {
		for _, f := range p.WriterFeatures {
			if why, ok := refusedFeatures[f]; ok {
				return fmt.Errorf("check protocol: writer feature %q (%s): %w", f, why, ErrUnsupportedFeature)
			}
		}
		if f := firstUnsupported(p.WriterFeatures, supportedWriterFeatures); f != "" {
			return fmt.Errorf("check protocol: writer feature %q is not implemented by ingestd: %w", f, ErrUnsupportedFeature)
		}
	}
	if m == nil {
		return fmt.Errorf("check metadata: table has no metaData action")
	}
	if _, err := m.ColumnMappingMode(); err != nil {
		return fmt.Errorf("check metadata: %w", err)
	}
	if err := checkSchemaWritable(schema, ""); err != nil {
		return err
	}
	if _, err := GeneratedColumns(schema, m.Configuration); err != nil {
		return fmt.Errorf("check metadata: %w", err)
	}
	if _, err := Constraints(schema, m.Configuration); err != nil {
		return fmt.Errorf("check metadata: %w", err)
	}
	return nil
}

// Field metadata keys that make a column need writer-side evaluation.
var refusedFieldMetadata = []struct{ prefix, feature string }{
	{deltalog.MetaIdentityPrefix, deltalog.FeatureIdentityColumns},
	{deltalog.MetaCurrentDefault, deltalog.FeatureAllowColumnDefaults},
}

func checkSchemaWritable(t deltalog.DataType, path string) error {
	switch t := t.(type) {
	case *deltalog.StructType:
		for _, f := range t.Fields {
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			for k := range f.Metadata {
				for _, r := range refusedFieldMetadata {
					if strings.HasPrefix(k, r.prefix) {
						return fmt.Errorf("check schema: column %q has %s (feature %s): %w", p, k, r.feature, ErrUnsupportedFeature)
					}
				}
			}
			if err := checkTypeChanges(f, p); err != nil {
				return err
			}
			if err := checkSchemaWritable(f.Type, p); err != nil {
				return err
			}
		}
	case *deltalog.ArrayType:
		return checkSchemaWritable(t.ElementType, path+".element")
	case *deltalog.MapType:
		if err := checkSchemaWritable(t.KeyType, path+".key"); err != nil {
			return err
		}
		return checkSchemaWritable(t.ValueType, path+".value")
	case deltalog.PrimitiveType:
		switch {
		case t == deltalog.Variant, t == deltalog.Void,
			strings.HasPrefix(string(t), "geometry"), strings.HasPrefix(string(t), "geography"):
			return fmt.Errorf("check schema: column %q has type %s, which ingestd cannot write: %w", path, t, ErrUnsupportedFeature)
		}
	case deltalog.DecimalType:
	default:
		return fmt.Errorf("check schema: column %q has unsupported type %v: %w", path, t, ErrUnsupportedFeature)
	}
	return nil
}

// checkTypeChanges refuses a column whose delta.typeChanges history records a change
// that is not a Delta type widening (deltalog.Widening; PROTOCOL.md, "Type Widening"), such
// as byte→decimal(4,1) from Delta 3's preview: Delta 4 refuses to read or write such a
// table (DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA), so ingestd does not append to it
// either. An entry it cannot parse is refused the same way.
func checkTypeChanges(f *deltalog.StructField, path string) error {
	raw, ok := f.Metadata[deltalog.MetaTypeChanges]
	if !ok {
		return nil
	}
	entries, ok := raw.([]any)
	if !ok {
		return fmt.Errorf("check schema: column %q has a %s that is not a list: %w", path, deltalog.MetaTypeChanges, ErrUnsupportedFeature)
	}
	for _, e := range entries {
		m, _ := e.(map[string]any)
		from, _ := m["fromType"].(string)
		to, _ := m["toType"].(string)
		ft, err1 := deltalog.ParsePrimitive(from)
		tt, err2 := deltalog.ParsePrimitive(to)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("check schema: column %q has a %s entry %v that ingestd cannot read: %w", path, deltalog.MetaTypeChanges, e, ErrUnsupportedFeature)
		}
		if deltalog.Widening(ft, tt) == deltalog.WideningNone {
			where := path
			if fp, _ := m["fieldPath"].(string); fp != "" {
				where += " (" + fp + ")"
			}
			return fmt.Errorf("check schema: column %q recorded the type change %s → %s, which Delta type widening does not allow (Delta 4 refuses such tables: DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA): %w",
				where, from, to, ErrUnsupportedFeature)
		}
	}
	return nil
}

func firstUnsupported(features []string, supported map[string]bool) string {
	for _, f := range features {
		if !supported[f] {
			return f
		}
	}
	return ""
}

// columnMappingMode returns the effective column mapping mode: the metadata property,
// honoured only when the protocol supports column mapping (PROTOCOL.md, "Column Mapping":
// reader 2, or 3 with columnMapping; writer 5 or 6, or 7 with columnMapping).
func columnMappingMode(p *deltalog.Protocol, m *deltalog.Metadata) (deltalog.ColumnMappingMode, error) {
	mode, err := m.ColumnMappingMode()
	if err != nil || mode == deltalog.ColumnMappingNone {
		return mode, err
	}
	supported := p.MinReaderVersion == 2 || (p.MinReaderVersion == 3 && contains(p.ReaderFeatures, deltalog.FeatureColumnMapping))
	if !supported {
		return deltalog.ColumnMappingNone, nil
	}
	return mode, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
