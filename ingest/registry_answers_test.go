package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

// unreadableMsg is what Apicurio answers (400) for a stored schema it cannot parse.
const unreadableMsg = "Invalid Avro schema: Illegal character in: Bestellmenge\u00e4"

// answer400For makes the registry answer GET /schemas/ids/<id> with a 400 and a
// Confluent-style JSON body, and every other request normally.
func (h *harness) answer400For(id int) {
	h.reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != fmt.Sprintf("/schemas/ids/%d", id) {
			return false
		}
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error_code": 40001, "message": unreadableMsg})
		return true
	})
}

// TestRegistry400IsSchemaUnreadable: a schema id the registry answers with 400 is
// permanent for that id: under dead_letter its records go to the DLQ with reason
// schema_unreadable and the registry's message while the others land; under halt the
// partition halts at the first one. Before, the partition paused and retried forever.
func TestRegistry400IsSchemaUnreadable(t *testing.T) {
	t.Run("dead_letter", func(t *testing.T) {
		h := newHarness(t, 1)
		h.answer400For(h.ids[1])
		cfg := h.config()
		cfg.Schema.Policy = config.PolicyDeadLetter
		h.produce(1, 5, 0, 1, 0)
		h.produce(6, 3, 1, 1, 0) // schema v2: the registry answers 400
		h.produce(9, 2, 0, 1, 0)
		m := h.startWith("pipeline", cfg, nil)
		waitFor(t, 30*time.Second, func() error { return atLeast("records handled", h.handled(), 10) })
		m.stop(t)
		dl := h.readTopicAll(h.dlq)
		var got []string
		for _, r := range dl {
			reason, _ := dlq.Header(r, dlq.HeaderReason)
			msg, _ := dlq.Header(r, dlq.HeaderConnectMessage)
			got = append(got, fmt.Sprintf("%s@%s: %s: %s", r.Key, mustHeader(r, "__connect.errors.offset"), reason, msg))
		}
		wantMsg := fmt.Sprintf("decode: schema_unreadable: look up schema %d: schema registry answered 400 Bad Request: %s (error code 40001)", h.ids[1], unreadableMsg)
		want := []string{"6@5: schema_unreadable: " + wantMsg, "7@6: schema_unreadable: " + wantMsg, "8@7: schema_unreadable: " + wantMsg}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("DLQ:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		ids := h.orderIDs()
		for _, id := range []int64{1, 2, 3, 4, 5, 9, 10} {
			if ids[id] != 1 {
				t.Errorf("order %d is in the table %d times, want 1", id, ids[id])
			}
		}
		if len(ids) != 7 {
			t.Errorf("table holds %d orders, want 7", len(ids))
		}
	})
	t.Run("halt", func(t *testing.T) {
		h := newHarness(t, 1)
		h.answer400For(h.ids[1])
		cfg := h.config()
		cfg.Schema.Policy = config.PolicyHalt // with a dead-letter topic (for bad bytes): the policy decides
		h.produce(1, 5, 0, 1, 0)
		h.produce(6, 3, 1, 1, 0)
		m := h.startWith("pipeline", cfg, nil)
		waitFor(t, 30*time.Second, func() error {
			if len(m.p.Status().Halted) == 0 {
				return errors.New("no halted partition")
			}
			return nil
		})
		hp := m.p.Status().Halted[0]
		if hp.Offset != 5 || hp.Reason != "schema_unreadable" || !strings.Contains(hp.Message, unreadableMsg) {
			t.Errorf("halted at %+v, want offset 5, reason schema_unreadable, the registry's message", hp)
		}
		m.stop(t)
		if n := h.handled(); n != 5 {
			t.Errorf("table handled %d records, want 5 (the ones before the unreadable schema)", n)
		}
		if n := h.dlqCount(); n != 0 {
			t.Errorf("%d records dead-lettered under halt", n)
		}
	})
}

func mustHeader(r *kgo.Record, k string) string {
	v, _ := dlq.Header(r, k)
	return v
}

// TestRegistry401FailsPipeline: a registry that refuses the credentials fails the
// pipeline (Run returns, Status failed) with a message naming the registry and the user,
// never the password; nothing is dead-lettered or committed. Before, every lookup was
// transient and the partitions paused forever.
func TestRegistry401FailsPipeline(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			h := newHarness(t, 1)
			h.reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(status)
				_ = json.NewEncoder(w).Encode(map[string]any{"error_code": status * 100, "message": "nope"})
				return true
			})
			cfg := h.config()
			cfg.SchemaRegistry.Username, cfg.SchemaRegistry.Password = "ingestd-reader", "s3cr3t-pa55"
			h.produce(1, 3, 0, 1, 0)
			log := slog.New(slog.NewTextHandler(testWriter{t, "pipeline"}, &slog.HandlerOptions{Level: slog.LevelWarn}))
			deps, err := OpenDeps(context.Background(), cfg, log, h.metrics)
			if err != nil {
				t.Fatal(err)
			}
			deps.KafkaOpts = []kgo.Opt{kgo.HeartbeatInterval(200 * time.Millisecond)}
			p := NewPipeline(cfg, deps)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			var runErr error
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				cancel()
				<-done
				t.Fatalf("Run still running 30 s after the registry answered %d (status %+v)", status, p.Status())
			}
			fix := "check schema_registry.username and schema_registry.password"
			if status == http.StatusForbidden {
				fix = "grant that user read access to the registry's schemas, or set other credentials in schema_registry.username and schema_registry.password"
			}
			want := fmt.Sprintf(`look up schema %d: schema registry %s answered %d %s to user "ingestd-reader": nope (error code %d); %s`,
				h.ids[0], h.reg.URL(), status, http.StatusText(status), status*100, fix)
			if runErr == nil || runErr.Error() != want {
				t.Errorf("Run returned\n %v\nwant\n %s", runErr, want)
			}
			st := p.Status()
			if st.State != StateFailed || st.Error != want {
				t.Errorf("status %s %q, want failed with the same message", st.State, st.Error)
			}
			if runErr != nil && strings.Contains(runErr.Error(), "s3cr3t") {
				t.Errorf("the error shows the password")
			}
			if n := h.dlqCount(); n != 0 {
				t.Errorf("%d records dead-lettered", n)
			}
			if n := h.handled(); n != 0 {
				t.Errorf("%d records committed", n)
			}
		})
	}
}
