package kafkaclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgo's errors and warnings caused by a cancelled context (the client closing, or a
// request cancelled on shutdown) are logged at debug, whether the error wraps
// context.Canceled or only carries its text (kgo's balancer formats it with %v when a
// consumer closes while it leads a rebalance); every other error keeps its level.
func TestKgoLoggerCancelledIsNoError(t *testing.T) {
	var buf bytes.Buffer
	l := kgoLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, c := range []struct {
		level kgo.LogLevel
		msg   string
		kv    []any
		want  string
	}{
		{kgo.LogLevelError, "group manage loop errored", []any{"group", "g", "err", fmt.Errorf("unable to fetch metadata for group topics: %v", context.Canceled), "consecutive_errors", 1},
			`level=DEBUG msg="kafka: group manage loop errored" group=g err="unable to fetch metadata for group topics: context canceled" consecutive_errors=1`},
		{kgo.LogLevelWarn, "join group failed", []any{"group", "g", "err", fmt.Errorf("join: %w", context.Canceled)},
			`level=DEBUG msg="kafka: join group failed" group=g err="join: context canceled"`},
		{kgo.LogLevelError, "group manage loop errored", []any{"group", "g", "err", kerr.GroupAuthorizationFailed},
			`level=ERROR msg="kafka: group manage loop errored" group=g err="GROUP_AUTHORIZATION_FAILED: Not authorized to access group: Group authorization failed."`},
		{kgo.LogLevelError, "fetch offsets failed with non-retryable error", []any{"group", "g", "err", context.DeadlineExceeded},
			`level=ERROR msg="kafka: fetch offsets failed with non-retryable error" group=g err="context deadline exceeded"`},
		{kgo.LogLevelWarn, "heartbeat errored", []any{"group", "g", "err", errors.New("EOF")},
			`level=WARN msg="kafka: heartbeat errored" group=g err=EOF`},
		{kgo.LogLevelError, "context canceled", []any{"note", "context canceled"}, // no err value
			`level=ERROR msg="kafka: context canceled" note="context canceled"`},
	} {
		buf.Reset()
		l.Log(c.level, c.msg, c.kv...)
		line := strings.TrimSpace(buf.String())
		if _, rest, ok := strings.Cut(line, " "); !ok || rest != c.want { // drop time=…
			t.Errorf("Log(%v, %q):\n got %s\nwant %s", c.level, c.msg, line, c.want)
		}
	}
}
