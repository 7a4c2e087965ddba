// Package archtest checks the module's import rules (docs/architecture.md, "Packages and
// import rules") on its packages, as `go list` sees them (this platform's build tags;
// non-test Go files, but for the rules on direct imports, which read the tests too): run
// by `go test ./...`, so by `make test`.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ingestd/ingestd"

// layers orders the module's packages from the top (cmd) down; patterns are relative to
// the module, "x/..." meaning x and everything below it, and the most specific pattern
// names a package's layer. A package may import only packages of a lower layer (a larger
// rank), or packages of its own "x/..." subtree: cmd → ingest → {batcher, schemaguard,
// deltawriter}; inside deltawriter, tableops → deltawriter → {storage, expr, parquetenc}
// → {deltalog, column}.
var layers = []struct {
	pattern string
	rank    int
}{
	{"cmd/...", 0},
	{"integration/...", 0}, // end-to-end tests only
	{"ingest", 1},
	{"ingest/...", 2}, // decode, dlq, …: below the ingest trunk, never importing it
	{"batcher/...", 3},
	{"schemaguard/...", 3},
	{"deltawriter/...", 3}, // tableops and other users of the Delta writer
	{"deltawriter", 4},
	{"deltawriter/storage/...", 5},
	{"deltawriter/parquetenc/...", 5},
	{"deltawriter/expr/...", 5}, // the SQL expression evaluator: below deltawriter and tableops, used by ingest
	{"deltawriter/deltalog/...", 6},
	{"deltawriter/column/...", 6}, // a leaf column's values between decoder and encoder: below deltawriter and ingest/decode
	{"internal/...", 7},           // shared helpers (tarzst): import nothing above
}

