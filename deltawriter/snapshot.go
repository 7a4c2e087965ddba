package deltawriter

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// ErrTableNotFound is returned (wrapped) when the table root has no _delta_log commit.
var ErrTableNotFound = errors.New("delta table not found")

// Snapshot is the state of a table at one version, reconstructed per PROTOCOL.md
// "Action Reconciliation". Snapshots handed out by Table are immutable: do not modify
// their maps.
type Snapshot struct {
	// Version is the table version; -1 when the table does not exist yet.
	Version  int64
	Protocol deltalog.Protocol
	Metadata deltalog.Metadata
	// Schema is Metadata.SchemaString parsed.
	Schema *deltalog.StructType
	// ColumnMapping is the effective column mapping mode (the property, honoured only when
	// the protocol supports column mapping).
	ColumnMapping deltalog.ColumnMappingMode
	// Txns maps each transaction appId to its latest version. When the table sets
	// delta.setTransactionRetentionDuration, txns whose lastUpdated is older than the
	// retention (at load time) are dropped, as Spark and Kernel do.
	Txns map[string]int64
	// TxnRetention is delta.setTransactionRetentionDuration (0 when unset: txns never
	// expire). A pipeline whose partition idles longer than this loses its txn and must
	// fall back to Kafka group offsets.
	TxnRetention time.Duration
	// Files holds the live add actions keyed by their reconciliation key
	// (deltalog.FileKey: canonical decoded path, plus the deletion vector id if any), in
	// a compact, immutable table (FileSet).
	Files *FileSet

	txns       map[string]deltalog.Txn            // full txn actions, for checkpoints
	tombstones tombstoneSet                       // remove actions not superseded by an add
	domains    map[string]deltalog.DomainMetadata // live (non-removed) domains
}

// Domains returns the snapshot's live domainMetadata actions whose domain starts with
// prefix, sorted by domain (PROTOCOL.md, "Domain Metadata"; removed domains are gone).
func (s *Snapshot) Domains(prefix string) []deltalog.DomainMetadata {
	var out []deltalog.DomainMetadata
	for name, d := range s.domains {
		if strings.HasPrefix(name, prefix) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b deltalog.DomainMetadata) int { return strings.Compare(a.Domain, b.Domain) })
	return out
}

// SupportsFeature reports whether the table's protocol supports table feature f,
// listed or implied by its legacy reader/writer versions (PROTOCOL.md, "Table Features").
func (s *Snapshot) SupportsFeature(f string) bool {
	return s.Version >= 0 && protocolSupports(s.Protocol, f)
}

func emptySnapshot() *Snapshot {
	return &Snapshot{
		Version: -1,
		Txns:    map[string]int64{},
		Files:   &FileSet{},
		txns:    map[string]deltalog.Txn{},
		domains: map[string]deltalog.DomainMetadata{},
	}
}

// clone copies the maps so the result can be advanced without touching s.
func (s *Snapshot) clone() *Snapshot {
	c := *s
	c.Txns = maps.Clone(s.Txns)
	c.Files = s.Files.clone()
	c.txns = maps.Clone(s.txns)
	c.tombstones = s.tombstones.clone()
	c.domains = maps.Clone(s.domains)
	return &c
}

// apply reconciles the actions of one commit (or checkpoint) into s
// (PROTOCOL.md, "Action Reconciliation"): last protocol and metaData win, the last txn
// per appId wins, the newest add/remove per path wins, removed domains disappear.
func (s *Snapshot) apply(actions []deltalog.Action) {
	for _, a := range actions {
		switch {
		case a.Protocol != nil:
			s.Protocol = *a.Protocol
		case a.Metadata != nil:
			s.Metadata = *a.Metadata
			s.Schema = nil // re-parsed by finish
		case a.Txn != nil:
			s.Txns[a.Txn.AppID] = a.Txn.Version
			s.txns[a.Txn.AppID] = *a.Txn
		case a.Add != nil:
			k := deltalog.FileKey(a.Add.Path, a.Add.DeletionVector)
			s.Files.put(k, *a.Add)
			s.tombstones.del(k)
		case a.Remove != nil:
			k := deltalog.FileKey(a.Remove.Path, a.Remove.DeletionVector)
			s.Files.del(k)
			s.tombstones.put(k, *a.Remove)
		case a.DomainMetadata != nil:
			if a.DomainMetadata.Removed {
				delete(s.domains, a.DomainMetadata.Domain)
			} else {
				s.domains[a.DomainMetadata.Domain] = *a.DomainMetadata
			}
		}
	}
	s.Files.maybeCompact()
}

