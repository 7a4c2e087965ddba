package deltalog

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A schema with nested types and column-mapping metadata, as Spark writes it.
const cmSchema = `{"type":"struct","fields":[` +
	`{"name":"id","type":"long","nullable":false,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-a1"}},` +
	`{"name":"amount","type":"decimal(25,3)","nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-b2","comment":"money"}},` +
	`{"name":"s","type":{"type":"struct","fields":[{"name":"x","type":"timestamp","nullable":true,"metadata":{"delta.columnMapping.id":4,"delta.columnMapping.physicalName":"col-d4"}}]},"nullable":true,"metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-c3"}},` +
	`{"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"col-e5"}},` +
	`{"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"struct","fields":[{"name":"v","type":"date","nullable":true,"metadata":{"delta.columnMapping.id":7,"delta.columnMapping.physicalName":"col-g7"}}]},"valueContainsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":6,"delta.columnMapping.physicalName":"col-f6","delta.typeChanges":[{"fromType":"integer","toType":"long","tableVersion":3}]}}` +
	`]}`

func TestSchemaRoundTrip(t *testing.T) {
	s, err := ParseSchema(cmSchema)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "struct<id:long,amount:decimal(25,3),s:struct<x:timestamp>,tags:array<string>,m:map<string,struct<v:date>>>" {
		t.Fatalf("String() = %s", got)
	}
	m := s.Field("m")
	if id, ok := m.FieldID(); !ok || id != 6 || m.PhysicalName(ColumnMappingName) != "col-f6" || m.PhysicalName(ColumnMappingNone) != "m" {
		t.Fatalf("column mapping of m: id %d %v, physical %q", id, ok, m.PhysicalName(ColumnMappingName))
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal([]byte(cmSchema), &a)
	_ = json.Unmarshal(out, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip differs:\n in  %s\n out %s", cmSchema, out)
	}
}

func TestCommitRoundTrip(t *testing.T) {
	created := int64(1700000000000)
	one := "2024-01-01"
	lu := int64(1700000000123)
	in := []Action{
		{CommitInfo: CommitInfo{"timestamp": json.Number("1700000000000"), "operation": "WRITE", "operationParameters": map[string]any{"mode": "Append"}}},
		{Protocol: &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"columnMapping"}, WriterFeatures: []string{"columnMapping", "appendOnly"}}},
		{Metadata: &Metadata{ID: "6f1b2c3d-0000-4000-8000-000000000001", Format: Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString: cmSchema, PartitionColumns: []string{"d"}, Configuration: map[string]string{"delta.columnMapping.mode": "name"}, CreatedTime: &created}},
		{Txn: &Txn{AppID: "pipe-orders-0", Version: 41, LastUpdated: &lu}},
		{Add: &Add{Path: "d=2024-01-01/part-00000-x-c000.snappy.parquet", PartitionValues: map[string]*string{"d": &one, "e": nil},
			Size: 1234, ModificationTime: 1700000000001, DataChange: true, Stats: `{"numRecords":3}`, Tags: map[string]string{"k": "v"}}},
		{Remove: &Remove{Path: "old.parquet", DataChange: true}},
		{DomainMetadata: &DomainMetadata{Domain: "delta.rowTracking", Configuration: `{"rowIdHighWaterMark":1}`}},
		{Other: map[string]json.RawMessage{"cdc": json.RawMessage(`{"path":"_change_data/c.parquet","partitionValues":{},"size":1,"dataChange":false}`)}},
	}
	enc, err := EncodeCommit(in)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(enc, []byte("\n")); n != len(in) {
		t.Fatalf("%d lines, want %d:\n%s", n, len(in), enc)
	}
	for _, want := range []string{`"partitionValues":{"d":"2024-01-01","e":null}`, `"appId":"pipe-orders-0"`, `"readerFeatures":["columnMapping"]`, `{"cdc":{"path":"_change_data/c.parquet"`} {
		if !bytes.Contains(enc, []byte(want)) {
			t.Errorf("encoded commit lacks %s:\n%s", want, enc)
		}
	}
	out, err := ParseCommit(bytes.NewReader(enc))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip differs:\n in  %+v\n out %+v", in, out)
	}
	mode, err := out[2].Metadata.ColumnMappingMode()
	if err != nil || mode != ColumnMappingName {
		t.Fatalf("ColumnMappingMode = %q, %v", mode, err)
	}
	if s, err := out[2].Metadata.Schema(); err != nil || len(s.Fields) != 5 {
		t.Fatalf("Metadata.Schema: %v", err)
	}
}

func TestParseCommitTolerance(t *testing.T) {
	// delta-rs style: nulls for optional fields, no trailing newline, unknown action and field.
	in := `{"metaData":{"id":"x","name":null,"description":null,"format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":[],"createdTime":1,"configuration":{}}}
{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":2,"dataChange":true,"stats":null,"tags":null,"deletionVector":null,"baseRowId":null,"defaultRowCommitVersion":null,"clusteringProvider":null,"futureField":1}}

{"futureAction":{"x":1}}
{"txn":{"appId":"a","version":3}}`
	acts, err := ParseCommit(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 4 || acts[0].Metadata.Name != "" || acts[1].Add.Stats != "" || acts[2].Other["futureAction"] == nil || acts[3].Txn.Version != 3 {
		t.Fatalf("parsed %+v", acts)
	}
	if _, err := ParseCommit(strings.NewReader("{\"add\":{}}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("malformed line error = %v, want line 2", err)
	}
}

func TestProtocolFeatureLists(t *testing.T) {
	for _, tc := range []struct {
		p    Protocol
		want string
	}{
		{Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, `{"minReaderVersion":1,"minWriterVersion":2}`},
		{Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly"}}, `{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["appendOnly"]}`},
		{Protocol{MinReaderVersion: 3, MinWriterVersion: 7}, `{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":[],"writerFeatures":[]}`},
	} {
		b, err := json.Marshal(tc.p)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.p, b, err, tc.want)
		}
	}
}

func TestColumnMappingModeAndIntProperty(t *testing.T) {
	for _, tc := range []struct {
		conf map[string]string
		want ColumnMappingMode
		err  bool
	}{
		{nil, ColumnMappingNone, false},
		{map[string]string{PropColumnMappingMode: "none"}, ColumnMappingNone, false},
		{map[string]string{PropColumnMappingMode: "id"}, ColumnMappingID, false},
		{map[string]string{PropColumnMappingMode: "Name"}, ColumnMappingName, false},
		{map[string]string{PropColumnMappingMode: "bogus"}, "", true},
	} {
		m := Metadata{Configuration: tc.conf}
		got, err := m.ColumnMappingMode()
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%v: got %q, %v", tc.conf, got, err)
		}
	}
	m := Metadata{Configuration: map[string]string{PropCheckpointInterval: "5", "bad": "x"}}
	if n, err := m.IntProperty(PropCheckpointInterval, 10); n != 5 || err != nil {
		t.Errorf("IntProperty = %d, %v", n, err)
	}
	if n, err := m.IntProperty("unset", 10); n != 10 || err != nil {
		t.Errorf("IntProperty default = %d, %v", n, err)
	}
	if _, err := m.IntProperty("bad", 10); err == nil {
		t.Errorf("IntProperty(bad) succeeded")
	}
}
