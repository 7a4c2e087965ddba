package rowfill

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// A table without Kafka columns, generated columns, constraints or partition columns
// needs no per-row stage: New returns nil, whose Partitioner is nil.
func TestNewWithoutRowWorkIsNil(t *testing.T) {
	schema, pq, _, _ := tableSetup(t, rowfillAvro, nil)
	s, err := New(&config.Config{}, Table{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone, Parquet: pq}, Options{})
	if err != nil || s != nil {
		t.Fatalf("New = %v, %v; want nil, nil", s, err)
	}
	if p := s.Partitioner(); p != nil {
		t.Fatalf("nil Stage's Partitioner = %v; want nil", p)
	}
}

// The Stage as a flush drives it (Begin, decode, Decoded, Fill) on a table with two Kafka
// columns and a generated date column d = CAST(ts AS DATE) that the writer lacks.
// Unpartitioned, the rows stay in the flush's columns, filled (_kafka_offset,
// _kafka_topic, d), and the filled columns stay dense: the decoder's NULL placeholders
// went to the spares, not to the columns. Partitioned by d with one partition file
// allowed, the rows of one day move into the file d=2023-01-09 (without d), and a row of
// another day is ErrPartitionLimit and leaves nothing in the flush's columns.
func TestStageFillsAndRoutesRows(t *testing.T) {
	const avsc = `{"type":"record","name":"e","fields":[{"name":"id","type":"long"},{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}}]}`
	ws, err := decode.ParseWriterSchema(5, avsc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Table: config.Table{URI: "file:///t", KafkaColumns: []string{kafkacols.Offset, kafkacols.Topic}, KeyFormat: kafkacols.KeyBytes}}
	kf, err := kafkacols.Fields(cfg.Table.KafkaColumns, cfg.Table.KeyFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &deltalog.StructField{Name: "d", Type: deltalog.Date, Nullable: true, Metadata: map[string]any{deltalog.MetaGenerationExpression: "CAST(ts AS DATE)"}}
	schema := &deltalog.StructType{Fields: append(append(slices.Clone(ws.Delta.Fields), d), kf...)}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decode.Compile(ws, ValueTable(schema, kafkacols.Columns(cfg.Table.KafkaColumns)), deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	newStage := func(partitionBy []string) *Stage {
		s, err := New(cfg, Table{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone, Parquet: pq, PartitionColumns: partitionBy},
			Options{MaxOpenPartitions: 1, Keys: newKeySchemas(), Log: discard()})
		if err != nil || s == nil {
			t.Fatalf("New = %v, %v", s, err)
		}
		return s
	}
	row := func(s *Stage, cols []column.Column, id, ts, offset int64) error {
		body, err := avro.Marshal(avro.MustParse(avsc), map[string]any{"id": id, "ts": ts})
		if err != nil {
			t.Fatal(err)
		}
		s.Begin(cols, ws)
		err = dec.DecodeColumns(nil, body, cols)
		s.Decoded()
		if err != nil {
			t.Fatal(err)
		}
		return s.Fill(&kgo.Record{Topic: "orders", Partition: 2, Offset: offset})
	}
	// render renders leaves names of fs in cols: "dense=… [value(def,column) …]".
	render := func(fs *parquet.Schema, cols []column.Column, names ...string) string {
		var out []string
		for _, name := range names {
			l, ok := column.LeafOf(fs, name)
			if !ok {
				t.Fatalf("no leaf %s", name)
			}
			var vs []string
			for _, v := range levelledOf(cols)[l.Index] {
				vs = append(vs, fmt.Sprintf("%v(d%d,c%d)", v, v.DefinitionLevel(), v.Column()-l.Index))
			}
			out = append(out, fmt.Sprintf("%s dense=%v %v", name, cols[l.Index].IsDense(), vs))
		}
		return strings.Join(out, "; ")
	}
	const day = 86_400_000_000                                        // µs
	ts := []int64{1673269200000000, 1673269200000000 + 3_600_000_000} // 2023-01-09T13:00Z, 14:00Z

	s := newStage(nil)
	if s.Partitioner() != nil {
		t.Fatal("an unpartitioned table has a partitioner")
	}
	cols := newCols(pq)
	for i := range ts {
		if err := row(s, cols, int64(i), ts[i], int64(40+i)); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	got := render(pq, cols, "_kafka_offset", "_kafka_topic", "d")
	if want := "_kafka_offset dense=true [40(d1,c0) 41(d1,c0)]; _kafka_topic dense=true [orders(d1,c0) orders(d1,c0)]; d dense=true [19366(d1,c0) 19366(d1,c0)]"; got != want {
		t.Errorf("unpartitioned columns:\n got %s\nwant %s", got, want)
	}

	s = newStage([]string{"d"})
	cols = newCols(pq)
	for i := range ts {
		if err := row(s, cols, int64(i), ts[i], int64(40+i)); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	if err := row(s, cols, 9, ts[0]+day, 49); !errors.Is(err, ErrPartitionLimit) {
		t.Fatalf("a second day with max_open_partitions 1: %v; want ErrPartitionLimit", err)
	}
	for i := range cols {
		if n := cols[i].Len(); n != 0 {
			t.Errorf("table-wide leaf %d keeps %d entries; want every row moved or dropped", i, n)
		}
	}
	files := s.Partitioner().Files()
	if len(files) != 1 || files[0].Dir != "d=2023-01-09" || files[0].Rows != 2 || files[0].Values["d"] == nil || *files[0].Values["d"] != "2023-01-09" {
		t.Fatalf("files %+v; want one, d=2023-01-09 with 2 rows", files)
	}
	fs := s.Partitioner().FileSchema()
	if _, ok := fs.Lookup("d"); ok {
		t.Errorf("the partition files' schema keeps the partition column d: %v", fs.Columns())
	}
	got = render(fs, files[0].Cols, "id", "_kafka_offset", "_kafka_topic")
	if want := "id dense=true [0(d1,c0) 1(d1,c0)]; _kafka_offset dense=true [40(d1,c0) 41(d1,c0)]; _kafka_topic dense=true [orders(d1,c0) orders(d1,c0)]"; got != want {
		t.Errorf("the partition file's columns:\n got %s\nwant %s", got, want)
	}
}
