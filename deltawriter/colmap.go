package deltawriter

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// AssignColumnMapping gives every field of schema that has no column mapping id and
// physical name yet — at every nesting level, including structs inside arrays and map
// values — a fresh delta.columnMapping.id and a physical name "col-<uuid>" (PROTOCOL.md,
// "Column Mapping"; Delta's DeltaColumnMapping.assignColumnIdAndPhysicalNameToSchema).
// New ids continue from max(delta.columnMapping.maxColumnId, the largest id in schema).
// Fields that already carry both keep them. It returns the new schema (schema itself is
// not modified) and a copy of configuration with delta.columnMapping.maxColumnId set to
// the largest id in use. When configuration does not enable column mapping ("none" or
// unset) both are returned unchanged.
//
// PrepareSchemaChange calls it (through evolveMetadata) whenever a commit creates a table
// with column mapping or adds fields to one.
func AssignColumnMapping(schema *deltalog.StructType, configuration map[string]string) (*deltalog.StructType, map[string]string, error) {
	m := deltalog.Metadata{Configuration: configuration}
	mode, err := m.ColumnMappingMode()
	if err != nil {
		return nil, nil, fmt.Errorf("assign column mapping: %w", err)
	}
	if mode == deltalog.ColumnMappingNone {
		return schema, configuration, nil
	}
	maxID, err := m.IntProperty(deltalog.PropColumnMappingMaxColumnID, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("assign column mapping: %w", err)
	}
	out := schema.Clone()
	maxID = max(maxID, int64(maxFieldID(out)))
	if err := assignIDs(out, &maxID); err != nil {
		return nil, nil, err
	}
	conf := make(map[string]string, len(configuration)+1)
	for k, v := range configuration {
		conf[k] = v
	}
	conf[deltalog.PropColumnMappingMaxColumnID] = strconv.FormatInt(maxID, 10)
	return out, conf, nil
}

func maxFieldID(t deltalog.DataType) int {
	n := 0
	switch t := t.(type) {
	case *deltalog.StructType:
		for _, f := range t.Fields {
			if id, ok := f.FieldID(); ok {
				n = max(n, id)
			}
			n = max(n, maxFieldID(f.Type))
		}
	case *deltalog.ArrayType:
		n = maxFieldID(t.ElementType)
	case *deltalog.MapType:
		n = max(maxFieldID(t.KeyType), maxFieldID(t.ValueType))
	}
	return n
}

func assignIDs(t deltalog.DataType, maxID *int64) error {
	switch t := t.(type) {
	case *deltalog.StructType:
		for _, f := range t.Fields {
			_, hasID := f.FieldID()
			phys, _ := f.Metadata[deltalog.MetaColumnMappingPhysicalName].(string)
			switch {
			case hasID && phys != "":
			case hasID != (phys != ""):
				return fmt.Errorf("assign column mapping: field %q has only one of %s and %s", f.Name, deltalog.MetaColumnMappingID, deltalog.MetaColumnMappingPhysicalName)
			default:
				*maxID++
				u, err := newUUID()
				if err != nil {
					return err
				}
				if f.Metadata == nil {
					f.Metadata = map[string]any{}
				}
				f.Metadata[deltalog.MetaColumnMappingID] = float64(*maxID)
				f.Metadata[deltalog.MetaColumnMappingPhysicalName] = "col-" + u
			}
			if err := assignIDs(f.Type, maxID); err != nil {
				return err
			}
		}
	case *deltalog.ArrayType:
		return assignIDs(t.ElementType, maxID)
	case *deltalog.MapType:
		if err := assignIDs(t.KeyType, maxID); err != nil {
			return err
		}
		return assignIDs(t.ValueType, maxID)
	}
	return nil
}

// evolveMetadata returns a copy of the table metadata m with schema as its new schema:
// column mapping ids and physical names assigned to new fields (AssignColumnMapping) and
// delta.columnMapping.maxColumnId bumped when the table uses column mapping; id, format,
// partition columns, createdTime and the other properties unchanged. The returned schema
// is the one to build the Parquet schema from (ParquetSchema).
func evolveMetadata(m deltalog.Metadata, schema *deltalog.StructType) (deltalog.Metadata, *deltalog.StructType, error) {
	s, conf, err := AssignColumnMapping(schema, m.Configuration)
	if err != nil {
		return deltalog.Metadata{}, nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return deltalog.Metadata{}, nil, fmt.Errorf("evolve metadata: %w", err)
	}
	out := m
	out.SchemaString = string(b)
	out.Configuration = conf
	out.PartitionColumns = append([]string(nil), m.PartitionColumns...)
	return out, s, nil
}
