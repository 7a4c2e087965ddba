package dlq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readQuiet is how long Scan waits for more records before it takes the rest of a
// partition to be transaction markers.
const readQuiet = 5 * time.Second

// ErrStopScan, returned by Scan's callback, ends the scan early without an error.
var ErrStopScan = errors.New("stop the scan")

// Range is the part of one dead-letter partition Scan reads: From (inclusive) to End
// (exclusive; an end offset as listed by kadm.ListEndOffsets).
type Range struct{ From, End int64 }

// Ranges are the whole partitions of a topic, from offset 0 to the listed end offsets;
// empty partitions are left out. Errors: an end offset that failed to list.
func Ranges(topic string, ends map[int32]kadm.ListedOffset) (map[int32]Range, error) {
	out := map[int32]Range{}
	for part, o := range ends {
		if o.Err != nil {
			return nil, fmt.Errorf("end offset of %s[%d]: %w", topic, part, o.Err)
		}
		if o.Offset > 0 {
			out[part] = Range{End: o.Offset}
		}
	}
	return out, nil
}

// Scan streams the given ranges of topic through cl, which must not consume anything
// else, calling fn with each record, in offset order within a partition (partitions
// interleave). It holds no record itself: its memory is the client's fetch buffers
// (kafkaclient sizes them from batch.max_bytes) and whatever fn keeps; a record fn keeps
// pins the fetch buffer it was decoded from. A partition is complete at its record
// End-1; when the last offsets are transaction markers (read_committed never returns
// them) a quiet spell of readQuiet ends the read instead, logged at warn. fatal, when not
// nil, sees every fetch error: a non-nil result ends the read with it (e.g. a missing READ
// permission); the others are logged and retried. fn returning ErrStopScan ends the scan
// with nil; any other error ends it with that error. Errors: fatal's, fn's, or ctx's.
func Scan(ctx context.Context, cl *kgo.Client, topic string, ranges map[int32]Range, log *slog.Logger, fatal func(error) error, fn func(*kgo.Record) error) error {
	starts := map[int32]kgo.Offset{}
	for part, rg := range ranges {
		if rg.From < rg.End {
			starts[part] = kgo.NewOffset().At(rg.From)
		}
	}
	if len(starts) == 0 {
		return nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts})
	defer cl.PurgeTopicsFromConsuming(topic)
	// Stopping early is safe for replay: its txn only covers what it processed.
	for remaining := len(starts); remaining > 0; {
		pctx, cancel := context.WithTimeout(ctx, readQuiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if fs.NumRecords() == 0 && pctx.Err() != nil {
			log.Warn("no more records before the end offsets (transaction markers?); stopping the read", "topic", topic, "partitions_unfinished", remaining)
			return nil
		}
		var stop error
		fs.EachError(func(t string, part int32, err error) {
			if fatal != nil && stop == nil {
				stop = fatal(err)
			}
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				log.Warn("fetch error", "topic", t, "partition", part, "err", err)
			}
		})
		if stop != nil {
			return stop
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			rg, ok := ranges[r.Partition]
			if !ok || r.Offset < rg.From || r.Offset >= rg.End {
				continue
			}
			if r.Offset == rg.End-1 {
				remaining--
			}
			if err := fn(r); errors.Is(err, ErrStopScan) {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}
