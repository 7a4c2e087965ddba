package deltawriter

// Temporary stand-in until the deletion-vector writer lands; replaced at merge.

import (
	"context"
	"errors"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

type RowDeletes struct {
	Add  deltalog.Add
	Rows []uint64
}

func DeleteRows(ctx context.Context, st storage.Store, dels []RowDeletes, now time.Time) ([]deltalog.Remove, []deltalog.Add, error) {
	if len(dels) == 0 {
		return nil, nil, nil
	}
	return nil, nil, errors.New("deletion vectors: not yet")
}
