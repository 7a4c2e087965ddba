package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/deltawriter/tableops"
	"github.com/ingestd/ingestd/ingest"
	"github.com/ingestd/ingestd/ingest/config"
)

const tableSynopsis = `table <command> URI [flags]
       ingestd table <command> --table URI [flags]
       ingestd table <command> --config PIPELINE.yaml [flags]`

const tableSummary = `URI is the table: an absolute or relative path, or file:///abs/path; --config uses a
pipeline file's table (with kafka.topic_pattern, the table of --topic). Given more than
one way, they must name the same table.

Commands:
  schema     the schema as a tree (types, nullability, column mapping ids)
  history    commits, newest first (version, time, operation, parameters, metrics)
  describe   protocol, features, properties, files, size, txn versions per app id
  vacuum     delete files no version inside the retention references (removed files,
             leftovers of crashed flushes), like Delta's VACUUM:
               --retain 168h   (default: delta.deletedFileRetentionDuration, 7 days)
               --dry-run       list them (path relative to the table, bytes)
               --force         allow a --retain shorter than the table's setting
  alter      change the table, one Delta commit per change:
               --add-column 'path TYPE'   add a nullable column (nested: 'a.b TYPE')
               --widen 'path TYPE'        widen a type (Delta type widening only)
               --set-property k=v         set a table property
               --enable-feature F         typeWidening or timestampNtz (irreversible)
               --add-constraint 'n CHECK (e)'  add a CHECK constraint (existing rows checked)
               --drop-constraint n        drop a CHECK constraint
               --set-not-null col         make a column NOT NULL (existing rows checked)
               --drop-not-null col        make a column nullable
               --enable-column-mapping name   give columns ids and physical names (irreversible)
               --rename-column 'a TO b'   rename (nested: 's.a TO b'); needs column mapping
               --drop-column path         drop a column (repeatable); needs column mapping
               --move-column 'a AFTER b'  reorder ('a FIRST'); no data is rewritten
  reset-offsets  set where the pipeline of --config reads a topic from (its txn
             versions; the fix of a partition halted txn_beyond_log_end); stop the
             pipeline first, then restart it:
               --topic T                  the source topic (required)
               --to-earliest              from the start of each partition
               --to-offset N              from offset N
               --partition P              only this partition (repeatable; default:
                                          every partition the table has a txn for)
               --force                    skip the checks on the cluster: the
                                          pipeline's consumer group has no member,
                                          the topic and its partitions exist
  optimize   compact small files per partition (OPTIMIZE, dataChange false):
               --target-file-size 256MiB  size new files approach; larger files stay
               --min-files 10             small files a partition needs to be compacted
               --where "dt >= '2026-11-01'"  partition predicate (partition columns only)
               --max-rewrite-rate 64MiB   bytes read per second (default unthrottled)
               --dry-run                  show the plan, write nothing

Works on any Delta table, not only ingestd's. A running pipeline picks the change up at
its next commit, without a restart.`

// checkFlagsApply refuses a flag given to a table subcommand it does not belong to
// (`table alter --dry-run` would otherwise commit, `table vacuum --where` would
// vacuum everything): a flag whose usage starts "cmd, cmd: " belongs to those
// subcommands; one without such a prefix (--table, --config) to all. It returns
// exitOK, or exitUsage after printing which subcommands take the flag.
func checkFlagsApply(fs *flag.FlagSet, sub string, stderr io.Writer) int {
	code := exitOK
	fs.Visit(func(f *flag.Flag) {
		if code != exitOK {
			return
		}
		prefix, _, ok := strings.Cut(f.Usage, ": ")
		if !ok || strings.ContainsAny(prefix, "`(") {
			return
		}
		subs := strings.Split(prefix, ", ")
		if slices.Contains(subs, sub) {
			return
		}
		fmt.Fprintf(stderr, "ingestd table %s: --%s does not apply to %s (it is a flag of: ingestd table %s); remove it\n", sub, f.Name, sub, strings.Join(subs, ", ingestd table "))
		code = exitUsage
	})
	return code
}

