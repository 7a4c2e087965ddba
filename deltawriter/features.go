package deltawriter

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// This file is the one place that says which Delta protocol versions and table features
// ingestd supports (PROTOCOL.md, "Protocol Evolution" and "Table Features";
// delta-protocol-checklist.md §1.11–1.12). Add a feature here only together with its
// implementation.

// Highest legacy protocol versions understood. Reader 3 / writer 7 mean "explicit
// feature lists".
const (
	maxReaderVersion = 3
	maxWriterVersion = 7
)

// supportedReaderFeatures are the reader features whose log (and data layout) this
// package handles.
var supportedReaderFeatures = map[string]bool{
	"columnMapping": true, // physical names and field ids (ParquetSchema, stats keys)
	"timestampNtz":  true, // timestamp_ntz type: INT64 MICROS isAdjustedToUTC=false, stats without zone
}

// supportedWriterFeatures are the writer features this package honours when writing.
var supportedWriterFeatures = map[string]bool{
	"appendOnly":    true, // we only ever add files
	"invariants":    true, // only while no field carries delta.invariants (checked in checkWritable)
	"columnMapping": true, // writes physical names and field ids
	"timestampNtz":  true,
	// changeDataFeed: commits with only add actions need no cdc files
	// (PROTOCOL.md, "Add CDC File": data-only inserts are read from add actions).
	"changeDataFeed": true,
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
		if f := firstUnsupported(p.ReaderFeatures, supportedReaderFeatures); f != "" {
			return fmt.Errorf("check protocol: reader feature %q: %w", f, ErrUnsupportedFeature)
		}
	}
	return nil
}

// checkWritable refuses, before anything is written, a table whose protocol or metadata
// requires writer behaviour we do not implement: unknown writer features, CHECK
// constraints, invariants, generated and identity columns, column defaults.
func checkWritable(p *deltalog.Protocol, m *deltalog.Metadata, schema *deltalog.StructType) error {
	if err := checkReadable(p); err != nil {
		return err
	}
	if p.MinWriterVersion > maxWriterVersion {
		return fmt.Errorf("check protocol: writer version %d > %d: %w", p.MinWriterVersion, maxWriterVersion, ErrUnsupportedFeature)
	}
	if p.MinWriterVersion == 7 {
		if f := firstUnsupported(p.WriterFeatures, supportedWriterFeatures); f != "" {
			return fmt.Errorf("check protocol: writer feature %q: %w", f, ErrUnsupportedFeature)
		}
	}
	if m == nil {
		return fmt.Errorf("check metadata: table has no metaData action")
	}
	// Whatever the protocol says, these need evaluation we do not do (checklist §1.12:
	// legacy versions imply features that are inactive unless metadata uses them).
	keys := make([]string, 0, len(m.Configuration))
	for k := range m.Configuration {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, deltalog.PropConstraintPrefix) {
			return fmt.Errorf("check metadata: CHECK constraint %q (feature checkConstraints): %w", strings.TrimPrefix(k, deltalog.PropConstraintPrefix), ErrUnsupportedFeature)
		}
	}
	if _, err := m.ColumnMappingMode(); err != nil {
		return fmt.Errorf("check metadata: %w", err)
	}
	return checkSchemaWritable(schema, "")
}

// Field metadata keys that make a column need writer-side evaluation.
var refusedFieldMetadata = []struct{ prefix, feature string }{
	{"delta.invariants", "invariants"},
	{"delta.generationExpression", "generatedColumns"},
	{"delta.identity.", "identityColumns"},
	{"CURRENT_DEFAULT", "allowColumnDefaults"},
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
	case deltalog.PrimitiveType, deltalog.DecimalType:
	default:
		return fmt.Errorf("check schema: column %q has unsupported type %v: %w", path, t, ErrUnsupportedFeature)
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
// honoured only when the protocol supports column mapping (checklist §1.13).
func columnMappingMode(p *deltalog.Protocol, m *deltalog.Metadata) (deltalog.ColumnMappingMode, error) {
	mode, err := m.ColumnMappingMode()
	if err != nil || mode == deltalog.ColumnMappingNone {
		return mode, err
	}
	supported := p.MinReaderVersion == 2 || (p.MinReaderVersion == 3 && contains(p.ReaderFeatures, "columnMapping"))
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
