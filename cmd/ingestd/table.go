package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/deltawriter/tableops"
	"github.com/ingestd/ingestd/ingest/config"
)

const tableSynopsis = `table <command> URI [flags]
       ingestd table <command> --table URI [flags]
       ingestd table <command> --config PIPELINE.yaml [flags]`

const tableSummary = `URI is the table: an absolute or relative path, or file:///abs/path; --config uses a
pipeline file's table. Given more than one way, they must name the same table.

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

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ", ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func cmdTable(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub := "table"
	if len(args) > 0 {
		sub = args[0]
	}
	fs := newFlagSet("table "+sub, tableSynopsis, tableSummary, stderr)
	uri := fs.String("table", "", "table `URI` (/path, a relative path, file:///path, s3://, gs://, az:// or abfss://; store settings from the environment), instead of the argument")
	configFlag := fs.String("config", "", "pipeline `file` whose table to use, instead of the argument")
	n := fs.Int("n", 20, "history: number of `commits` (0 for all)")
	asJSON := fs.Bool("json", false, "history, describe, optimize, vacuum: print JSON")
	var add, widen, props, features stringList
	fs.Var(&add, "add-column", "alter: `'path TYPE'` to add (repeatable)")
	fs.Var(&widen, "widen", "alter: `'path TYPE'` to widen to (repeatable)")
	fs.Var(&props, "set-property", "alter: `key=value` to set (repeatable)")
	fs.Var(&features, "enable-feature", "alter: `FEATURE` to enable, typeWidening or timestampNtz (repeatable)")
	// CHECK constraints and NOT NULL (tableops/constraints.go)
	var addCons, dropCons, setNotNull, dropNotNull stringList
	fs.Var(&addCons, "add-constraint", "alter: `'name CHECK (expr)'` to add after checking every existing row (repeatable)")
	fs.Var(&dropCons, "drop-constraint", "alter: constraint `name` to drop (repeatable)")
	fs.Var(&setNotNull, "set-not-null", "alter: top-level `column` to make NOT NULL after checking every existing row (repeatable)")
	fs.Var(&dropNotNull, "drop-not-null", "alter: top-level `column` to make nullable (repeatable)")
	// Column mapping operations (tableops/columns.go).
	enableCM := fs.String("enable-column-mapping", "", "alter: column mapping `MODE` to enable: name (a protocol upgrade to reader 2 / writer 5)")
	var renames, drops, moves stringList
	fs.Var(&renames, "rename-column", "alter: `'path TO name'` to rename (repeatable; needs column mapping)")
	fs.Var(&drops, "drop-column", "alter: column `path` to drop (repeatable, one commit; needs column mapping)")
	fs.Var(&moves, "move-column", "alter: `'path FIRST'` or 'path AFTER sibling' to reorder (repeatable)")
	dryRun := fs.Bool("dry-run", false, "optimize, vacuum: show what would be done, change nothing")
	// optimize flags
	targetSize := fs.String("target-file-size", "256MiB", "optimize: `size` new files approach (e.g. 256MiB, 134217728)")
	minFiles := fs.Int("min-files", maintenance.DefaultMinFiles, "optimize: small files a partition needs before it is compacted")
	where := fs.String("where", "", "optimize: partition `predicate` (Spark SQL on partition columns), e.g. \"dt >= '2026-11-01'\"")
	maxRate := fs.String("max-rewrite-rate", "0", "optimize: `bytes` read per second while rewriting, e.g. 64MiB (0: unthrottled)")
	// vacuum
	retain := fs.Duration("retain", -1, "vacuum: keep unreferenced files this `long` (e.g. 168h; default: the table's delta.deletedFileRetentionDuration, 7 days)")
	force := fs.Bool("force", false, "vacuum: allow a --retain shorter than the table's delta.deletedFileRetentionDuration")
	nowFlag := fs.String("now", "", "vacuum: evaluate the retention as of this `RFC 3339 time` instead of the clock (what-if runs, tests)")
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
	if sub == "vacuum" && *retain < 0 && *retain != -1 {
		fmt.Fprintf(stderr, "ingestd table vacuum: --retain %s is negative: write a duration such as 168h (or leave it out for the table's delta.deletedFileRetentionDuration)\n", *retain)
		return exitUsage
	}
	var storeOpts storage.Options // the pipeline's table.storage with --config; else the environment only
	if *uri, storeOpts, code = tableArg(sub, pos, *uri, *configFlag, stderr); *uri == "" {
		return code
	}
	timeout := 5 * time.Minute
	if sub == "optimize" || sub == "vacuum" {
		timeout = 24 * time.Hour // maintenance rewrites or lists whole tables
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := storage.OpenWith(ctx, *uri, storeOpts)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd table:", err)
		return exitUsage
	}
	var topts []deltawriter.Option
	if sub == "optimize" || sub == "vacuum" {
		// Maintenance beside busy pipelines steps over their commits for as long as it
		// takes; it stops only on a real conflict (maintenance.Optimize).
		topts = append(topts, deltawriter.WithMaxCommitAttempts(1_000_000))
	}
	tbl, err := deltawriter.Open(ctx, st, topts...)
	if err == nil {
		_, err = tbl.Snapshot(ctx)
	}
	if err != nil {
		if errors.Is(err, deltawriter.ErrTableNotFound) {
			err = fmt.Errorf("no Delta table at %s", *uri)
		}
		fmt.Fprintln(stderr, "ingestd table:", err)
		return exitFailure
	}
	snap, _ := tbl.Snapshot(ctx)
	switch sub {
	case "schema":
		tableops.WriteSchema(stdout, snap.Schema, snap.ColumnMapping)
	case "describe":
		d := tableops.Describe(*uri, snap)
		if err := tableops.AddMaintenance(ctx, st, &d); err != nil {
			fmt.Fprintln(stderr, "ingestd table describe:", err)
			return exitFailure
		}
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(d)
		} else {
			tableops.WriteDetail(stdout, d)
		}
	case "history":
		h, err := tableops.History(ctx, st, *n)
		if err != nil {
			fmt.Fprintln(stderr, "ingestd table history:", err)
			return exitFailure
		}
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(h)
			break
		}
		for _, e := range h {
			fmt.Fprintf(stdout, "%6d  %s  %-18s %s\n", e.Version, e.Timestamp.Format(time.RFC3339), e.Operation, kv(e.Parameters))
			if len(e.Metrics) > 0 {
				fmt.Fprintf(stdout, "        metrics: %s\n", kv(e.Metrics))
			}
		}
	case "alter":
		a := tableops.Alter{EnableFeatures: features, SetProperties: map[string]string{}}
		for _, p := range props {
			k, v, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				fmt.Fprintf(stderr, "ingestd table alter: --set-property %q: write key=value\n", p)
				return exitUsage
			}
			a.SetProperties[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		for _, list := range []struct {
			in  []string
			out *[]tableops.ColumnDef
		}{{add, &a.AddColumns}, {widen, &a.Widen}} {
			for _, s := range list.in {
				c, err := tableops.ParseColumnDef(s)
				if err != nil {
					fmt.Fprintln(stderr, "ingestd table alter:", err)
					return exitUsage
				}
				*list.out = append(*list.out, c)
			}
		}
		for _, c := range addCons {
			def, err := tableops.ParseConstraint(c)
			if err != nil {
				fmt.Fprintln(stderr, "ingestd table alter:", err)
				return exitUsage
			}
			a.AddConstraints = append(a.AddConstraints, def)
		}
		for _, c := range dropCons {
			name, err := tableops.ParseConstraintName(c)
			if err != nil {
				fmt.Fprintln(stderr, "ingestd table alter: --drop-constraint:", err)
				return exitUsage
			}
			a.DropConstraints = append(a.DropConstraints, name)
		}
		a.SetNotNull, a.DropNotNull = setNotNull, dropNotNull
		a.EnableColumnMapping = *enableCM
		for _, s := range renames {
			r, err := tableops.ParseRename(s)
			if err != nil {
				fmt.Fprintln(stderr, "ingestd table alter: --rename-column:", err)
				return exitUsage
			}
			a.RenameColumns = append(a.RenameColumns, r)
		}
		for _, s := range drops {
			p, err := tableops.ParseColumnPath(s)
			if err != nil {
				fmt.Fprintln(stderr, "ingestd table alter: --drop-column:", err)
				return exitUsage
			}
			a.DropColumns = append(a.DropColumns, p)
		}
		for _, s := range moves {
			m, err := tableops.ParseMove(s)
			if err != nil {
				fmt.Fprintln(stderr, "ingestd table alter: --move-column:", err)
				return exitUsage
			}
			a.MoveColumns = append(a.MoveColumns, m)
		}
		if len(a.AddColumns)+len(a.Widen)+len(a.SetProperties)+len(a.EnableFeatures)+
			len(a.AddConstraints)+len(a.DropConstraints)+len(a.SetNotNull)+len(a.DropNotNull)+
			len(a.RenameColumns)+len(a.DropColumns)+len(a.MoveColumns) == 0 && a.EnableColumnMapping == "" {
			fmt.Fprintln(stderr, "ingestd table alter: nothing to do; see ingestd table --help")
			return exitUsage
		}
		res, err := tableops.Apply(ctx, tbl, a)
		for _, r := range res {
			fmt.Fprintf(stdout, "version %d: %s %s\n", r.Version, r.Operation, r.Detail)
		}
		if err != nil {
			fmt.Fprintln(stderr, "ingestd table alter:", err)
			return exitFailure
		}
	case "optimize":
		target, err := config.ParseByteSize(*targetSize)
		if err != nil || target <= 0 {
			fmt.Fprintf(stderr, "ingestd table optimize: --target-file-size %q: write a positive size such as 256MiB\n", *targetSize)
			return exitUsage
		}
		rate, err := config.ParseByteSize(*maxRate)
		if err != nil {
			fmt.Fprintf(stderr, "ingestd table optimize: --max-rewrite-rate %q: write a size per second such as 64MiB\n", *maxRate)
			return exitUsage
		}
		if *minFiles < 2 {
			fmt.Fprintf(stderr, "ingestd table optimize: --min-files %d: use 2 or more\n", *minFiles)
			return exitUsage
		}
		res, err := maintenance.Optimize(ctx, tbl, maintenance.OptimizeOptions{TargetFileSize: int64(target), MinFiles: *minFiles,
			Where: *where, DryRun: *dryRun, MaxRewriteRate: int64(rate), EngineInfo: "ingestd table optimize"})
		if err != nil {
			fmt.Fprintln(stderr, "ingestd table optimize:", err)
			return exitFailure
		}
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(res)
			break
		}
		verb := "compacted"
		if *dryRun {
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
		case *dryRun:
			fmt.Fprintf(stdout, "dry run at version %d: nothing written\n", res.ReadVersion)
		default:
			fmt.Fprintf(stdout, "nothing committed at version %d: no partition has %d or more files below %d bytes\n", res.ReadVersion, *minFiles, target)
		}
	case "vacuum":
		return tableVacuum(ctx, tbl, *retain, *force, *dryRun, *nowFlag, *asJSON, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "ingestd table: unknown command %q\n\n", sub)
		fs.Usage()
		return exitUsage
	}
	return exitOK
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
func tableArg(sub string, pos []string, table, config string, stderr io.Writer) (string, storage.Options, int) {
	type source struct{ name, uri string }
	var given []source
	var opts storage.Options
	if len(pos) > 0 {
		given = append(given, source{"the argument " + pos[0], pos[0]})
	}
	if table != "" {
		given = append(given, source{"--table " + table, table})
	}
	if config != "" {
		cfg, code := onePipeline(config, stderr)
		if cfg == nil {
			return "", opts, code
		}
		opts = cfg.Table.StorageOptions()
		given = append(given, source{"--config " + config + " (table " + cfg.Table.URI + ")", cfg.Table.URI})
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

// tableVacuum runs "ingestd table vacuum" (maintenance.Vacuum) and prints the files
// deleted (or, with --dry-run, to delete), one "path<TAB>bytes" line each, and a summary;
// --json prints the VacuumResult.
func tableVacuum(ctx context.Context, tbl *deltawriter.Table, retain time.Duration, force, dryRun bool, nowFlag string, asJSON bool, stdout, stderr io.Writer) int {
	o := maintenance.VacuumOptions{Retain: retain, Force: force, DryRun: dryRun, EngineInfo: "ingestd table vacuum"}
	if nowFlag != "" {
		at, err := time.Parse(time.RFC3339, nowFlag)
		if err != nil {
			fmt.Fprintf(stderr, "ingestd table vacuum: --now %q: write an RFC 3339 time such as 2026-12-01T15:00:00Z\n", nowFlag)
			return exitUsage
		}
		if at.After(time.Now()) && !dryRun && !force {
			// a later "now" shortens the real retention by the difference: the check
			// --force exists for, so it needs --force (or a dry run) too
			fmt.Fprintf(stderr, "ingestd table vacuum: --now %s is in the future: files removed, or written by flushes in flight, less than --retain before it (including now) would be deleted; add --dry-run to see what it would delete, or --force if no writer is running and no reader needs older versions\n", nowFlag)
			return exitUsage
		}
		o.Now = func() time.Time { return at }
	}
	res, err := maintenance.Vacuum(ctx, tbl, o)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd table vacuum:", err)
		if errors.Is(err, maintenance.ErrRetentionTooShort) {
			return exitUsage
		}
		return exitFailure
	}
	if asJSON {
		_ = json.NewEncoder(stdout).Encode(res)
		return exitOK
	}
	for _, f := range res.Files {
		name := f.Path
		if f.IsDir {
			name += "/"
		}
		fmt.Fprintf(stdout, "%s\t%d\n", name, f.Size)
	}
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	fmt.Fprintf(stdout, "vacuum: %s %d files and directories (%d bytes) in %d directories; retention %s (files unreferenced before %s)\n",
		verb, len(res.Files), res.Bytes, res.Dirs, res.Retention, res.DeleteBefore.UTC().Format(time.RFC3339))
	return exitOK
}
