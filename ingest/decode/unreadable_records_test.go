package decode

// Records the decoder cannot read: schema ids the registry does not know, registry
// outages, and values that are not Confluent-framed Avro (see writer_schemas_test.go for
// how these tests are written).

import (
	"errors"
	"net/http"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestCaseC20UnknownIDAndRegistryOutage: a registry reply that could not be parsed was
// cached as permanent, sending every later record to the dead-letter path
// (delta-io/kafka-delta-ingest#199), and transient failures were cached like permanent ones
// elsewhere (gklijs/schema_registry_converter#171). Order id 101 is known; off 0 uses it and
// decodes. Id 999 is unknown: schema_not_found, permanent (never ErrTransient), and
// negatively cached for the 30 s TTL, so three lookups within it make one registry request
// and one after it a second. Then id 102, known, is answered by a 503 and by a proxy's 200
// HTML page in turn: each of six lookups is transient (ErrTransient, no reason code), none
// is cached (six requests) and no row is appended. After recovery offs 2–1002 decode with
// one more request.
func TestCaseC20UnknownIDAndRegistryOutage(t *testing.T) {
	const order = `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"},{"name":"status","type":"string"},{"name":"dt","type":"string"}]}`
	fake, cl := newCountingRegistry(t)
	fake.SeedSchema("orders-value", 1, 101, sr.Schema{Schema: order})
	fake.SeedSchema("orders-value", 2, 102, sr.Schema{Schema: order})
	reg := NewRegistry(cl, WithNegativeTTL(30*time.Second))
	now := time.Unix(1_700_000_000, 0)
	reg.now = func() time.Time { return now }
	table := structOf(field("order_id", deltalog.Long, true), field("status", deltalog.String, true), field("dt", deltalog.String, true))
	p := newFramedPipeline(t, reg, table)
	frame := func(id byte, orderID int64) []byte {
		body := mustMarshal(t, mustWriter(t, 1, order).Avro, map[string]any{"order_id": orderID, "status": "NEW", "dt": "2024-05-01"})
		return append([]byte{0, 0, 0, 0, id}, body...)
	}
	unknown := append([]byte{0, 0, 0, 0x03, 0xE7}, frame(101, 9)[5:]...) // id 999

	if _, err := p.handle(frame(101, 0)); err != nil {
		t.Fatalf("off 0: %v", err)
	}
	for i := 0; i < 3; i++ { // off 1, then the same id again within the TTL
		id, err := p.handle(unknown)
		if id != 999 || ReasonOf(err) != ReasonSchemaNotFound || errors.Is(err, ErrTransient) {
			t.Fatalf("id 999 lookup %d: %d %v, want permanent schema_not_found", i, id, err)
		}
	}
	if n := fake.requests("/schemas/ids/999"); n != 1 {
		t.Fatalf("%d requests for id 999 within the TTL, want 1", n)
	}
	now = now.Add(31 * time.Second)
	if _, err := p.handle(unknown); ReasonOf(err) != ReasonSchemaNotFound || fake.requests("/schemas/ids/999") != 2 {
		t.Fatalf("after the TTL: %v, %d requests (want 2)", err, fake.requests("/schemas/ids/999"))
	}

	// Outage for id 102: 503 and a proxy's HTML page alternate.
	var calls atomic.Int64
	fake.fail.Store(func(w http.ResponseWriter, r *http.Request) bool {
		if calls.Add(1)%2 == 0 {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>maintenance</html>"))
			return true
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	rowsBefore := colLens(p.cols)
	for i := 0; i < 6; i++ { // the partition is paused and retried; each retry asks again
		if _, err := p.handle(frame(102, 2)); !errors.Is(err, ErrTransient) || ReasonOf(err) != "" {
			t.Fatalf("outage retry %d: %v, want transient with no reason code", i, err)
		}
	}
	if n := fake.requests("/schemas/ids/102"); n != 6 {
		t.Fatalf("%d requests during the outage, want 6 (nothing cached)", n)
	}
	if !slices.Equal(colLens(p.cols), rowsBefore) {
		t.Fatal("rows appended during the outage")
	}
	fake.fail.Store(func(http.ResponseWriter, *http.Request) bool { return false })
	for off := int64(2); off <= 1002; off++ {
		if _, err := p.handle(frame(102, off)); err != nil {
			t.Fatalf("off %d after recovery: %v", off, err)
		}
	}
	if n := fake.requests("/schemas/ids/102"); n != 7 {
		t.Fatalf("%d requests for id 102 in all, want 7 (one after recovery)", n)
	}
	got := p.rows()["order_id"]
	if len(got) != 1002 || got[0] != "0/1:0" || got[1] != "0/1:2" || got[1001] != "0/1:1002" {
		t.Fatalf("order_id column: %d values, first %q, last %q", len(got), got[:2], got[len(got)-1])
	}
}

// TestCaseC21PoisonPills: values that are not Confluent-framed Avro killed consumers or
// looped them forever on one record (delta-io/kafka-delta-ingest#199,
// spring-projects/spring-kafka#1287). One partition: off 0 a valid id-101 order
// {1,"NEW","2024-05-01"}; off 1 the JSON text {"order_id":1} (first byte 0x7B); off 2 the
// three bytes 00 00 00; off 3 the frame of id 101 and one byte of a three-field body; off 4
// a frame with id 0; off 5 a valid order {3,"PAID","2024-05-02"}. Offs 1–4 fail with four
// distinct, permanent reasons (bad_magic, too_short, truncated at status,
// schema_not_found), leave no partial row, and id 0 never reaches the registry; offs 0 and
// 5 are the two rows.
func TestCaseC21PoisonPills(t *testing.T) {
	const order = `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"},{"name":"status","type":"string"},{"name":"dt","type":"string"}]}`
	fake, cl := newCountingRegistry(t)
	fake.SeedSchema("orders-value", 1, 101, sr.Schema{Schema: order})
	table := structOf(field("order_id", deltalog.Long, true), field("status", deltalog.String, true), field("dt", deltalog.String, true))
	p := newFramedPipeline(t, NewRegistry(cl), table)
	msgs := [][]byte{
		mustHex(t, "0000000065 02 064e4557 14323032342d30352d3031"), // {1,"NEW","2024-05-01"}
		[]byte(`{"order_id":1}`),
		{0, 0, 0},
		{0, 0, 0, 0, 0x65, 0x02},
		mustHex(t, "0000000000 02 064e4557 14323032342d30352d3031"),
		mustHex(t, "0000000065 06 0850414944 14323032342d30352d3032"), // {3,"PAID","2024-05-02"}
	}
	wantReasons := []string{"", ReasonBadMagic, ReasonTooShort, ReasonTruncated, ReasonSchemaNotFound, ""}
	for off, v := range msgs {
		before := colLens(p.cols)
		_, err := p.handle(v)
		if ReasonOf(err) != wantReasons[off] || (wantReasons[off] == "") != (err == nil) {
			t.Fatalf("off %d: %v, want reason %q", off, err, wantReasons[off])
		}
		if err != nil && !slices.Equal(colLens(p.cols), before) {
			t.Fatalf("off %d left a partial row", off)
		}
		if errors.Is(err, ErrTransient) {
			t.Fatalf("off %d is transient: %v", off, err)
		}
	}
	if FieldOf(func() error { _, err := p.handle(msgs[3]); return err }()) != "status" {
		t.Fatal("truncated body does not name field status")
	}
	want := map[string][]string{
		"order_id": {"0/1:1", "0/1:3"},
		"status":   {`0/1:"NEW"`, `0/1:"PAID"`},
		"dt":       {`0/1:"2024-05-01"`, `0/1:"2024-05-02"`},
	}
	if got := p.rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %q\nwant %q", got, want)
	}
	if n := fake.requests("/schemas/ids/0"); n != 0 {
		t.Fatalf("id 0 reached the registry %d times", n)
	}
}
