package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// ProbePrefix starts the name of the probe object Probe writes in _delta_log/. It starts
// with a dot and has no version number, so no Delta reader takes it for a log file
// (PROTOCOL.md names log files <version>.json, <version>.checkpoint…, _last_checkpoint,
// and readers skip hidden names).
const ProbePrefix = "_delta_log/.ingestd-probe-"

// Probe checks that st honours put-if-absent, the one property Delta commits rely on:
// it creates _delta_log/.ingestd-probe-<random> with PutIfAbsent, creates it again with
// other bytes, which must fail with ErrExist and leave the first bytes in place, and
// deletes the probe. A store that accepts the second create (it ignores If-None-Match or
// the generation precondition) gives an error wrapping ErrUnsafeStore that names the
// table, the endpoint that answered (and the setting it came from) and the fix. Local stores (link(2)) are not probed. Other failures (network,
// permissions) are returned as they are, wrapped.
func Probe(ctx context.Context, st Store) error {
	if _, ok := st.(*Local); ok {
		return nil
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("probe %s: %w", st.URI(), err)
	}
	name := ProbePrefix + hex.EncodeToString(rnd[:])
	first := []byte("ingestd put-if-absent probe " + hex.EncodeToString(rnd[:]) + " first\n")
	second := []byte("ingestd put-if-absent probe " + hex.EncodeToString(rnd[:]) + " second\n")
	err := st.PutIfAbsent(ctx, name, first)
	if errors.Is(err, ErrExist) {
		// An SDK retry of a create that landed: it is ours if it holds our bytes.
		got, gerr := st.Get(ctx, name)
		if gerr != nil || string(got) != string(first) {
			return fmt.Errorf("probe %s: a fresh random name %s already exists with other content", st.URI(), name)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("probe %s: create %s: %w", st.URI(), name, err)
	}
	defer func() {
		if d, ok := st.(Deleter); ok {
			_ = d.Delete(context.WithoutCancel(ctx), name)
		}
	}()
	err = st.PutIfAbsent(ctx, name, second)
	if err == nil {
		return fmt.Errorf("probe %s: %w: %s accepted a second conditional create of %s, so concurrent commits would overwrite each other. %s",
			st.URI(), ErrUnsafeStore, endpointOf(st), name, unsafeFix(st))
	}
	if !errors.Is(err, ErrExist) {
		return fmt.Errorf("probe %s: second create of %s: %w", st.URI(), name, err)
	}
	got, err := st.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("probe %s: read back %s: %w", st.URI(), name, err)
	}
	if string(got) != string(first) {
		return fmt.Errorf("probe %s: %w: %s refused a conditional create of %s but still replaced the object. %s",
			st.URI(), ErrUnsafeStore, endpointOf(st), name, unsafeFix(st))
	}
	return nil
}

// endpointOf names the service endpoint that answered the probe, and where it was set:
// the store that failed to honour the conditional write is the endpoint's, not the
// table URI's.
func endpointOf(st Store) string {
	switch s := st.(type) {
	case *S3:
		if s.endpoint != "" {
			return "the S3 endpoint " + s.endpoint + " (table.storage.endpoint, else AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL)"
		}
		return "AWS S3's regional endpoint (no table.storage.endpoint set)"
	case *GCS:
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			return "the GCS endpoint " + h + " (STORAGE_EMULATOR_HOST)"
		}
		return "the GCS endpoint storage.googleapis.com"
	case *Azure:
		u := s.cc.URL()
		return "the Azure Blob endpoint " + strings.TrimSuffix(u, "/"+s.container) + " (table.storage.endpoint, else AZURE_STORAGE_CONNECTION_STRING or the account's)"
	}
	return "the store"
}

func unsafeFix(st Store) string {
	switch s := st.(type) {
	case *S3:
		where := "point table.storage.endpoint at an S3 store that supports conditional writes"
		if s.endpoint == "" {
			where = "use an S3 store that supports conditional writes"
		}
		return "Fix: " + where + " (PutObject with If-None-Match: *): AWS S3, MinIO RELEASE.2024-11 or later, versitygw with metadata (not --nometa); or check that no proxy between ingestd and the endpoint strips the If-None-Match header."
	case *GCS:
		return "Fix: use Google Cloud Storage, or point STORAGE_EMULATOR_HOST at an emulator that honours ifGenerationMatch=0 (fake-gcs-server); gcp-storage-emulator does not."
	case *Azure:
		return "Fix: point table.storage.endpoint at Azure Blob Storage or Azurite, which honour If-None-Match: * on Put Blob; check that no proxy between ingestd and the endpoint strips the header."
	}
	return "Fix: use a store whose conditional create refuses an existing object."
}

// probeOnce runs Probe for a store before its first write. A success or ErrUnsafeStore
// is kept; any other failure (network, throttling) is returned and retried by the next
// write. Concurrent first writes wait for the one probe.
type probeOnce struct {
	mu   sync.Mutex
	done bool
	err  error
}

// check runs probe (Probe on an unprobed view of the store) unless it already settled.
func (p *probeOnce) check(ctx context.Context, probe func(context.Context) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.err
	}
	err := probe(ctx)
	if err == nil || errors.Is(err, ErrUnsafeStore) {
		p.done, p.err = true, err
	}
	return err
}

// CheckPutIfAbsent runs the store's start-up probe (see Probe) now, sharing its outcome
// with the store's own check before its first write, so a process probes a store once.
// Local stores pass without I/O.
func CheckPutIfAbsent(ctx context.Context, st Store) error {
	if p, ok := st.(interface{ beforeWrite(context.Context) error }); ok {
		return p.beforeWrite(ctx)
	}
	return Probe(ctx, st)
}