// rules are what each package must not import, or may only import. A
// pattern with a dot in its first element is outside the module (it also forbids the
// package as an indirect dependency); any other is relative to the module.
var rules = []struct {
	pkgs string // the packages the rule applies to
	// only, when set, lists every module package they may import.
	only []string
	deny []string
	why  string
	// onlyExternal, when set, lists every package outside the module and the standard
	// library they may import (patterns as in deny).
	onlyExternal []string
	// except lists packages matching pkgs that the rule leaves out.
	except []string
	// denyDirect lists packages outside the module that none of their Go files, tests
	// included, may import; their dependencies may (deltawriter reaches the cloud SDKs
	// through deltawriter/storage).
	denyDirect []string
}{
	{pkgs: "batcher/...", only: []string{"batcher/..."}, deny: []string{"github.com/twmb/franz-go/..."},
		why: "batcher is pure size/bytes/age batching: no Kafka, no Delta, nothing else of the module"},
	{pkgs: "schemaguard/...", only: []string{"schemaguard/...", "deltawriter/deltalog"}, deny: []string{"github.com/twmb/franz-go/..."},
		why: "schemaguard is pure: no Kafka, no storage, no deltawriter; it works on the Delta model of deltawriter/deltalog only"},
	{pkgs: "deltawriter/...", deny: []string{"github.com/twmb/franz-go/...", "github.com/hamba/avro/...", "ingest/...", "schemaguard/...", "batcher/..."},
		why: "deltawriter is the Delta protocol: no Kafka, no Avro, nothing of ingest; offsets arrive as plain (appId, version) pairs"},
	{pkgs: "deltawriter/storage/...", only: []string{"deltawriter/storage/...", "deltawriter/deltalog", "internal/backoff"},
		why: "deltawriter/storage holds the stores: it imports nothing of the module but deltawriter/deltalog and the one retry policy"},
	{pkgs: "deltawriter/expr/...", only: []string{"deltawriter/expr/...", "deltawriter/deltalog"},
		why: "deltawriter/expr evaluates Spark SQL expressions on the Delta model: it imports nothing of the module but deltawriter/deltalog"},
	{pkgs: "deltawriter/maintenance/...", only: []string{"deltawriter/maintenance/...", "deltawriter", "deltawriter/deltalog", "deltawriter/storage", "deltawriter/expr", "deltawriter/column", "internal/..."},
		why: "deltawriter/maintenance is table maintenance (OPTIMIZE, VACUUM, log cleanup) on the Delta writer: it never imports ingest; pipelines call it (OPTIMIZE moves column buffers from the data file reader to the writer)"},
	{pkgs: "deltawriter/keyindex/...", only: []string{"deltawriter/keyindex/...", "deltawriter", "deltawriter/deltalog", "deltawriter/storage"},
		onlyExternal: []string{"github.com/parquet-go/parquet-go/...", "github.com/RoaringBitmap/roaring/...", "golang.org/x/sync/..."},
		why:          "deltawriter/keyindex is the key index of keyed tables, read from the table's key columns: it knows the Delta writer, its model and stores and parquet-go, never Kafka, Avro or ingest"},
	{pkgs: "deltawriter/parquetenc/...", only: []string{"deltawriter/parquetenc/...", "deltawriter/column"},
		onlyExternal: []string{"github.com/parquet-go/parquet-go/...", "github.com/klauspost/compress/..."},
		why:          "deltawriter/parquetenc turns column buffers into a Parquet file and per-column summaries: it knows package column and parquet-go (and the codecs), nothing of Delta or the table"},
	{pkgs: "deltawriter/column/...", only: []string{"deltawriter/column/..."},
		why: "deltawriter/column is the column values the decoder writes and the encoder reads: it imports nothing of the module"},
	{pkgs: "deltawriter/deltalog/...", only: []string{"deltawriter/deltalog/..."},
		why: "deltawriter/deltalog is the pure leaf of Delta facts: it imports nothing of the module"},
	{pkgs: "ingest/kafkacols/...", only: []string{"ingest/kafkacols/...", "deltawriter/deltalog"}, deny: []string{"github.com/twmb/franz-go/..."},
		why: "ingest/kafkacols names the Kafka columns and their Delta types: pure, on the Delta model of deltawriter/deltalog only; a record's values are filled by ingest/rowfill"},
	{pkgs: "ingest/config/...", only: []string{"ingest/config/...", "ingest/kafkacols", "deltawriter/deltalog", "deltawriter/expr", "deltawriter/storage", "internal/awscred"}, deny: []string{"github.com/twmb/franz-go/..."},
		why: "ingest/config turns pipeline YAML into a validated Config: no Kafka client, not the Delta writer, nothing of the pipeline trunk"},
	{pkgs: "ingest/rowfill/...", only: []string{"ingest/rowfill/...", "ingest/config", "ingest/decode", "ingest/kafkacols", "schemaguard", "deltawriter", "deltawriter/deltalog", "deltawriter/expr", "deltawriter/column", "deltawriter/keyindex"},
		why: "ingest/rowfill is the per-row stage after decode (Kafka and generated column fills, CHECK constraints, partition routing, a keyed table's keys): it never imports the pipeline trunk nor ingest/dlq; a replay's original coordinates arrive as Options.Origin"},
	{pkgs: "cmd/benche2e", only: []string{"cmd/benche2e"},
		why: "cmd/benche2e is the end-to-end benchmark's helper: it measures the daemon from outside (Kafka, /proc, the table's log) and imports nothing of the module"},
	{pkgs: "cmd/benchcdc", only: []string{"cmd/benchcdc"},
		why: "cmd/benchcdc is the change-data-capture benchmark's helper: it measures Debezium and the daemon from outside (PostgreSQL, Kafka, /proc, the table's log) and imports nothing of the module"},
	{pkgs: "ingest/kafkaclient/...", only: []string{"ingest/kafkaclient/...", "ingest/config", "internal/awscred"},
		why: "ingest/kafkaclient builds the Kafka clients and their security (TLS, SASL, MSK IAM, ACL hints) from the config: besides franz-go and prometheus it imports only ingest/config and internal/awscred, never the pipeline trunk nor deltawriter"},
	{pkgs: "ingest/maintain/...", only: []string{"ingest/maintain/...", "ingest/config", "ingest/kafkaclient", "deltawriter", "deltawriter/maintenance", "deltawriter/storage"},
		onlyExternal: []string{"github.com/twmb/franz-go/pkg/kadm", "github.com/prometheus/client_golang/prometheus"},
		why:          "ingest/maintain schedules table maintenance and log cleanup: it runs deltawriter/maintenance's jobs on the config's schedule and reads the dead-letter topic's retention through kadm (its admin client from ingest/kafkaclient), never the pipeline trunk"},
	{pkgs: "ingest/...", deny: []string{"cmd/..."},
		why: "commands are wired in cmd; nothing imports them"},
	{pkgs: "...", except: []string{"deltawriter/storage/...", "internal/awscred"}, denyDirect: cloudSDKs,
		why: "only deltawriter/storage talks to the object stores: the rest of ingestd sees the storage.Store interface"},
	{pkgs: "...", except: []string{"deltawriter/internal/deltatest", "ingest/internal/configtest", "internal/testpki"}, deny: []string{"deltawriter/internal/deltatest", "ingest/internal/configtest", "internal/testpki"},
		why: "deltawriter/internal/deltatest, ingest/internal/configtest and internal/testpki are test fixtures: only _test.go files import them"},
	{pkgs: "internal/awscred", denyDirect: []string{"cloud.google.com/go/...", "google.golang.org/api/...", "github.com/Azure/...", "golang.org/x/oauth2/..."},
		why: "internal/awscred is the AWS credential chain of the AWS_MSK_IAM SASL mechanism, not a store: of the cloud SDKs it imports the AWS SDK only"},
}