// tableCommandUsage is `ingestd table SUB --help`: SUB's synopsis, its entry of
// tableSummary and only the flags that apply to it (checkFlagsApply's rule).
func tableCommandUsage(w io.Writer, fs *flag.FlagSet, sub string) {
	syn := strings.ReplaceAll(tableSynopsis, "<command>", sub)
	var entry []string
	for _, line := range strings.Split(tableSummary, "\n") {
		if strings.HasPrefix(line, "  "+sub+" ") || len(entry) > 0 && strings.HasPrefix(line, "   ") {
			entry = append(entry, line)
		} else if len(entry) > 0 {
			break
		}
	}
	fmt.Fprintf(w, "Usage: ingestd %s\n\n%s\n\nFlags:\n", syn, strings.Join(entry, "\n"))
	sel := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		prefix, _, ok := strings.Cut(f.Usage, ": ")
		if !ok || strings.ContainsAny(prefix, "`(") || slices.Contains(strings.Split(prefix, ", "), sub) {
			sel.Var(f.Value, f.Name, f.Usage)
			sel.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	printFlags(w, sel)
}

// retainFlag is --retain: a duration, -1 until given (the table's
// delta.deletedFileRetentionDuration). It prints as "" when unset, so --help shows no
// "(default -1ns)".
type retainFlag time.Duration

func (r *retainFlag) String() string {
	if r == nil || *r == -1 {
		return ""
	}
	return time.Duration(*r).String()
}

func (r *retainFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("write a duration such as 168h")
	}
	*r = retainFlag(d)
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ", ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// cmdTable runs "ingestd table <command> …": it parses the flags every subcommand shares,
// refuses a flag given to a subcommand it does not belong to, resolves the table
// (tableArg), opens it (openDeltaTable) and runs the subcommand's entry of tableCommands.
// It returns exitOK; exitUsage for help without a command, bad arguments or flag values,
// a store that cannot be opened and an unknown command; exitFailure when there is no
// Delta table at the URI, its log cannot be read or the subcommand fails.
func cmdTable(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub := "table"
	if len(args) > 0 {
		sub = args[0]
	}
	fs := newFlagSet("table "+sub, tableSynopsis, tableSummary, stderr)
	f := newTableFlags(fs)
	if _, known := tableCommands[sub]; known {
		fs.Usage = func() { tableCommandUsage(stderr, fs, sub) }
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fs.Usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	pos, code, done := parseArgs(fs, args[1:], 1)
	if done {
		return code
	}
	if code := checkFlagsApply(fs, sub, stderr); code != exitOK {
		return code
	}
	cmd, known := tableCommands[sub]
	if cmd.check != nil {
		if code := cmd.check(f, stderr); code != exitOK {
			return code
		}
	}
	uri, storeOpts, code := tableArg(sub, pos, f, stderr)
	if uri == "" {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, cmd.timeout())
	defer cancel()
	t, code := openDeltaTable(ctx, uri, storeOpts, cmd.tableOptions(), stderr)
	if t == nil {
		return code
	}
	if !known {
		// Reported only once the table is open, as it always was: `ingestd table typo
		// /missing` says the table is missing (exit 1).
		fmt.Fprintf(stderr, "ingestd table: unknown command %q\n\n", sub)
		fs.Usage()
		return exitUsage
	}
	return cmd.run(ctx, t, f, stdout, stderr)
}

// tableFlags holds the flags of every "ingestd table" subcommand. They share one flag set,
// so --help lists them all; a usage starting "cmd, cmd: " names the subcommands a flag
// belongs to (checkFlagsApply), one without such a prefix belongs to all.
type tableFlags struct {
	uri, config string         // all
	topic       string         // all (the table of a topic_pattern file); reset-offsets
	cfg         *config.Config // the pipeline of --config, once loaded (nil without it)
	n           int            // history
	asJSON      bool           // history, describe, optimize, vacuum
	dryRun      bool           // optimize, vacuum

	// alter
	add, widen, props, features                stringList
	addCons, dropCons, setNotNull, dropNotNull stringList // CHECK constraints and NOT NULL (tableops/constraints.go)
	enableCM                                   string     // column mapping operations (tableops/columns.go)
	renames, drops, moves                      stringList

	// optimize
	targetSize, maxRate, where string
	minFiles                   int

	// reset-offsets
	partitions intList
	toEarliest bool
	toOffset   int64 // -1: not given

	// vacuum
	retain time.Duration // -1: the table's delta.deletedFileRetentionDuration
	force  bool
	now    string
}

// newTableFlags defines the table flags on fs and returns where they are parsed to.
func newTableFlags(fs *flag.FlagSet) *tableFlags {
	f := &tableFlags{}
	fs.StringVar(&f.uri, "table", "", "table `URI` (/path, a relative path, file:///path, s3://, gs://, az:// or abfss://; store settings from the environment), instead of the argument")
	fs.StringVar(&f.config, "config", "", "pipeline `file` whose table to use, instead of the argument")
	fs.StringVar(&f.topic, "topic", "", "with a kafka.topic_pattern pipeline file, the table of this `topic`; for reset-offsets, the source topic")
	fs.Var(&f.partitions, "partition", "reset-offsets: only this `partition` (repeatable)")
	fs.BoolVar(&f.toEarliest, "to-earliest", false, "reset-offsets: read from the start of each partition")
	f.toOffset = -1
	fs.Var((*offsetFlag)(&f.toOffset), "to-offset", "reset-offsets: read from this `offset`")
	fs.IntVar(&f.n, "n", 20, "history: number of `commits` (0 for all)")
	fs.BoolVar(&f.asJSON, "json", false, "history, describe, optimize, vacuum: print JSON")
	fs.Var(&f.add, "add-column", "alter: `'path TYPE'` to add (repeatable)")
	fs.Var(&f.widen, "widen", "alter: `'path TYPE'` to widen to (repeatable)")
	fs.Var(&f.props, "set-property", "alter: `key=value` to set (repeatable)")
	fs.Var(&f.features, "enable-feature", "alter: `FEATURE` to enable, typeWidening or timestampNtz (repeatable)")
	fs.Var(&f.addCons, "add-constraint", "alter: `'name CHECK (expr)'` to add after checking every existing row (repeatable)")
	fs.Var(&f.dropCons, "drop-constraint", "alter: constraint `name` to drop (repeatable)")
	fs.Var(&f.setNotNull, "set-not-null", "alter: top-level `column` to make NOT NULL after checking every existing row (repeatable)")
	fs.Var(&f.dropNotNull, "drop-not-null", "alter: top-level `column` to make nullable (repeatable)")
	fs.StringVar(&f.enableCM, "enable-column-mapping", "", "alter: column mapping `MODE` to enable: name (a protocol upgrade to reader 2 / writer 5)")
	fs.Var(&f.renames, "rename-column", "alter: `'path TO name'` to rename (repeatable; needs column mapping)")
	fs.Var(&f.drops, "drop-column", "alter: column `path` to drop (repeatable, one commit; needs column mapping)")
	fs.Var(&f.moves, "move-column", "alter: `'path FIRST'` or 'path AFTER sibling' to reorder (repeatable)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "optimize, vacuum: show what would be done, change nothing")
	fs.StringVar(&f.targetSize, "target-file-size", "256MiB", "optimize: `size` new files approach (e.g. 256MiB, 134217728)")
	fs.IntVar(&f.minFiles, "min-files", maintenance.DefaultMinFiles, "optimize: small files a partition needs before it is compacted")
	fs.StringVar(&f.where, "where", "", "optimize: partition `predicate` (Spark SQL on partition columns), e.g. \"dt >= '2026-11-01'\"")
	fs.StringVar(&f.maxRate, "max-rewrite-rate", "0", "optimize: `bytes` read per second while rewriting, e.g. 64MiB (0: unthrottled)")
	f.retain = -1
	fs.Var((*retainFlag)(&f.retain), "retain", "vacuum: keep unreferenced files this `long` (e.g. 168h; default: the table's delta.deletedFileRetentionDuration, 7 days unless set)")
	fs.BoolVar(&f.force, "force", false, "vacuum, reset-offsets: vacuum: allow a --retain shorter than the table's delta.deletedFileRetentionDuration; reset-offsets: skip the checks on the cluster (no member in the group, the topic and partitions exist)")
	fs.StringVar(&f.now, "now", "", "vacuum: evaluate the retention as of this `RFC 3339 time` instead of the clock (what-if runs, tests)")
	return f
}

// tableCommand is one "ingestd table" subcommand.
type tableCommand struct {
	// maintenance: the command rewrites or lists whole tables (OPTIMIZE, VACUUM), so it
	// gets 24 h instead of 5 minutes and steps over concurrent commits.
	maintenance bool
	// check, when set, refuses flag values before the table is resolved or opened; it
	// prints why and returns exitUsage, or exitOK.
	check func(f *tableFlags, stderr io.Writer) int
	// run runs the command on the opened table and returns its exit code.
	run func(ctx context.Context, t *openedTable, f *tableFlags, stdout, stderr io.Writer) int
}

// tableCommands are the "ingestd table" subcommands by name (tableSummary describes them).
var tableCommands = map[string]tableCommand{
	"schema":        {run: tableSchema},
	"history":       {run: tableHistory},
	"describe":      {run: tableDescribe},
	"alter":         {run: tableAlter},
	"reset-offsets": {check: checkResetOffsets, run: tableResetOffsets},
	"optimize":      {maintenance: true, run: tableOptimize},
	"vacuum":        {maintenance: true, check: checkVacuumRetain, run: tableVacuum},
}

// timeout bounds the whole command.
func (c tableCommand) timeout() time.Duration {
	if c.maintenance {
		return 24 * time.Hour // maintenance rewrites or lists whole tables
	}
	return 5 * time.Minute
}

// tableOptions are the deltawriter options the command opens the table with.
func (c tableCommand) tableOptions() []deltawriter.Option {
	if !c.maintenance {
		return nil
	}
	// Maintenance beside busy pipelines steps over their commits for as long as it
	// takes; it stops only on a real conflict (maintenance.Optimize).
	return []deltawriter.Option{deltawriter.WithMaxCommitAttempts(1_000_000)}
}

// openedTable is the table a subcommand works on: the URI tableArg resolved, its store,
// and the Delta table with its latest snapshot.
type openedTable struct {
	uri  string
	st   storage.Store
	tbl  *deltawriter.Table
	snap *deltawriter.Snapshot
}

// openDeltaTable opens the store at uri and the Delta table in it, and checks the table has
// a commit. It prints the error and returns nil with exitUsage when the store cannot be
// opened (the URI or its settings), with exitFailure when there is no Delta table there
// or its log cannot be read.
func openDeltaTable(ctx context.Context, uri string, storeOpts storage.Options, topts []deltawriter.Option, stderr io.Writer) (*openedTable, int) {
	st, err := storage.OpenWith(ctx, uri, storeOpts)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd table:", err)
		return nil, exitUsage
	}
	tbl, err := deltawriter.Open(ctx, st, topts...)
	if err == nil {
		_, err = tbl.Snapshot(ctx)
	}
	if err != nil {
		if errors.Is(err, deltawriter.ErrTableNotFound) {
			err = fmt.Errorf("no Delta table at %s", uri)
		}
		fmt.Fprintln(stderr, "ingestd table:", err)
		return nil, exitFailure
	}
	snap, _ := tbl.Snapshot(ctx)
	return &openedTable{uri: uri, st: st, tbl: tbl, snap: snap}, exitOK
}

// tableSchema prints the schema as a tree ("ingestd table schema"); it cannot fail.
func tableSchema(_ context.Context, t *openedTable, _ *tableFlags, stdout, _ io.Writer) int {
	tableops.WriteSchema(stdout, t.snap.Schema, t.snap.ColumnMapping)
	return exitOK
}

// tableDescribe prints the table's detail with its maintenance history ("ingestd table
// describe"), as text or with --json as a tableops.Detail. exitFailure when the commits
// cannot be read.
func tableDescribe(ctx context.Context, t *openedTable, f *tableFlags, stdout, stderr io.Writer) int {
	d := tableops.Describe(t.uri, t.snap)
	if err := tableops.AddMaintenance(ctx, t.st, &d); err != nil {
		fmt.Fprintln(stderr, "ingestd table describe:", err)
		return exitFailure
	}
	if f.asJSON {
		_ = json.NewEncoder(stdout).Encode(d)
	} else {
		tableops.WriteDetail(stdout, d)
	}
	return exitOK
}

// tableHistory prints the newest --n commits ("ingestd table history"), one line each
// (version, time, operation, parameters) with their metrics below, or with --json the
// tableops.HistoryEntry list. exitFailure when the log cannot be read.
func tableHistory(ctx context.Context, t *openedTable, f *tableFlags, stdout, stderr io.Writer) int {
	h, err := tableops.History(ctx, t.st, f.n)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd table history:", err)
		return exitFailure
	}
	if f.asJSON {
		_ = json.NewEncoder(stdout).Encode(h)
		return exitOK
	}
	for _, e := range h {
		fmt.Fprintf(stdout, "%6d  %s  %-18s %s\n", e.Version, e.Timestamp.Format(time.RFC3339), e.Operation, kv(e.Parameters))
		if len(e.Metrics) > 0 {
			fmt.Fprintf(stdout, "        metrics: %s\n", kv(e.Metrics))
		}
	}
	return exitOK
}

// tableAlter makes the changes the alter flags ask for ("ingestd table alter",
// tableops.Apply) and prints each commit made, "version N: OPERATION detail", also those
// made before a failure. exitUsage for a flag value that does not parse or no change
// asked for; exitFailure when a change is refused or cannot be committed.
func tableAlter(ctx context.Context, t *openedTable, f *tableFlags, stdout, stderr io.Writer) int {
	a, code := alterFromFlags(f, stderr)
	if code != exitOK {
		return code
	}
	res, err := tableops.Apply(ctx, t.tbl, a)
	for _, r := range res {
		fmt.Fprintf(stdout, "version %d: %s %s\n", r.Version, r.Operation, r.Detail)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ingestd table alter:", err)
		return exitFailure
	}
	return exitOK
}

// alterFromFlags parses the alter flags into a tableops.Alter. It prints the first value
// that does not parse, or that nothing was asked for, and returns exitUsage; else exitOK.
func alterFromFlags(f *tableFlags, stderr io.Writer) (tableops.Alter, int) {
	a := tableops.Alter{EnableFeatures: f.features, SetProperties: map[string]string{}}
	for _, p := range f.props {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			fmt.Fprintf(stderr, "ingestd table alter: --set-property %q: write key=value\n", p)
			return a, exitUsage
		}
		a.SetProperties[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	a.SetNotNull, a.DropNotNull = f.setNotNull, f.dropNotNull
	a.EnableColumnMapping = f.enableCM
	const prefix = "ingestd table alter:"
	ok := parseEach(f.add, tableops.ParseColumnDef, &a.AddColumns, prefix, stderr) &&
		parseEach(f.widen, tableops.ParseColumnDef, &a.Widen, prefix, stderr) &&
		parseEach(f.addCons, tableops.ParseConstraint, &a.AddConstraints, prefix, stderr) &&
		parseEach(f.dropCons, tableops.ParseConstraintName, &a.DropConstraints, prefix+" --drop-constraint:", stderr) &&
		parseEach(f.renames, tableops.ParseRename, &a.RenameColumns, prefix+" --rename-column:", stderr) &&
		parseEach(f.drops, tableops.ParseColumnPath, &a.DropColumns, prefix+" --drop-column:", stderr) &&
		parseEach(f.moves, tableops.ParseMove, &a.MoveColumns, prefix+" --move-column:", stderr)
	if !ok {
		return a, exitUsage
	}
	if len(a.AddColumns)+len(a.Widen)+len(a.SetProperties)+len(a.EnableFeatures)+
		len(a.AddConstraints)+len(a.DropConstraints)+len(a.SetNotNull)+len(a.DropNotNull)+
		len(a.RenameColumns)+len(a.DropColumns)+len(a.MoveColumns) == 0 && a.EnableColumnMapping == "" {
		fmt.Fprintln(stderr, "ingestd table alter: nothing to do; see ingestd table --help")
		return a, exitUsage
	}
	return a, exitOK
}

// parseEach appends parse(s) to *out for each s of in, in order. At the first error it
// prints "prefix err" to stderr and returns false.
func parseEach[T any](in []string, parse func(string) (T, error), out *[]T, prefix string, stderr io.Writer) bool {
	for _, s := range in {
		v, err := parse(s)
		if err != nil {
			fmt.Fprintln(stderr, prefix, err)
			return false
		}
		*out = append(*out, v)
	}
	return true
}

// tableOptimize compacts small files per partition ("ingestd table optimize",
// maintenance.Optimize) and prints what it compacted (or, with --dry-run, would compact)
// and the commit, or with --json the OptimizeResult. exitUsage for a bad flag value;
// exitFailure when the plan or the commit fails.
func tableOptimize(ctx context.Context, t *openedTable, f *tableFlags, stdout, stderr io.Writer) int {
	o, code := optimizeOptions(f, stderr)
	if code != exitOK {
		return code
	}
	res, err := maintenance.Optimize(ctx, t.tbl, o)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd table optimize:", err)
		return exitFailure
	}
	if f.asJSON {
		_ = json.NewEncoder(stdout).Encode(res)
		return exitOK
	}
	writeOptimizeResult(stdout, res, o)
	return exitOK
}

// optimizeOptions are the OptimizeOptions the optimize flags ask for: --target-file-size
// and --max-rewrite-rate in bytes (bytes per second for the rate). A value that does not
// parse, a target size ≤ 0 or --min-files < 2 is printed and returns exitUsage.
func optimizeOptions(f *tableFlags, stderr io.Writer) (maintenance.OptimizeOptions, int) {
	target, err := config.ParseByteSize(f.targetSize)
	if err != nil || target <= 0 {
		fmt.Fprintf(stderr, "ingestd table optimize: --target-file-size %q: write a positive size such as 256MiB\n", f.targetSize)
		return maintenance.OptimizeOptions{}, exitUsage
	}
	rate, err := config.ParseByteSize(f.maxRate)
	if err != nil {
		fmt.Fprintf(stderr, "ingestd table optimize: --max-rewrite-rate %q: write a size per second such as 64MiB\n", f.maxRate)
		return maintenance.OptimizeOptions{}, exitUsage
	}
	if f.minFiles < 2 {
		fmt.Fprintf(stderr, "ingestd table optimize: --min-files %d: use 2 or more\n", f.minFiles)
		return maintenance.OptimizeOptions{}, exitUsage
	}
	return maintenance.OptimizeOptions{TargetFileSize: int64(target), MinFiles: f.minFiles,
		Where: f.where, DryRun: f.dryRun, MaxRewriteRate: int64(rate), EngineInfo: "ingestd table optimize"}, exitOK
}

// writeOptimizeResult prints an OPTIMIZE run made with o: one line per partition
// compacted (files and bytes removed, files added), one per partition dropped because a
// concurrent commit got there first, and a last line on what was committed.
func writeOptimizeResult(stdout io.Writer, res maintenance.OptimizeResult, o maintenance.OptimizeOptions) {
	verb := "compacted"
	if o.DryRun {
		verb = "would compact"
	}
	for _, p := range res.Partitions {
		fmt.Fprintf(stdout, "%s %s: %d files (%d bytes) -> %d files\n", verb, p.Partition, p.FilesRemoved, p.BytesRemoved, p.FilesAdded)
	}
	for _, p := range res.Dropped {
		fmt.Fprintf(stdout, "skipped %s: a concurrent commit compacted or removed its files first\n", p)
	}
	switch {
	case res.Version < 0 && len(res.Dropped) > 0:
		fmt.Fprintf(stdout, "nothing committed: every selected partition was compacted concurrently\n")
	case res.Version >= 0:
		fmt.Fprintf(stdout, "version %d: OPTIMIZE removed %d files (%d bytes), added %d files (%d bytes)\n", res.Version, res.FilesRemoved, res.BytesRemoved, res.FilesAdded, res.BytesAdded)
	case o.DryRun && len(res.Partitions) > 0:
		fmt.Fprintf(stdout, "dry run at version %d: nothing written\n", res.ReadVersion)
	case o.DryRun:
		fmt.Fprintf(stdout, "dry run at version %d: nothing to compact: no partition has %d or more files below %d bytes (--min-files, --target-file-size)\n", res.ReadVersion, o.MinFiles, o.TargetFileSize)
	default:
		fmt.Fprintf(stdout, "nothing committed at version %d: no partition has %d or more files below %d bytes\n", res.ReadVersion, o.MinFiles, o.TargetFileSize)
	}
}

func kv(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// tableArg is the table of "ingestd table <sub> [URI] [--table URI] [--config FILE]": the
// argument, --table or the pipeline file's table; when more than one is given they must
// name the same table. A relative path is made absolute (the stores take absolute paths
// and file:// URIs).
func tableArg(sub string, pos []string, f *tableFlags, stderr io.Writer) (string, storage.Options, int) {
	type source struct{ name, uri string }
	var given []source
	var opts storage.Options
	table, config := f.uri, f.config
	if len(pos) > 0 {
		given = append(given, source{"the argument " + pos[0], pos[0]})
	}
	if table != "" {
		given = append(given, source{"--table " + table, table})
	}
	if config != "" {
		cfg, code := pipelineFor(config, f.topic, sub == "reset-offsets", stderr)
		if cfg == nil {
			return "", opts, code
		}
		f.cfg = cfg
		opts = cfg.Table.StorageOptions()
		given = append(given, source{"--config " + config + " (table " + cfg.Table.URI + ")", cfg.Table.URI})
	} else if f.topic != "" && sub != "reset-offsets" {
		fmt.Fprintf(stderr, "ingestd table %s: --topic names the table of a kafka.topic_pattern pipeline file: give --config too, or remove --topic\n", sub)
		return "", opts, exitUsage
	}
	if len(given) == 0 {
		fmt.Fprintf(stderr, "ingestd table: name the table: ingestd table %s URI (or --table URI, or --config PIPELINE.yaml)\n", sub)
		return "", opts, exitUsage
	}
	for _, g := range given[1:] {
		if sameTable(g.uri) != sameTable(given[0].uri) {
			fmt.Fprintf(stderr, "ingestd table: %s and %s name different tables; give one\n", given[0].name, g.name)
			return "", opts, exitUsage
		}
	}
	u := given[0].uri
	if !strings.Contains(u, "://") && !filepath.IsAbs(u) {
		u = absPath(u)
	}
	return u, opts, exitOK
}

// sameTable is a table URI in one spelling for comparisons: local paths and file:// URIs
// as a clean absolute path, other URIs without a trailing slash.
func sameTable(u string) string {
	if p, ok := strings.CutPrefix(u, "file://"); ok {
		return filepath.Clean(p)
	}
	if !strings.Contains(u, "://") {
		return absPath(u)
	}
	return strings.TrimRight(u, "/")
}

// checkVacuumRetain refuses a negative --retain (-1, the default, stands for the table's
// delta.deletedFileRetentionDuration): it prints why and returns exitUsage, else exitOK.
func checkVacuumRetain(f *tableFlags, stderr io.Writer) int {
	if f.retain < 0 && f.retain != -1 {
		fmt.Fprintf(stderr, "ingestd table vacuum: --retain %s is negative: write a duration such as 168h (or leave it out for the table's delta.deletedFileRetentionDuration)\n", f.retain)
		return exitUsage
	}
	return exitOK
}

// tableVacuum runs "ingestd table vacuum" (maintenance.Vacuum) and prints the files
// deleted (or, with --dry-run, to delete), one "path<TAB>bytes" line each, and a summary;
// --json prints the VacuumResult. exitUsage for a bad --now or a retention shorter than
// the table's (maintenance.ErrRetentionTooShort) without --force; exitFailure when the
// vacuum fails.
func tableVacuum(ctx context.Context, t *openedTable, f *tableFlags, stdout, stderr io.Writer) int {
	o, code := vacuumOptions(f, stderr)
	if code != exitOK {
		return code
	}
	res, err := maintenance.Vacuum(ctx, t.tbl, o)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd table vacuum:", err)
		if errors.Is(err, maintenance.ErrRetentionTooShort) {
			return exitUsage
		}
		return exitFailure
	}
	if f.asJSON {
		_ = json.NewEncoder(stdout).Encode(res)
		return exitOK
	}
	for _, file := range res.Files {
		name := file.Path
		if file.IsDir {
			name += "/"
		}
		fmt.Fprintf(stdout, "%s\t%d\n", name, file.Size)
	}
	verb := "deleted"
	if o.DryRun {
		verb = "would delete"
	}
	fmt.Fprintf(stdout, "vacuum: %s %d files and directories (%d bytes) in %d directories; retention %s (files unreferenced before %s)\n",
		verb, len(res.Files), res.Bytes, res.Dirs, res.Retention, res.DeleteBefore.UTC().Format(time.RFC3339))
	if o.DryRun && !o.Force && res.Retention < res.TableRetention {
		fmt.Fprintf(stdout, "note: --retain %s is shorter than the table's delta.deletedFileRetentionDuration (%s): the real run needs --force, and must run when no writer is running and no reader needs older versions\n",
			res.Retention, res.TableRetention)
	}
	return exitOK
}

// vacuumOptions are the VacuumOptions the vacuum flags ask for. A --now that is not an
// RFC 3339 time, or one in the future without --dry-run or --force, is printed and
// returns exitUsage.
func vacuumOptions(f *tableFlags, stderr io.Writer) (maintenance.VacuumOptions, int) {
	o := maintenance.VacuumOptions{Retain: f.retain, Force: f.force, DryRun: f.dryRun, EngineInfo: "ingestd table vacuum"}
	if f.now == "" {
		return o, exitOK
	}
	at, err := time.Parse(time.RFC3339, f.now)
	if err != nil {
		fmt.Fprintf(stderr, "ingestd table vacuum: --now %q: write an RFC 3339 time such as 2026-12-01T15:00:00Z\n", f.now)
		return o, exitUsage
	}
	if at.After(time.Now()) && !f.dryRun && !f.force {
		// a later "now" shortens the real retention by the difference: the check
		// --force exists for, so it needs --force (or a dry run) too
		fmt.Fprintf(stderr, "ingestd table vacuum: --now %s is in the future: files removed, or written by flushes in flight, less than --retain before it (including now) would be deleted; add --dry-run to see what it would delete, or --force if no writer is running and no reader needs older versions\n", f.now)
		return o, exitUsage
	}
	o.Now = func() time.Time { return at }
	return o, exitOK
}

// offsetFlag is --to-offset: a Kafka offset, -1 until given (printed as "" then, so
// --help shows no default).
type offsetFlag int64

func (o *offsetFlag) String() string {
	if o == nil || *o < 0 {
		return ""
	}
	return strconv.FormatInt(int64(*o), 10)
}

func (o *offsetFlag) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not an offset (a whole number, 0 or more)", v)
	}
	*o = offsetFlag(n)
	return nil
}

