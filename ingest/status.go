package ingest

import (
	"sort"
	"sync"
	"time"
)

// State is a pipeline's lifecycle state.
type State string

// States reported by /readyz.
const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StateHalted   State = "halted"   // a schema policy stopped it; needs a person
	StateFailed   State = "failed"   // it could not start or hit a permanent error
	StateStopped  State = "stopped"  // shut down cleanly
	StateRetrying State = "retrying" // a transient failure (registry, broker, store) is being retried
)

// HaltedPartition is where a halted pipeline stopped: the first offending offset.
type HaltedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Reason    string `json:"reason"`
	Field     string `json:"field,omitempty"`
	Message   string `json:"message"`
}

// Status is a snapshot of one pipeline's state, safe to serialise as JSON.
type Status struct {
	Pipeline string            `json:"pipeline"`
	State    State             `json:"state"`
	Error    string            `json:"error,omitempty"`
	Halted   []HaltedPartition `json:"halted,omitempty"`
	Since    time.Time         `json:"since"`
}

// statusBox guards a Status shared between the pipeline and the HTTP handlers.
type statusBox struct {
	mu sync.Mutex
	s  Status
}

func (b *statusBox) set(state State, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s.State != state {
		b.s.Since = time.Now()
	}
	b.s.State = state
	b.s.Error = ""
	if err != nil {
		b.s.Error = err.Error()
	}
}

func (b *statusBox) halt(h HaltedPartition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, old := range b.s.Halted {
		if old.Topic == h.Topic && old.Partition == h.Partition {
			return
		}
	}
	b.s.Halted = append(b.s.Halted, h)
	sort.Slice(b.s.Halted, func(i, j int) bool {
		if b.s.Halted[i].Topic != b.s.Halted[j].Topic {
			return b.s.Halted[i].Topic < b.s.Halted[j].Topic
		}
		return b.s.Halted[i].Partition < b.s.Halted[j].Partition
	})
	if b.s.State != StateHalted {
		b.s.Since = time.Now()
	}
	b.s.State = StateHalted
}

// unhalt forgets the halt of a partition that is no longer ours (its new owner halts at
// the same offset); the pipeline is running again when no halted partition is left.
func (b *statusBox) unhalt(topic string, partition int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.s.Halted[:0]
	for _, h := range b.s.Halted {
		if h.Topic != topic || h.Partition != partition {
			kept = append(kept, h)
		}
	}
	clear(b.s.Halted[len(kept):])
	b.s.Halted = kept
	if len(kept) == 0 && b.s.State == StateHalted {
		b.s.State = StateRunning
		b.s.Since = time.Now()
	}
}

func (b *statusBox) get() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.s
	s.Halted = append([]HaltedPartition(nil), b.s.Halted...)
	return s
}

// retrying marks a running pipeline as stalled on a transient failure (registry, broker,
// store); /readyz reports it with the error until a flush succeeds.
func (b *statusBox) retrying(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s.State == StateRunning || b.s.State == StateRetrying {
		if b.s.State != StateRetrying {
			b.s.Since = time.Now()
		}
		b.s.State = StateRetrying
		b.s.Error = err.Error()
	}
}

// recovered undoes retrying.
func (b *statusBox) recovered() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s.State == StateRetrying {
		b.s.State, b.s.Error, b.s.Since = StateRunning, "", time.Now()
	}
}
