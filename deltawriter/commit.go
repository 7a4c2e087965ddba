package deltawriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/internal/backoff"
)

// Errors returned (wrapped) by Commit when a concurrent writer won a version.
var (
	// ErrTxnAlreadyCommitted: a commit after ReadVersion already recorded a txn for one of
	// our appIds with a version >= ours. The batch is a duplicate: drop it.
	ErrTxnAlreadyCommitted = errors.New("transaction version already committed")
	// ErrConcurrentTxn: a commit after ReadVersion recorded a lower version for one of our
	// appIds (another writer handled part of the same source range). Re-read the snapshot
	// and rebuild the batch from its txn version.
	ErrConcurrentTxn = errors.New("concurrent commit for the same transaction appId")
	// ErrMetadataChanged: a commit after ReadVersion changed metaData or protocol. Re-run
	// the schema guard on a fresh snapshot and rebuild the commit.
	ErrMetadataChanged = errors.New("table metadata or protocol changed concurrently")
	// ErrConcurrentDelete: a commit after ReadVersion removed a file this commit removes
	// (Delta's ConcurrentDeleteDeleteException). Re-read the snapshot and drop what
	// depended on that file. ConcurrentDeleteError names the files.
	ErrConcurrentDelete = errors.New("a file this commit removes was removed concurrently")
	// ErrConcurrentAppend: a commit with ConflictOnDataChange lost to a winner that
	// changed the table's rows (an add with dataChange true).
	ErrConcurrentAppend = errors.New("rows were added concurrently to a table this commit read")
	// ErrCommitAttempts: every version tried was taken by blind appends.
	ErrCommitAttempts = errors.New("too many concurrent commits")
)

// Commit is one atomic change to a table (PROTOCOL.md, "Delta Log Entries").
type Commit struct {
	// ReadVersion is the snapshot version the commit was prepared against; -1 creates the
	// table (then Protocol and Metadata are required).
	ReadVersion int64
	// Protocol, when set, replaces the table protocol.
	Protocol *deltalog.Protocol
	// Metadata, when set, replaces the table metadata (on create or schema change). Its ID
	// must equal the table's.
	Metadata *deltalog.Metadata
	// Adds are the new data files (from WriteDataFile).
	Adds []deltalog.Add
	// Removes are the files the commit removes (PROTOCOL.md, "Add File and Remove
	// File"); OPTIMIZE removes with dataChange false. A winner that removed one of them
	// fails the commit with a *ConcurrentDeleteError (ErrConcurrentDelete).
	Removes []deltalog.Remove
	// Txns record source progress, at most one per appId. LastUpdated defaults to the
	// commit time.
	Txns []deltalog.Txn
	// Domains are domainMetadata actions (PROTOCOL.md, "Domain Metadata"): a domain's
	// configuration, or its removal (Removed). At most one per domain, none in the
	// system-controlled "delta." namespace; the table must have the domainMetadata
	// writer feature (enable it with SchemaChange.Enable). Writers that share a domain
	// are not checked against each other: give each commit's domain its own name.
	Domains []deltalog.DomainMetadata
	// Operation is commitInfo.operation: "WRITE" by default, "CREATE TABLE", …
	Operation string
	// OperationParameters is commitInfo.operationParameters (string values only).
	OperationParameters map[string]string
	// OperationMetrics, when set, is commitInfo.operationMetrics (string values); by
	// default the metrics of a write (numFiles, numOutputBytes, numOutputRows). An empty
	// non-nil map writes {}, as Spark does for ALTER TABLE and CREATE TABLE without data.
	OperationMetrics map[string]string
	// ReadsData says the commit was computed from the table's data files (a scan, Spark's
	// readFiles/readPredicates: ADD CONSTRAINT, SET NOT NULL): commitInfo.isBlindAppend is
	// then false. isBlindAppend is also false when the commit removes files.
	ReadsData bool
	// IsolationLevel is commitInfo.isolationLevel: "Serializable" by default; Spark's
	// OPTIMIZE writes "SnapshotIsolation".
	IsolationLevel string
	// EngineInfo is commitInfo.engineInfo, e.g. "ingestd/0.1.0".
	EngineInfo string
	// TxnID is commitInfo.txnId (a UUID string); a random one when empty. A writer that
	// names its commit in advance (e.g. in dead-letter headers) sets it.
	TxnID string
	// ConflictOnDataChange makes a winner that added a file with dataChange true (new
	// rows, or a file given a deletion vector) a conflict, ErrConcurrentAppend: the commit
	// was computed from the rows the table held at ReadVersion (an upsert that looked its
	// keys up), which such a winner may have changed. OPTIMIZE's rewrites (dataChange
	// false) do not conflict unless they removed one of Removes.
	ConflictOnDataChange bool
}

