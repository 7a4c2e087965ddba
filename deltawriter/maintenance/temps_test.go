package maintenance

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
)

// TestVacuumDeletesStaleTemps: ".tmp-" files that killed writers left in the table's
// directories (hidden from every listing) are deleted once older than the retention and a
// day, and counted like any other file; younger ones, which may be writes in flight, stay,
// even with a zero retention, and keep their directory (the dry run does not list it). A
// directory that held only a stale one goes with it; _delta_log's are log cleanup's.
func TestVacuumDeletesStaleTemps(t *testing.T) {
	ctx := context.Background()
	root, local := oneLiveFileTable(t)
	day := 24 * time.Hour
	touch(t, root, ".tmp-100", 8*day)             // older than the 7-day retention: left by a killed flush
	touch(t, root, "p=a/.tmp-200", 30*day)        // the only entry of its directory
	touch(t, root, "p=b/.tmp-300", 3*day)         // within the retention
	touch(t, root, ".tmp-400", 2*time.Hour)       // in flight, maybe
	touch(t, root, "_delta_log/.tmp-500", 30*day) // the log's: not VACUUM's
	tbl, err := deltawriter.Open(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := vacuumPaths(dry.Files); !slices.Equal(got, []string{".tmp-100", "p=a/", "p=a/.tmp-200"}) || dry.Bytes != 20 {
		t.Fatalf("dry run: %v, %d bytes; want .tmp-100, p=a/ and p=a/.tmp-200 (p=b/ holds a younger one), 20 bytes", got, dry.Bytes)
	}
	res, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := vacuumPaths(res.Files); !slices.Equal(got, []string{".tmp-100", "p=a/", "p=a/.tmp-200"}) || res.Deleted != 3 {
		t.Fatalf("vacuum deleted %d: %v; want 3: .tmp-100, p=a/.tmp-200 and p=a/ (p=b/ still holds .tmp-300)", res.Deleted, got)
	}
	if got := dirNames(t, root); !slices.Equal(got, []string{".tmp-400", "_delta_log", "live.parquet", "p=b"}) {
		t.Errorf("after vacuum the root holds %v", got)
	}
	if got := dirNames(t, filepath.Join(root, "p=b")); !slices.Equal(got, []string{".tmp-300"}) {
		t.Errorf("after vacuum p=b holds %v, want .tmp-300", got)
	}
	// A zero retention still keeps a temporary file younger than a day.
	touch(t, root, "p=b/.tmp-600", 25*time.Hour)
	res, err = Vacuum(ctx, tbl, VacuumOptions{Retain: 0, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := vacuumPaths(res.Files); !slices.Equal(got, []string{"p=b/", "p=b/.tmp-300", "p=b/.tmp-600"}) {
		t.Errorf("vacuum with retention 0 deleted %v; want p=b/ and its two temporary files older than a day", got)
	}
	if got := dirNames(t, root); !slices.Equal(got, []string{".tmp-400", "_delta_log", "live.parquet"}) {
		t.Errorf("after the second vacuum the root holds %v", got)
	}
	if _, err := os.Stat(filepath.Join(root, "_delta_log", ".tmp-500")); err != nil {
		t.Errorf("VACUUM touched _delta_log: %v", err)
	}
}

// TestCleanupLogDeletesStaleTemps: a commit, checkpoint or sidecar whose writer was
// killed mid-write leaves a ".tmp-" file in _delta_log or _delta_log/_sidecars; log
// cleanup deletes those older than the log retention (30 days) and keeps younger ones.
func TestCleanupLogDeletesStaleTemps(t *testing.T) {
	ctx := context.Background()
	root, tbl := logTable(t, "", 7)
	day := 24 * time.Hour
	touch(t, root, "_delta_log/.tmp-1", 40*day)
	touch(t, root, "_delta_log/.tmp-2", 29*day)
	touch(t, root, "_delta_log/_sidecars/.tmp-3", 31*day)
	touch(t, root, "_delta_log/_sidecars/.tmp-4", time.Hour)
	res, err := CleanupLog(ctx, tbl, LogCleanupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var temps []string
	for _, p := range res.Deleted {
		if filepath.Base(p)[0] == '.' {
			temps = append(temps, p)
		}
	}
	if want := []string{"_delta_log/.tmp-1", "_delta_log/_sidecars/.tmp-3"}; !slices.Equal(temps, want) {
		t.Errorf("temporary files deleted: %v, want %v", temps, want)
	}
	if !slices.IsSorted(res.Deleted) || len(res.Deleted) != 8 {
		t.Errorf("deleted %v: want 8 paths (5 commits, a checksum, 2 temporary files), ascending", res.Deleted)
	}
	if got := dirNames(t, filepath.Join(root, "_delta_log", "_sidecars")); !slices.Equal(got, []string{".tmp-4"}) {
		t.Errorf("_sidecars after cleanup: %v, want .tmp-4", got)
	}
	if !slices.Contains(logNames(t, root), ".tmp-2") {
		t.Errorf("_delta_log/.tmp-2 (29 days old) was deleted")
	}
}
