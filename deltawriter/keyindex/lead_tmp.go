package keyindex

// Temporary stand-in until the index package lands; replaced at merge.

import (
	"context"
	"slices"
	"time"

	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

var ErrNullKey = errors.New("key column is NULL")

func AppendValue(dst []byte, t deltalog.DataType, v parquet.Value) ([]byte, error) {
	if v.IsNull() {
		return dst, ErrNullKey
	}
	switch v.Kind() {
	case parquet.Int32, parquet.Int64:
		return binary.BigEndian.AppendUint64(append(dst, 'i'), uint64(v.Int64())), nil
	case parquet.ByteArray, parquet.FixedLenByteArray:
		b := v.ByteArray()
		dst = binary.AppendUvarint(append(dst, 's'), uint64(len(b)))
		return append(dst, b...), nil
	case parquet.Boolean:
		if v.Boolean() {
			return append(dst, 'b', 1), nil
		}
		return append(dst, 'b', 0), nil
	}
	return dst, fmt.Errorf("key type %s", t)
}

func CheckKeyColumns(schema *deltalog.StructType, names []string) error { return nil }

type Spec struct {
	Key      []string
	Sequence string
}

type Loc struct {
	Path string
	Row  uint64
}

type Entry struct {
	Locs    []Loc
	Seq     int64
	Deleted bool
}

type FileKeys struct {
	Path string
	Keys [][]byte
	Seqs []int64
}

type Index struct {
	version int64
	m       map[string]*Entry
	rev     map[Loc]string
}

func Build(ctx context.Context, st storage.Store, snap *deltawriter.Snapshot, spec Spec) (*Index, error) {
	if len(snap.Files) > 0 {
		return nil, fmt.Errorf("temporary index: cannot build over existing files")
	}
	return &Index{version: snap.Version, m: map[string]*Entry{}, rev: map[Loc]string{}}, nil
}

func (ix *Index) Version() int64 { return ix.version }

func (ix *Index) Lookup(key []byte) (Entry, bool) {
	e, ok := ix.m[string(key)]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

func (ix *Index) Refresh(ctx context.Context, st storage.Store, snap *deltawriter.Snapshot) error {
	ix.version = snap.Version
	return nil
}

func (ix *Index) Apply(version int64, added []FileKeys, deleted map[string][]uint64) {
	for p, rows := range deleted {
		for _, r := range rows {
			l := Loc{p, r}
			k, ok := ix.rev[l]
			if !ok {
				continue
			}
			delete(ix.rev, l)
			e := ix.m[k]
			e.Locs = slices.DeleteFunc(e.Locs, func(x Loc) bool { return x == l })
			if len(e.Locs) == 0 && !e.Deleted {
				delete(ix.m, k)
			}
		}
	}
	for _, f := range added {
		for i, k := range f.Keys {
			l := Loc{f.Path, uint64(i)}
			var seq int64
			if f.Seqs != nil {
				seq = f.Seqs[i]
			}
			e := ix.m[string(k)]
			if e == nil {
				e = &Entry{}
				ix.m[string(k)] = e
			}
			e.Locs, e.Seq, e.Deleted = append(e.Locs, l), seq, false
			ix.rev[l] = string(k)
		}
	}
	ix.version = version
}

func (ix *Index) PutDeleted(key []byte, seq int64, at time.Time) {
	e := ix.m[string(key)]
	if e == nil {
		e = &Entry{}
		ix.m[string(key)] = e
	}
	e.Seq, e.Deleted = seq, true
}
