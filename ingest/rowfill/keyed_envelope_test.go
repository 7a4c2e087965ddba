package rowfill

import (
	"errors"
	"strconv"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/keyindex"
	"github.com/ingestd/ingestd/ingest/decode"
)

const envelopeRowAvro = `{"type":"record","name":"Value","fields":[{"name":"id","type":"long"},{"name":"name","type":["null","string"]}]}`

// A change of an envelope table without its envelope sequence: a snapshot read (op r)
// is accepted, ordered by its position (SeqFromPosition, its sequence column NULL until
// the flush gives it one: SetSequence); a create, update or delete is missing_key naming
// the sequence path.
func TestKeyedEnvelopeSnapshotReadWithoutSequence(t *testing.T) {
	schema, pq, dec, row := tableSetup(t, envelopeRowAvro, func(s *deltalog.StructType) {
		s.Fields = append(s.Fields, &deltalog.StructField{Name: SourceLSN, Type: deltalog.Long, Nullable: true})
	})
	cfg := modeConfig(t, "  mode: upsert\n  key: [id]\n  key_format: string\n  envelope: debezium\n  sequence_by: source.lsn")
	k, err := newKeyFill(cfg, schema, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cols := newCols(pq)
	lsnLeaf := leafIndex(t, pq, SourceLSN)
	for i, c := range []struct {
		env     decode.EnvelopeChange
		wantErr bool
		seq     int64
		fromPos bool
		lsn     string // the row's _source_lsn after the fill
	}{
		{env: decode.EnvelopeChange{Op: decode.OpRead, LSN: 100, HasLSN: true}, seq: 100, lsn: "100"},
		{env: decode.EnvelopeChange{Op: decode.OpRead}, seq: keyindex.NullSequence, fromPos: true, lsn: "<null>"},
		{env: decode.EnvelopeChange{Op: decode.OpCreate}, wantErr: true},
		{env: decode.EnvelopeChange{Op: decode.OpUpdate}, wantErr: true},
		{env: decode.EnvelopeChange{Op: decode.OpDelete}, wantErr: true},
	} {
		b, err := avro.Marshal(avro.MustParse(envelopeRowAvro), map[string]any{"id": int64(i), "name": nil})
		if err != nil {
			t.Fatal(err)
		}
		row.begin(cols)
		if err := dec.DecodeColumns(nil, b, cols); err != nil {
			t.Fatal(err)
		}
		k.env = &c.env
		ch, err := k.read(row)
		if c.wantErr {
			var de *decode.Error
			if !errors.As(err, &de) || de.Reason != decode.ReasonMissingKey || de.Field != "source.lsn" {
				t.Fatalf("op %c without an LSN: error %v, want missing_key at source.lsn", c.env.Op, err)
			}
			row.drop()
			continue
		}
		if err != nil || ch.Seq != c.seq || ch.SeqFromPosition != c.fromPos {
			t.Fatalf("op %c: change seq %d from position %v, err %v; want %d, %v", c.env.Op, ch.Seq, ch.SeqFromPosition, err, c.seq, c.fromPos)
		}
		if err := k.mode.set(row, ch, &kgo.Record{}, false, &c.env); err != nil {
			t.Fatal(err)
		}
		v, _, _ := row.top(SourceLSN)
		if got := valueText(v); got != c.lsn {
			t.Fatalf("op %c: %s %s, want %s", c.env.Op, SourceLSN, got, c.lsn)
		}
	}
	// The flush gave the read (row 1) the sequence 200, then another read (row 0, kept
	// for the test) nothing known: NULL.
	s := &Stage{row: row, keyed: k}
	if err := s.SetSequence(cols, Change{SeqFromPosition: true, Row: 1, Seq: 200}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSequence(cols, Change{SeqFromPosition: true, Row: 0, Seq: keyindex.NullSequence}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSequence(cols, Change{Row: 0, Seq: 7}); err != nil { // not a read by position: left alone
		t.Fatal(err)
	}
	got := levelledOf(cols)[lsnLeaf]
	if len(got) != 2 || !got[0].IsNull() || got[1].IsNull() || got[1].Int64() != 200 {
		t.Fatalf("%s values %v, want [NULL 200]", SourceLSN, got)
	}
}

// valueText is a long value as text, "<null>" for a NULL.
func valueText(v parquet.Value) string {
	if v.IsNull() {
		return "<null>"
	}
	return strconv.FormatInt(v.Int64(), 10)
}

// A replay (Options.Origin set) reads dead letters out of their source partition's order:
// a snapshot read without its sequence cannot be ordered there and stays missing_key.
func TestKeyedEnvelopeSnapshotReadWithoutSequenceInAReplay(t *testing.T) {
	schema, pq, dec, row := tableSetup(t, envelopeRowAvro, func(s *deltalog.StructType) {
		s.Fields = append(s.Fields, &deltalog.StructField{Name: SourceLSN, Type: deltalog.Long, Nullable: true})
	})
	cfg := modeConfig(t, "  mode: upsert\n  key: [id]\n  key_format: string\n  envelope: debezium\n  sequence_by: source.lsn")
	k, err := newKeyFill(cfg, schema, Options{Origin: func(*kgo.Record) Source { return Source{} }})
	if err != nil {
		t.Fatal(err)
	}
	b, err := avro.Marshal(avro.MustParse(envelopeRowAvro), map[string]any{"id": int64(1), "name": nil})
	if err != nil {
		t.Fatal(err)
	}
	cols := newCols(pq)
	row.begin(cols)
	if err := dec.DecodeColumns(nil, b, cols); err != nil {
		t.Fatal(err)
	}
	k.env = &decode.EnvelopeChange{Op: decode.OpRead}
	_, err = k.read(row)
	var de *decode.Error
	if !errors.As(err, &de) || de.Reason != decode.ReasonMissingKey || de.Field != "source.lsn" {
		t.Fatalf("a replayed snapshot read without an LSN: error %v, want missing_key at source.lsn", err)
	}
}
