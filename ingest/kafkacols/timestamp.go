package kafkacols

import (
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Kafka record timestamps (KIP-32): milliseconds since the Unix epoch, an int64 on the
// wire, -1 when the producer set none.
//
// franz-go (v1.22) hands a consumed record's timestamp over as a time.Time built through
// nanoseconds, time.Unix(0, ms*1e6): the product wraps modulo 2^64 for |ms| above
// 9223372036854 (before 1677-09-21, after 2262-04-11), and 9999-12-31 arrives as a time
// in 1816. It offers no raw value (its fetch hooks see batches, not record fields). The
// broker's value is recovered exactly from the wrapped nanoseconds: n = ms·10^6 mod 2^64
// and 10^6 = 2^6·15625 with 15625 odd, so ms ≡ (n/2^6)·15625⁻¹ (mod 2^58), unique in
// [-2^57, 2^57) ms (±4.5 million years), which holds every timestamp Delta can store
// (TimestampMinMillis..TimestampMaxMillis) many times over. A broker value outside
// ±2^57 ms reads as the one inside that it aliases to: no reader of franz-go's
// time.Time can tell them apart.

// NoTimestamp is Kafka's "no timestamp" (RecordBatch.NO_TIMESTAMP): -1 ms.
const NoTimestamp int64 = -1

// The range of the timestamps _kafka_timestamp holds, in ms since the epoch: Delta's
// (deltalog.TimestampMinMicros..TimestampMaxMicros, also Spark's TimestampType range),
// which is what the Delta log's renderings of a timestamp (partition values, statistics)
// can write.
const (
	TimestampMinMillis = deltalog.TimestampMinMicros / 1000 // 0001-01-01T00:00:00.000Z
	TimestampMaxMillis = deltalog.TimestampMaxMicros / 1000 // 9999-12-31T23:59:59.999Z
)

// inv15625 is the inverse of 15625 modulo 2^64 (15625·inv15625 ≡ 1).
var inv15625 = func() uint64 {
	x := uint64(15625) // Newton's iteration: each step doubles the correct low bits
	for range 6 {
		x *= 2 - 15625*x
	}
	return x
}()

// TimestampMillis returns the broker's millisecond timestamp of a record franz-go
// consumed, from its Record.Timestamp (time.Unix(0, ms*1e6), wrapped modulo 2^64 outside
// 1677–2262): exact for every broker value in [-2^57, 2^57) ms. A time.Time not built
// that way (whole milliseconds within 1677–2262, as time.UnixMilli builds them, or a time
// with a nanosecond count franz-go cannot produce, a time outside int64 nanoseconds) is
// read as t.UnixMilli().
func TimestampMillis(t time.Time) int64 {
	n := t.UnixNano()
	if t.Before(minNano) || t.After(maxNano) {
		return t.UnixMilli() // outside int64 nanoseconds: not franz-go's, UnixMilli is exact
	}
	if n%1e6 == 0 {
		return n / 1e6 // no wrap: for |ms| < 2^57, n is a multiple of 10^6 only unwrapped
	}
	if n&63 != 0 {
		return t.UnixMilli() // franz-go's n is always a multiple of 2^6
	}
	q := uint64(n) >> 6 // n/2^6 mod 2^58
	m := (q * inv15625) & (1<<58 - 1)
	return int64(m<<6) >> 6 // sign-extend 58 bits: the representative in [-2^57, 2^57)
}

var (
	minNano = time.Unix(0, -1<<63)
	maxNano = time.Unix(0, 1<<63-1)
)

// TimestampMicros is the value _kafka_timestamp holds for a record's broker timestamp
// ms: ms×1000 µs, ok; ok is false (the column is NULL) for NoTimestamp and for a value
// outside TimestampMinMillis..TimestampMaxMillis (outOfRange true then).
func TimestampMicros(ms int64) (us int64, ok, outOfRange bool) {
	switch {
	case ms == NoTimestamp:
		return 0, false, false
	case ms < TimestampMinMillis || ms > TimestampMaxMillis:
		return 0, false, true
	}
	return ms * 1000, true, false
}
