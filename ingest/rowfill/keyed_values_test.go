package rowfill

import (
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// A key value names a row only within Delta's date and timestamp range (no row holds a
// value outside it): the ends are read exactly, one unit past them is refused.
func TestKeyValueTimeRange(t *testing.T) {
	for _, c := range []struct {
		t    deltalog.DataType
		v    any
		want int64
		err  string
	}{
		{deltalog.Date, int32(-719162), -719162, ""},
		{deltalog.Date, 2932896, 2932896, ""},
		{deltalog.Date, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), -719162, ""},
		{deltalog.Date, int32(2932897), 0, "date 2932897 days since 1970-01-01 is outside Delta's range 0001-01-01..9999-12-31 for a date key column"},
		{deltalog.Date, time.Date(0, 12, 31, 23, 0, 0, 0, time.UTC), 0, "date -719163 days since 1970-01-01 is outside Delta's range"},
		{deltalog.Timestamp, time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), 253402300799999999, ""},
		{deltalog.TimestampNtz, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), -62135596800000000, ""},
		{deltalog.Timestamp, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), 0, "timestamp 10000-01-01T00:00:00Z is outside Delta's range 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z for a timestamp key column"},
		{deltalog.TimestampNtz, time.Date(0, 12, 31, 23, 59, 59, 999999000, time.UTC), 0, "timestamp 0000-12-31T23:59:59.999999Z is outside Delta's range"},
	} {
		v, err := goKeyValue(c.t, c.v)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %v: %v %v, want error %q", c.t, c.v, v, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s %v: %v", c.t, c.v, err)
		case c.err == "" && c.t == deltalog.Date && int64(v.Int32()) != c.want,
			c.err == "" && c.t != deltalog.Date && v.Int64() != c.want:
			t.Errorf("%s %v: %v, want %d", c.t, c.v, v, c.want)
		}
	}
}
