package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ingestd runs the CLI with args and returns the exit code, stdout and stderr.
func ingestd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestHelpListsFlagsWithTwoDashes: every subcommand's --help lists each of its flags as
// --name (as the README and the messages spell them), never -name; both spellings parse.
func TestHelpListsFlagsWithTwoDashes(t *testing.T) {
	tableFlags := []string{"table", "config", "n", "json", "add-column", "widen", "set-property", "enable-feature"}
	tableFlags = append(tableFlags, "enable-column-mapping", "rename-column", "drop-column", "move-column")
	for _, c := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"run"}, []string{"config", "listen", "log-format", "log-level"}},
		{[]string{"validate"}, []string{"config"}},
		{[]string{"demo"}, []string{"out", "v1", "v2", "v"}},
		{[]string{"table"}, tableFlags},
		// a subcommand's --help lists its own flags (and those of every subcommand)
		{[]string{"table", "schema"}, []string{"table", "config"}},
		{[]string{"table", "history"}, []string{"table", "config", "n", "json"}},
		{[]string{"table", "describe"}, []string{"table", "config", "json"}},
		{[]string{"table", "alter"}, append([]string{"table", "config"}, tableFlags[4:]...)},
		{[]string{"dlq"}, []string{"config", "samples", "json"}},
		{[]string{"dlq", "inspect"}, []string{"config", "samples", "json"}},
		{[]string{"replay"}, []string{"config", "dry-run", "max-replays", "reason", "from", "until", "json", "log-format", "log-level"}},
	} {
		for _, h := range []string{"--help", "-h"} {
			code, stdout, stderr := ingestd(t, append(append([]string(nil), c.args...), h)...)
			help := stdout + stderr
			if code != exitOK {
				t.Errorf("%v %s: exit %d, want 0", c.args, h, code)
			}
			for _, f := range c.flags {
				if !regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(f) + `\b`).MatchString(help) {
					t.Errorf("%v %s does not list --%s:\n%s", c.args, h, f, help)
				}
			}
			if m := regexp.MustCompile(`(?m)^\s+-[a-z][a-z0-9-]*\b.*$`).FindAllString(help, -1); len(m) > 0 {
				t.Errorf("%v %s lists flags with one dash: %q", c.args, h, m)
			}
		}
	}
	// Both spellings still parse, and flag errors name the flag with two dashes.
	for _, args := range [][]string{{"validate", "-config", "configs-missing"}, {"validate", "--config", "configs-missing"}} {
		if code, _, stderr := ingestd(t, args...); code != exitUsage || strings.Contains(stderr, "flag provided but not defined") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
	code, _, stderr := ingestd(t, "validate", "--nope")
	if code != exitUsage || !strings.HasPrefix(stderr, "flag provided but not defined: --nope\n") {
		t.Errorf("unknown flag: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = ingestd(t, "table", "history", "/x", "-n", "many")
	if code != exitUsage || !strings.HasPrefix(stderr, `invalid value "many" for flag --n: parse error`+"\n") {
		t.Errorf("bad value: exit %d, stderr %q", code, stderr)
	}
}

// newTestTable writes a minimal Delta table (protocol and metaData, no data) and returns
// its directory.
func newTestTable(t *testing.T, dir string) string {
	t.Helper()
	log := filepath.Join(dir, "_delta_log")
	if err := os.MkdirAll(log, 0o755); err != nil {
		t.Fatal(err)
	}
	commit := `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"6f2b0b1c-5a43-4f0e-9d8e-0c1d2e3f4a5b","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"order_id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}},{\"name\":\"customer\",\"type\":\"string\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{},"createdTime":1764547200000}}
{"commitInfo":{"timestamp":1764547200000,"operation":"CREATE TABLE","operationParameters":{}}}
`
	if err := os.WriteFile(filepath.Join(log, "00000000000000000000.json"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pipelineFile writes a pipeline file whose table is uri.
func pipelineFile(t *testing.T, dir, name, uri string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	body := `name: orders-silver
kafka: {brokers: ["127.0.0.1:1"], topics: [orders], group: g}
schema_registry: {url: "http://127.0.0.1:1"}
table: {uri: "` + uri + `"}
schema: {policy: dead_letter}
dead_letter: {topic: orders.dlq}
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTableURIAsArgument: every table subcommand takes the table as its first argument
// (an absolute or relative path or a file:// URI), as well as --table and --config; flags
// may follow it. Both given and naming different tables, or none given, is an error.
func TestTableURIAsArgument(t *testing.T) {
	root := t.TempDir()
	dir := newTestTable(t, filepath.Join(root, "orders"))
	other := newTestTable(t, filepath.Join(root, "other"))
	cfg := pipelineFile(t, root, "orders.yaml", "file://"+dir)
	const schema = "root\n |-- order_id: long (nullable = true)\n |-- customer: string (nullable = true)\n"
	t.Chdir(root)
	for _, args := range [][]string{
		{"table", "schema", dir},
		{"table", "schema", "file://" + dir},
		{"table", "schema", "orders"},    // relative to the working directory
		{"table", "schema", "./orders/"}, // spelled another way
		{"table", "schema", "--table", dir},
		{"table", "schema", "--config", cfg},
		{"table", "schema", dir, "--table", "file://" + dir + "/"}, // both, same table
		{"table", "schema", dir, "--config", cfg},
	} {
		code, stdout, stderr := ingestd(t, args...)
		if code != exitOK || stdout != schema || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and the schema", args, code, stdout, stderr)
		}
	}
	code, stdout, stderr := ingestd(t, "table", "history", dir, "-n", "1", "--json")
	if code != exitOK || !strings.HasPrefix(stdout, `[{"version":0,`) {
		t.Errorf("history with flags after the table: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = ingestd(t, "table", "describe", dir, "--json")
	if code != exitOK || !strings.Contains(stdout, `"version":0`) {
		t.Errorf("describe: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = ingestd(t, "table", "alter", dir, "--set-property", "delta.appendOnly=false")
	if code != exitOK || stdout != "version 1: SET TBLPROPERTIES map[delta.appendOnly:false]\n" {
		t.Errorf("alter: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"table", "schema", dir, "--table", other},
			"ingestd table: the argument " + dir + " and --table " + other + " name different tables; give one\n"},
		{[]string{"table", "schema", other, "--config", cfg},
			"ingestd table: the argument " + other + " and --config " + cfg + " (table file://" + dir + ") name different tables; give one\n"},
		{[]string{"table", "schema", "--table", other, "--config", cfg},
			"ingestd table: --table " + other + " and --config " + cfg + " (table file://" + dir + ") name different tables; give one\n"},
		{[]string{"table", "schema"},
			"ingestd table: name the table: ingestd table schema URI (or --table URI, or --config PIPELINE.yaml)\n"},
		{[]string{"table", "schema", dir, other}, "unexpected arguments: [" + other + "]\n"},
	} {
		code, stdout, stderr := ingestd(t, c.args...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestPipelineFileAsArgument: dlq inspect and replay take the pipeline file as their first
// argument, as well as --config; both naming different files, or none, is an error.
func TestPipelineFileAsArgument(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "missing.yaml")
	other := filepath.Join(root, "other.yaml")
	for _, cmd := range [][]string{{"replay"}, {"dlq", "inspect"}} {
		name := strings.Join(cmd, " ")
		for _, args := range [][]string{{missing}, {"--config", missing}, {missing, "--config", missing}, {missing, "--json"}} {
			// The file is read (and found missing): the argument named it.
			code, stdout, stderr := ingestd(t, append(append([]string(nil), cmd...), args...)...)
			want := "read config " + missing + ": stat " + missing + ": no such file or directory\n"
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, want) {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", name, args, code, stdout, stderr, want)
			}
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{missing, "--config", other}, "ingestd " + name + ": the argument " + missing + " and --config " + other + " name different pipeline files; give one\n"},
			{nil, "ingestd " + name + ": name the pipeline file: ingestd " + name + " PIPELINE.yaml (or --config PIPELINE.yaml)\n"},
			{[]string{missing, other}, "unexpected arguments: [" + other + "]\n"},
		} {
			code, stdout, stderr := ingestd(t, append(append([]string(nil), cmd...), c.args...)...)
			if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, c.want) {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", name, c.args, code, stdout, stderr, c.want)
			}
		}
	}
}

// TestTableAlterColumnMapping: rename is refused without column mapping, naming the
// command that enables it; after --enable-column-mapping name, rename, drop and move are
// one commit each and the schema shows the kept physical names.
func TestTableAlterColumnMapping(t *testing.T) {
	dir := newTestTable(t, filepath.Join(t.TempDir(), "orders"))
	code, stdout, stderr := ingestd(t, "table", "alter", dir, "--rename-column", "customer TO client")
	if want := "ingestd table alter: rename column needs column mapping, which this table does not have (Parquet columns are found by name without it); " +
		"run `ingestd table alter --table URI --enable-column-mapping name` first (a protocol upgrade to reader 2 / writer 5 that readers older than Delta 1.2 cannot follow)\n"; code != exitFailure || stdout != "" || stderr != want {
		t.Errorf("rename without column mapping: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := ingestd(t, "table", "alter", dir, "--move-column", "customer LAST"); code != exitUsage ||
		stderr != "ingestd table alter: --move-column: parse move \"customer LAST\": write 'column FIRST' or 'column AFTER other_column'\n" {
		t.Errorf("bad --move-column: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr = ingestd(t, "table", "alter", dir, "--enable-column-mapping", "name", "--add-column", "tier STRING")
	if code != exitOK || stdout != "version 1: ADD COLUMNS tier string\nversion 2: SET TBLPROPERTIES column mapping name (protocol 2/5, maxColumnId 3)\n" {
		t.Errorf("enable: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = ingestd(t, "table", "alter", dir, "--rename-column", "customer TO client", "--drop-column", "tier", "--move-column", "client FIRST")
	if code != exitOK || stdout != "version 3: RENAME COLUMN customer TO client\nversion 4: DROP COLUMNS tier\nversion 5: CHANGE COLUMN client FIRST\n" {
		t.Errorf("rename, drop, move: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = ingestd(t, "table", "schema", dir)
	if want := "root\n |-- client: string (nullable = true) [id=2 physical=customer]\n |-- order_id: long (nullable = true) [id=1 physical=order_id]\n"; code != exitOK || stdout != want {
		t.Errorf("schema: exit %d\n got %q\nwant %q", code, stdout, want)
	}
}

// TestTableFlagOfAnotherCommand: a flag of one table subcommand given to another is
// refused (exit 2) before the table is touched, naming the subcommands it belongs to:
// `table alter --dry-run` used to commit the change, `table vacuum --where` to vacuum
// the whole table. A negative --retain is refused too (it used to mean the default).
func TestTableFlagOfAnotherCommand(t *testing.T) {
	dir := newTestTable(t, filepath.Join(t.TempDir(), "orders"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"table", "alter", dir, "--dry-run", "--add-column", "channel STRING"},
			"ingestd table alter: --dry-run does not apply to alter (it is a flag of: ingestd table optimize, ingestd table vacuum); remove it\n"},
		{[]string{"table", "vacuum", dir, "--where", "dt = '2026-11-01'", "--dry-run"},
			"ingestd table vacuum: --where does not apply to vacuum (it is a flag of: ingestd table optimize); remove it\n"},
		{[]string{"table", "optimize", dir, "--retain", "1h"},
			"ingestd table optimize: --retain does not apply to optimize (it is a flag of: ingestd table vacuum); remove it\n"},
		{[]string{"table", "describe", dir, "--add-constraint", "p CHECK (order_id > 0)"},
			"ingestd table describe: --add-constraint does not apply to describe (it is a flag of: ingestd table alter); remove it\n"},
		{[]string{"table", "vacuum", dir, "--now", "2099-01-01T00:00:00Z"},
			"ingestd table vacuum: --now 2099-01-01T00:00:00Z is in the future: files removed, or written by flushes in flight, less than --retain before it (including now) would be deleted; add --dry-run to see what it would delete, or --force if no writer is running and no reader needs older versions\n"},
		{[]string{"table", "vacuum", dir, "--retain", "-1h", "--force"},
			"ingestd table vacuum: --retain -1h0m0s is negative: write a duration such as 168h (or leave it out for the table's delta.deletedFileRetentionDuration)\n"},
	} {
		code, stdout, stderr := ingestd(t, c.args...)
		if code != exitUsage || stdout != "" || stderr != c.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
	code, stdout, stderr := ingestd(t, "table", "history", dir, "--json", "-n", "0")
	if code != exitOK || strings.Count(stdout, `"version":`) != 1 {
		t.Errorf("nothing may have been committed: history exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"table", "vacuum", dir, "--json", "--dry-run"}, `{"dryRun":true,"retentionNanos":604800000000000,`},
		{[]string{"table", "vacuum", dir, "--json", "--dry-run", "--now", "2099-01-01T00:00:00Z"}, `{"dryRun":true,"retentionNanos":604800000000000,"deleteBefore":"2098-12-25T00:00:00Z"`},
		// camelCase keys with units, like vacuum's (they were Go field names, Duration unitless)
		{[]string{"table", "optimize", dir, "--json", "--dry-run"}, `{"readVersion":0,"version":-1,"partitions":null,"dropped":null,"filesRemoved":0,"filesAdded":0,"bytesRemoved":0,"bytesAdded":0,"rowsWritten":0,"deletionVectorsRemoved":0,"durationNanos":`},
	} {
		if code, stdout, stderr := ingestd(t, c.args...); code != exitOK || !strings.HasPrefix(stdout, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and JSON starting %s", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestTableConstraintNames: --drop-constraint takes the name as --add-constraint does,
// backticked when it holds dots or backticks; an empty or unquoted dotted name is refused
// before anything is committed.
func TestTableConstraintNames(t *testing.T) {
	dir := newTestTable(t, filepath.Join(t.TempDir(), "orders"))
	for _, c := range []struct {
		args       []string
		code       int
		out, error string
	}{
		{[]string{"--add-constraint", "`Ops.Id``Max` CHECK (order_id < 1000000)"}, exitOK, "version 1: ADD CONSTRAINT ops.id`max CHECK (order_id < 1000000)\n", ""},
		{[]string{"--drop-constraint", "`OPS.ID``MAX`"}, exitOK, "version 2: DROP CONSTRAINT ops.id`max CHECK (order_id < 1000000)\n", ""},
		{[]string{"--add-constraint", "`` CHECK (order_id > 0)"}, exitUsage, "",
			"ingestd table alter: parse constraint \"`` CHECK (order_id > 0)\": constraint name `` is empty\n"},
		{[]string{"--add-constraint", "ops.pos CHECK (order_id > 0)"}, exitUsage, "",
			"ingestd table alter: parse constraint \"ops.pos CHECK (order_id > 0)\": constraint name ops.pos: an unquoted name has only letters, digits and underscores; quote it in backticks: `ops.pos`\n"},
		{[]string{"--drop-constraint", ""}, exitUsage, "", "ingestd table alter: --drop-constraint: constraint name is empty\n"},
	} {
		code, stdout, stderr := ingestd(t, append([]string{"table", "alter", dir}, c.args...)...)
		if code != c.code || stdout != c.out || stderr != c.error {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, %q, %q", c.args, code, stdout, stderr, c.code, c.out, c.error)
		}
	}
}
