package config

import (
	"bufio"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// referencePage is the configuration reference every key must appear in.
const referencePage = "../../docs/configuration.md"

// yamlKeys returns every YAML key path reachable from t ("kafka", "kafka.tls",
// "kafka.tls.ca_file", …), blocks included, in field order. A struct (or pointer to one)
// is a block whose fields are keys below it; anything else (scalars, lists, maps,
// durations, byte sizes, secrets) is a leaf. Fields without a yaml tag, or tagged "-",
// are not keys.
func yamlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out = append(out, path)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			out = append(out, yamlKeys(ft, path)...)
		}
	}
	return out
}

// keyRow is a table row of the reference whose first cell is a key in backticks.
var keyRow = regexp.MustCompile("^\\|\\s*`([a-z0-9_.]+)`\\s*\\|")

// documentedKeys returns the keys of the reference's table rows, with their line numbers.
func documentedKeys(r io.Reader) (map[string]int, error) {
	keys := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if m := keyRow.FindStringSubmatch(sc.Text()); m != nil {
			keys[m[1]] = n
		}
	}
	return keys, sc.Err()
}

// compareReference returns one message per key the loader knows and the page lacks, and
// per key the page lists that the loader does not know.
func compareReference(known []string, documented map[string]int) []string {
	var out []string
	for _, k := range known {
		if _, ok := documented[k]; !ok {
			out = append(out, "key "+k+" is not in "+referencePage+": add a row for it (type, default, allowed values, example)")
		}
	}
	var extra []string
	for k := range documented {
		if !slices.Contains(known, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	for _, k := range extra {
		out = append(out, "key "+k+" is documented in "+referencePage+" but the loader does not know it: remove or correct the row")
	}
	return out
}

// TestConfigurationReference: docs/configuration.md documents exactly the keys Load
// accepts, every block and every leaf of Config.
func TestConfigurationReference(t *testing.T) {
	f, err := os.Open(referencePage)
	if err != nil {
		t.Fatalf("the configuration reference: %v", err)
	}
	defer f.Close()
	documented, err := documentedKeys(f)
	if err != nil {
		t.Fatal(err)
	}
	known := yamlKeys(reflect.TypeFor[Config](), "")
	if len(known) < 60 {
		t.Fatalf("found only %d keys in Config: the walk is broken", len(known))
	}
	for _, msg := range compareReference(known, documented) {
		t.Error(msg)
	}
}

// The checker itself: a key added to a config type without a row, and a row without a
// key, are both reported; a block's own key counts.
func TestCompareReferenceReports(t *testing.T) {
	type inner struct {
		Depth int `yaml:"depth"`
	}
	type withNewKey struct {
		Name   string `yaml:"name"`
		Secret Secret `yaml:"secret"`
		Block  *inner `yaml:"block"`
		Hidden string `yaml:"-"`
	}
	known := yamlKeys(reflect.TypeFor[withNewKey](), "")
	if want := []string{"name", "secret", "block", "block.depth"}; !slices.Equal(known, want) {
		t.Fatalf("yamlKeys = %v, want %v", known, want)
	}
	doc := "# Reference\n\n| key | type |\n|---|---|\n| `name` | string |\n| `block` | block |\n| `block.depth` | int |\n| `gone` | string |\nText with `secret` outside a table.\n"
	documented, err := documentedKeys(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := compareReference(known, documented)
	want := []string{
		"key secret is not in " + referencePage + ": add a row for it (type, default, allowed values, example)",
		"key gone is documented in " + referencePage + " but the loader does not know it: remove or correct the row",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("compareReference:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
