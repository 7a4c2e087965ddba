package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		name     string
		p        Policy
		attempt  int
		min, max time.Duration
	}{
		{"zero policy", Policy{}, 3, 0, 0},
		{"first", Policy{Min: 100 * time.Millisecond, Max: time.Second}, 0, 100 * time.Millisecond, 100 * time.Millisecond},
		{"doubles", Policy{Min: 100 * time.Millisecond, Max: time.Second}, 2, 400 * time.Millisecond, 400 * time.Millisecond},
		{"capped", Policy{Min: 100 * time.Millisecond, Max: time.Second}, 10, time.Second, time.Second},
		{"huge attempt does not overflow", Policy{Min: 100 * time.Millisecond, Max: time.Second}, 1 << 20, time.Second, time.Second},
		{"negative attempt", Policy{Min: 100 * time.Millisecond, Max: time.Second}, -1, 100 * time.Millisecond, 100 * time.Millisecond},
		{"max below min", Policy{Min: time.Second, Max: time.Millisecond}, 5, time.Second, time.Second},
		{"jitter", Policy{Min: time.Second, Max: time.Second, Jitter: 0.25}, 0, 750 * time.Millisecond, 1250 * time.Millisecond},
		{"default at 7", Default, 7, 22500 * time.Millisecond, 37500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 200 {
				if d := tt.p.Duration(tt.attempt); d < tt.min || d > tt.max {
					t.Fatalf("Duration(%d) = %v, want in [%v, %v]", tt.attempt, d, tt.min, tt.max)
				}
			}
		})
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := (Policy{Min: time.Hour}).Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep did not return when ctx ended")
	}
	if err := Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Wait = %v", err)
	}
}
