package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// resolveSchemas notes the batch it passes on as framed with one schema id only when
// every value in it is such a frame; collect then reads the id from the note and makes
// the same items as when it parses every frame itself.
func TestFrameNote(t *testing.T) {
	h := newHarness(t, 1)
	schemas := h.staticSchemas()
	schemas.fail[h.ids[1]] = true
	d := h.deps(slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.Schemas = schemas
	p := NewPipeline(h.config(), d)
	v1 := func(id int64) []byte { return h.encode(id, 0) }
	rec := func(part int32, off int64, v []byte) *kgo.Record {
		return &kgo.Record{Topic: "orders", Partition: part, Offset: off, Value: v}
	}
	tomb := rec(0, 9, nil)
	unknown := append([]byte{0, 0, 0, 0x30, 0x39}, v1(1)[5:]...) // id 12345: not in the registry
	cases := []struct {
		name  string
		recs  []*kgo.Record
		down  bool
		halt  int32 // a halted partition, or -1
		noted bool
	}{
		{"one schema id, tombstones between", []*kgo.Record{rec(0, 0, v1(0)), tomb, rec(1, 0, v1(1)), rec(0, 1, v1(2))}, false, -1, true},
		{"a bad frame", []*kgo.Record{rec(0, 0, v1(0)), rec(0, 1, []byte{1, 2})}, false, -1, false},
		{"a bad frame first", []*kgo.Record{rec(0, 0, []byte{7, 0, 0, 0, 1, 2}), rec(0, 1, v1(0))}, false, -1, false},
		{"two schema ids", []*kgo.Record{rec(0, 0, v1(0)), rec(0, 1, h.encode(1, 1))}, false, -1, false},
		{"an id the registry does not know, after a known one", []*kgo.Record{rec(0, 0, v1(0)), rec(0, 1, unknown)}, false, -1, false},
		{"only an id the registry does not know", []*kgo.Record{rec(0, 0, unknown), rec(1, 0, unknown)}, false, -1, true},
		{"a halted partition's records are not read", []*kgo.Record{rec(0, 0, v1(0)), rec(1, 0, v1(1))}, false, 1, false},
		{"records waiting for the registry leave the rest noted", []*kgo.Record{rec(0, 0, v1(0)), rec(1, 0, h.encode(1, 1)), rec(1, 1, v1(1)), rec(0, 1, v1(2))}, true, -1, true},
		{"a schema id again after another", []*kgo.Record{rec(0, 0, v1(0)), rec(0, 1, unknown), rec(0, 2, v1(1))}, false, -1, false},
		{"only tombstones", []*kgo.Record{tomb}, false, -1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schemas.setDown(c.down)
			clear(p.halted)
			if c.halt >= 0 {
				p.halted[topicPartition{"orders", c.halt}] = HaltedPartition{}
			}
			ready, _, note, _ := p.resolveSchemas(context.Background(), c.recs)
			if note.uniform != c.noted {
				t.Fatalf("noted %v, want %v (note %+v)", note.uniform, c.noted, note)
			}
			tbl := tableState{version: -1, txns: map[string]int64{}}
			withNote, err := p.fl.collect(context.Background(), tbl, ready, note)
			if err != nil {
				t.Fatal(err)
			}
			kept := append([]item(nil), withNote...)
			p.fl.release(withNote)
			withNote = kept
			parsed, err := p.fl.collect(context.Background(), tbl, ready, frameNote{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(withNote, parsed) {
				t.Fatalf("collect with the note made\n%s\nwithout it\n%s", dump(withNote), dump(parsed))
			}
			p.fl.release(parsed)
		})
	}
	// collect takes the id from the note, not from the values (here a note made up with
	// another id: never so in production).
	recs := []*kgo.Record{rec(0, 0, v1(0)), rec(0, 1, v1(1))}
	schemas.setDown(false)
	clear(p.halted)
	ready, _, note, _ := p.resolveSchemas(context.Background(), recs)
	if !note.uniform || note.id != h.ids[0] {
		t.Fatalf("note %+v, want schema id %d for every value", note, h.ids[0])
	}
	note.id = h.ids[1]
	items, err := p.fl.collect(context.Background(), tableState{version: -1, txns: map[string]int64{}}, ready, note)
	if err != nil {
		t.Fatal(err)
	}
	if items[0].ws == nil || items[0].ws.ID != h.ids[1] || len(items[0].payload) != len(ready[0].Value)-5 {
		t.Fatalf("collect did not read the note: %s", dump(items))
	}
	p.fl.release(items)
}

func dump(items []item) string {
	var s string
	for _, it := range items {
		s += fmt.Sprintf("  offset %d route %d ws %v payload %d bytes fail %v\n", it.rec.Offset, it.route, it.ws != nil, len(it.payload), it.fail)
	}
	return s
}