// defaultDeletedFileRetention is delta.deletedFileRetentionDuration when the table does
// not set it (PROTOCOL.md, "Add File and Remove File"; Spark's default).
const defaultDeletedFileRetention = 7 * 24 * time.Hour

// expireTombstones drops the tombstones expired at now: deletionTimestamp older than
// delta.deletedFileRetentionDuration (7 days by default), the ones a checkpoint leaves out
// (PROTOCOL.md, "Add File and Remove File"; Spark's state reconstruction drops them too).
// s must not have been handed out. A retention that does not parse keeps them all.
func (s *Snapshot) expireTombstones(now time.Time) {
	ret, err := s.Metadata.DurationProperty(deltalog.PropDeletedFileRetention, defaultDeletedFileRetention)
	if err != nil {
		return
	}
	s.tombstones.expire(now.Add(-ret).UnixMilli())
}

// finish validates a reconstructed snapshot: protocol and metaData present, protocol
// readable, schema parseable; and drops txns expired at now per
// delta.setTransactionRetentionDuration.
func (s *Snapshot) finish(now time.Time) error {
	if s.Protocol.MinReaderVersion == 0 {
		return fmt.Errorf("load snapshot at version %d: no protocol action", s.Version)
	}
	if s.Metadata.ID == "" && s.Metadata.SchemaString == "" {
		return fmt.Errorf("load snapshot at version %d: no metaData action", s.Version)
	}
	if err := checkReadable(&s.Protocol); err != nil {
		return fmt.Errorf("load snapshot at version %d: %w", s.Version, err)
	}
	if s.Schema == nil {
		schema, err := s.Metadata.Schema()
		if err != nil {
			return fmt.Errorf("load snapshot at version %d: %w", s.Version, err)
		}
		s.Schema = schema
	}
	mode, err := columnMappingMode(&s.Protocol, &s.Metadata)
	if err != nil {
		return fmt.Errorf("load snapshot at version %d: %w", s.Version, err)
	}
	s.ColumnMapping = mode
	return s.expireTxns(now)
}

// expireTxns drops txn actions whose lastUpdated is older than
// delta.setTransactionRetentionDuration before now (PROTOCOL.md, "Transaction
// Identifiers"; Spark's minSetTransactionRetentionTimestamp). Txns without lastUpdated
// never expire.
func (s *Snapshot) expireTxns(now time.Time) error {
	ret, err := s.Metadata.DurationProperty(deltalog.PropTxnRetentionDuration, 0)
	if err != nil {
		return fmt.Errorf("load snapshot at version %d: %w", s.Version, err)
	}
	s.TxnRetention = ret
	if ret <= 0 {
		return nil
	}
	cutoff := now.Add(-ret).UnixMilli()
	for app, x := range s.txns {
		if x.LastUpdated != nil && *x.LastUpdated < cutoff {
			delete(s.txns, app)
			delete(s.Txns, app)
		}
	}
	return nil
}

// CheckWritable returns an error wrapping ErrUnsupportedFeature, naming the feature, when
// ingestd cannot append to this table (unknown writer feature, CHECK constraints,
// invariants, generated or identity columns, column defaults).
func (s *Snapshot) CheckWritable() error {
	if s.Version < 0 {
		return fmt.Errorf("check table: %w", ErrTableNotFound)
	}
	return checkWritable(&s.Protocol, &s.Metadata, s.Schema)
}

// Tombstones returns the remove actions of the snapshot that no later add superseded
// (PROTOCOL.md, "Add File and Remove File": tombstones are kept until
// delta.deletedFileRetentionDuration after their deletionTimestamp, so that VACUUM keeps
// their files for readers of older versions), keyed like Files. The map is a copy.
func (s *Snapshot) Tombstones() map[string]deltalog.Remove { return maps.Collect(s.tombstones.all()) }

// ---- log listing ----

const logDir = "_delta_log"

// sidecarDir holds the sidecar files of V2 checkpoints (PROTOCOL.md, "V2 Spec").
const sidecarDir = logDir + "/_sidecars"

