package keyindex

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// DeletesDomainPrefix starts the domains (PROTOCOL.md, "Domain Metadata") that record a
// keyed table's deletes where no deleted row stays in the table to remember them (an
// upsert table written copy-on-write with hard deletes): one domain per commit that
// deleted keys, named "ingestd.deletes.<unix seconds>.<id>", its configuration the
// deleted keys and their sequences. Every commit of the table's keyed writer removes
// those older than the delete horizon (ExpiredDeletesDomains), with deletes of its own or
// not, so the table holds at most a horizon of deletes.
const DeletesDomainPrefix = "ingestd.deletes."

// Deleted is one delete to remember: the key (the concatenated AppendValue encodings of
// its key columns, as Lookup takes it) and the delete's sequence.
type Deleted struct {
	Key []byte
	Seq int64
}

// deletesConfig is a deletes domain's configuration: keys base64 (standard, padded), and
// the sequence of each.
type deletesConfig struct {
	Keys []string `json:"keys"`
	Seqs []int64  `json:"seqs"`
}

// DeletesDomain returns the domainMetadata action that records deletes made at time at
// (kept to whole seconds) under a domain named with id, which must be unique per commit
// (a commit's txnId) and free of dots. Errors: an id with a dot or empty, a time outside
// 1970–2106.
func DeletesDomain(at time.Time, id string, deletes []Deleted) (deltalog.DomainMetadata, error) {
	if id == "" || strings.Contains(id, ".") {
		return deltalog.DomainMetadata{}, fmt.Errorf("record deletes: domain id %q is empty or has a dot", id)
	}
	sec := at.Unix()
	if sec < 0 || sec > 1<<32-1 {
		return deltalog.DomainMetadata{}, fmt.Errorf("record deletes: time %s outside 1970–2106", at)
	}
	c := deletesConfig{Keys: make([]string, len(deletes)), Seqs: make([]int64, len(deletes))}
	for i, d := range deletes {
		c.Keys[i], c.Seqs[i] = base64.StdEncoding.EncodeToString(d.Key), d.Seq
	}
	b, err := json.Marshal(c)
	if err != nil {
		return deltalog.DomainMetadata{}, fmt.Errorf("record deletes: %w", err)
	}
	return deltalog.DomainMetadata{Domain: fmt.Sprintf("%s%d.%s", DeletesDomainPrefix, sec, id), Configuration: string(b)}, nil
}

// ExpiredDeletesDomains returns the removals (domainMetadata with Removed) of snap's
// deletes domains made before before: the deletes past the horizon that a commit drops
// from the table.
func ExpiredDeletesDomains(snap *deltawriter.Snapshot, before time.Time) []deltalog.DomainMetadata {
	var out []deltalog.DomainMetadata
	for _, d := range snap.Domains(DeletesDomainPrefix) {
		if sec, ok := deletesDomainTime(d.Domain); ok && sec < before.Unix() {
			out = append(out, deltalog.DomainMetadata{Domain: d.Domain, Configuration: d.Configuration, Removed: true})
		}
	}
	return out
}

// deletesDomainTime is the time (unix seconds) in a deletes domain's name.
func deletesDomainTime(domain string) (int64, bool) {
	rest, ok := strings.CutPrefix(domain, DeletesDomainPrefix)
	if !ok {
		return 0, false
	}
	secText, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	sec, err := strconv.ParseInt(secText, 10, 64)
	return sec, err == nil && sec >= 0 && sec <= 1<<32-1
}

// rememberDomains makes each deletes domain of snap the index has not read yet a set of
// remembered deletes at the domain's time, unless a live row of the key is as new
// (x.mu not held). Errors: a domain whose name or configuration does not parse.
func (x *Index) rememberDomains(snap *deltawriter.Snapshot) error {
	for _, d := range snap.Domains(DeletesDomainPrefix) {
		x.mu.Lock()
		seen := x.domains[d.Domain]
		x.domains[d.Domain] = true
		x.mu.Unlock()
		if seen {
			continue
		}
		sec, ok := deletesDomainTime(d.Domain)
		if !ok {
			return fmt.Errorf("read deletes domain %q: the name has no time", d.Domain)
		}
		var c deletesConfig
		if err := json.Unmarshal([]byte(d.Configuration), &c); err != nil {
			return fmt.Errorf("read deletes domain %q: %w", d.Domain, err)
		}
		if len(c.Keys) != len(c.Seqs) {
			return fmt.Errorf("read deletes domain %q: %d keys but %d sequences", d.Domain, len(c.Keys), len(c.Seqs))
		}
		gone := make(map[fp]int64, len(c.Keys))
		for i, k := range c.Keys {
			key, err := base64.StdEncoding.DecodeString(k)
			if err != nil {
				return fmt.Errorf("read deletes domain %q: key %d: %w", d.Domain, i, err)
			}
			hi, lo := x.fingerprint(key)
			if old, ok := gone[fp{hi, lo}]; !ok || c.Seqs[i] > old {
				gone[fp{hi, lo}] = c.Seqs[i]
			}
		}
		x.rememberGone(gone, time.Unix(sec, 0))
	}
	return nil
}
