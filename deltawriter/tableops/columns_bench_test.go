package tableops

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// BenchmarkRenameColumn: one --rename-column on a column-mapped table of 50 columns and
// 10,000 data files (one op = read the latest snapshot, validate, commit RENAME COLUMN).
// No data file is opened, so the cost is the log, not the data: compare the two sizes.
func BenchmarkRenameColumn(b *testing.B) {
	for _, files := range []int{100, 10000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			ctx := context.Background()
			st, err := storage.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			tbl, err := deltawriter.Open(ctx, st)
			if err != nil {
				b.Fatal(err)
			}
			var cols []string
			for i := range 50 {
				cols = append(cols, fmt.Sprintf(`{"name":"c%d","type":"string","nullable":true,"metadata":{}}`, i))
			}
			s, err := deltalog.ParseSchema(`{"type":"struct","fields":[` + strings.Join(cols, ",") + `]}`)
			if err != nil {
				b.Fatal(err)
			}
			create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "t", Schema: s,
				Properties: map[string]string{deltalog.PropColumnMappingMode: "name"}})
			if err != nil {
				b.Fatal(err)
			}
			c := deltawriter.Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata, Operation: "CREATE TABLE"}
			for i := range files {
				c.Adds = append(c.Adds, deltalog.Add{Path: fmt.Sprintf("part-%05d.parquet", i), Size: 1 << 20, DataChange: true})
			}
			if _, err := tbl.Commit(ctx, c); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				from, to := "c0", "c0_renamed"
				if i%2 == 1 {
					from, to = to, from
				}
				if _, err := Apply(ctx, tbl, Alter{RenameColumns: []RenameColumn{{Path: []string{from}, To: to}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
