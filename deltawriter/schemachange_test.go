package deltawriter

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

func TestPrepareSchemaChangeCreate(t *testing.T) {
	schema := mustSchema(t, `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"s","type":{"type":"struct","fields":[{"name":"b","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	ntz := mustSchema(t, `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"t","type":"timestamp_ntz","nullable":true,"metadata":{}}]}`)
	for _, tc := range []struct {
		name     string
		change   SchemaChange
		mode     deltalog.ColumnMappingMode
		reader   int
		writer   int
		features []string // writer features
		props    map[string]string
	}{
		{"plain", SchemaChange{Schema: schema, Properties: map[string]string{"delta.appendOnly": "true"}},
			deltalog.ColumnMappingNone, 1, 2, nil, map[string]string{"delta.appendOnly": "true"}},
		{"column mapping from config", SchemaChange{Schema: schema, ColumnMapping: "id"},
			deltalog.ColumnMappingID, 2, 5, nil, map[string]string{deltalog.PropColumnMappingMode: "id", deltalog.PropColumnMappingMaxColumnID: "3"}},
		{"column mapping enabled by the guard", SchemaChange{Schema: schema, ColumnMapping: "none", Enable: []string{deltalog.FeatureColumnMapping}},
			deltalog.ColumnMappingName, 2, 5, nil, map[string]string{deltalog.PropColumnMappingMode: "name", deltalog.PropColumnMappingMaxColumnID: "3"}},
		{"type widening", SchemaChange{Schema: schema, Enable: []string{deltalog.FeatureTypeWidening}},
			deltalog.ColumnMappingNone, 3, 7, []string{"appendOnly", "invariants", "typeWidening"}, map[string]string{deltalog.PropEnableTypeWidening: "true"}},
		{"timestamp_ntz", SchemaChange{Schema: ntz, Enable: []string{deltalog.FeatureTimestampNtz}},
			deltalog.ColumnMappingNone, 3, 7, []string{"appendOnly", "invariants", "timestampNtz"}, map[string]string{}},
		{"timestampNtz enabled without a column", SchemaChange{Schema: schema, Enable: []string{deltalog.FeatureTimestampNtz}},
			deltalog.ColumnMappingNone, 3, 7, []string{"appendOnly", "invariants", "timestampNtz"}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.change.Name, tc.change.PartitionColumns = "t", []string{"a"}
			props := maps.Clone(tc.change.Properties)
			d, fo, err := PrepareSchemaChange(emptySnapshot(), tc.change)
			if err != nil {
				t.Fatal(err)
			}
			if d.Protocol == nil || d.Metadata == nil {
				t.Fatalf("create without protocol or metadata: %+v", d)
			}
			p, m := d.Protocol, d.Metadata
			if p.MinReaderVersion != tc.reader || p.MinWriterVersion != tc.writer || !slices.Equal(p.WriterFeatures, tc.features) {
				t.Errorf("protocol %+v, want (%d,%d) %v", p, tc.reader, tc.writer, tc.features)
			}
			if m.ID == "" || m.Name != "t" || !slices.Equal(m.PartitionColumns, []string{"a"}) || !maps.Equal(m.Configuration, tc.props) {
				t.Errorf("metadata %+v, want properties %v", m, tc.props)
			}
			if fo.ColumnMapping != tc.mode || !maps.Equal(fo.Configuration, tc.props) {
				t.Errorf("file options mode %s, configuration %v", fo.ColumnMapping, fo.Configuration)
			}
			if got, _ := m.Schema(); !sameSchema(got, fo.Schema) {
				t.Errorf("file schema differs from the committed one")
			}
			_, hasID := fo.Schema.Fields[0].FieldID()
			if hasID != (tc.mode != deltalog.ColumnMappingNone) {
				t.Errorf("column mapping ids assigned: %v under mode %s", hasID, tc.mode)
			}
			if !maps.Equal(tc.change.Properties, props) {
				t.Errorf("Properties modified: %v", tc.change.Properties)
			}
			if err := checkWritable(p, m, fo.Schema); err != nil {
				t.Errorf("created table not writable: %v", err)
			}
		})
	}
	if _, _, err := PrepareSchemaChange(nil, SchemaChange{}); err == nil || !strings.Contains(err.Error(), "no schema") {
		t.Errorf("create without schema: %v", err)
	}
	if _, _, err := PrepareSchemaChange(nil, SchemaChange{Schema: schema, Enable: []string{"rowTracking"}}); err == nil || !strings.Contains(err.Error(), `"rowTracking"`) {
		t.Errorf("unknown feature: %v", err)
	}
}

func TestPrepareSchemaChangeEvolve(t *testing.T) {
	ctx := context.Background()
	tbl, err := Open(ctx, newStore(t))
	if err != nil {
		t.Fatal(err)
	}
	create, _, err := PrepareSchemaChange(nil, SchemaChange{Name: "t", Schema: mustSchema(t, `{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]}`), ColumnMapping: "name"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata}); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Nothing changes: no actions, the snapshot's file options.
	for _, c := range []SchemaChange{{}, {Schema: snap.Schema}, {Schema: snap.Schema.Clone()}, {Schema: snap.Schema, Enable: nil, Properties: map[string]string{"x": "y"}}} {
		d, fo, err := PrepareSchemaChange(snap, c)
		if err != nil || d.Protocol != nil || d.Metadata != nil {
			t.Errorf("unchanged schema: %+v, %v", d, err)
		}
		if !sameSchema(fo.Schema, snap.Schema) || fo.ColumnMapping != deltalog.ColumnMappingName || fo.Configuration[deltalog.PropColumnMappingMode] != "name" {
			t.Errorf("unchanged schema: file options %+v", fo)
		}
	}

	// A new column: an id and a physical name, maxColumnId bumped, the protocol unchanged.
	wider := snap.Schema.Clone()
	wider.Fields = append(wider.Fields, &deltalog.StructField{Name: "b", Type: deltalog.String, Nullable: true})
	d, fo, err := PrepareSchemaChange(snap, SchemaChange{Schema: wider, ColumnMapping: "none", Properties: map[string]string{"ignored": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Protocol != nil || d.Metadata == nil || d.Metadata.ID != snap.Metadata.ID {
		t.Fatalf("add column: %+v", d)
	}
	if id, ok := fo.Schema.Fields[1].FieldID(); !ok || id != 2 || d.Metadata.Configuration[deltalog.PropColumnMappingMaxColumnID] != "2" || d.Metadata.Configuration["ignored"] != "" {
		t.Errorf("add column: id %d %v, configuration %v", id, ok, d.Metadata.Configuration)
	}
	if snap.Metadata.Configuration[deltalog.PropColumnMappingMaxColumnID] != "1" {
		t.Errorf("the snapshot's configuration was modified: %v", snap.Metadata.Configuration)
	}

	// Enabling type widening with a widening: the property, delta.typeChanges and the feature.
	widened := snap.Schema.Clone()
	widened.Fields[0].Type = deltalog.Long
	if _, _, err := PrepareSchemaChange(snap, SchemaChange{Schema: widened}); err == nil || !strings.Contains(err.Error(), deltalog.PropEnableTypeWidening) {
		t.Errorf("widening without the property: %v", err)
	}
	d, fo, err = PrepareSchemaChange(snap, SchemaChange{Schema: widened, Enable: []string{deltalog.FeatureTypeWidening}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Protocol == nil || !slices.Contains(d.Protocol.WriterFeatures, deltalog.FeatureTypeWidening) || d.Metadata.Configuration[deltalog.PropEnableTypeWidening] != "true" {
		t.Errorf("enable typeWidening: %+v", d)
	}
	if _, ok := fo.Schema.Fields[0].Metadata[deltalog.MetaTypeChanges]; !ok || fo.Configuration[deltalog.PropEnableTypeWidening] != "true" {
		t.Errorf("enable typeWidening: file options %+v", fo)
	}

	// Enabling timestampNtz without such a column still upgrades the protocol.
	d, _, err = PrepareSchemaChange(snap, SchemaChange{Enable: []string{deltalog.FeatureTimestampNtz}})
	if err != nil || d.Protocol == nil || !slices.Contains(d.Protocol.ReaderFeatures, deltalog.FeatureTimestampNtz) {
		t.Errorf("enable timestampNtz: %+v, %v", d, err)
	}
	// Column mapping is already on: enabling it is a no-op.
	if d, _, err := PrepareSchemaChange(snap, SchemaChange{Enable: []string{deltalog.FeatureColumnMapping}}); err != nil || d.Protocol != nil {
		t.Errorf("enable columnMapping on a mapped table: %+v, %v", d, err)
	}
}

func TestPrepareSchemaChangeRefusesColumnMappingOnExistingTable(t *testing.T) {
	ctx := context.Background()
	tbl, err := Open(ctx, newStore(t))
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, tbl, nil)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wider := snap.Schema.Clone()
	wider.Fields = append(wider.Fields, &deltalog.StructField{Name: "needs mapping", Type: deltalog.String, Nullable: true})
	_, _, err = PrepareSchemaChange(snap, SchemaChange{Schema: wider, Enable: []string{deltalog.FeatureColumnMapping}})
	if err == nil || !strings.Contains(err.Error(), "enabling column mapping on an existing table is not supported yet") {
		t.Errorf("enable columnMapping on an existing table: %v", err)
	}
}
