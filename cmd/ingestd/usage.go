package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
)

// newFlagSet returns the flag set of "ingestd <name>": errors are returned, not fatal,
// and --help prints "Usage: ingestd <synopsis>", the summary and the flags, each spelled
// with two dashes as the README and the messages spell them (Go's flag package accepts
// -flag and --flag alike, but its own PrintDefaults shows one dash).
func newFlagSet(name, synopsis, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: ingestd %s\n\n%s\n\nFlags:\n", synopsis, strings.TrimRight(summary, "\n"))
		printFlags(stderr, fs)
	}
	return fs
}

// printFlags writes fs's flags in flag.PrintDefaults' layout, with two dashes:
//
//	--name TYPE
//	    usage (default value)
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		b.WriteString("  --" + f.Name)
		typ, usage := flag.UnquoteUsage(f)
		if typ != "" {
			b.WriteString(" " + typ)
		}
		b.WriteString("\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch d := f.DefValue; {
		case d == "" || d == "0" || d == "false" || d == "[]":
		case typ == "string" || isStringFlag(f):
			fmt.Fprintf(&b, " (default %q)", d)
		default:
			fmt.Fprintf(&b, " (default %s)", d)
		}
		fmt.Fprintln(w, b.String())
	})
}

func isStringFlag(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, s := g.Get().(string)
	return s
}

// oneDash finds the flag package's own spelling of a flag in its parse errors
// ("flag provided but not defined: -x", "invalid value "v" for flag -x: …").
var oneDash = regexp.MustCompile(`(not defined: |needs an argument: |for flag |for )-([A-Za-z0-9])`)

// parseFlags parses args, which must hold flags only; it returns done=true with the exit
// code when the caller must stop (help requested or bad flags).
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	_, code, done = parseArgs(fs, args, 0)
	return code, done
}

// parseArgs parses args holding at most maxArgs arguments besides the flags, before,
// between or after them (after "--" everything is an argument), and returns the
// arguments. done=true with the exit code means the caller must stop (help requested,
// bad flags, too many arguments).
func parseArgs(fs *flag.FlagSet, args []string, maxArgs int) (pos []string, code int, done bool) {
	out, usage := fs.Output(), fs.Usage
	defer func() { fs.SetOutput(out); fs.Usage = usage }()
	fs.SetOutput(io.Discard) // the error is printed below, with two dashes
	fs.Usage = func() {}
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return nil, exitOK, true
		}
		if err != nil {
			fmt.Fprintln(out, oneDash.ReplaceAllString(err.Error(), "$1--$2"))
			usage()
			return nil, exitUsage, true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) > maxArgs {
		fmt.Fprintf(out, "unexpected arguments: %v\n", pos[maxArgs:])
		usage()
		return nil, exitUsage, true
	}
	return pos, 0, false
}

// pipelineArg is the pipeline file of "ingestd <cmd> [PIPELINE.yaml] [--config FILE]":
// the argument or --config, or both when they name the same file.
func pipelineArg(cmd string, pos []string, config string, stderr io.Writer) (string, int) {
	var arg string
	if len(pos) > 0 {
		arg = pos[0]
	}
	switch {
	case arg == "" && config == "":
		fmt.Fprintf(stderr, "ingestd %s: name the pipeline file: ingestd %s PIPELINE.yaml (or --config PIPELINE.yaml)\n", cmd, cmd)
		return "", exitUsage
	case arg == "":
		return config, exitOK
	case config != "" && absPath(arg) != absPath(config):
		fmt.Fprintf(stderr, "ingestd %s: the argument %s and --config %s name different pipeline files; give one\n", cmd, arg, config)
		return "", exitUsage
	}
	return arg, exitOK
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}