func commitPath(v int64) string { return fmt.Sprintf("%s/%020d.json", logDir, v) }

// logListing is what a _delta_log listing says about versions.
type logListing struct {
	commits   map[int64]bool
	maxCommit int64
	// checkpoints maps a version to its candidate checkpoints, each a list of file names
	// (one for classic and V2 UUID-named checkpoints, all parts for multi-part ones).
	checkpoints map[int64][][]string
}

// listLog lists _delta_log. It recognises commits (<v>.json), classic checkpoints
// (<v>.checkpoint.parquet), multi-part ones (<v>.checkpoint.<part:10>.<parts:10>.parquet;
// only complete sets count) and V2 UUID-named ones (<v>.checkpoint.<uuid>.{json,parquet}),
// and ignores everything else (.crc files, compacted logs, temp files, _commits/).
//
// With after set, only names after it are listed (storage.ListFrom: S3 StartAfter, GCS
// StartOffset, Azure StartFrom), so a load from a checkpoint does not list the history
// before it.
func listLog(ctx context.Context, st storage.Store, after string) (*logListing, error) {
	ents, err := storage.ListFrom(ctx, st, logDir, after)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", logDir, err)
	}
	l := &logListing{commits: map[int64]bool{}, maxCommit: -1, checkpoints: map[int64][][]string{}}
	parts := map[int64]map[int]map[int]string{} // version → number of parts → part → name
	for _, e := range ents {
		if e.IsDir {
			continue
		}
		name := e.Name
		if len(name) < 21 || name[20] != '.' {
			continue
		}
		v, err := strconv.ParseInt(name[:20], 10, 64)
		if err != nil {
			continue
		}
		rest := name[21:]
		switch {
		case rest == "json":
			l.commits[v] = true
			l.maxCommit = max(l.maxCommit, v)
		case rest == "checkpoint.parquet":
			l.checkpoints[v] = append(l.checkpoints[v], []string{name})
		case strings.HasPrefix(rest, "checkpoint.") && (strings.HasSuffix(rest, ".parquet") || strings.HasSuffix(rest, ".json")):
			mid := strings.TrimPrefix(rest, "checkpoint.")
			mid = mid[:strings.LastIndexByte(mid, '.')]
			f := strings.Split(mid, ".")
			switch {
			case len(f) == 1 && isUUID(f[0]): // V2, UUID-named
				l.checkpoints[v] = append(l.checkpoints[v], []string{name})
			case len(f) == 2 && len(f[0]) == 10 && len(f[1]) == 10 && strings.HasSuffix(rest, ".parquet"):
				part, err1 := strconv.Atoi(f[0])
				n, err2 := strconv.Atoi(f[1])
				if err1 != nil || err2 != nil || n <= 0 || part < 1 || part > n {
					continue
				}
				if parts[v] == nil {
					parts[v] = map[int]map[int]string{}
				}
				if parts[v][n] == nil {
					parts[v][n] = map[int]string{}
				}
				parts[v][n][part] = name
			}
		}
	}
	for v, byN := range parts {
		for _, n := range slices.Sorted(maps.Keys(byN)) {
			if len(byN[n]) == n { // complete set
				names := make([]string, 0, n)
				for p := 1; p <= n; p++ {
					names = append(names, byN[n][p])
				}
				l.checkpoints[v] = append(l.checkpoints[v], names)
			}
		}
	}
	return l, nil
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// loadSnapshot reconstructs the latest snapshot from the newest readable checkpoint plus
// the JSON commits after it (PROTOCOL.md, "Checkpoints", "Last Checkpoint File"). A
// missing or corrupt _last_checkpoint is tolerated: the listing decides; a
// checkpoint that cannot be read completely (missing part or sidecar, corrupt file) is
// skipped for an older one. It returns an error wrapping ErrTableNotFound when there is
// no commit at all, and an error when commit versions are not contiguous.
//
// When _last_checkpoint names a version, _delta_log is first listed from that version
// on only; the whole log is listed when that checkpoint is missing or unreadable.
func loadSnapshot(ctx context.Context, st storage.Store, now time.Time) (*Snapshot, error) {
	return loadSnapshotWarn(ctx, st, now, nil)
}

