package deltawriter

import (
	"fmt"
	"slices"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// recordTypeChanges compares the new schema with the old one and, for every field whose
// type was widened (at any depth; array elements and map keys/values too), appends
// {"fromType","toType"[,"fieldPath"]} to the field's delta.typeChanges metadata. It
// returns whether any was recorded, and an error for a type change that is not a Delta
// type widening (PROTOCOL.md, "Type Widening", supported type changes).
func recordTypeChanges(old, cur *deltalog.StructType) (bool, error) {
	changed := false
	for _, f := range cur.Fields {
		of := old.FieldByKey(f.Name)
		if of == nil {
			continue // a new field
		}
		var entries []map[string]any
		if err := diffTypes(of.Type, f.Type, "", f.Name, &entries, &changed); err != nil {
			return false, err
		}
		if len(entries) > 0 {
			if f.Metadata == nil {
				f.Metadata = map[string]any{}
			}
			var hist []any
			if h, ok := f.Metadata[deltalog.MetaTypeChanges].([]any); ok {
				hist = append(hist, h...)
			}
			for _, e := range entries {
				hist = append(hist, e)
			}
			f.Metadata[deltalog.MetaTypeChanges] = hist
		}
	}
	return changed, nil
}

// diffTypes walks two types of one field; fieldPath is the path inside the field
// ("element", "key", "value", "value.element", …) used for nested arrays and maps.
func diffTypes(old, cur deltalog.DataType, fieldPath, where string, entries *[]map[string]any, changed *bool) error {
	switch c := cur.(type) {
	case *deltalog.StructType:
		o, ok := old.(*deltalog.StructType)
		if !ok {
			return fmt.Errorf("evolve schema: %s changes from %s to a struct", where, old)
		}
		ch, err := recordTypeChanges(o, c)
		*changed = *changed || ch
		return err
	case *deltalog.ArrayType:
		o, ok := old.(*deltalog.ArrayType)
		if !ok {
			return fmt.Errorf("evolve schema: %s changes from %s to an array", where, old)
		}
		return diffTypes(o.ElementType, c.ElementType, joinPath(fieldPath, "element"), where, entries, changed)
	case *deltalog.MapType:
		o, ok := old.(*deltalog.MapType)
		if !ok {
			return fmt.Errorf("evolve schema: %s changes from %s to a map", where, old)
		}
		if err := diffTypes(o.KeyType, c.KeyType, joinPath(fieldPath, "key"), where, entries, changed); err != nil {
			return err
		}
		return diffTypes(o.ValueType, c.ValueType, joinPath(fieldPath, "value"), where, entries, changed)
	default:
		if old.String() == cur.String() {
			return nil
		}
		if deltalog.Widening(old, cur) == deltalog.WideningNone {
			return fmt.Errorf("evolve schema: %s changes from %s to %s, which is not a Delta type widening", where, old, cur)
		}
		e := map[string]any{"fromType": old.String(), "toType": cur.String()}
		if fieldPath != "" {
			e["fieldPath"] = fieldPath
		}
		*entries = append(*entries, e)
		*changed = true
		return nil
	}
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// evolveTable prepares the protocol and metadata of a commit that changes the table
// schema to schema (new fields and/or widened types) in the same commit as the data:
//   - column mapping: new fields (at every level) get ids and physical names, and
//     delta.columnMapping.maxColumnId is bumped (AssignColumnMapping);
//   - type widening: widened fields get delta.typeChanges entries; this needs
//     delta.enableTypeWidening=true on the table (else an error) and the typeWidening
//     table feature;
//   - the protocol is upgraded when the new schema needs a feature the current protocol
//     lacks (timestampNtz, typeWidening), listing the features the legacy versions
//     implied (UpgradeProtocol); so it is for the features in enable.
//
// It returns the new metadata, the schema to write data with (physical names and ids
// assigned), and a new protocol, or nil when the protocol does not change.
func evolveTable(p deltalog.Protocol, m deltalog.Metadata, schema *deltalog.StructType, enable ...string) (deltalog.Metadata, *deltalog.StructType, *deltalog.Protocol, error) {
	old, err := m.Schema()
	if err != nil {
		return deltalog.Metadata{}, nil, nil, fmt.Errorf("evolve table: %w", err)
	}
	schema = schema.Clone()
	widened, err := recordTypeChanges(old, schema)
	if err != nil {
		return deltalog.Metadata{}, nil, nil, err
	}
	if widened && m.Configuration[deltalog.PropEnableTypeWidening] != "true" {
		return deltalog.Metadata{}, nil, nil, fmt.Errorf("evolve table: a column type is widened but %s is not true", deltalog.PropEnableTypeWidening)
	}
	nm, ns, err := evolveMetadata(m, schema)
	if err != nil {
		return deltalog.Metadata{}, nil, nil, err
	}
	var need []string
	if hasType(ns, deltalog.TimestampNtz) {
		need = append(need, deltalog.FeatureTimestampNtz)
	}
	if widened || hasTypeChanges(ns) {
		need = append(need, deltalog.FeatureTypeWidening)
	}
	for _, f := range enable {
		if !slices.Contains(need, f) {
			need = append(need, f)
		}
	}
	np := UpgradeProtocol(p, need...)
	if protocolEqual(np, p) {
		return nm, ns, nil, nil
	}
	return nm, ns, &np, nil
}

func hasTypeChanges(t deltalog.DataType) bool {
	switch t := t.(type) {
	case *deltalog.StructType:
		for _, f := range t.Fields {
			if _, ok := f.Metadata[deltalog.MetaTypeChanges]; ok || hasTypeChanges(f.Type) {
				return true
			}
		}
	case *deltalog.ArrayType:
		return hasTypeChanges(t.ElementType)
	case *deltalog.MapType:
		return hasTypeChanges(t.KeyType) || hasTypeChanges(t.ValueType)
	}
	return false
}

// readerWriterFeatures are the table features that are both reader and writer features.
var readerWriterFeatures = map[string]bool{
	deltalog.FeatureColumnMapping: true, deltalog.FeatureDeletionVectors: true, deltalog.FeatureTimestampNtz: true,
	deltalog.FeatureTypeWidening: true, deltalog.FeatureTypeWideningPreview: true, deltalog.FeatureV2Checkpoint: true,
	deltalog.FeatureVacuumProtocolCheck: true, deltalog.FeatureVariantType: true, deltalog.FeatureVariantTypePreview: true,
	deltalog.FeatureCatalogManaged: true,
}

// UpgradeProtocol returns p extended with the given table features. Nothing changes when
// p already supports them all. Otherwise the result is (3,7) when a reader-writer feature
// is needed, else (p's reader version, 7), with every feature the legacy versions implied
// listed explicitly (writer 2: appendOnly, invariants; 3: +checkConstraints; 4:
// +changeDataFeed, generatedColumns; 5: +columnMapping; 6: +identityColumns; reader 2:
// columnMapping) — omitting them makes Spark fail with
// DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH (PROTOCOL.md, "Table Features": a table
// upgraded to writer 7 lists the features its legacy version implied).
func UpgradeProtocol(p deltalog.Protocol, features ...string) deltalog.Protocol {
	missing := false
	for _, f := range features {
		if !protocolSupports(p, f) {
			missing = true
		}
	}
	if !missing {
		return p
	}
	out := deltalog.Protocol{MinReaderVersion: p.MinReaderVersion, MinWriterVersion: 7}
	writer := slices.Clone(p.WriterFeatures)
	reader := slices.Clone(p.ReaderFeatures)
	if p.MinWriterVersion < 7 {
		implied := [][]string{2: {deltalog.FeatureAppendOnly, deltalog.FeatureInvariants}, 3: {deltalog.FeatureCheckConstraints},
			4: {deltalog.FeatureChangeDataFeed, deltalog.FeatureGeneratedColumns}, 5: {deltalog.FeatureColumnMapping}, 6: {deltalog.FeatureIdentityColumns}}
		for v := 2; v <= p.MinWriterVersion && v < len(implied); v++ {
			writer = append(writer, implied[v]...)
		}
	}
	if p.MinReaderVersion == 2 {
		reader = append(reader, deltalog.FeatureColumnMapping)
	}
	needReader := p.MinReaderVersion >= 3
	for _, f := range features {
		writer = append(writer, f)
		if readerWriterFeatures[f] {
			reader = append(reader, f)
			needReader = true
		}
	}
	if needReader {
		out.MinReaderVersion = 3
		out.ReaderFeatures = uniq(reader)
	}
	out.WriterFeatures = uniq(writer)
	return out
}

// protocolSupports reports whether p supports feature f, explicitly or through its
// legacy versions.
func protocolSupports(p deltalog.Protocol, f string) bool {
	if p.MinWriterVersion >= 7 {
		if !slices.Contains(p.WriterFeatures, f) {
			return false
		}
		if readerWriterFeatures[f] && p.MinReaderVersion >= 3 {
			return slices.Contains(p.ReaderFeatures, f)
		}
		return true
	}
	legacy := map[string]int{deltalog.FeatureAppendOnly: 2, deltalog.FeatureInvariants: 2, deltalog.FeatureCheckConstraints: 3,
		deltalog.FeatureChangeDataFeed: 4, deltalog.FeatureGeneratedColumns: 4, deltalog.FeatureColumnMapping: 5, deltalog.FeatureIdentityColumns: 6}
	v, ok := legacy[f]
	return ok && p.MinWriterVersion >= v && (f != deltalog.FeatureColumnMapping || p.MinReaderVersion >= 2)
}

func uniq(s []string) []string {
	out := make([]string, 0, len(s))
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func protocolEqual(a, b deltalog.Protocol) bool {
	return a.MinReaderVersion == b.MinReaderVersion && a.MinWriterVersion == b.MinWriterVersion &&
		slices.Equal(a.ReaderFeatures, b.ReaderFeatures) && slices.Equal(a.WriterFeatures, b.WriterFeatures)
}
