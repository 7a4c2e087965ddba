package deltawriter

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// CopyRows writes copies of the rows asked, in file order, with the columns edit sets;
// rows its deletion vector deletes, rows past the end and unknown columns are refused.
func TestCopyRows(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, adds := dvTable(t, st, nil, seq(0, 10))
	r, ad, err := DeleteRows(ctx, st, []RowDeletes{{Add: adds[0], Rows: []uint64{0, 1}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: 1, Removes: r, Adds: ad}); err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	var asked []uint64
	na, err := snap.CopyRows(ctx, st, ad[0], []uint64{5, 3}, func(row uint64) map[string]any {
		asked = append(asked, row)
		return map[string]any{"a": -int64(row)}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []uint64{3, 5}) || na.Path == ad[0].Path || na.DeletionVector != nil || !na.DataChange ||
		na.Stats != `{"numRecords":2,"minValues":{"a":-5},"maxValues":{"a":-3},"nullCount":{"a":0}}` {
		t.Fatalf("rows edited %v, add %s", asked, jsonOf(t, na))
	}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{na}}); err != nil {
		t.Fatal(err)
	}
	if got := tableValues(t, tbl); !slices.Equal(got, []int64{-5, -3, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("values %v", got)
	}
	none := func(uint64) map[string]any { return nil }
	for _, c := range []struct {
		rows []uint64
		edit func(uint64) map[string]any
		want string
	}{
		{[]uint64{1}, none, "a row to copy is deleted by the file's deletion vector"},
		{[]uint64{10}, none, "row 10 is beyond the file's 10 rows"},
		{[]uint64{4}, func(uint64) map[string]any { return map[string]any{"nosuch": true} }, "set column nosuch of row 4: the table has no such column"},
	} {
		if _, err := snap.CopyRows(ctx, st, ad[0], c.rows, c.edit); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rows %v: %v, want %q", c.rows, err, c.want)
		}
	}
}
