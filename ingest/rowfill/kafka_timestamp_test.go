package rowfill

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// _kafka_timestamp holds the broker's milliseconds × 1000 exactly, whatever franz-go's
// time.Time says (it wraps outside 1677–2262): for 9999-12-31T23:59:59.999, 0, a
// pre-1970 value; Kafka's -1 (no timestamp) and a value outside 0001–9999 (microseconds
// written into the ms field) are NULL, and so is the partition value of the generated
// kafka_date = CAST(_kafka_timestamp AS DATE) (no 1969-12-31 directory); only the
// out-of-range one is counted. A NOT NULL _kafka_timestamp refuses the -1 as
// not_null_violation.
func TestKafkaTimestampExactAndNull(t *testing.T) {
	const avsc = `{"type":"record","name":"e","fields":[{"name":"id","type":"long"}]}`
	ws, err := decode.ParseWriterSchema(5, avsc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Table: config.Table{URI: "file:///t", KafkaColumns: []string{kafkacols.Timestamp}, KeyFormat: kafkacols.KeyBytes}}
	kf, err := kafkacols.Fields(cfg.Table.KafkaColumns, cfg.Table.KeyFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &deltalog.StructField{Name: "kafka_date", Type: deltalog.Date, Nullable: true, Metadata: map[string]any{deltalog.MetaGenerationExpression: "CAST(_kafka_timestamp AS DATE)"}}
	schema := &deltalog.StructType{Fields: append(append(slices.Clone(ws.Delta.Fields), kf...), d)}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decode.Compile(ws, ValueTable(schema, kafkacols.Columns(cfg.Table.KafkaColumns)), deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Table{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone, Parquet: pq, PartitionColumns: []string{"kafka_date"}},
		Options{Keys: newKeySchemas(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	cols := newCols(pq)
	brokerMs := []int64{253402300799999, -1, 1735689600000000, 0, -86400000, 1700000000123}
	for i, ms := range brokerMs {
		body, _ := avro.Marshal(avro.MustParse(avsc), map[string]any{"id": int64(i)})
		s.Begin(cols, ws)
		if err := dec.DecodeColumns(nil, body, cols); err != nil {
			t.Fatal(err)
		}
		s.Decoded()
		// the Timestamp franz-go hands over: time.Unix(0, ms*1e6), wrapping
		if err := s.Fill(&kgo.Record{Topic: "t", Offset: int64(i), Timestamp: time.Unix(0, ms*1e6)}); err != nil {
			t.Fatalf("%d ms: %v", ms, err)
		}
	}
	got := map[string]string{}
	fs := s.Partitioner().FileSchema()
	idLeaf, tsLeaf := leafIndex(t, fs, "id"), leafIndex(t, fs, "_kafka_timestamp")
	for _, f := range s.Partitioner().Files() {
		date := "NULL"
		if v := f.Values["kafka_date"]; v != nil {
			date = *v
		}
		for j := range f.Cols[idLeaf].Len() {
			id, ts := f.Cols[idLeaf].At(j), f.Cols[tsLeaf].At(j)
			us := "NULL"
			if !ts.IsNull() {
				us = fmt.Sprint(ts.Int64())
			}
			got[fmt.Sprint(brokerMs[id.Int64()])] = us + " " + date
		}
	}
	want := map[string]string{
		"253402300799999":  "253402300799999000 9999-12-31",
		"-1":               "NULL NULL",
		"1735689600000000": "NULL NULL",
		"0":                "0 1970-01-01",
		"-86400000":        "-86400000000 1969-12-31",
		"1700000000123":    "1700000000123000 2023-11-14",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("broker ms → _kafka_timestamp µs, kafka_date:\n got %v\nwant %v", got, want)
	}
	if n := s.TimestampsOutOfRange(); n != 1 {
		t.Errorf("TimestampsOutOfRange = %d, want 1 (the µs-in-ms value; -1 is not counted)", n)
	}

	// A NOT NULL _kafka_timestamp: the -1 is a not_null_violation naming the column.
	strict := schema.Clone()
	strict.FieldByKey("_kafka_timestamp").Nullable = false
	s2, err := New(cfg, Table{Schema: strict, ColumnMapping: deltalog.ColumnMappingNone, Parquet: pq}, Options{Keys: newKeySchemas(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	cols = newCols(pq)
	body, _ := avro.Marshal(avro.MustParse(avsc), map[string]any{"id": int64(9)})
	s2.Begin(cols, ws)
	if err := dec.DecodeColumns(nil, body, cols); err != nil {
		t.Fatal(err)
	}
	s2.Decoded()
	err = s2.Fill(&kgo.Record{Topic: "t", Timestamp: time.Unix(0, -1e6)})
	var de *decode.Error
	if !errors.As(err, &de) || de.Reason != decode.ReasonNotNullViolation || de.Field != "_kafka_timestamp" || !strings.Contains(err.Error(), "no timestamp (-1)") {
		t.Errorf("-1 into NOT NULL _kafka_timestamp: %v", err)
	}
}