// Commit writes c as the next version with put-if-absent of
// _delta_log/<version:020d>.json and returns that version (PROTOCOL.md, "Creation of New
// Log Entries"; docs/architecture.md, "Delta writing"). Actions are written in the order
// commitInfo, protocol, metaData, txn, domainMetadata, remove, add.
//
// Commits that landed after ReadVersion are checked first, and again each time the
// version is taken: a winner with a txn for one of our appIds gives
// ErrTxnAlreadyCommitted (its version >= ours) or ErrConcurrentTxn (lower); a winner
// with metaData or protocol gives ErrMetadataChanged; a winner that removed one of our
// Removes gives a *ConcurrentDeleteError; otherwise (appends, and files other than
// ours removed, whatever their dataChange) the
// commit is retried at the next version, up to the attempt limit (ErrCommitAttempts).
// Before anything is written, it refuses with an error wrapping ErrUnsupportedFeature a
// table whose protocol or metadata it cannot honour.
//
// After success the cached snapshot advances by this commit only, and every
// delta.checkpointInterval versions (default 10) a classic checkpoint and
// _last_checkpoint are written before Commit returns, or handed to the table's
// background goroutine with WithBackgroundCheckpoints; a failed checkpoint is logged,
// not returned.
func (t *Table) Commit(ctx context.Context, c Commit) (int64, error) {
	defer t.fg.exit(t.fg.enter())
	t.mu.Lock()
	defer t.mu.Unlock()

	if err := validateCommit(&c); err != nil {
		return -1, err
	}
	snap, err := t.refreshLocked(ctx)
	if err != nil && !errors.Is(err, ErrTableNotFound) {
		return -1, fmt.Errorf("commit: %w", err)
	}
	if snap.Version < c.ReadVersion {
		return -1, fmt.Errorf("commit: read version %d is newer than the table (version %d)", c.ReadVersion, snap.Version)
	}
	// Winners we already know of (commits after ReadVersion) are checked without writing.
	for v := c.ReadVersion + 1; v <= snap.Version; v++ {
		actions, err := readCommit(ctx, t.store, v)
		if err != nil {
			return -1, fmt.Errorf("commit: %w", err)
		}
		if err := checkWinner(&c, v, actions); err != nil {
			return -1, err
		}
	}
	if err := t.checkCommitWritable(snap, &c); err != nil {
		return -1, err
	}

	txnID := c.TxnID
	if txnID == "" {
		if txnID, err = newUUID(); err != nil {
			return -1, fmt.Errorf("commit: %w", err)
		}
	}
	version := snap.Version + 1
	for attempt := 1; ; attempt++ {
		now := t.opts.now()
		actions := buildActions(&c, txnID, now.UnixMilli())
		data, err := deltalog.EncodeCommit(actions)
		if err != nil {
			return -1, fmt.Errorf("commit: %w", err)
		}
		err = t.putCommit(ctx, version, data)
		if err == nil {
			t.afterCommit(ctx, version, actions)
			return version, nil
		}
		if !errors.Is(err, storage.ErrExist) {
			return -1, fmt.Errorf("commit version %d: %w", version, err)
		}
		winner, err := readCommit(ctx, t.store, version)
		if err != nil {
			return -1, fmt.Errorf("commit: %w", err)
		}
		if CommitTxnID(winner) == txnID {
			// Our own earlier attempt landed although its put reported an error.
			t.afterCommit(ctx, version, winner)
			return version, nil
		}
		if err := checkWinner(&c, version, winner); err != nil {
			return -1, err
		}
		if attempt >= t.opts.maxAttempts {
			return -1, fmt.Errorf("commit: versions %d..%d taken by concurrent writers: %w", snap.Version+1, version, ErrCommitAttempts)
		}
		version++
		// Lost a race: back off with jitter (so contending writers spread out instead of
		// retrying in a tight loop), then step over the versions other writers took in the
		// meantime by reading them (each checked like the winner above), not by one
		// conditional put per taken version.
		if err := lostRaceBackoff(ctx, attempt); err != nil {
			return -1, fmt.Errorf("commit: %w", err)
		}
		for {
			next, err := readCommit(ctx, t.store, version)
			if storage.IsNotExist(err) {
				break
			}
			if err != nil {
				return -1, fmt.Errorf("commit: %w", err)
			}
			if err := checkWinner(&c, version, next); err != nil {
				return -1, err
			}
			version++
		}
	}
}

