package parquetenc

import (
	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go/compress"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// Snappy returns Parquet's SNAPPY codec on klauspost/compress/s2: s2.EncodeSnappy writes
// the plain snappy block format (readable by every snappy decoder) several times faster
// than the golang/snappy-derived encoder parquet-go uses by default
// (BenchmarkParquetEncode; docs/performance.md).
func Snappy() compress.Codec { return snappyCodec{} }

// Zstd returns parquet-go's ZSTD codec at klauspost's fastest level: about twice the
// default level's speed for a few percent more bytes on typical ingest pages. Every call
// returns the same codec, whose pooled encoders all files share.
func Zstd() compress.Codec { return zstdCodec }

type snappyCodec struct{}

func (snappyCodec) String() string                            { return "SNAPPY" }
func (snappyCodec) CompressionCodec() format.CompressionCodec { return format.Snappy }
func (snappyCodec) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}
func (snappyCodec) Decode(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	return s2.Decode(dst[:n], src)
}

// zstdCodec is Zstd's codec: one value, so that its encoder pool is shared.
var zstdCodec compress.Codec = &pqzstd.Codec{Level: pqzstd.SpeedFastest}
