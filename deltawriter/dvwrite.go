package deltawriter

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// RowDeletes names rows of one live data file to mark deleted.
type RowDeletes struct {
	// Add is the file's live add action, with its current deletion vector if it has one
	// (a value of Snapshot.Files).
	Add deltalog.Add
	// Rows are 0-based row positions in the physical data file (the order of its rows in
	// the Parquet file, deleted rows included), in any order; duplicates and rows the
	// current deletion vector already deletes are allowed.
	Rows []uint64
	// KeepEmpty keeps the file's add (with a deletion vector of every row) when all its
	// rows end up deleted, instead of removing the file: a keyed pipeline's new file
	// holding only delete markers, rows kept for what a key index reads from them.
	KeepEmpty bool
}

// dvFileVersion is the first byte of a deletion vector file (PROTOCOL.md, "Deletion
// Vector File Storage Format").
const dvFileVersion = 1

// DeleteRows marks rows of data files deleted with deletion vectors (PROTOCOL.md,
// "Deletion Vectors", "Deletion Vector Format", "Add File and Remove File") and returns
// the actions that do it, for one Commit (Commit.Removes and Commit.Adds, beside whatever
// else the commit carries). The table must support deletion vectors with
// delta.enableDeletionVectors=true in the commit's state (CheckDeletes, EnableDeletionVectors).
//
// Per entry, the new deletion vector is the union of the file's current one (read with
// ReadDeletionVector, any storage type) and Rows, serialised as a RoaringBitmapArray
// (magic 1681511377 and the portable 64-bit Roaring format, little-endian). A vector of at
// most inlineDVMaxBytes serialised bytes is stored inline (PROTOCOL.md, "Deletion Vector
// Descriptor Schema"): storageType "i", pathOrInlineDv the bitmap zero-padded to a multiple
// of 4 bytes and Z85-encoded, no offset, sizeInBytes the unpadded bitmap's bytes. Larger
// vectors of the call go into one file, deletion_vector_<uuid>.bin at the table root,
// written with put-if-absent before DeleteRows returns (as Spark writes them: version byte
// 1, then per vector its size (4 bytes, big-endian), the bitmap and its CRC-32
// (big-endian)); their descriptors have storageType "u", pathOrInlineDv the Z85-encoded
// UUID, offset the position of its size field (the first is 1) and sizeInBytes the
// bitmap's bytes. Cardinality is the number of rows deleted in all.
//
// Per entry it returns the remove of the current add (its path and deletion vector,
// dataChange true, deletionTimestamp now, extendedFileMetadata true with its
// partitionValues, size, stats and tags) and, unless every row of the file is now
// deleted, an add of the same path, size, partitionValues, modificationTime and tags
// with the new deletion vector, dataChange true and its stats marked
// "tightBounds":false (numRecords stays the physical row count, PROTOCOL.md "Per-file
// Statistics"; a file without stats.numRecords gets it from its Parquet footer). A file
// whose rows are all deleted is only removed, as Spark's DELETE does (unless KeepEmpty). An entry whose rows
// are all deleted already changes nothing and yields no action.
//
// Nothing is written, and no action returned, when dels is empty or changes nothing. The
// written file becomes part of the table only through the commit; if that commit never
// lands, VACUUM deletes it as any uncommitted file.
//
// Errors: a row at or beyond the file's number of records, two entries for one file, a
// current deletion vector that cannot be read, a footer that cannot be read, or the
// store's error writing the file.
func DeleteRows(ctx context.Context, st storage.Store, dels []RowDeletes, now time.Time) (removes []deltalog.Remove, adds []deltalog.Add, err error) {
	type pending struct {
		add     deltalog.Add
		bm      *roaring64.Bitmap
		records int64
		keep    bool
	}
	var work []pending
	seen := make(map[string]bool, len(dels))
	for _, d := range dels {
		key := deltalog.CanonicalPath(d.Add.Path)
		if seen[key] {
			return nil, nil, fmt.Errorf("delete rows: two entries for data file %s", d.Add.Path)
		}
		seen[key] = true
		records, err := numRecords(ctx, st, d.Add)
		if err != nil {
			return nil, nil, fmt.Errorf("delete rows of %s: %w", d.Add.Path, err)
		}
		cur, err := ReadDeletionVector(ctx, st, d.Add.DeletionVector)
		if err != nil {
			return nil, nil, fmt.Errorf("delete rows of %s: %w", d.Add.Path, err)
		}
		bm := roaring64.New()
		if cur != nil {
			bm = cur.bm.Clone()
		}
		before := bm.GetCardinality()
		for _, r := range d.Rows {
			if r >= uint64(records) {
				return nil, nil, fmt.Errorf("delete rows of %s: row %d is beyond the file's %d records", d.Add.Path, r, records)
			}
			bm.Add(r)
		}
		if bm.GetCardinality() == before {
			continue
		}
		work = append(work, pending{add: d.Add, bm: bm, records: records, keep: d.KeepEmpty})
	}
	if len(work) == 0 {
		return nil, nil, nil
	}

	uuid, err := newUUID()
	if err != nil {
		return nil, nil, fmt.Errorf("delete rows: %w", err)
	}
	raw, _ := hex.DecodeString(strings.ReplaceAll(uuid, "-", ""))
	name := "deletion_vector_" + uuid + ".bin"
	file := []byte{dvFileVersion}
	nowMs := now.UnixMilli()
	for _, w := range work {
		size := w.add.Size
		removes = append(removes, deltalog.Remove{
			Path: w.add.Path, DeletionTimestamp: &nowMs, DataChange: true, ExtendedFileMetadata: ptrTo(true),
			PartitionValues: w.add.PartitionValues, Size: &size, Stats: w.add.Stats, Tags: w.add.Tags,
			DeletionVector: w.add.DeletionVector, BaseRowID: w.add.BaseRowID, DefaultRowCommitVersion: w.add.DefaultRowCommitVersion,
		})
		card := w.bm.GetCardinality()
		if card == uint64(w.records) && !w.keep {
			continue // every row deleted: the file goes
		}
		data, err := encodeBitmapArray(w.bm)
		if err != nil {
			return nil, nil, fmt.Errorf("delete rows of %s: %w", w.add.Path, err)
		}
		stats, err := wideStats(w.add.Stats, w.records)
		if err != nil {
			return nil, nil, fmt.Errorf("delete rows of %s: %w", w.add.Path, err)
		}
		a := w.add
		a.DataChange = true
		a.Stats = stats
		a.StatsParsed = nil
		if len(data) <= inlineDVMaxBytes {
			a.DeletionVector = inlineDV(data, int64(card))
			adds = append(adds, a)
			continue
		}
		offset := len(file)
		if offset > math.MaxInt32 {
			return nil, nil, fmt.Errorf("delete rows: deletion vector file %s would exceed 2 GiB", name)
		}
		file = binary.BigEndian.AppendUint32(file, uint32(len(data)))
		file = append(file, data...)
		file = binary.BigEndian.AppendUint32(file, crc32.ChecksumIEEE(data))
		off := int32(offset)
		a.DeletionVector = &deltalog.DeletionVector{
			StorageType: "u", PathOrInlineDv: z85Encode(raw), Offset: &off,
			SizeInBytes: int32(len(data)), Cardinality: int64(card),
		}
		adds = append(adds, a)
	}
	if len(file) > 1 {
		if err := st.PutIfAbsent(ctx, name, file); err != nil {
			return nil, nil, fmt.Errorf("delete rows: write deletion vector file %s: %w", name, err)
		}
	}
	return removes, adds, nil
}

