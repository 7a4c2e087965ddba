package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo runs the demo end to end on kfake/srfake and checks its report value by value.
func TestDemo(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	rep, err := runDemo(context.Background(), log, dir, 600, 150)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tableReport{}
	for _, tr := range rep.Tables {
		byName[tr.Pipeline] = tr
	}
	if got := byName["orders-bronze"]; got.Rows != 750 || len(got.Columns) != 6 || got.Columns[5] != "channel string" {
		t.Errorf("bronze: %d rows, columns %v; want 750 rows with channel last", got.Rows, got.Columns)
	}
	if got := byName["orders-silver"]; got.Rows != 600 || len(got.Columns) != 5 {
		t.Errorf("silver: %d rows, columns %v; want the 600 v1 rows and 5 columns", got.Rows, got.Columns)
	}
	if len(rep.DeadLetters) != 1 || rep.DeadLetters["schema_mismatch field=channel"] != 150 {
		t.Errorf("dead letters %v, want 150 schema_mismatch field=channel", rep.DeadLetters)
	}
	if len(rep.Halted) != 3 {
		t.Fatalf("gold halted on %d partitions, want 3", len(rep.Halted))
	}
	var beforeHalt int64
	for _, h := range rep.Halted {
		beforeHalt += h.Offset
		// The fix names the table (by its pipeline file); a table the flush creates is not
		// "being created" once the user reads the message.
		fix := "ingestd table alter --config " + filepath.Join(dir, "configs", "orders-gold.yaml") + " --add-column 'channel STRING'"
		if h.Reason != "schema_mismatch" || h.Field != "channel" || !strings.Contains(h.Message, fix) || strings.Contains(h.Message, "being created") {
			t.Errorf("halt %+v lacks reason, field or the fix %q", h, fix)
		}
	}
	// v1 records come first in every partition, so the halt offsets sum to the v1 count.
	if gold := byName["orders-gold"]; gold.Rows != beforeHalt || beforeHalt != 600 {
		t.Errorf("gold: %d rows, halt offsets sum to %d; want both 600", gold.Rows, beforeHalt)
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{"orders-bronze", "750 rows", "150 records  reason=schema_mismatch field=channel", "orders[0] at offset"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCLIUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "ingestd ") {
		t.Errorf("version: code %d out %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"bogus"}, &out, &errb); code != exitUsage {
		t.Errorf("unknown command exit %d, want %d", code, exitUsage)
	}
	for _, cmd := range []string{"run", "validate", "demo"} {
		errb.Reset()
		if code := run([]string{cmd, "--help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "Usage: ingestd "+cmd) {
			t.Errorf("%s --help: code %d, output %q", cmd, code, errb.String())
		}
	}
	errb.Reset()
	if code := run([]string{"validate", "--config", "../../configs"}, &out, &errb); code != 0 {
		t.Errorf("validate configs/: code %d: %s", code, errb.String())
	}
}

func TestDemoRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runDemo(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), dir, 10, 0)
	if err == nil || !strings.Contains(err.Error(), "refusing to replace") {
		t.Fatalf("err = %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data.txt")); err != nil || string(b) != "keep me" {
		t.Fatalf("the user's file is gone: %v", err)
	}
}
