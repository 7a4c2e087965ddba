package ingest

import (
	"errors"
	"testing"

	"github.com/ingestd/ingestd/ingest/config"
)

// A topic is claimed for a table by one pipeline: another pipeline's claim of it for
// the same table, however the URI is written, fails naming both; other topics of that
// table, and the topic in another table, are free; a released claim can be taken.
func TestTableClaims(t *testing.T) {
	pipe := func(name, file, uri string, topics ...string) *config.Config {
		c := &config.Config{Name: name, File: file}
		c.Kafka.Topics, c.Table.URI = topics, uri
		return c
	}
	c := NewTableClaims()
	if _, err := c.Claim(pipe("orders", "/etc/ingestd/orders.yaml", "/lake/orders", "orders", "orders-eu")); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"/lake/orders", "/lake/orders/", "file:///lake/orders", "file://localhost/lake/./orders/"} {
		_, err := c.Claim(pipe("copy", "/etc/ingestd/copy.yaml", uri, "payments", "orders-eu"))
		want := "claim table " + uri + " for topic orders-eu: pipeline orders (/etc/ingestd/orders.yaml) already writes that topic into this table, " +
			"so pipeline copy (/etc/ingestd/copy.yaml) would write every record a second time: " + ErrTableClaimed.Error()
		if !errors.Is(err, ErrTableClaimed) || err.Error() != want {
			t.Errorf("claim of %s: %v\nwant %s", uri, err, want)
		}
	}
	// The refused claim took nothing: payments is free for another pipeline.
	releasePayments, err := c.Claim(pipe("payments", "p.yaml", "file:///lake/orders", "payments"))
	if err != nil {
		t.Fatalf("payments into the orders table: %v", err)
	}
	if _, err := c.Claim(pipe("orders-copy", "c.yaml", "s3://lake/orders", "orders")); err != nil {
		t.Fatalf("orders into another table: %v", err)
	}
	if _, err := c.Claim(pipe("other", "o.yaml", "/lake/orders", "payments")); !errors.Is(err, ErrTableClaimed) {
		t.Fatalf("payments claimed twice: %v", err)
	}
	releasePayments()
	if _, err := c.Claim(pipe("other", "o.yaml", "/lake/orders", "payments")); err != nil {
		t.Fatalf("payments after its release: %v", err)
	}
	var none *TableClaims
	if release, err := none.Claim(pipe("x", "x.yaml", "/lake/orders", "orders")); err != nil || release == nil {
		t.Fatalf("nil TableClaims: %v", err)
	}
}
