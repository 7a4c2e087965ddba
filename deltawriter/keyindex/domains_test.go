package keyindex

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// A copy-on-write table's deletes live in deletes domains: Build reads each as
// remembered deletes at the domain's time (a key with a newer live row keeps the row),
// Expire drops them by that time, and Refresh reads only domains it has not read, so an
// expired delete does not come back. ExpiredDeletesDomains removes domains by the time
// in their names.
func TestDeletesDomainsAreRememberedDeletes(t *testing.T) {
	ctx := context.Background()
	tt := newTable(t, idSeqSchema, nil, false, false)
	a := tt.write(rowsOf(1, 2, 3), nil) // seqs 10, 21, 32
	tt.commit([]deltalog.Add{a}, nil)
	k := func(id int64) []byte { return key(t, long, parquet.Int64Value(id)) }
	dom := func(sec int64, id string, ds ...Deleted) deltalog.DomainMetadata {
		d, err := DeletesDomain(time.Unix(sec, 0), id, ds)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// The copy-on-write delete of key 2 (seq 40) and of key 9 (no row, seq 5) at 1000 s;
	// a stale delete of key 1 (seq 5 < its live row's 10) at 2000 s.
	b := tt.write([]map[string]any{{"id": int64(1), "seq": int64(10), "v": "x"}, {"id": int64(3), "seq": int64(32), "v": "x"}}, nil)
	p := deltawriter.UpgradeProtocol(tt.snap().Protocol, deltalog.FeatureDomainMetadata)
	d1, d2 := dom(1000, "c1", Deleted{k(2), 40}, Deleted{k(9), 5}), dom(2000, "c2", Deleted{k(1), 5})
	if d1.Domain != "ingestd.deletes.1000.c1" || d1.Configuration != `{"keys":["gAAAAAAAAAI=","gAAAAAAAAAk="],"seqs":[40,5]}` {
		t.Fatalf("domain %+v", d1)
	}
	if _, err := tt.tbl.Commit(ctx, deltawriter.Commit{ReadVersion: tt.snap().Version, Protocol: &p, Adds: []deltalog.Add{b},
		Removes: []deltalog.Remove{remove(a)}, Domains: []deltalog.DomainMetadata{d1, d2}}); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Key: []string{"id"}, Sequence: "seq"}
	x, err := Build(ctx, tt.st, tt.snap(), spec, WithDeletesDomains())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{b.Path: "b"}
	for id, w := range map[int64]string{1: "b#0@10 max@10", 2: "deleted@40", 3: "b#1@32 max@32", 9: "deleted@5"} {
		if got := hits(t, x, names, id); got != w {
			t.Errorf("built index: key %d: %s, want %s", id, got, w)
		}
	}
	if s := x.Stats(); s.Deleted != 2 || s.Keys != 2 {
		t.Errorf("stats %+v, want 2 deleted, 2 keys", s)
	}
	if plain, err := Build(ctx, tt.st, tt.snap(), spec); err != nil || hits(t, plain, names, 2) != "-" {
		t.Fatalf("without WithDeletesDomains key 2 is %q (%v), want unknown", hits(t, plain, names, 2), err)
	}
	if n := x.Expire(time.Unix(1500, 0)); n != 2 {
		t.Fatalf("Expire dropped %d, want 2 (the deletes made at 1000 s)", n)
	}
	// Another writer deletes key 3 (seq 99) at 3000 s, rewriting b without it.
	c := tt.write([]map[string]any{{"id": int64(1), "seq": int64(10), "v": "x"}}, nil)
	if _, err := tt.tbl.Commit(ctx, deltawriter.Commit{ReadVersion: tt.snap().Version, Adds: []deltalog.Add{c},
		Removes: []deltalog.Remove{remove(b)}, Domains: []deltalog.DomainMetadata{dom(3000, "c3", Deleted{k(3), 99})}}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Refresh(ctx, tt.st, tt.snap()); err != nil {
		t.Fatal(err)
	}
	names[c.Path] = "c"
	for id, w := range map[int64]string{1: "c#0@10 max@10", 2: "-", 3: "deleted@99", 9: "-"} {
		if got := hits(t, x, names, id); got != w {
			t.Errorf("refreshed index: key %d: %s, want %s", id, got, w)
		}
	}
	var gone []string
	for _, d := range ExpiredDeletesDomains(tt.snap(), time.Unix(2500, 0)) {
		if !d.Removed {
			t.Errorf("%s: not a removal", d.Domain)
		}
		gone = append(gone, d.Domain)
	}
	if strings.Join(gone, " ") != "ingestd.deletes.1000.c1 ingestd.deletes.2000.c2" {
		t.Errorf("expired domains %v", gone)
	}
	if _, err := DeletesDomain(time.Unix(1, 0), "a.b", nil); err == nil {
		t.Error("a domain id with a dot was accepted")
	}
}

// Commit writes domainMetadata only where the protocol has the feature, never in the
// delta. namespace, one action per domain.
func TestCommitDomainsNeedTheFeature(t *testing.T) {
	ctx := context.Background()
	tt := newTable(t, idSeqSchema, nil, false, false)
	d := deltalog.DomainMetadata{Domain: "ingestd.deletes.1.x", Configuration: "{}"}
	_, err := tt.tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Domains: []deltalog.DomainMetadata{d}})
	if !errors.Is(err, deltawriter.ErrUnsupportedFeature) || !strings.Contains(err.Error(), "domainMetadata writer feature") {
		t.Fatalf("commit without the feature: %v", err)
	}
	p := deltawriter.UpgradeProtocol(tt.snap().Protocol, deltalog.FeatureDomainMetadata)
	for _, bad := range [][]deltalog.DomainMetadata{{{Domain: "delta.clustering"}}, {d, d}, {{}}} {
		if _, err := tt.tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Protocol: &p, Domains: bad}); err == nil {
			t.Errorf("domains %+v accepted", bad)
		}
	}
	if _, err := tt.tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Protocol: &p, Domains: []deltalog.DomainMetadata{d}}); err != nil {
		t.Fatal(err)
	}
	got := tt.snap().Domains("ingestd.")
	if len(got) != 1 || got[0] != d {
		t.Fatalf("domains %+v, want %+v", got, d)
	}
}
