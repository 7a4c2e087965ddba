package ingest

import (
	"log/slog"
	"time"
)

// deadLetterLogEvery is the least time between two log lines about dead letters of one
// reason: a producer that sends incompatible records may send millions of them.
const deadLetterLogEvery = 10 * time.Second

// deadLetterLog writes the WARN lines about dead letters, at most one per reason every
// deadLetterLogEvery, each with the records dead-lettered for that reason since the last
// line and an example. Dead letters are records the table did not get: worth a WARN, not
// an INFO per flush. Used by the flush token's holder only.
type deadLetterLog struct {
	last  map[string]time.Time
	count map[string]int // records since the last line, per reason
	now   func() time.Time
}

func newDeadLetterLog() *deadLetterLog {
	return &deadLetterLog{last: map[string]time.Time{}, count: map[string]int{}, now: time.Now}
}

// add counts n dead letters of reason from source topic (field and message are one of
// them, for the line)
// and logs them with those not logged yet when the last line for reason is
// deadLetterLogEvery old.
func (l *deadLetterLog) add(log *slog.Logger, reason string, n int, topic, field, message string) {
	l.count[reason] += n
	now := l.now()
	if t, ok := l.last[reason]; ok && now.Sub(t) < deadLetterLogEvery {
		return
	}
	log.Warn("records dead-lettered", "reason", reason, "count", l.count[reason], "topic", topic,
		"field", field, "example", message, "next_line_in", deadLetterLogEvery)
	l.last[reason], l.count[reason] = now, 0
}