// inlineDVMaxBytes is the largest serialised RoaringBitmapArray (in bytes, before Z85)
// that DeleteRows stores inline in the log rather than in a deletion vector file.
//
// Inline vectors cost log space: Z85 makes 5 characters of every 4 bytes, and the
// descriptor is repeated in the add, in the remove that later replaces it, and in every
// checkpoint until then, where a "u" descriptor is a 20-character UUID and an offset. A
// vector of one deleted row is 34 bytes (45 characters inline); 2 KiB holds about 1,000
// scattered deleted rows of one file (2 bytes each in a Roaring array container), and adds
// at most ~2.5 KB per action, against data files of megabytes. Vectors in files cost
// readers: delta-rs (1.x) loads each on a blocking thread that waits on further blocking
// reads, and a scan of more than about 512 files whose vectors are in files exhausts the
// 512 blocking threads of its runtime and never finishes; an inline vector needs no read.
// Keyed upserts delete a few rows per file per flush, so 2 KiB keeps nearly all of their
// vectors inline while a file with many deleted rows still gets a compact vector file
// (and is a candidate for OPTIMIZE's purge). A var so that tests can move the cut-off.
var inlineDVMaxBytes = 2048

// inlineDV is the inline descriptor of the serialised bitmap data (PROTOCOL.md, "Deletion
// Vector Descriptor Schema", storageType "i"): data zero-padded to a multiple of 4 bytes
// and Z85-encoded, as Delta's reference writer pads it, sizeInBytes the unpadded length
// (readers drop the padding), offset absent.
func inlineDV(data []byte, cardinality int64) *deltalog.DeletionVector {
	padded := data
	if r := len(data) % 4; r != 0 {
		padded = append(slices.Clip(data), make([]byte, 4-r)...)
	}
	return &deltalog.DeletionVector{
		StorageType: "i", PathOrInlineDv: z85Encode(padded),
		SizeInBytes: int32(len(data)), Cardinality: cardinality,
	}
}

