package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

// replayHoldMargin is added to the dead-letter topic's retention.ms + segment.ms: the
// slack between a dead letter's table version and its produce time, and between a
// segment's deadline and the broker's retention check (log.retention.check.interval.ms,
// 5 minutes by default).
const replayHoldMargin = time.Hour

// replayHoldTTL is how long a dead-letter topic's retention, once read, is trusted.
const replayHoldTTL = time.Hour

// LogCleaner runs log cleanup (maintenance.CleanupLog, PROTOCOL.md "Metadata Cleanup")
// after each background checkpoint of a pipeline's table, with the replay safeguard
// (docs/architecture.md, "Dead letters and replay"). Create it with NewLogCleaner and
// hand AfterCheckpoint to deltawriter.WithAfterCheckpoint.
//
// The safeguard: replay tells a real dead letter from an orphan (its flush never
// committed) by reading the commits after the table version the dead letter names
// (dlq.AckIndex). Were those commits deleted, an orphan would look real and be landed
// twice. So while a dead letter can still be in the pipeline's dead-letter topic, the
// commits after it stay: log cleanup keeps every log file younger than the topic's
// retention.ms + segment.ms + replayHoldMargin (a record is deleted at the latest when its
// whole segment, rolled after segment.ms, is past retention.ms). A topic that keeps
// records forever (retention.ms = -1, or cleanup.policy with compact) stops log cleanup
// of the table; when the topic's settings cannot be read, cleanup is skipped until they
// can (never guessed). A pipeline without a dead-letter topic cleans up by the table's
// delta.logRetentionDuration alone.
type LogCleaner struct {
	cfg     *config.Config
	log     *slog.Logger
	clients kafkaclient.Clients

	// sidecars remembers which sidecars each checkpoint of the table references, so that
	// a run reads only the checkpoints written since the last one.
	sidecars *maintenance.SidecarRefs

	mu     sync.Mutex
	hold   time.Duration
	holdAt time.Time
}

// NewLogCleaner returns the log cleaner of cfg's pipeline: cfg.Table.URI names the table
// in its logs, cfg.DeadLetter.Topic is the topic whose retention holds the log (none: no
// hold). clients builds the admin client (kafkaclient.Clients.LogCleanupAdmin) that
// describes the topic's configs, at most once per replayHoldTTL; log (nil: slog.Default())
// receives the cleaner's lines. It does no I/O.
func NewLogCleaner(cfg *config.Config, log *slog.Logger, clients kafkaclient.Clients) *LogCleaner {
	if log == nil {
		log = slog.Default()
	}
	return &LogCleaner{cfg: cfg, log: log, clients: clients, sidecars: maintenance.NewSidecarRefs()}
}

// AfterCheckpoint is the deltawriter.WithAfterCheckpoint hook: after checkpoint version of
// t, it deletes the log files the table's delta.logRetentionDuration and the replay hold
// both let go. It returns nothing: a failure is logged ("log cleanup skipped" when the
// dead-letter topic's retention cannot be read, "log cleanup failed" otherwise) and the
// next checkpoint tries again. deltawriter calls it on the table's background
// checkpoint goroutine.
func (c *LogCleaner) AfterCheckpoint(ctx context.Context, t *deltawriter.Table, version int64) {
	hold, err := c.replayHold(ctx)
	if err != nil {
		args := []any{"table", c.cfg.Table.URI, "dead_letter_topic", c.cfg.DeadLetter.Topic, "checkpoint", version, "err", err}
		if fix := kafkaclient.DescribeConfigsFix(c.cfg.Kafka, c.cfg.DeadLetter.Topic, err); fix != "" {
			args = append(args, "fix", fix)
		}
		c.log.Warn("log cleanup skipped: cannot read the dead-letter topic's retention", args...)
		return
	}
	if hold < 0 {
		c.log.Debug("log cleanup off: the dead-letter topic keeps records forever", "table", c.cfg.Table.URI,
			"dead_letter_topic", c.cfg.DeadLetter.Topic, "checkpoint", version)
		return
	}
	res, err := maintenance.CleanupLog(ctx, t, maintenance.LogCleanupOptions{MinRetention: hold, Sidecars: c.sidecars})
	if err != nil {
		c.log.Warn("log cleanup failed", "table", c.cfg.Table.URI, "checkpoint", version, "err", err)
		return
	}
	c.log.Info("log cleanup", "table", c.cfg.Table.URI, "checkpoint", version, "log_start_version", res.Checkpoint,
		"files_deleted", len(res.Deleted), "retention", res.Retention.String(), "replay_hold", hold.String())
}

// replayHold is the MinRetention of the replay safeguard: 0 without a dead-letter topic,
// -1 when it keeps records forever, else retention.ms + segment.ms + replayHoldMargin.
func (c *LogCleaner) replayHold(ctx context.Context) (time.Duration, error) {
	topic := c.cfg.DeadLetter.Topic
	if topic == "" {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holdAt.IsZero() && time.Since(c.holdAt) < replayHoldTTL {
		return c.hold, nil
	}
	cl, err := c.clients.LogCleanupAdmin()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	if rc.Err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, rc.Err)
	}
	hold, err := holdFromConfigs(rc.Configs)
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	c.hold, c.holdAt = hold, time.Now()
	return hold, nil
}

// holdFromConfigs computes replayHold from a topic's configs.
func holdFromConfigs(cfgs []kadm.Config) (time.Duration, error) {
	var retention, segment int64 = -2, -2
	for _, k := range cfgs {
		if k.Value == nil {
			continue
		}
		v := *k.Value
		switch k.Key {
		case "cleanup.policy":
			if strings.Contains(v, "compact") {
				return -1, nil
			}
		case "retention.ms", "segment.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read %s=%q: %w", k.Key, v, err)
			}
			if k.Key == "retention.ms" {
				retention = n
			} else {
				segment = n
			}
		}
	}
	if retention == -2 || segment == -2 {
		return 0, errors.New("the broker did not return retention.ms and segment.ms")
	}
	if retention < 0 {
		return -1, nil
	}
	return time.Duration(retention+segment)*time.Millisecond + replayHoldMargin, nil
}
