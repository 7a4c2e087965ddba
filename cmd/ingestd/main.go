// Command ingestd streams Avro records from Kafka into Delta Lake tables and guards each
// table against schema drift. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	// The IANA zone database inside the binary: generation expressions evaluated in
	// ingestd.generation.timeZone give the same results on any host or image.
	_ "time/tzdata"

	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

// version may be set at build time with -ldflags "-X main.version=…"; otherwise
// versionText reads the module's build info.
var version = ""

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the run failed
	exitUsage   = 2 // bad flags or config
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `ingestd streams Avro records from Kafka into Delta Lake tables and guards
every table against schema drift.

Usage:
  ingestd run      --config DIR|FILE [--listen 127.0.0.1:9102]   run pipelines
  ingestd validate --config DIR|FILE                              check pipeline files
  ingestd table    schema|history|describe|alter URI              inspect or alter a Delta table
                   optimize|vacuum URI                            compact it; delete files no version needs
                   (or --table URI, or --config PIPELINE.yaml: the pipeline's table)
  ingestd dlq inspect PIPELINE.yaml                               what is in the dead-letter topic
  ingestd replay   PIPELINE.yaml [--dry-run] [--max-replays N]    land dead letters that now fit
  ingestd demo     [--out DIR]                                    self-contained demo
  ingestd demo produce --config PIPELINE.yaml                     the demo's orders, to a real broker
  ingestd version                                                 print the version

A pipeline file may also be given as --config PIPELINE.yaml.

Run "ingestd <command> --help" for a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr)
	case "table":
		return cmdTable(ctx, args[1:], stdout, stderr)
	case "replay":
		return cmdReplay(ctx, args[1:], stdout, stderr)
	case "dlq":
		return cmdDLQ(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		bi, _ := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionText(version, bi))
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "ingestd: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// versionText is `ingestd version`'s line: the version set at build time, else the
// module's (go install …@v1.2.0 records it; a build in a checkout records "(devel)"),
// then the VCS commit, its time and whether the tree was modified, when the build
// recorded them (go build in a git checkout, runtime/debug.BuildInfo's vcs.* settings),
// and the Go version.
func versionText(set string, bi *debug.BuildInfo) string {
	v := set
	if v == "" && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "devel"
	}
	var about []string
	if bi != nil {
		s := map[string]string{}
		for _, x := range bi.Settings {
			s[x.Key] = x.Value
		}
		if rev := s["vcs.revision"]; rev != "" {
			about = append(about, "commit "+rev[:min(12, len(rev))])
		}
		if t := s["vcs.time"]; t != "" {
			about = append(about, t)
		}
		if s["vcs.modified"] == "true" {
			about = append(about, "modified")
		}
	}
	return fmt.Sprintf("ingestd %s (%s)", v, strings.Join(append(about, runtime.Version()), ", "))
}

// newLogger: --log-level trace is debug plus the Kafka client's own debug logs (every
// request it writes and reads; kafkaclient.LevelTrace).
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if strings.EqualFold(level, "trace") {
		lvl = kafkaclient.LevelTrace
	} else if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("parse --log-level %q: use trace, debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("parse --log-format %q: use json or text", format)
}
