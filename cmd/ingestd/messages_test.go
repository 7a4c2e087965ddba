package main

import (
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestTableDryRunMessages: an OPTIMIZE dry run with nothing to compact says why (the
// thresholds), and a VACUUM dry run with a retention shorter than the table's needs no
// --force (it deletes nothing) but says the real run would.
func TestTableDryRunMessages(t *testing.T) {
	dir := newTestTable(t, filepath.Join(t.TempDir(), "orders"))
	code, stdout, stderr := ingestd(t, "table", "optimize", dir, "--dry-run")
	if want := "dry run at version 0: nothing to compact: no partition has 10 or more files below 268435456 bytes (--min-files, --target-file-size)\n"; code != exitOK || stdout != want {
		t.Errorf("optimize --dry-run: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	code, stdout, stderr = ingestd(t, "table", "vacuum", dir, "--dry-run", "--retain", "0s")
	if want := "note: --retain 0s is shorter than the table's delta.deletedFileRetentionDuration (168h0m0s): the real run needs --force"; code != exitOK || !strings.Contains(stdout, "vacuum: would delete 0 files") || !strings.Contains(stdout, want) {
		t.Errorf("vacuum --dry-run --retain 0s: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, stdout, stderr, want)
	}
	if code, _, stderr := ingestd(t, "table", "vacuum", dir, "--retain", "0s"); code != exitUsage || !strings.Contains(stderr, "add --force") {
		t.Errorf("vacuum --retain 0s without --dry-run: exit %d, stderr %q; want the refusal", code, stderr)
	}
}

// TestTableCommandHelp: `table SUB --help` shows SUB's entry and flags only, and no
// flag default reads "-1ns".
func TestTableCommandHelp(t *testing.T) {
	code, _, stderr := ingestd(t, "table", "describe", "--help")
	if code != exitOK || !strings.HasPrefix(stderr, "Usage: ingestd table describe URI [flags]\n") ||
		!strings.Contains(stderr, "  describe   protocol, features") || strings.Contains(stderr, "alter") ||
		strings.Contains(stderr, "--retain") || !strings.Contains(stderr, "--json") {
		t.Errorf("table describe --help: exit %d\n%s", code, stderr)
	}
	code, _, stderr = ingestd(t, "table", "vacuum", "--help")
	if code != exitOK || !strings.Contains(stderr, "--retain long") || !strings.Contains(stderr, "--force") ||
		strings.Contains(stderr, "-1ns") || strings.Contains(stderr, "--add-column") {
		t.Errorf("table vacuum --help: exit %d\n%s", code, stderr)
	}
	if _, _, stderr := ingestd(t, "table", "--help"); strings.Contains(stderr, "-1ns") || !strings.Contains(stderr, "alter") {
		t.Errorf("table --help:\n%s", stderr)
	}
}

// TestVersionText: `ingestd version` comes from the module's build info when no version
// was set at build time.
func TestVersionText(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/ingestd/ingestd", Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-29T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		set  string
		bi   *debug.BuildInfo
		want string
	}{
		{"", bi, "ingestd devel (commit 0123456789ab, 2026-11-29T10:00:00Z, modified, " + runtime.Version() + ")"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "ingestd v1.4.0 (" + runtime.Version() + ")"},
		{"1.5.0-rc1", bi, "ingestd 1.5.0-rc1 (commit 0123456789ab, 2026-11-29T10:00:00Z, modified, " + runtime.Version() + ")"},
		{"", nil, "ingestd devel (" + runtime.Version() + ")"},
	} {
		if got := versionText(c.set, c.bi); got != c.want {
			t.Errorf("versionText(%q, …) = %q, want %q", c.set, got, c.want)
		}
	}
	if code, stdout, _ := ingestd(t, "version"); code != exitOK || strings.Contains(stdout, "dev ") || !strings.HasPrefix(stdout, "ingestd ") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
}