// encodeBitmapArray serialises bm as a RoaringBitmapArray (PROTOCOL.md, "Deletion Vector
// Format"): the magic number 1681511377 (little-endian int32), then the portable 64-bit
// Roaring format.
func encodeBitmapArray(bm *roaring64.Bitmap) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(bm.GetSerializedSizeInBytes()) + 4)
	_ = binary.Write(&buf, binary.LittleEndian, uint32(dvMagic))
	if _, err := bm.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("serialise deletion vector: %w", err)
	}
	return buf.Bytes(), nil
}

// wideStats returns the stats JSON of a file that gets a deletion vector: stats with
// "tightBounds":false (the bounds may now cover deleted rows) and numRecords, the
// physical row count, set (PROTOCOL.md, "Per-file Statistics": a file with a deletion
// vector must have an accurate numRecords). Other members pass unchanged.
func wideStats(stats string, records int64) (string, error) {
	m := map[string]json.RawMessage{}
	if stats != "" {
		if err := json.Unmarshal([]byte(stats), &m); err != nil {
			return "", fmt.Errorf("read stats: %w", err)
		}
	}
	m["numRecords"] = json.RawMessage(fmt.Sprint(records))
	m["tightBounds"] = json.RawMessage("false")
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("write stats: %w", err)
	}
	return string(b), nil
}

// numRecords is the physical row count of add's file: stats.numRecords, else the count
// in its Parquet footer (read with ranged reads when the store supports them).
func numRecords(ctx context.Context, st storage.Store, add deltalog.Add) (int64, error) {
	if n, ok := add.NumRecords(); ok {
		return n, nil
	}
	rel := deltalog.CanonicalPath(add.Path)
	var f *parquet.File
	var err error
	if rg, ok := st.(storage.RangeGetter); ok && add.Size > 0 {
		f, err = parquet.OpenFile(storage.NewObjectReader(ctx, rg, rel, add.Size), add.Size,
			parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	} else {
		var data []byte
		if data, err = st.Get(ctx, rel); err == nil {
			f, err = parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
		}
	}
	if err != nil {
		return 0, fmt.Errorf("read row count from the footer of %s: %w", add.Path, err)
	}
	return f.NumRows(), nil
}

// z85Encode encodes b (a multiple of 4 bytes) in ZeroMQ's Z85 (RFC 32/Z85), the Base85
// variant of deletion vector descriptors.
func z85Encode(b []byte) string {
	var out strings.Builder
	out.Grow(len(b) / 4 * 5)
	for i := 0; i+4 <= len(b); i += 4 {
		v := binary.BigEndian.Uint32(b[i:])
		var g [5]byte
		for j := 4; j >= 0; j-- {
			g[j] = z85Alphabet[v%85]
			v /= 85
		}
		out.Write(g[:])
	}
	return out.String()
}

func ptrTo[T any](v T) *T { return &v }