// cloudSDKs are the object stores' SDKs and their credential libraries.
var cloudSDKs = []string{"github.com/aws/...", "cloud.google.com/go/...", "google.golang.org/api/...", "github.com/Azure/...", "golang.org/x/oauth2/..."}

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
	// TestImports and XTestImports are the imports of its _test.go files (package p and
	// package p_test).
	TestImports, XTestImports []string
}

func TestImportRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps,TestImports,XTestImports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d packages of %s: run the test inside the module", len(pkgs), module)
	}
	for _, v := range check(pkgs) {
		t.Error(v)
	}
}

// check returns one message per broken rule: the package, the import and the rule.
func check(pkgs []pkg) []string {
	byPath := make(map[string]pkg, len(pkgs))
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	var out []string
	for _, p := range pkgs {
		rel, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		rank, layer := layerOf(rel)
		if layer == "" {
			out = append(out, fmt.Sprintf("package %s has no layer in the import rules: add it to layers in internal/archtest (docs/architecture.md, \"Packages and import rules\")", rel))
			continue
		}
		for _, imp := range p.Imports {
			irel, inModule := relative(imp)
			if !inModule {
				continue
			}
			irank, ilayer := layerOf(irel)
			if irank < rank || (irank == rank && !(ilayer == layer && strings.HasSuffix(layer, "/..."))) {
				out = append(out, fmt.Sprintf("%s imports %s: a package may import only packages below its layer (%s is in layer %q, %s in %q; cmd → ingest → {batcher, schemaguard, deltawriter})",
					rel, irel, rel, layer, irel, ilayer))
			}
		}
		for _, r := range rules {
			if !match(r.pkgs, rel) || slices.ContainsFunc(r.except, func(pat string) bool { return match(pat, rel) }) {
				continue
			}
			for _, pat := range r.denyDirect {
				for _, imps := range []struct {
					how  string
					list []string
				}{{"directly", p.Imports}, {"in its tests", append(slices.Clone(p.TestImports), p.XTestImports...)}} {
					if i := slices.IndexFunc(imps.list, func(imp string) bool { return match(pat, imp) }); i >= 0 {
						out = append(out, fmt.Sprintf("%s imports %s (%s): rule %q must not import %q: %s", rel, imps.list[i], imps.how, r.pkgs, pat, r.why))
					}
				}
			}
			for _, imp := range p.Imports {
				irel, inModule := relative(imp)
				if !inModule {
					continue
				}
				if r.only != nil && !slices.ContainsFunc(r.only, func(pat string) bool { return match(pat, irel) }) {
					out = append(out, fmt.Sprintf("%s imports %s: rule %q: %s (it may import only %s of the module)", rel, irel, r.pkgs, r.why, strings.Join(r.only, ", ")))
				}
				for _, pat := range r.deny {
					if !external(pat) && match(pat, irel) {
						out = append(out, fmt.Sprintf("%s imports %s: rule %q must not import %q: %s", rel, irel, r.pkgs, pat, r.why))
					}
				}
			}
			for _, imp := range p.Imports {
				if _, inModule := relative(imp); r.onlyExternal == nil || inModule || !external(imp) ||
					slices.ContainsFunc(r.onlyExternal, func(pat string) bool { return match(pat, imp) }) {
					continue // the standard library is always allowed
				}
				out = append(out, fmt.Sprintf("%s imports %s: rule %q: %s (outside the module and the standard library it may import only %s)",
					rel, imp, r.pkgs, r.why, strings.Join(r.onlyExternal, ", ")))
			}
			for _, pat := range r.deny {
				if !external(pat) {
					continue
				}
				if dep, how := findDep(p, pat, byPath); dep != "" {
					out = append(out, fmt.Sprintf("%s imports %s (%s): rule %q must not import %q: %s", rel, dep, how, r.pkgs, pat, r.why))
				}
			}
		}
	}
	return out
}

