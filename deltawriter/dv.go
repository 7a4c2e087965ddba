package deltawriter

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// DeletedRows is the set of row indexes (0-based positions in the data file) a deletion
// vector marks as deleted (PROTOCOL.md, "Deletion Vectors").
type DeletedRows struct{ bm *roaring64.Bitmap }

// Contains reports whether row index i is deleted. A nil *DeletedRows deletes nothing.
func (d *DeletedRows) Contains(i uint64) bool { return d != nil && d.bm.Contains(i) }

// Cardinality is the number of deleted rows.
func (d *DeletedRows) Cardinality() uint64 {
	if d == nil {
		return 0
	}
	return d.bm.GetCardinality()
}

// dvMagic is the little-endian int32 that starts a serialised RoaringBitmapArray
// (PROTOCOL.md, "Deletion Vector Format").
const dvMagic = 1681511377

// ReadDeletionVector reads the deletion vector dv of a file of the table in st
// (PROTOCOL.md, "Deletion Vector Descriptor Schema" and "Deletion Vector Format"):
// storageType "i" holds the Z85-encoded bitmap inline; "u" names
// <prefix>/deletion_vector_<uuid>.bin under the table root (pathOrInlineDv is the prefix
// followed by the Z85-encoded 16-byte UUID); "p" is an absolute path, which is refused
// unless it lies under the table root. In a file, the bitmap starts at dv.offset with its
// size (4 bytes, big-endian) and ends with its CRC-32 (big-endian), which is checked. The
// bitmap is the RoaringBitmapArray portable format: magic 1681511377, the number of 32-bit
// bitmaps (8 bytes), then each bitmap's high 32 bits (4 bytes) and its portable Roaring
// serialisation, all little-endian. A nil dv returns nil (no deleted rows).
//
// Errors: an unknown storage type, a file that cannot be read, a bad checksum, a bad
// magic number, or a cardinality other than dv.cardinality.
func ReadDeletionVector(ctx context.Context, st storage.Store, dv *deltalog.DeletionVector) (*DeletedRows, error) {
	if dv == nil {
		return nil, nil
	}
	var data []byte
	switch dv.StorageType {
	case "i":
		b, err := z85Decode(dv.PathOrInlineDv)
		if err != nil {
			return nil, fmt.Errorf("read inline deletion vector: %w", err)
		}
		if int(dv.SizeInBytes) > len(b) {
			return nil, fmt.Errorf("read inline deletion vector: %d bytes, sizeInBytes says %d", len(b), dv.SizeInBytes)
		}
		data = b[:dv.SizeInBytes]
	case "u", "p":
		rel, err := dvPath(st, dv)
		if err != nil {
			return nil, err
		}
		file, err := st.Get(ctx, rel)
		if err != nil {
			return nil, fmt.Errorf("read deletion vector %s: %w", rel, err)
		}
		off := int64(0)
		if dv.Offset != nil {
			off = int64(*dv.Offset)
		}
		if off+4 > int64(len(file)) {
			return nil, fmt.Errorf("read deletion vector %s: offset %d past the end (%d bytes)", rel, off, len(file))
		}
		n := int64(binary.BigEndian.Uint32(file[off:]))
		if off+4+n+4 > int64(len(file)) {
			return nil, fmt.Errorf("read deletion vector %s: %d bytes at offset %d past the end (%d bytes)", rel, n, off, len(file))
		}
		data = file[off+4 : off+4+n]
		if want := binary.BigEndian.Uint32(file[off+4+n:]); crc32.ChecksumIEEE(data) != want {
			return nil, fmt.Errorf("read deletion vector %s: checksum mismatch at offset %d", rel, off)
		}
	default:
		return nil, fmt.Errorf("read deletion vector: unknown storageType %q", dv.StorageType)
	}
	if len(data) < 4 || binary.LittleEndian.Uint32(data) != dvMagic {
		return nil, fmt.Errorf("read deletion vector: not a RoaringBitmapArray (bad magic number)")
	}
	bm := roaring64.New()
	if _, err := bm.ReadFrom(bytes.NewReader(data[4:])); err != nil {
		return nil, fmt.Errorf("read deletion vector: %w", err)
	}
	if c := bm.GetCardinality(); int64(c) != dv.Cardinality {
		return nil, fmt.Errorf("read deletion vector: %d deleted rows, cardinality says %d", c, dv.Cardinality)
	}
	return &DeletedRows{bm: bm}, nil
}

// dvPath is the store-relative path of an on-disk deletion vector.
func dvPath(st storage.Store, dv *deltalog.DeletionVector) (string, error) {
	if dv.StorageType == "p" {
		root := strings.TrimSuffix(st.URI(), "/") + "/"
		p := dv.PathOrInlineDv
		if rel, ok := strings.CutPrefix(deltalog.CanonicalPath(p), deltalog.CanonicalPath(root)); ok {
			return rel, nil
		}
		return "", fmt.Errorf("read deletion vector %s: absolute path outside the table root %s", p, root)
	}
	s := dv.PathOrInlineDv
	if len(s) < 20 {
		return "", fmt.Errorf("read deletion vector: pathOrInlineDv %q is shorter than a Z85 UUID", s)
	}
	prefix, enc := s[:len(s)-20], s[len(s)-20:]
	u, err := z85Decode(enc)
	if err != nil || len(u) != 16 {
		return "", fmt.Errorf("read deletion vector: pathOrInlineDv %q does not end in a Z85 UUID", s)
	}
	h := hex.EncodeToString(u)
	name := "deletion_vector_" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:] + ".bin"
	if prefix != "" {
		name = prefix + "/" + name
	}
	return name, nil
}

const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Decode decodes ZeroMQ's Z85 (RFC 32/Z85), as Delta encodes deletion vectors: every 5
// characters are 4 big-endian bytes; a length that is not a multiple of 5 is refused. A
// group above 2^32-1 (which no encoder produces from 4 bytes, yet appears in published
// Spark-written inline vectors) keeps its low 32 bits, as Delta's reference decoder does,
// so that ingestd reads such a descriptor as Spark does.
func z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("decode Z85: length %d is not a multiple of 5", len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for _, c := range []byte(s[i : i+5]) {
			d := strings.IndexByte(z85Alphabet, c)
			if d < 0 {
				return nil, fmt.Errorf("decode Z85: character %q is not in the alphabet", c)
			}
			v = v*85 + uint64(d)
		}
		out = binary.BigEndian.AppendUint32(out, uint32(v))
	}
	return out, nil
}