// lostRacePolicy spreads the commit attempts of writers that lost a version to each
// other: uniform over [0, 5 ms · 2^n], at most 500 ms ("full jitter").
var lostRacePolicy = backoff.Policy{Min: 2500 * time.Microsecond, Max: 250 * time.Millisecond, Jitter: 1}

// lostRaceBackoff sleeps before the commit attempt after attempt (1-based) lost its
// version (lostRacePolicy); it returns ctx's error if ctx ends first.
func lostRaceBackoff(ctx context.Context, attempt int) error {
	return lostRacePolicy.Sleep(ctx, attempt-1)
}

// ErrCommitOutcomeUnknown is wrapped when the put of a commit failed in a way that does
// not say whether it landed, and re-trying the identical put could not settle it. The
// commit may be visible later: do not delete its data files; re-read the txn versions
// before retrying the batch.
var ErrCommitOutcomeUnknown = errors.New("commit outcome unknown")

// putRetry is the wait between the identical puts of an ambiguous commit (50 ms, 100 ms,
// 200 ms, ±25%).
var putRetry = backoff.Policy{Min: 50 * time.Millisecond, Max: time.Second, Jitter: 0.25}

// putCommit writes the commit file with put-if-absent. A failure other than "exists"
// (a timeout, a 5xx, a lost connection) is ambiguous: the object may have been written.
// The identical bytes (same commitInfo.txnId) are then put again, up to 3 times: success
// means it was not written before; ErrExist sends the caller to read the winner and
// compare its txnId with ours (PROTOCOL.md "Creation of New Log Entries";
// docs/architecture.md, "Exactly-once").
// A refusal (storage.ErrPermission, storage.ErrUnsafeStore, storage.ErrDataLost) is
// returned as it is.
func (t *Table) putCommit(ctx context.Context, version int64, data []byte) error {
	err := t.store.PutIfAbsent(ctx, commitPath(version), data)
	if errors.Is(err, storage.ErrPermission) || errors.Is(err, storage.ErrUnsafeStore) || errors.Is(err, storage.ErrDataLost) {
		return err // refused before anything was written: not ambiguous, and retrying cannot help
	}
	for retry := 0; err != nil && !errors.Is(err, storage.ErrExist) && retry < 3; retry++ {
		t.logf("commit put failed, retrying the identical put", "version", version, "err", err)
		if putRetry.Sleep(ctx, retry) != nil {
			break // ctx ended: the outcome stays unknown
		}
		err = t.store.PutIfAbsent(ctx, commitPath(version), data)
	}
	if err != nil && !errors.Is(err, storage.ErrExist) {
		return fmt.Errorf("%w: %w", ErrCommitOutcomeUnknown, err)
	}
	return err
}

