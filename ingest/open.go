package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
	"github.com/ingestd/ingestd/ingest/maintain"
)

// Open builds a Pipeline from its config (see OpenDeps), with the process's logger,
// metrics and table maintainers (mt, maintain.NewRegistry: shared by every pipeline the
// process runs). It does no Kafka I/O; the table is read (and refused if ingestd cannot
// safely write it) when Run starts. Errors: OpenDeps', and a store that does not honour
// put-if-absent or refuses the credentials ("check store <uri>: …").
func Open(ctx context.Context, cfg *config.Config, log *slog.Logger, m *Metrics, sh Shared) (*Pipeline, error) {
	deps, err := OpenDeps(ctx, cfg, log, m)
	if err != nil {
		return nil, err
	}
	deps.Maintainers, deps.Memory = sh.Maintainers, sh.Memory
	// Refuse, before anything is written, a store that does not honour put-if-absent or
	// whose credentials are refused. A transient failure (network, throttling) is left to
	// the store's own check before its first write, which the pipeline retries.
	if err := storage.CheckPutIfAbsent(ctx, deps.Table.Store()); err != nil {
		if !storage.IsTransient(err) {
			_ = CloseDeps(ctx, deps)
			return nil, fmt.Errorf("check store %s: %w", cfg.Table.URI, err)
		}
		log.Warn("store check failed transiently; it is retried before the first write", "table", cfg.Table.URI, "err", err)
	}
	return NewPipeline(cfg, deps), nil
}

// OpenDeps builds what a pipeline (or a replay) of cfg needs: the table's store and log,
// and the schema source (registry client with caches, or the static .avsc).
func OpenDeps(ctx context.Context, cfg *config.Config, log *slog.Logger, m *Metrics) (Deps, error) {
	sec, err := kafkaclient.SecurityOpts(cfg.Kafka, m.kafka())
	if err != nil {
		return Deps{}, err
	}
	store, err := storage.OpenWith(ctx, cfg.Table.URI, cfg.Table.StorageOptions())
	if err != nil {
		return Deps{}, fmt.Errorf("open store %s: %w", cfg.Table.URI, err)
	}
	// Checkpoints are written by the table's background goroutine, so a commit never waits
	// for one (docs/performance.md); Pipeline.Close / CloseDeps wait for it.
	// After each of them, expired log files are removed (log cleanup, with the replay
	// safeguard: maintain.LogCleaner), on that goroutine too.
	deps := Deps{Logger: log, Metrics: m, KafkaSecurity: sec}
	lc := maintain.NewLogCleaner(cfg, log, kafkaclient.New(cfg, log, m.kafka(), sec))
	topts := []deltawriter.Option{deltawriter.WithBackgroundCheckpoints(), deltawriter.WithLogger(log), deltawriter.WithAfterCheckpoint(lc.AfterCheckpoint)}
	if m != nil {
		stale := m.StaleLastCheckpoint.WithLabelValues(cfg.Name)
		topts = append(topts, deltawriter.WithStaleLastCheckpoint(func(int64) { stale.Inc() }))
	}
	table, err := deltawriter.Open(ctx, store, topts...)
	if err != nil {
		return Deps{}, fmt.Errorf("open table %s: %w", cfg.Table.URI, err)
	}
	deps.Table = table
	if cfg.SchemaRegistry != nil {
		opts, err := registryClientOpts(cfg.SchemaRegistry)
		if err != nil {
			return Deps{}, err
		}
		cl, err := sr.NewClient(opts...)
		if err != nil {
			return Deps{}, fmt.Errorf("create registry client: %w", err)
		}
		deps.Schemas, deps.Framed = decode.NewRegistry(cl, decode.WithAuthInfo(cfg.SchemaRegistry.URL, cfg.SchemaRegistry.Username)), true
	} else if cfg.Format == config.FormatJSON || cfg.Format == config.FormatConnectJSON {
		deps.Schemas = noSchemas{}
		if cfg.Format == config.FormatConnectJSON {
			deps.Documents = decode.NewConnectSource()
		} else {
			var file *deltalog.StructType
			if cfg.AvroSchemaFile != "" {
				s, err := decode.StaticSchema(cfg.AvroSchemaFile)
				if err != nil {
					return Deps{}, fmt.Errorf("load avro_schema_file: %w", err)
				}
				if s.DeltaErr != nil {
					return Deps{}, fmt.Errorf("load avro_schema_file: %w", s.DeltaErr)
				}
				file = s.Delta
			}
			deps.Documents = decode.NewJSONSource(file, kafkaColumns(cfg))
		}
	} else {
		s, err := decode.StaticSchema(cfg.AvroSchemaFile)
		if err != nil {
			return Deps{}, fmt.Errorf("load avro_schema_file: %w", err)
		}
		deps.Schemas = staticSource{s}
	}
	return deps, nil
}

