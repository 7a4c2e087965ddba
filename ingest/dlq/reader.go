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

// readQuiet is how long ReadToEnd waits for more records before it takes the rest of a
// partition to be transaction markers.
const readQuiet = 5 * time.Second

// ReadToEnd reads every partition of topic from its start to the given end offsets
// (exclusive; ends as listed by kadm.ListEndOffsets) through cl, which must not consume
// anything else, and returns the records by partition, in offset order. A partition is
// complete at its record end-1; when the last offsets are transaction markers
// (read_committed never returns them) a quiet spell of readQuiet ends the read instead,
// logged at warn. fatal, when not nil, sees every fetch error: a non-nil result ends the
// read with it (e.g. a missing READ permission); the others are logged and retried.
// Errors: an end offset that failed to list, fatal's, or ctx's error.
func ReadToEnd(ctx context.Context, cl *kgo.Client, topic string, ends map[int32]kadm.ListedOffset, log *slog.Logger, fatal func(error) error) (map[int32][]*kgo.Record, error) {
	endOf := map[int32]int64{}
	starts := map[int32]kgo.Offset{}
	for part, o := range ends {
		if o.Err != nil {
			return nil, fmt.Errorf("end offset of %s[%d]: %w", topic, part, o.Err)
		}
		if o.Offset > 0 {
			endOf[part] = o.Offset
			starts[part] = kgo.NewOffset().AtStart()
		}
	}
	byPart := map[int32][]*kgo.Record{}
	if len(starts) == 0 {
		return byPart, nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts})
	defer cl.PurgeTopicsFromConsuming(topic)
	// Stopping early is safe for replay: its txn only covers what it processed.
	for remaining := len(starts); remaining > 0; {
		pctx, cancel := context.WithTimeout(ctx, readQuiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if fs.NumRecords() == 0 && pctx.Err() != nil {
			log.Warn("no more records before the end offsets (transaction markers?); stopping the read", "topic", topic, "partitions_unfinished", remaining)
			break
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
			return nil, stop
		}
		fs.EachRecord(func(r *kgo.Record) {
			end := endOf[r.Partition]
			if r.Offset >= end {
				return
			}
			byPart[r.Partition] = append(byPart[r.Partition], r)
			if r.Offset == end-1 {
				remaining--
			}
		})
	}
	return byPart, nil
}
