package parquetenc

import (
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// What the tests of package parquetenc_test reach inside the encoder.

// PageTargetBytes and DictMaxBytes point at the page target and the dictionary bound, in
// bytes, so that a test can shrink them (and must put them back).
var PageTargetBytes, DictMaxBytes = &pageTargetBytes, &dictMaxBytes

// DictProbe is the number of non-null values probed for dictionary encoding.
const DictProbe = dictProbe

// EncodeWith is Encode on helpers extra goroutines (0: inline), outside the budget.
func EncodeWith(schema *parquet.Schema, cols []column.Column, numRows int, codec compress.Codec, helpers int) (*File, []Summary, error) {
	return encodeFile(schema, cols, numRows, codec, helpers)
}