// checkpointWait bounds how long Close waits for a background checkpoint (ms-scale
// normally; a slow store must not hold up shutdown past a supervisor's kill timeout).
const checkpointWait = 20 * time.Second

// Close waits for the table's background checkpoint, if one is being written, at most
// until ctx ends or checkpointWait passes (a checkpoint that does not finish is skipped;
// the next one covers it). Call it after Run returns.
func (p *Pipeline) Close(ctx context.Context) error { return CloseDeps(ctx, p.deps) }

// CloseDeps is Close for dependencies opened with OpenDeps (replay, dlq inspect).
func CloseDeps(ctx context.Context, d Deps) error {
	if d.Table == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointWait)
	defer cancel()
	return d.Table.Close(ctx)
}

// noSchemas is the schema source of unframed JSON formats, whose records carry no schema
// id (Deps.Documents gives their writer schemas).
type noSchemas struct{}

func (noSchemas) Schema(_ context.Context, id int) (*decode.WriterSchema, error) {
	return nil, &decode.Error{Reason: decode.ReasonSchemaNotFound, Err: fmt.Errorf("look up schema %d: the pipeline's format carries no schema ids", id)}
}

// staticSource serves one writer schema (raw Avro with avro_schema_file) for every record.
type staticSource struct{ ws *decode.WriterSchema }

func (s staticSource) Schema(context.Context, int) (*decode.WriterSchema, error) { return s.ws, nil }

// registryClientOpts returns the sr client options for r: the URL, a 10 s HTTP timeout,
// sr.DialTLSConfig when schema_registry.tls is present, and a PreReq hook that sets
// basic auth (username + password, password_file or password_env) or a Bearer token
// (bearer_token_file), re-reading the file or variable on every request so a rotated
// secret is used without a restart. Errors: an unreadable or invalid CA or key pair.
func registryClientOpts(r *config.Registry) ([]sr.ClientOpt, error) {
	opts := []sr.ClientOpt{sr.URLs(r.URL), sr.HTTPClient(&http.Client{Timeout: 10 * time.Second}), sr.UserAgent("ingestd")}
	if r.TLS != nil {
		tc, err := r.TLS.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("configure schema_registry.tls: %w", err)
		}
		opts = append(opts, sr.DialTLSConfig(tc))
	}
	switch {
	case r.BearerTokenFile != "":
		file := r.BearerTokenFile
		opts = append(opts, sr.PreReq(func(req *http.Request) error {
			t, err := config.ReadSecret(file, "")
			if err != nil {
				return fmt.Errorf("read schema_registry.bearer_token_file: %w", err)
			}
			req.Header.Set("Authorization", "Bearer "+t.Reveal())
			return nil
		}))
	case r.Username != "":
		user, literal, file, env := r.Username, r.Password, r.PasswordFile, r.PasswordEnv
		opts = append(opts, sr.PreReq(func(req *http.Request) error {
			p := literal
			if file != "" || env != "" {
				var err error
				if p, err = config.ReadSecret(file, env); err != nil {
					return fmt.Errorf("read schema_registry password: %w", err)
				}
			}
			req.SetBasicAuth(user, p.Reveal())
			return nil
		}))
	}
	return opts, nil
}
