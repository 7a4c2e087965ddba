package kafkacols

import (
	"testing"
	"time"
)

// franzTime is how franz-go v1.22 builds a consumed record's Timestamp from the broker's
// milliseconds (kgo's timeFromMillis): through int64 nanoseconds, wrapping.
func franzTime(ms int64) time.Time { return time.Unix(0, ms*1e6) }

// The broker's milliseconds come back exactly from franz-go's wrapped time.Time for every
// value Delta can hold and beyond (to ±2^57 ms), where the naive UnixMicro is wrong
// outside 1677–2262; -1 is NoTimestamp; Delta's range bounds are TimestampMicros' limits.
func TestTimestampMillisRecoversTheBrokersValue(t *testing.T) {
	for _, c := range []struct {
		ms        int64
		naiveDate string // what franz-go's time.Time says (UTC), wrapped outside 1677–2262
	}{
		{253402300799999, "1816-03-30"},  // 9999-12-31T23:59:59.999
		{1735689600000000, "2023-09-25"}, // microseconds written into the ms field (2025-01-01 in µs): a plausible date
		{-1, "1969-12-31"},               // NO_TIMESTAMP
		{0, "1970-01-01"},
		{-86400000, "1969-12-31"}, // 1969-12-31T00:00:00
		{1700000000123, "2023-11-14"},
		{-62135596800000, "1754-08-30"}, // 0001-01-01
		{9223372036854, "2262-04-11"},   // the last ms franz-go keeps unwrapped
		{9223372036855, "1677-09-21"},   // the first it wraps
		{1<<57 - 1, ""}, {-1 << 57, ""}, // the ends of the exact range
	} {
		ft := franzTime(c.ms)
		if c.naiveDate != "" && ft.UTC().Format(time.DateOnly) != c.naiveDate {
			t.Errorf("%d: franz-go's time is %s, want %s (the wrap this recovers from)", c.ms, ft.UTC(), c.naiveDate)
		}
		if got := TimestampMillis(ft); got != c.ms {
			t.Errorf("TimestampMillis(franz-go's time of %d ms) = %d", c.ms, got)
		}
		if got := TimestampMillis(time.UnixMilli(c.ms)); got != c.ms && c.ms > -9223372036854 && c.ms < 9223372036855 {
			t.Errorf("TimestampMillis(time.UnixMilli(%d)) = %d", c.ms, got)
		}
	}
	// A time.Time with sub-millisecond nanoseconds (not franz-go's) reads as UnixMilli.
	if got := TimestampMillis(time.Unix(1700000000, 123456789)); got != 1700000000123 {
		t.Errorf("sub-ms time: %d", got)
	}
	for _, c := range []struct {
		ms               int64
		us               int64
		ok, outsideRange bool
	}{
		{-1, 0, false, false},
		{253402300799999, 253402300799999000, true, false},
		{253402300800000, 0, false, true},
		{-62135596800000, -62135596800000000, true, false},
		{-62135596800001, 0, false, true},
		{1735689600000000, 0, false, true},
		{-2, -2000, true, false},
		{0, 0, true, false},
	} {
		us, ok, out := TimestampMicros(c.ms)
		if us != c.us || ok != c.ok || out != c.outsideRange {
			t.Errorf("TimestampMicros(%d) = %d, %v, %v; want %d, %v, %v", c.ms, us, ok, out, c.us, c.ok, c.outsideRange)
		}
	}
}
