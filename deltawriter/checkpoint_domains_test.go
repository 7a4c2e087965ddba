package deltawriter

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// A domain's configuration can be megabytes (a keyed table's remembered deletes): the
// checkpoint stores it once, in the data page, not again as min and max in the page
// header and the footer, where no reader uses it (bounds of a JSON text).
func TestCheckpointDomainConfigurationWithoutBounds(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := minimalSnapshot()
	s.Protocol = deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{deltalog.FeatureDomainMetadata}}
	var b strings.Builder
	for i := range 50_000 {
		fmt.Fprintf(&b, "%d,", i*7919)
	}
	config := b.String()
	s.domains["ingestd.deletes.1.a"] = deltalog.DomainMetadata{Domain: "ingestd.deletes.1.a", Configuration: "a" + config}
	s.domains["ingestd.deletes.2.b"] = deltalog.DomainMetadata{Domain: "ingestd.deletes.2.b", Configuration: "b" + config}
	st := newStore(t)
	if err := writeCheckpoint(ctx, st, s, now); err != nil {
		t.Fatal(err)
	}
	data, err := st.Get(ctx, checkpointPath(s.Version))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			if strings.Join(c.MetaData.PathInSchema, ".") != "domainMetadata.configuration" {
				continue
			}
			if st := c.MetaData.Statistics; len(st.MinValue) > 0 || len(st.MaxValue) > 0 || len(st.Min) > 0 || len(st.Max) > 0 {
				t.Errorf("domainMetadata.configuration has bounds of %d and %d bytes in the footer, want none", max(len(st.MinValue), len(st.Min)), max(len(st.MaxValue), len(st.Max)))
			}
		}
	}
	got, err := readCheckpoint(ctx, st, s.Version, []string{fmt.Sprintf("%020d.checkpoint.parquet", s.Version)})
	if err != nil {
		t.Fatal(err)
	}
	if d := got.domains["ingestd.deletes.2.b"]; d.Configuration != "b"+config {
		t.Errorf("domain read back with a configuration of %d bytes, want %d", len(d.Configuration), len(config)+1)
	}
	if len(data) > 2*(len(config)+1) {
		t.Errorf("checkpoint of %d bytes for two domains of %d bytes, want at most their length (each stored once, snappy)", len(data), len(config)+1)
	}
}
