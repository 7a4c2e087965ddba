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
	// StateWaiting: started, but the consumer group has not assigned it partitions yet
	// (after a kill -9 the coordinator waits for the previous member's session timeout).
	StateWaiting State = "waiting_for_assignment"
	// StateDegraded: running, but every record of its last flushes went to the dead-letter
	// topic as schema_not_found: a wrong schema_registry.url, or a producer using another
	// registry (Status.Error says which ids).
	StateDegraded State = "degraded"
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
	// assignedOnce is set by the first assignment: waiting is then a no-op (the assignment
	// may arrive before the start-up checks end).
	assignedOnce bool
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

// assigned ends StateWaiting: the group has given the pipeline its first assignment.
func (b *statusBox) assigned() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.assignedOnce = true
	if b.s.State == StateWaiting {
		b.s.State, b.s.Error, b.s.Since = StateRunning, "", time.Now()
	}
}

// waiting marks a started pipeline that has no assignment yet, why shown in /readyz; once
// assigned, it makes a starting pipeline running.
func (b *statusBox) waiting(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.assignedOnce {
		if b.s.State == StateStarting {
			b.s.State, b.s.Error, b.s.Since = StateRunning, "", time.Now()
		}
		return
	}
	if b.s.State == StateStarting || b.s.State == StateWaiting {
		if b.s.State != StateWaiting {
			b.s.Since = time.Now()
		}
		b.s.State, b.s.Error = StateWaiting, why
	}
}

// degraded marks a running pipeline whose flushes only dead-letter unknown schema ids;
// why is shown in /readyz until undegraded.
func (b *statusBox) degraded(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s.State == StateRunning || b.s.State == StateDegraded {
		if b.s.State != StateDegraded {
			b.s.Since = time.Now()
		}
		b.s.State, b.s.Error = StateDegraded, why
	}
}

// undegraded undoes degraded.
func (b *statusBox) undegraded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s.State == StateDegraded {
		b.s.State, b.s.Error, b.s.Since = StateRunning, "", time.Now()
	}
}