// staleHint describes a _last_checkpoint whose checkpoint could not be used: the version
// it names and why (missing from the listing, or the read's error).
type staleHint struct {
	named int64
	why   error
}

// loadSnapshotWarn is loadSnapshot that calls stale (when not nil) once when
// _last_checkpoint names a checkpoint that is missing or unreadable, before recovering
// by listing the whole log (delta-kernel-rs recovers with a warning; Spark fails).
func loadSnapshotWarn(ctx context.Context, st storage.Store, now time.Time, stale func(staleHint)) (*Snapshot, error) {
	hint := readLastCheckpoint(ctx, st)
	if hint >= 0 {
		l, err := listLog(ctx, st, fmt.Sprintf("%020d", hint))
		if err != nil {
			return nil, err
		}
		why := fmt.Errorf("no checkpoint of version %d in %s", hint, logDir)
		for _, names := range l.checkpoints[hint] {
			s, err := readCheckpoint(ctx, st, hint, names)
			if err != nil {
				why = err
				continue // the full listing below looks for another one
			}
			if l.maxCommit > hint && !l.commits[hint+1] {
				return nil, fmt.Errorf("load snapshot: commit %d after checkpoint %d is missing (versions are not contiguous up to %d)", hint+1, hint, l.maxCommit)
			}
			if err := replayCommits(ctx, st, s, l, hint+1); err != nil {
				return nil, err
			}
			return s, s.finish(now)
		}
		if stale != nil {
			stale(staleHint{named: hint, why: why})
		}
	}
	l, err := listLog(ctx, st, "")
	if err != nil {
		return nil, err
	}
	if l.maxCommit < 0 && len(l.checkpoints) == 0 {
		return nil, fmt.Errorf("load snapshot: no commit in %s: %w", logDir, ErrTableNotFound)
	}
	// Candidate checkpoints, newest first; _last_checkpoint's version first when it is
	// complete in the listing (it normally is the newest).
	var cands []int64
	for v := range l.checkpoints {
		cands = append(cands, v)
	}
	slices.SortFunc(cands, func(a, b int64) int { return cmp.Compare(b, a) })
	if hint >= 0 && l.checkpoints[hint] != nil && (len(cands) == 0 || cands[0] != hint) {
		cands = append([]int64{hint}, cands...)
	}
	var lastErr error
	for _, cp := range cands {
		for _, names := range l.checkpoints[cp] {
			s, err := readCheckpoint(ctx, st, cp, names)
			if err != nil {
				lastErr = err
				continue // corrupt or partial: try another one, an older one, or replay from 0
			}
			if l.maxCommit > cp && !l.commits[cp+1] {
				return nil, fmt.Errorf("load snapshot: commit %d after checkpoint %d is missing (versions are not contiguous up to %d)", cp+1, cp, l.maxCommit)
			}
			if err := replayCommits(ctx, st, s, l, cp+1); err != nil {
				return nil, err
			}
			return s, s.finish(now)
		}
	}
	if !l.commits[0] {
		if lastErr != nil {
			return nil, fmt.Errorf("load snapshot: no readable checkpoint and no commit 0: %w", lastErr)
		}
		return nil, fmt.Errorf("load snapshot: commit 0 is missing and there is no checkpoint")
	}
	s := emptySnapshot()
	if err := replayCommits(ctx, st, s, l, 0); err != nil {
		return nil, err
	}
	return s, s.finish(now)
}

// replayCommits applies commits from..l.maxCommit to s, requiring each to exist.
func replayCommits(ctx context.Context, st storage.Store, s *Snapshot, l *logListing, from int64) error {
	for v := from; v <= l.maxCommit; v++ {
		if !l.commits[v] {
			return fmt.Errorf("load snapshot: commit %d is missing (versions are not contiguous up to %d)", v, l.maxCommit)
		}
		actions, err := readCommit(ctx, st, v)
		if err != nil {
			return err
		}
		s.apply(actions)
		s.Version = v
	}
	return nil
}

func readCommit(ctx context.Context, st storage.Store, v int64) ([]deltalog.Action, error) {
	b, err := st.Get(ctx, commitPath(v))
	if err != nil {
		return nil, fmt.Errorf("read commit %d: %w", v, err)
	}
	actions, err := deltalog.ParseCommit(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("read commit %d: %w", v, err)
	}
	return actions, nil
}
