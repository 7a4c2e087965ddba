package dlq

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DeliveryTimeout bounds one Produce call: every record acknowledged by the broker
// (acks=all) within it, or the call fails.
const DeliveryTimeout = 30 * time.Second

// Producer writes dead letters, re-dead-letters, parked and carried-forward records and
// waits for every acknowledgement, bounded by DeliveryTimeout. The bound is a context
// deadline, not kgo's RecordDeliveryTimeout: kgo measures that from each record's
// Timestamp, and a dead letter keeps its source record's timestamp, so with any consumer
// lag above the timeout every dead letter would time out at once, forever.
type Producer struct {
	cl *kgo.Client
}

// NewProducer returns a producer over cl (which it does not close).
func NewProducer(cl *kgo.Client) *Producer { return &Producer{cl: cl} }

// Produce sends recs and returns once all are acknowledged. Errors: the first produce
// error of a record, or, when DeliveryTimeout passes first, an error saying so that wraps
// it; in both cases some records may have been written (the DLQ is at-least-once).
func (p *Producer) Produce(ctx context.Context, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, DeliveryTimeout)
	defer cancel()
	if err := p.cl.ProduceSync(dctx, recs...).FirstErr(); err != nil {
		if dctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("produce to %s: not acknowledged within %v: %w", recs[0].Topic, DeliveryTimeout, err)
		}
		return fmt.Errorf("produce to %s: %w", recs[0].Topic, err)
	}
	return nil
}
