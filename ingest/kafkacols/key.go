package kafkacols

import (
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/schemaguard"
)

// KeyDecoder decodes the Avro body of keys written with one key writer schema into the
// leaf columns of a table's _kafka_key struct column (key_format avro). It compiles the
// key's writer schema against the struct's fields as if they were a table of their own
// (decode.Compile), then places each value in the full table's leaf column with its
// definition level raised by the levels of the enclosing _kafka_key group (one when the
// column is nullable). The key's writer schema is never drift for the value's guard.
type KeyDecoder struct {
	dec   *decode.Decoder
	cols  []int // full-schema leaf column of each sub-schema leaf
	shift []int // definition levels added per sub-schema leaf
	tmp   [][]parquet.Value
}

// CompileKey builds the KeyDecoder for key writer schema ws and the table's _kafka_key
// column key (a struct) in full, the Parquet schema of the table under column mapping
// mode. Errors are *decode.Error with decode.ReasonKeyDecodeError: a key schema that is
// not representable, has a field the _kafka_key struct lacks (it would be dropped; add
// it to the column first, e.g. ingestd table alter), or a field whose type does not fit
// its column losslessly.
func CompileKey(ws *decode.WriterSchema, key *deltalog.StructField, mode deltalog.ColumnMappingMode, full *parquet.Schema) (*KeyDecoder, error) {
	st, ok := key.Type.(*deltalog.StructType)
	if !ok {
		return nil, fmt.Errorf("compile key decoder: column %s is %s, not a struct", key.Name, key.Type)
	}
	if ws.DeltaErr != nil {
		return nil, KeyError("key writer schema id %d is not representable in Delta: %v", ws.ID, ws.DeltaErr)
	}
	for _, c := range schemaguard.Diff(st, ws.Delta) {
		if c.Kind == schemaguard.AddColumn {
			return nil, KeyError("key writer schema id %d has field %s, which column %s lacks (add it to %s.%s first, e.g. with ALTER TABLE … ADD COLUMNS; key schema changes are not schema evolution)", ws.ID, c.Path, key.Name, key.Name, c.Path)
		}
	}
	sub, err := deltawriter.ParquetSchema(st, mode)
	if err != nil {
		return nil, fmt.Errorf("compile key decoder: build parquet schema of %s: %w", key.Name, err)
	}
	dec, err := decode.Compile(ws, st, mode, sub)
	if err != nil {
		var de *decode.Error
		if errors.As(err, &de) {
			return nil, KeyError("key writer schema id %d does not fit column %s: %v", ws.ID, key.Name, de)
		}
		return nil, fmt.Errorf("compile key decoder: %w", err)
	}
	k := &KeyDecoder{dec: dec}
	prefix := key.PhysicalName(mode)
	for _, path := range sub.Columns() {
		sl, _ := sub.Lookup(path...)
		fl, ok := full.Lookup(append([]string{prefix}, path...)...)
		if !ok {
			return nil, fmt.Errorf("compile key decoder: table parquet schema has no leaf column %v under %s", path, prefix)
		}
		k.cols = append(k.cols, fl.ColumnIndex)
		k.shift = append(k.shift, fl.MaxDefinitionLevel-sl.MaxDefinitionLevel)
	}
	return k, nil
}

// Decode decodes one key's Avro body (after the Confluent frame) and returns its values
// per leaf column of the full table schema: out[i] holds the values of leaf column
// Leaves()[i], levels and column index set for the full schema. The slices are reused by
// the next call; the values' bytes are not. Errors: *decode.Error with
// decode.ReasonKeyDecodeError (bad bytes, a null for a NOT NULL field).
func (k *KeyDecoder) Decode(payload []byte) ([][]parquet.Value, error) {
	for i := range k.tmp {
		k.tmp[i] = k.tmp[i][:0]
	}
	var err error
	if k.tmp, err = k.dec.Decode(payload, k.tmp); err != nil {
		if errors.Is(err, decode.ErrNullRecord) {
			return nil, KeyError("decode key: the key's Avro value is null (a [null, record] key schema): write a null key instead")
		}
		return nil, KeyError("decode key: %v", err)
	}
	for i, vs := range k.tmp {
		col, up := k.cols[i], k.shift[i]
		for j, v := range vs {
			vs[j] = v.Level(v.RepetitionLevel(), v.DefinitionLevel()+up, col)
		}
	}
	return k.tmp, nil
}

// Leaves are the full-schema leaf columns Decode fills, in the order of its result.
func (k *KeyDecoder) Leaves() []int { return k.cols }
