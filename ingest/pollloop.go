package ingest

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

// Runtime security errors (poll loop): brokers have been seen to report single spurious
// authorization failures around a re-authentication (kgo reports one on several polls in
// a burst), so a burst is not fatal; a failure still seen fatalGrace after the first one
// is. An authentication failure gets authGrace: after a password rotation the broker may
// know the new password before the password_file has it, and every reconnect re-reads the
// file. A poll that returns records forgets them; so does a quiet minute. At start-up
// every one of these is fatal at once.
const (
	fatalGrace  = 3 * time.Second
	authGrace   = 30 * time.Second
	fatalForget = time.Minute
)

// fatalWatch counts security failures seen by the poll loop (see fatalGrace).
type fatalWatch struct {
	first, last time.Time
	n           int
}

// observe records one failure at now and reports whether it is now fatal: still failing
// grace after the first one.
func (w *fatalWatch) observe(now time.Time, grace time.Duration) bool {
	if w.n > 0 && now.Sub(w.last) > fatalForget {
		w.n = 0
	}
	if w.n == 0 {
		w.first = now
	}
	w.n++
	w.last = now
	return (w.n >= 2 || grace == 0) && now.Sub(w.first) >= grace
}

// fetchErrors checks a poll's errors for security failures: it returns the
// *kafkaclient.SecurityError to fail the pipeline with once w says the failure persists, else
// nil (the poll loop logs and counts the errors as transient as before).
func (p *Pipeline) fetchErrors(fs kgo.Fetches, w *fatalWatch) error {
	var fatal error
	fs.EachError(func(t string, _ int32, err error) {
		need := ""
		if t != "" {
			need = "READ on topic " + t
		}
		if se := kafkaclient.AsSecurityError(p.cfg.Kafka, need, err); se != nil && fatal == nil {
			p.log.Warn("kafka security error", "err", se)
			grace := fatalGrace
			switch {
			case errors.Is(err, kerr.SaslAuthenticationFailed):
				grace = authGrace
			case errors.Is(err, kerr.FencedInstanceID):
				grace = 0 // kgo does not rejoin after a fence: reported once, fatal at once
			}
			if w.observe(time.Now(), grace) {
				fatal = se
			}
		}
	})
	if fatal == nil && fs.NumRecords() > 0 {
		w.n = 0
	}
	return fatal
}
