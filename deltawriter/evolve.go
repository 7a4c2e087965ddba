package deltawriter

import (
	"fmt"
	"slices"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// MetaTypeChanges is the field metadata key under which type widening records the
// history of a field's type (PROTOCOL.md, "Type Widening"): an array of
// {"fromType", "toType"[, "fieldPath"]} objects, oldest first.
const MetaTypeChanges = "delta.typeChanges"

// PropEnableTypeWidening is the table property that allows type widening.
const PropEnableTypeWidening = "delta.enableTypeWidening"

// recordTypeChanges compares the new schema with the old one and, for every field whose
// type was widened (at any depth; array elements and map keys/values too), appends
// {"fromType","toType"[,"fieldPath"]} to the field's delta.typeChanges metadata. It
// returns whether any was recorded, and an error for a type change that is not a Delta
// type widening (PROTOCOL.md, "Type Widening", supported type changes).
func recordTypeChanges(old, cur *deltalog.StructType) (bool, error) {
	changed := false
	for _, f := range cur.Fields {
		of := fieldFold(old, f.Name)
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
			if h, ok := f.Metadata[MetaTypeChanges].([]any); ok {
				hist = append(hist, h...)
			}
			for _, e := range entries {
				hist = append(hist, e)
			}
			f.Metadata[MetaTypeChanges] = hist
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
		if !IsTypeWidening(old, cur) {
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

func fieldFold(s *deltalog.StructType, name string) *deltalog.StructField {
	if s == nil {
		return nil
	}
	if f := s.Field(name); f != nil {
		return f
	}
	for _, f := range s.Fields {
		if equalFoldASCII(f.Name, name) {
			return f
		}
	}
	return nil
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// IsTypeWidening reports whether Delta's type widening allows changing a column from old
// to cur (PROTOCOL.md, "Type Widening"; https://docs.delta.io/delta-type-widening):
// byte→short→int→long, float→double, byte/short/int→double, date→timestamp_ntz,
// decimal(p,s)→decimal(p+k1,s+k2) with k1 ≥ k2 ≥ 0, byte/short/int→decimal(10+k1,k2) and
// long→decimal(20+k1,k2) with k1 ≥ k2 ≥ 0. The integer-to-decimal minimum is 10 integer
// digits for byte and short too, not the 3 or 5 their values need: Delta 3's preview
// allowed byte→decimal(4,1), and Delta 4 refuses to read tables that recorded it.
// Schema evolution applies only a subset of these (schemaguard.Widens); ALTER may apply
// all of them.
func IsTypeWidening(old, cur deltalog.DataType) bool {
	rank := map[deltalog.DataType]int{deltalog.Byte: 1, deltalog.Short: 2, deltalog.Integer: 3, deltalog.Long: 4}
	digits := map[deltalog.DataType]int{deltalog.Byte: 10, deltalog.Short: 10, deltalog.Integer: 10, deltalog.Long: 20}
	switch c := cur.(type) {
	case deltalog.PrimitiveType:
		switch {
		case rank[old] > 0 && rank[c] > rank[old]:
			return true
		case old == deltalog.Float && c == deltalog.Double:
			return true
		case rank[old] > 0 && rank[old] <= 3 && c == deltalog.Double:
			return true
		case old == deltalog.Date && c == deltalog.TimestampNtz:
			return true
		}
	case deltalog.DecimalType:
		switch o := old.(type) {
		case deltalog.DecimalType:
			return c.Scale >= o.Scale && c.Precision-c.Scale >= o.Precision-o.Scale && (c.Precision > o.Precision || c.Scale > o.Scale)
		default:
			if d := digits[old]; d > 0 {
				return c.Precision-c.Scale >= d
			}
		}
	}
	return false
}

// EvolveTable prepares the protocol and metadata of a commit that changes the table
// schema to schema (new fields and/or widened types) in the same commit as the data:
//   - column mapping: new fields (at every level) get ids and physical names, and
//     delta.columnMapping.maxColumnId is bumped (AssignColumnMapping);
//   - type widening: widened fields get delta.typeChanges entries; this needs
//     delta.enableTypeWidening=true on the table (else an error) and the typeWidening
//     table feature;
//   - the protocol is upgraded when the new schema needs a feature the current protocol
//     lacks (timestampNtz, typeWidening), listing the features the legacy versions
//     implied (UpgradeProtocol).
//
// It returns the new metadata, the schema to write data with (physical names and ids
// assigned), and a new protocol, or nil when the protocol does not change. Put both in
// the Commit with the data.
func EvolveTable(p deltalog.Protocol, m deltalog.Metadata, schema *deltalog.StructType) (deltalog.Metadata, *deltalog.StructType, *deltalog.Protocol, error) {
	old, err := m.Schema()
	if err != nil {
		return deltalog.Metadata{}, nil, nil, fmt.Errorf("evolve table: %w", err)
	}
	schema = schema.Clone()
	widened, err := recordTypeChanges(old, schema)
	if err != nil {
		return deltalog.Metadata{}, nil, nil, err
	}
	if widened && m.Configuration[PropEnableTypeWidening] != "true" {
		return deltalog.Metadata{}, nil, nil, fmt.Errorf("evolve table: a column type is widened but %s is not true", PropEnableTypeWidening)
	}
	nm, ns, err := EvolveMetadata(m, schema)
	if err != nil {
		return deltalog.Metadata{}, nil, nil, err
	}
	var need []string
	if hasType(ns, deltalog.TimestampNtz) {
		need = append(need, "timestampNtz")
	}
	if widened || hasTypeChanges(ns) {
		need = append(need, "typeWidening")
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
			if _, ok := f.Metadata[MetaTypeChanges]; ok || hasTypeChanges(f.Type) {
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
	"columnMapping": true, "deletionVectors": true, "timestampNtz": true, "typeWidening": true,
	"typeWidening-preview": true, "v2Checkpoint": true, "vacuumProtocolCheck": true,
	"variantType": true, "variantType-preview": true, "catalogManaged": true,
}

// UpgradeProtocol returns p extended with the given table features. Nothing changes when
// p already supports them all. Otherwise the result is (3,7) when a reader-writer feature
// is needed, else (p's reader version, 7), with every feature the legacy versions implied
// listed explicitly (writer 2: appendOnly, invariants; 3: +checkConstraints; 4:
// +changeDataFeed, generatedColumns; 5: +columnMapping; 6: +identityColumns; reader 2:
// columnMapping) — omitting them makes Spark fail with
// DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH (checklist §1.8).
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
		implied := [][]string{2: {"appendOnly", "invariants"}, 3: {"checkConstraints"}, 4: {"changeDataFeed", "generatedColumns"},
			5: {"columnMapping"}, 6: {"identityColumns"}}
		for v := 2; v <= p.MinWriterVersion && v < len(implied); v++ {
			writer = append(writer, implied[v]...)
		}
	}
	if p.MinReaderVersion == 2 {
		reader = append(reader, "columnMapping")
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
	legacy := map[string]int{"appendOnly": 2, "invariants": 2, "checkConstraints": 3, "changeDataFeed": 4, "generatedColumns": 4, "columnMapping": 5, "identityColumns": 6}
	v, ok := legacy[f]
	return ok && p.MinWriterVersion >= v && (f != "columnMapping" || p.MinReaderVersion >= 2)
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