// findDep returns the first package matching the external pattern among p's imports
// ("directly"), else among its dependencies, with the import that brings it in when that
// is a package of the module, and "" when p does not depend on it.
func findDep(p pkg, pattern string, byPath map[string]pkg) (dep, how string) {
	for _, imp := range p.Imports {
		if match(pattern, imp) {
			return imp, "directly"
		}
	}
	for _, d := range p.Deps {
		if !match(pattern, d) {
			continue
		}
		for _, imp := range p.Imports {
			if q, ok := byPath[imp]; ok && slices.Contains(q.Deps, d) {
				rel, _ := relative(imp)
				return d, "through " + rel
			}
		}
		return d, "through its imports"
	}
	return "", ""
}

// relative returns path relative to the module ("" for the module root), and whether it
// is in the module.
func relative(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

func external(pattern string) bool {
	first, _, _ := strings.Cut(pattern, "/")
	return strings.Contains(first, ".")
}

// match reports whether path matches pattern: equal, or below it for "x/..."; "..."
// matches every package of the module.
func match(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// layerOf returns the rank and pattern of the most specific layer matching rel: an exact
// pattern wins, then the longest "x/...".
func layerOf(rel string) (int, string) {
	best, rank, score := "", -1, -1
	for _, l := range layers {
		if !match(l.pattern, rel) {
			continue
		}
		s := len(l.pattern)
		if !strings.HasSuffix(l.pattern, "/...") {
			s += 1 << 20
		}
		if s > score {
			best, rank, score = l.pattern, l.rank, s
		}
	}
	return rank, best
}

// The checker itself: each kind of violation is reported with the package, the import
// and the rule; the current layout passes.
func TestCheckReportsViolations(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	ok := []pkg{
		{ImportPath: m("cmd/ingestd"), Imports: []string{m("ingest"), m("deltawriter/tableops")}},
		{ImportPath: m("ingest"), Imports: []string{m("ingest/decode"), m("batcher"), m("schemaguard"), m("deltawriter"), "github.com/twmb/franz-go/pkg/kgo"}},
		{ImportPath: m("ingest/dlq"), Imports: []string{m("ingest/decode"), m("deltawriter"), "github.com/twmb/franz-go/pkg/kgo"}},
		{ImportPath: m("ingest/decode"), Imports: []string{m("deltawriter/deltalog"), "github.com/hamba/avro/v2"}},
		{ImportPath: m("ingest/kafkaclient"), Imports: []string{m("ingest/config"), m("internal/awscred"), "github.com/twmb/franz-go/pkg/kgo", "github.com/prometheus/client_golang/prometheus"}},
		{ImportPath: m("ingest/maintain"), Imports: []string{"context", m("ingest/config"), m("ingest/kafkaclient"), m("deltawriter"), m("deltawriter/maintenance"), m("deltawriter/storage"),
			"github.com/twmb/franz-go/pkg/kadm", "github.com/prometheus/client_golang/prometheus"}},
		{ImportPath: m("schemaguard"), Imports: []string{m("deltawriter/deltalog")}},
		{ImportPath: m("deltawriter/tableops"), Imports: []string{m("deltawriter"), m("deltawriter/storage"), m("deltawriter/deltalog")}},
		{ImportPath: m("deltawriter"), Imports: []string{m("deltawriter/storage"), m("deltawriter/deltalog"), m("deltawriter/parquetenc"), m("deltawriter/column")},
			Deps: []string{"github.com/aws/aws-sdk-go-v2/service/s3", "cloud.google.com/go/storage"}}, // through deltawriter/storage
		{ImportPath: m("deltawriter/parquetenc"), Imports: []string{"bytes", m("deltawriter/column"), "github.com/parquet-go/parquet-go", "github.com/parquet-go/parquet-go/format", "github.com/klauspost/compress/s2"}},
		{ImportPath: m("deltawriter/column"), Imports: []string{"github.com/parquet-go/parquet-go"}},
		{ImportPath: m("deltawriter/storage/s3"), Imports: []string{m("deltawriter/storage")}},
		{ImportPath: m("deltawriter/storage"), Imports: []string{m("deltawriter/deltalog"), "github.com/aws/aws-sdk-go-v2/service/s3", "cloud.google.com/go/storage", "golang.org/x/oauth2/google"},
			XTestImports: []string{"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"}},
		{ImportPath: m("internal/awscred"), Imports: []string{"github.com/aws/aws-sdk-go-v2/config"}},
		{ImportPath: m("deltawriter/deltalog")},
		{ImportPath: m("internal/tarzst")},
	}
	if v := check(ok); len(v) != 0 {
		t.Errorf("the intended layout is refused:\n%s", strings.Join(v, "\n"))
	}
	for _, tc := range []struct {
		p    pkg
		want []string // substrings of the one message expected
	}{
		{pkg{ImportPath: m("schemaguard"), Imports: []string{m("deltawriter/storage")}}, []string{"schemaguard imports deltawriter/storage", `rule "schemaguard/..."`, "may import only"}},
		{pkg{ImportPath: m("schemaguard"), Imports: []string{"github.com/twmb/franz-go/pkg/kgo"}, Deps: []string{"github.com/twmb/franz-go/pkg/kgo"}}, []string{"schemaguard imports github.com/twmb/franz-go/pkg/kgo (directly)", "must not import"}},
		{pkg{ImportPath: m("batcher"), Imports: []string{m("deltawriter/deltalog")}}, []string{"batcher imports deltawriter/deltalog", `rule "batcher/..."`}},
		{pkg{ImportPath: m("batcher"), Imports: []string{"example.com/x"}, Deps: []string{"example.com/x", "github.com/twmb/franz-go/pkg/kgo"}}, []string{"batcher imports github.com/twmb/franz-go/pkg/kgo (through its imports)"}},
		{pkg{ImportPath: m("deltawriter/tableops"), Imports: []string{"github.com/hamba/avro/v2"}, Deps: []string{"github.com/hamba/avro/v2"}}, []string{"deltawriter/tableops imports github.com/hamba/avro/v2", `"github.com/hamba/avro/..."`}},
		{pkg{ImportPath: m("deltawriter/deltalog"), Imports: []string{m("internal/tarzst")}}, []string{"deltawriter/deltalog imports internal/tarzst", "pure leaf"}},
		{pkg{ImportPath: m("deltawriter/storage"), Imports: []string{m("internal/tarzst")}}, []string{"deltawriter/storage imports internal/tarzst", "but deltawriter/deltalog"}},
		{pkg{ImportPath: m("deltawriter/parquetenc"), Imports: []string{m("deltawriter/deltalog")}}, []string{"deltawriter/parquetenc imports deltawriter/deltalog", `rule "deltawriter/parquetenc/..."`, "may import only deltawriter/parquetenc/..., deltawriter/column of the module"}},
		{pkg{ImportPath: m("deltawriter/parquetenc"), Imports: []string{m("deltawriter")}}, []string{"deltawriter/parquetenc imports deltawriter: a package may import only packages below its layer"}},
		{pkg{ImportPath: m("deltawriter/parquetenc"), Imports: []string{"github.com/apache/arrow-go/v18/parquet"}}, []string{"deltawriter/parquetenc imports github.com/apache/arrow-go/v18/parquet", "outside the module and the standard library it may import only github.com/parquet-go/parquet-go/..."}},
		{pkg{ImportPath: m("internal/tarzst"), Imports: []string{m("deltawriter/deltalog")}}, []string{"internal/tarzst imports deltawriter/deltalog: a package may import only packages below its layer"}},
		{pkg{ImportPath: m("ingest"), Imports: []string{m("cmd/ingestd")}}, []string{"ingest imports cmd/ingestd: a package may import only packages below its layer"}},
		{pkg{ImportPath: m("ingest/kafkaclient"), Imports: []string{m("deltawriter")}}, []string{"ingest/kafkaclient imports deltawriter", `rule "ingest/kafkaclient/..."`, "may import only"}},
		{pkg{ImportPath: m("ingest/kafkaclient"), Imports: []string{m("ingest")}}, []string{"ingest/kafkaclient imports ingest: a package may import only packages below its layer"}},
		{pkg{ImportPath: m("newtop")}, []string{"package newtop has no layer"}},
		{pkg{ImportPath: m("deltawriter"), Imports: []string{m("deltawriter/internal/deltatest")}}, []string{`deltawriter imports deltawriter/internal/deltatest: rule "..." must not import`, "test fixtures"}},
		{pkg{ImportPath: m("ingest/config"), Imports: []string{"github.com/twmb/franz-go/pkg/kgo"}, Deps: []string{"github.com/twmb/franz-go/pkg/kgo"}}, []string{"ingest/config imports github.com/twmb/franz-go/pkg/kgo (directly)", `rule "ingest/config/..."`}},
		{pkg{ImportPath: m("ingest/config"), Imports: []string{m("ingest/decode")}}, []string{"ingest/config imports ingest/decode", "may import only"}},
		{pkg{ImportPath: m("ingest/config"), Imports: []string{m("deltawriter")}}, []string{"ingest/config imports deltawriter", `rule "ingest/config/..."`, "may import only"}},
		{pkg{ImportPath: m("deltawriter"), Imports: []string{"github.com/aws/aws-sdk-go-v2/service/s3"}}, []string{"deltawriter imports github.com/aws/aws-sdk-go-v2/service/s3 (directly)", `rule "..." must not import "github.com/aws/..."`, "storage.Store"}},
		{pkg{ImportPath: m("ingest"), XTestImports: []string{"cloud.google.com/go/storage"}}, []string{"ingest imports cloud.google.com/go/storage (in its tests)", `"cloud.google.com/go/..."`}},
		{pkg{ImportPath: m("cmd/ingestd"), TestImports: []string{"golang.org/x/oauth2/google"}}, []string{"cmd/ingestd imports golang.org/x/oauth2/google (in its tests)"}},
		{pkg{ImportPath: m("internal/awscred"), Imports: []string{"github.com/aws/aws-sdk-go-v2/config", "github.com/Azure/azure-sdk-for-go/sdk/azidentity"}}, []string{"internal/awscred imports github.com/Azure/azure-sdk-for-go/sdk/azidentity (directly)", "the AWS SDK only"}},
		{pkg{ImportPath: m("ingest/rowfill"), Imports: []string{m("ingest/dlq")}}, []string{"ingest/rowfill imports ingest/dlq", `rule "ingest/rowfill/..."`, "may import only"}},
		{pkg{ImportPath: m("ingest/maintain"), Imports: []string{m("ingest")}}, []string{"ingest/maintain imports ingest: a package may import only packages below its layer",
			`ingest/maintain imports ingest: rule "ingest/maintain/..."`, "never the pipeline trunk"}},
		{pkg{ImportPath: m("ingest/maintain"), Imports: []string{m("ingest/dlq")}}, []string{"ingest/maintain imports ingest/dlq", `rule "ingest/maintain/..."`, "may import only ingest/maintain/..., ingest/config, ingest/kafkaclient, deltawriter, deltawriter/maintenance, deltawriter/storage of the module"}},
		{pkg{ImportPath: m("ingest/maintain"), Imports: []string{"github.com/twmb/franz-go/pkg/kgo"}}, []string{"ingest/maintain imports github.com/twmb/franz-go/pkg/kgo", `rule "ingest/maintain/..."`, "it may import only github.com/twmb/franz-go/pkg/kadm, github.com/prometheus/client_golang/prometheus"}},
	} {
		v := check([]pkg{tc.p})
		if len(v) == 0 {
			t.Errorf("%s importing %v: no violation reported", tc.p.ImportPath, tc.p.Imports)
			continue
		}
		for _, w := range tc.want {
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, w) }) {
				t.Errorf("%s importing %v: no message contains %q:\n%s", tc.p.ImportPath, tc.p.Imports, w, strings.Join(v, "\n"))
			}
		}
	}
	// Several rules at once: deltawriter importing ingest breaks the layers and the
	// deltawriter rule.
	v := check([]pkg{{ImportPath: m("deltawriter"), Imports: []string{m("ingest"), m("schemaguard")}}})
	for _, w := range []string{"deltawriter imports ingest: a package may import only packages below its layer",
		`deltawriter imports ingest: rule "deltawriter/..." must not import "ingest/..."`,
		`deltawriter imports schemaguard: rule "deltawriter/..." must not import "schemaguard/..."`,
		"deltawriter imports schemaguard: a package may import only packages below its layer"} {
		if !slices.ContainsFunc(v, func(s string) bool { return strings.HasPrefix(s, w) }) {
			t.Errorf("no message starts with %q:\n%s", w, strings.Join(v, "\n"))
		}
	}
}