// intList is a repeatable int32 flag.
type intList []int32

func (l *intList) String() string { return fmt.Sprint([]int32(*l)) }
func (l *intList) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a partition number", v)
	}
	*l = append(*l, int32(n))
	return nil
}

// checkResetOffsets refuses a reset-offsets without --config (the txn appIds are the
// pipeline's), without --topic, or without exactly one of --to-earliest and --to-offset.
func checkResetOffsets(f *tableFlags, stderr io.Writer) int {
	switch {
	case f.config == "":
		fmt.Fprintln(stderr, "ingestd table reset-offsets: --config PIPELINE.yaml is required: the offsets are that pipeline's (its app_id)")
	case f.topic == "":
		fmt.Fprintln(stderr, "ingestd table reset-offsets: --topic TOPIC is required")
	case f.toEarliest == (f.toOffset >= 0):
		fmt.Fprintln(stderr, "ingestd table reset-offsets: give one of --to-earliest and --to-offset N")
	default:
		return exitOK
	}
	return exitUsage
}

// tableResetOffsets moves the txn versions of --topic's partitions in the table of the
// pipeline of --config (ingest.ResetOffsets) and prints each partition's move. exitFailure
// when the table holds no txn of the topic (without --partition) or the commit fails.
func tableResetOffsets(ctx context.Context, t *openedTable, f *tableFlags, stdout, stderr io.Writer) int {
	next := max(f.toOffset, 0)
	var parts []int32
	if len(f.partitions) > 0 {
		parts = f.partitions
	}
	if !f.force {
		if err := ingest.CheckOffsetReset(ctx, f.cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})), f.topic, parts); err != nil {
			fmt.Fprintln(stderr, "ingestd table reset-offsets:", err)
			return exitFailure
		}
	}
	moved, v, err := ingest.ResetOffsets(ctx, f.cfg, t.tbl, f.topic, parts, next)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd table reset-offsets:", err)
		return exitFailure
	}
	for _, m := range moved {
		from := "no txn"
		if m.From >= 0 {
			from = "offset " + strconv.FormatInt(m.From, 10)
		}
		fmt.Fprintf(stdout, "%s[%d]: from %s to offset %d\n", f.topic, m.Partition, from, m.To)
	}
	fmt.Fprintf(stdout, "version %d: RESET OFFSETS; restart the pipeline to read from there\n", v)
	return exitOK
}
