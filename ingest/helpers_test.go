package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// errAbandon, as the cancel cause of a member's context, stops its Run like kill -9
// (hooks.abandon): nothing buffered is flushed, no offsets are committed. Tests pair it
// with a broker that ignores the LeaveGroup (swallowLeave).
var errAbandon = errors.New("pipeline abandoned without flushing")

// abandonOnCause makes p stop like kill -9 when its Run's context is cancelled with
// errAbandon as the cause.
func abandonOnCause(p *Pipeline) {
	p.hooks.abandon = func(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errAbandon) }
}

// waitFor calls cond every 10 ms until it returns nil, and fails t with cond's last error
// after timeout. cond runs on t's goroutine, so it may stop the test itself (t.Fatal).
func waitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running fails t if one of members has returned from Run.
func running(t testing.TB, members ...*member) {
	t.Helper()
	for _, m := range members {
		select {
		case err := <-m.done:
			m.done <- err
			t.Fatalf("a member stopped early: %v", err)
		default:
		}
	}
}

// atLeast is a waitFor condition: nil once got >= want.
func atLeast(what string, got, want int64) error {
	if got < want {
		return fmt.Errorf("%s is %d, want at least %d", what, got, want)
	}
	return nil
}

// stopped waits until m's Run returns by itself and returns its error; after timeout it
// fails t with why (what the member should not have kept doing).
func (m *member) stopped(t testing.TB, timeout time.Duration, why string) error {
	t.Helper()
	select {
	case err := <-m.done:
		m.done <- err
		return err
	case <-time.After(timeout):
		t.Fatal(why)
		return nil
	}
}

// writeConfig writes a pipeline file p.yaml with body into a temporary directory and
// returns its path (for config.Load).
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	return writeSecretFile(t, t.TempDir(), "p.yaml", body)
}

// writeSecretFile writes value and a newline to dir/name (mode 0600) and returns its path.
func writeSecretFile(t *testing.T, dir, name, value string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