func validateCommit(c *Commit) error {
	if c.ReadVersion < -1 {
		return fmt.Errorf("commit: invalid read version %d", c.ReadVersion)
	}
	if c.ReadVersion == -1 && (c.Protocol == nil || c.Metadata == nil) {
		return fmt.Errorf("commit: creating a table needs protocol and metadata")
	}
	if c.Metadata != nil {
		if c.Metadata.ID == "" {
			return fmt.Errorf("commit: metadata has no id")
		}
		if _, err := c.Metadata.Schema(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	seen := map[string]bool{}
	for _, x := range c.Txns {
		if x.AppID == "" {
			return fmt.Errorf("commit: txn with empty appId")
		}
		if seen[x.AppID] {
			return fmt.Errorf("commit: two txn actions for appId %q", x.AppID)
		}
		seen[x.AppID] = true
	}
	domains := map[string]bool{}
	for _, d := range c.Domains {
		switch {
		case d.Domain == "":
			return fmt.Errorf("commit: domainMetadata with empty domain")
		case strings.HasPrefix(d.Domain, "delta."):
			return fmt.Errorf("commit: domain %q is in the system-controlled delta. namespace", d.Domain)
		case domains[d.Domain]:
			return fmt.Errorf("commit: two domainMetadata actions for domain %q", d.Domain)
		}
		domains[d.Domain] = true
	}
	removed := map[string]bool{}
	for _, r := range c.Removes {
		if r.Path == "" {
			return fmt.Errorf("commit: remove with empty path")
		}
		k := deltalog.FileKey(r.Path, r.DeletionVector)
		if removed[k] {
			return fmt.Errorf("commit: two remove actions for path %q", r.Path)
		}
		removed[k] = true
	}
	paths := map[string]bool{}
	for _, a := range c.Adds {
		if a.Path == "" {
			return fmt.Errorf("commit: add with empty path")
		}
		if paths[a.Path] {
			return fmt.Errorf("commit: two add actions for path %q", a.Path)
		}
		paths[a.Path] = true
	}
	return nil
}

// checkCommitWritable runs the protocol gate on the state the commit would produce.
func (t *Table) checkCommitWritable(snap *Snapshot, c *Commit) error {
	p, m := snap.Protocol, snap.Metadata
	if c.Protocol != nil {
		p = *c.Protocol
	}
	if c.Metadata != nil {
		if snap.Version >= 0 && c.Metadata.ID != snap.Metadata.ID {
			return fmt.Errorf("commit: metadata id %q differs from the table's %q", c.Metadata.ID, snap.Metadata.ID)
		}
		m = *c.Metadata
	}
	schema := snap.Schema
	if c.Metadata != nil || schema == nil {
		var err error
		if schema, err = m.Schema(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	if err := checkWritable(&p, &m, schema); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if len(c.Domains) > 0 && !protocolSupports(p, deltalog.FeatureDomainMetadata) {
		// PROTOCOL.md, "Domain Metadata": domainMetadata actions only on tables with the
		// writer feature.
		return fmt.Errorf("commit: %d domainMetadata actions, but the table does not have the %s writer feature (enable it with SchemaChange.Enable): %w",
			len(c.Domains), deltalog.FeatureDomainMetadata, ErrUnsupportedFeature)
	}
	for _, a := range c.Adds {
		if a.DeletionVector != nil && !dvEnabled(p, m) {
			// PROTOCOL.md, "Deletion Vectors": new deletion vectors only on tables with the
			// feature and delta.enableDeletionVectors=true.
			return fmt.Errorf("commit: add %s has a deletion vector, but the table does not have the %s feature with %s=true (enable it with SchemaChange.Enable): %w",
				a.Path, deltalog.FeatureDeletionVectors, deltalog.PropEnableDeletionVectors, ErrUnsupportedFeature)
		}
	}
	return nil
}

// ConcurrentDeleteError is the error of a commit whose Removes a winner removed first.
type ConcurrentDeleteError struct {
	Version int64    // the winner's version
	Paths   []string // our removes' paths the winner removed
}

func (e *ConcurrentDeleteError) Error() string {
	return fmt.Sprintf("commit: version %d removed %d file(s) this commit removes (%s): %v", e.Version, len(e.Paths), strings.Join(e.Paths, ", "), ErrConcurrentDelete)
}

// Unwrap returns ErrConcurrentDelete.
func (e *ConcurrentDeleteError) Unwrap() error { return ErrConcurrentDelete }

// checkWinner decides whether our commit may follow the winning commit at version v.
// Files added or removed by the winner never conflict with an append (Delta's rules for
// a blind append: it read no file), whatever their dataChange flag: an OPTIMIZE commit
// (dataChange false) between a pipeline's read and its commit changes nothing for it.
// Only a winner that removed a file we remove (under any deletion vector), or added it
// with a new deletion vector, conflicts (Delta's ConcurrentDeleteDeleteException).
func checkWinner(c *Commit, v int64, winner []deltalog.Action) error {
	ours := make(map[string]int64, len(c.Txns))
	for _, x := range c.Txns {
		ours[x.AppID] = x.Version
	}
	// Our removes by canonical path: a winner that removed the file under any deletion
	// vector, or gave it a new one, changed the logical file we replace.
	var removing map[string]bool
	if len(c.Removes) > 0 {
		removing = make(map[string]bool, len(c.Removes))
		for _, r := range c.Removes {
			removing[deltalog.CanonicalPath(r.Path)] = true
		}
	}
	var metaErr, appendErr error
	var gone []string
	for _, a := range winner {
		if c.ConflictOnDataChange && a.Add != nil && a.Add.DataChange && appendErr == nil {
			appendErr = fmt.Errorf("commit: version %d added %s: %w", v, a.Add.Path, ErrConcurrentAppend)
		}
		switch {
		case a.Remove != nil && removing != nil:
			if removing[deltalog.CanonicalPath(a.Remove.Path)] {
				gone = append(gone, a.Remove.Path)
			}
		case a.Add != nil && removing != nil && a.Add.DeletionVector != nil:
			// A DELETE that gave one of our files a (new) deletion vector replaced it.
			if removing[deltalog.CanonicalPath(a.Add.Path)] {
				gone = append(gone, a.Add.Path)
			}
		case a.Txn != nil:
			if mine, ok := ours[a.Txn.AppID]; ok {
				if a.Txn.Version >= mine {
					return fmt.Errorf("commit: version %d has txn %s=%d covering our %d: %w", v, a.Txn.AppID, a.Txn.Version, mine, ErrTxnAlreadyCommitted)
				}
				return fmt.Errorf("commit: version %d has txn %s=%d below our %d: %w", v, a.Txn.AppID, a.Txn.Version, mine, ErrConcurrentTxn)
			}
		case a.Metadata != nil && metaErr == nil:
			metaErr = fmt.Errorf("commit: version %d changed metaData: %w", v, ErrMetadataChanged)
		case a.Protocol != nil && metaErr == nil:
			metaErr = fmt.Errorf("commit: version %d changed protocol: %w", v, ErrMetadataChanged)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		return &ConcurrentDeleteError{Version: v, Paths: slices.Compact(gone)}
	}
	if metaErr != nil {
		return metaErr
	}
	return appendErr
}

// buildActions returns commitInfo, protocol, metaData, txn…, add… .
func buildActions(c *Commit, txnID string, nowMs int64) []deltalog.Action {
	op := c.Operation
	if op == "" {
		op = "WRITE"
	}
	params := c.OperationParameters
	if params == nil {
		params = map[string]string{}
	}
	var bytes, rows int64
	rowsKnown := true
	for _, a := range c.Adds {
		bytes += a.Size
		var st struct {
			NumRecords *int64 `json:"numRecords"`
		}
		if a.Stats == "" || json.Unmarshal([]byte(a.Stats), &st) != nil || st.NumRecords == nil {
			rowsKnown = false
		} else {
			rows += *st.NumRecords
		}
	}
	metrics := map[string]string{"numFiles": strconv.Itoa(len(c.Adds)), "numOutputBytes": strconv.FormatInt(bytes, 10)}
	if rowsKnown {
		metrics["numOutputRows"] = strconv.FormatInt(rows, 10)
	}
	if c.OperationMetrics != nil {
		metrics = c.OperationMetrics
	}
	isolation := c.IsolationLevel
	if isolation == "" {
		isolation = "Serializable"
	}
	info := deltalog.CommitInfo{
		"timestamp":           nowMs,
		"operation":           op,
		"operationParameters": params,
		"isolationLevel":      isolation,
		"isBlindAppend":       len(c.Removes) == 0 && !c.ReadsData,
		"operationMetrics":    metrics,
		"txnId":               txnID,
	}
	if c.ReadVersion >= 0 {
		info["readVersion"] = c.ReadVersion
	}
	if c.EngineInfo != "" {
		info["engineInfo"] = c.EngineInfo
	}
	actions := []deltalog.Action{{CommitInfo: info}}
	if c.Protocol != nil {
		p := *c.Protocol
		actions = append(actions, deltalog.Action{Protocol: &p})
	}
	if c.Metadata != nil {
		m := *c.Metadata
		actions = append(actions, deltalog.Action{Metadata: &m})
	}
	for _, x := range c.Txns {
		if x.LastUpdated == nil {
			ms := nowMs
			x.LastUpdated = &ms
		}
		actions = append(actions, deltalog.Action{Txn: &x})
	}
	for i := range c.Domains {
		actions = append(actions, deltalog.Action{DomainMetadata: &c.Domains[i]})
	}
	for i := range c.Removes {
		r := c.Removes[i]
		if r.DeletionTimestamp == nil {
			ms := nowMs
			r.DeletionTimestamp = &ms
		}
		actions = append(actions, deltalog.Action{Remove: &r})
	}
	for i := range c.Adds {
		a := c.Adds[i]
		actions = append(actions, deltalog.Action{Add: &a})
	}
	return actions
}

// afterCommit advances the cached snapshot by the commit just written and writes a
// checkpoint when the version is a multiple of delta.checkpointInterval.
func (t *Table) afterCommit(ctx context.Context, version int64, actions []deltalog.Action) {
	if t.snap != nil && t.snap.Version == version-1 {
		next := t.snap // not handed out yet: advanced in place
		if t.snapShared {
			next = t.snap.clone()
		}
		next.apply(actions)
		next.Version = version
		if err := next.finish(t.opts.now()); err != nil {
			t.logf("advance snapshot after commit", "version", version, "err", err)
			t.snap, t.snapShared = nil, false
			return
		}
		t.setSnap(next)
	} else if _, err := t.refreshLocked(ctx); err != nil {
		t.logf("refresh snapshot after commit", "version", version, "err", err)
		return
	}
	if t.opts.skipCheckpoint || t.snap == nil || t.snap.Version != version {
		return
	}
	interval, err := t.snap.Metadata.IntProperty(deltalog.PropCheckpointInterval, 10)
	if err != nil || interval <= 0 {
		t.logf("checkpoint interval", "value", t.snap.Metadata.Configuration[deltalog.PropCheckpointInterval], "err", err)
		return
	}
	if version > 0 && version%interval == 0 {
		if !t.snapShared {
			// The checkpoint leaves the expired tombstones out; the cached snapshot drops
			// them too, so that a long-running writer does not hold them for good.
			t.snap.expireTombstones(t.opts.now())
		}
		if t.opts.bgCheckpoint && t.cp.submit(ctx, t, t.snap) {
			t.snapShared = true // the checkpoint goroutine reads it
			return
		}
		if err := t.cpw.write(ctx, t.store, t.snap, t.opts.now()); err != nil {
			t.logf("write checkpoint", "version", version, "err", err)
		}
	}
}

// NewTxnID returns a random UUID (version 4) for Commit.TxnID (commitInfo.txnId), for
// callers that name a commit before making it.
func NewTxnID() string {
	id, _ := newUUID() // crypto/rand does not fail on supported platforms
	return id
}

func nowMillis() int64 { return time.Now().UnixMilli() }

func hasType(t deltalog.DataType, want deltalog.PrimitiveType) bool {
	switch t := t.(type) {
	case *deltalog.StructType:
		for _, f := range t.Fields {
			if hasType(f.Type, want) {
				return true
			}
		}
	case *deltalog.ArrayType:
		return hasType(t.ElementType, want)
	case *deltalog.MapType:
		return hasType(t.KeyType, want) || hasType(t.ValueType, want)
	case deltalog.PrimitiveType:
		return t == want
	}
	return false
}
