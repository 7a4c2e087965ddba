package rowfill

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
	"github.com/ingestd/ingestd/schemaguard"
)

// keyDecoder decodes the Avro body of keys written with one key writer schema into the
// leaf columns of a table's _kafka_key struct column (key_format avro). It compiles the
// key's writer schema against the struct's fields as if they were a table of their own
// (decode.Compile), then places each value in the full table's leaf column with its
// definition level raised by the levels of the enclosing _kafka_key group (one when the
// column is nullable). The key's writer schema is never drift for the value's guard.
type keyDecoder struct {
	dec   *decode.Decoder
	cols  []int // full-schema leaf column of each sub-schema leaf
	shift []int // definition levels added per sub-schema leaf
	tmp   [][]parquet.Value
}

// compileKey builds the keyDecoder for key writer schema ws and the table's _kafka_key
// column key (a struct) in full, the Parquet schema of the table under column mapping
// mode. Errors are *decode.Error with decode.ReasonKeyDecodeError: a key schema that is
// not representable, has a field the _kafka_key struct lacks (it would be dropped; add
// it to the column first, e.g. ingestd table alter), or a field whose type does not fit
// its column losslessly.
func compileKey(ws *decode.WriterSchema, key *deltalog.StructField, mode deltalog.ColumnMappingMode, full *parquet.Schema) (*keyDecoder, error) {
	st, ok := key.Type.(*deltalog.StructType)
	if !ok {
		return nil, fmt.Errorf("compile key decoder: column %s is %s, not a struct", key.Name, key.Type)
	}
	if ws.FormatName() != decode.FormatAvro {
		return nil, keyError("key writer schema id %d is a %s schema; table.key_format avro reads Avro keys only", ws.ID, ws.FormatName())
	}
	if ws.DeltaErr != nil {
		return nil, keyError("key writer schema id %d is not representable in Delta: %v", ws.ID, ws.DeltaErr)
	}
	for _, c := range schemaguard.Diff(st, ws.Delta) {
		if c.Kind == schemaguard.AddColumn {
			return nil, keyError("key writer schema id %d has field %s, which column %s lacks (add it to %s.%s first, e.g. with ALTER TABLE … ADD COLUMNS; key schema changes are not schema evolution)", ws.ID, c.Path, key.Name, key.Name, c.Path)
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
			return nil, keyError("key writer schema id %d does not fit column %s: %v", ws.ID, key.Name, de)
		}
		return nil, fmt.Errorf("compile key decoder: %w", err)
	}
	k := &keyDecoder{dec: dec}
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
func (k *keyDecoder) Decode(payload []byte) ([][]parquet.Value, error) {
	for i := range k.tmp {
		k.tmp[i] = k.tmp[i][:0]
	}
	var err error
	if k.tmp, err = k.dec.Decode(payload, k.tmp); err != nil {
		if errors.Is(err, decode.ErrNullRecord) {
			return nil, keyError("decode key: the key's Avro value is null (a [null, record] key schema): write a null key instead")
		}
		return nil, keyError("decode key: %v", err)
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
func (k *keyDecoder) Leaves() []int { return k.cols }

// header is one entry of the _kafka_headers map: a header key and its value, nil for a
// null header value (NULL in the map, not X”).
type header struct {
	Key   string
	Value []byte
}

// headerMap is the _kafka_headers map of a record's headers (KIP-82: an ordered list
// that allows repeated keys): one entry per distinct key, in the order keys first
// appear, holding the value of the key's last occurrence (Java's Headers.lastHeader). A
// null value stays nil. No headers: an empty (non-nil) map, never NULL. The record, and
// its dead-letter copy, keep every header in order; only the column folds repeats.
func headerMap(hs []kgo.RecordHeader) []header {
	return appendHeaderMap(make([]header, 0, len(hs)), hs)
}

// appendHeaderMap is headerMap appending to dst (reused by the caller across records).
func appendHeaderMap(dst []header, hs []kgo.RecordHeader) []header {
	base := len(dst)
	var at map[string]int // only for many headers; a few are searched linearly
	if len(hs) > 16 {
		at = make(map[string]int, len(hs))
	}
	for _, h := range hs {
		i := -1
		if at != nil {
			if j, ok := at[h.Key]; ok {
				i = j
			}
		} else {
			for j := base; j < len(dst); j++ {
				if dst[j].Key == h.Key {
					i = j
					break
				}
			}
		}
		if i >= 0 {
			dst[i].Value = h.Value
			continue
		}
		if at != nil {
			at[h.Key] = len(dst)
		}
		dst = append(dst, header{Key: h.Key, Value: h.Value})
	}
	return dst
}

// checkStringKey checks a key for key_format string: nil (a null key) and valid UTF-8 pass;
// other bytes are a *decode.Error with decode.ReasonKeyDecodeError (never replaced by
// U+FFFD, which would alter the data silently).
func checkStringKey(k []byte) error {
	if k == nil || utf8.Valid(k) {
		return nil
	}
	i := decode.InvalidUTF8At(k)
	return &decode.Error{Reason: decode.ReasonKeyDecodeError, Field: kafkacols.Column(kafkacols.Key),
		Err: fmt.Errorf("decode key as string (table.key_format string): byte %d (0x%02x) is not valid UTF-8", i, k[i])}
}

// checkHeaderKeys checks the header keys of a record for _kafka_headers, a map<string, binary>:
// each must be valid UTF-8 (a Java producer's always is; a key of other bytes in a Delta
// string would make the data file unreadable to readers that check UTF-8, delta-rs
// among them). The first that is not is a *decode.Error with decode.ReasonDecodeError at
// _kafka_headers, naming the header's index and the byte.
func checkHeaderKeys(hs []kgo.RecordHeader) error {
	for j, h := range hs {
		if utf8.ValidString(h.Key) {
			continue
		}
		i := decode.InvalidUTF8At([]byte(h.Key))
		return &decode.Error{Reason: decode.ReasonDecodeError, Field: kafkacols.Column(kafkacols.Headers),
			Err: fmt.Errorf("header %d: key byte %d (0x%02x) is not valid UTF-8", j, i, h.Key[i])}
	}
	return nil
}

// keyError is a key_decode_error for the record key: why the key cannot be written.
func keyError(format string, args ...any) *decode.Error {
	return &decode.Error{Reason: decode.ReasonKeyDecodeError, Field: kafkacols.Column(kafkacols.Key), Err: fmt.Errorf(format, args...)}
}
