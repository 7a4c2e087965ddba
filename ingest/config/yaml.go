package config

// The config decoder: YAML text → yaml.Node tree → Config, by a small reflective walker.
//
// Library choice: go.yaml.in/yaml/v3, the YAML organisation's maintained continuation of
// gopkg.in/yaml.v3 (a port of libyaml). It reads `brokers: [localhost:9092]` as the YAML
// 1.2 plain scalar "localhost:9092" (goccy/go-yaml v1.19.2, the newest release, reads it
// as a mapping {localhost: 9092}), and its yaml.Node carries a line for every key and
// value. Walking the nodes ourselves instead of yaml.Unmarshal gives us the three things
// the library's decoder cannot: ${VAR} expansion on scalar values after parsing (so a
// value containing " #" or ": " is taken as written), unknown-key detection that keeps
// the line (Node.Decode has no KnownFields), and type errors in the user's terms (the key
// path, the line, the expected form) rather than Go type names.

import (
	"encoding"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// yamlDecoder decodes one file's nodes into a Go value and collects every problem.
type yamlDecoder struct {
	file  string
	errs  []error
	lines map[string]int // "$.kafka.brokers[0]" → 1-based line; "$" is the document's first line
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	textUnmarsh  = reflect.TypeFor[encoding.TextUnmarshaler]()
	yamlLineRe   = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)
)

// decodeYAML parses src (one YAML document) into out (a pointer to a struct). It returns
// the line of every path it saw (see Config.line) and one Error per problem: a
// syntax error (then nothing is decoded), an unknown or repeated key, a value of the wrong
// form, an unset ${VAR}. An empty document decodes to the zero value without error.
func decodeYAML(file string, src []byte, out any) (map[string]int, []error) {
	d := &yamlDecoder{file: file, lines: map[string]int{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return d.lines, []error{syntaxError(file, src, err)}
	}
	if len(doc.Content) == 0 { // empty file or only comments
		return d.lines, nil
	}
	root := doc.Content[0]
	d.lines["$"] = root.Line
	d.decode(root, reflect.ValueOf(out).Elem(), "$")
	return d.lines, d.errs
}

// syntaxError turns "yaml: line 3: mapping values are not allowed in this context" into a
// Error on line 3 of src. An unquoted ${VAR} in a flow list or mapping on that line
// (brokers: [${KAFKA_BROKERS}]: its "{" opens a mapping) gets the fix to quote it.
func syntaxError(file string, src []byte, err error) error {
	ce := &Error{File: file, Msg: "invalid YAML: " + err.Error(), Fix: "check the indentation and quoting on that line (quote values that contain ': ' or ' #')"}
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		ce.Line, _ = strconv.Atoi(m[1])
		ce.Msg = "invalid YAML: " + m[2]
		if strings.HasPrefix(m[2], "did not find expected") {
			// Parser errors carry the 0-based line of the collection being parsed (yaml/v3
			// adds 1 only for scanner errors): name that collection's first line.
			ce.Line++
			ce.Msg = "invalid YAML in the list or mapping that starts here: " + m[2]
		}
		if v := unquotedFlowVar(src, ce.Line); v != "" {
			ce.Fix = fmt.Sprintf("quote %s as \"%s\": inside [ ] or { } an unquoted ${ opens a YAML mapping (e.g. brokers: [\"${KAFKA_BROKERS}\"])", v, v)
		}
	}
	return ce
}

// unquotedFlowVar returns the first ${VAR} on 1-based line n of src that stands unquoted
// in a flow collection opened on that line: after "[", "{", "," or ":" (spaces between),
// outside quotes; "" if there is none.
func unquotedFlowVar(src []byte, n int) string {
	lines := strings.Split(string(src), "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	line := lines[n-1]
	var quote byte
	prev := byte(0) // last non-space byte outside quotes
	depth := 0      // flow collections open
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return ""
		case c == '$' && i+1 < len(line) && line[i+1] == '{' && depth > 0 && strings.IndexByte("[{,:", prev) >= 0 && prev != 0:
			if end := strings.IndexByte(line[i:], '}'); end > 0 {
				return line[i : i+end+1]
			}
			return line[i:]
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		}
		if c != ' ' && c != '\t' {
			prev = c
		}
	}
	return ""
}

func (d *yamlDecoder) fail(n *yaml.Node, msg, fix string) {
	d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Msg: msg, Fix: fix})
}

// key renders a path for messages: "$.kafka.brokers[0]" → "kafka.brokers[0]".
func key(path string) string {
	if path == "$" {
		return "the file"
	}
	return strings.TrimPrefix(path, "$.")
}

// secretKey reports whether a key's value must never be quoted in a message.
func secretKey(path string) bool {
	last := strings.ToLower(path[strings.LastIndex(path, ".")+1:])
	return strings.Contains(last, "password") || strings.Contains(last, "token") || strings.Contains(last, "secret")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping ({key: value})"
	case yaml.SequenceNode:
		return "a list ([a, b])"
	default:
		return "a single value"
	}
}

// formOf is the expected form of a Go type in the user's terms.
func formOf(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration such as 10s or 500ms"
	case t == reflect.TypeFor[ByteSize]():
		return "a size such as 128MiB"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list such as [a, b]"
	case reflect.Map:
		return "a mapping such as {key: value}"
	case reflect.Struct:
		return "a mapping of keys such as {key: value}"
	case reflect.Pointer:
		return formOf(t.Elem())
	}
	return "a " + t.String()
}

func (d *yamlDecoder) wrongShape(n *yaml.Node, path string, t reflect.Type) {
	d.fail(n, fmt.Sprintf("%s: expected %s, got %s", key(path), formOf(t), kindName(n)), "write "+formOf(t))
}

func (d *yamlDecoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if _, seen := d.lines[path]; !seen {
		d.lines[path] = n.Line
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if isNull(n) {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	}
	if isNull(n) && t.Kind() != reflect.String {
		return // `key:` with no value leaves the default
	}
	if reflect.PointerTo(t).Implements(textUnmarsh) && t != durationType {
		s, ok := d.scalar(n, path, t)
		if !ok {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			d.fail(n, fmt.Sprintf("%s: %v", key(path), err), "write "+formOf(t))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.wrongShape(n, path, t)
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode || t.Key().Kind() != reflect.String {
			d.wrongShape(n, path, t)
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if prev, dup := seen[k.Value]; dup {
				d.fail(k, fmt.Sprintf("%s: key %q is set twice (also on line %d)", key(path), k.Value, prev), "keep one")
				continue
			}
			seen[k.Value] = k.Line
			ev := reflect.New(t.Elem()).Elem()
			d.decode(val, ev, path+"."+k.Value)
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), ev)
		}
		v.Set(m)
	default:
		s, ok := d.scalar(n, path, t)
		if !ok {
			return
		}
		d.setScalar(n, v, path, s)
	}
}

// decodeStruct decodes a mapping into a struct by its `yaml` tags; unknown and repeated
// keys are errors on their own line.
func (d *yamlDecoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.MappingNode {
		d.wrongShape(n, path, t)
		return
	}
	fields := map[string]int{}
	var names []string
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" || !t.Field(i).IsExported() {
			continue
		}
		fields[tag] = i
		names = append(names, tag)
	}
	// merge keys (`<<: *defaults`, or a list of aliases) first: the mapping's own keys win
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, val := n.Content[i], n.Content[i+1]; k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			srcs := []*yaml.Node{val}
			if val.Kind == yaml.SequenceNode {
				srcs = val.Content
			}
			for _, src := range srcs {
				for src.Kind == yaml.AliasNode {
					src = src.Alias
				}
				d.decodeStruct(src, v, path)
			}
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			continue
		}
		p := path + "." + k.Value
		if path == "$" {
			p = "$." + k.Value
		}
		fi, known := fields[k.Value]
		if !known {
			where := "at the top level"
			if path != "$" {
				where = "in " + key(path)
			}
			fix := "remove it or correct its spelling"
			if alias, ok := keyAliases[k.Value]; ok && slices.Contains(names, alias.key) {
				fix = alias.fix
			} else if near := closest(k.Value, names); near != "" {
				fix = fmt.Sprintf("remove it or correct its spelling: did you mean %q?", near)
			}
			d.fail(k, fmt.Sprintf("unknown field %q %s", k.Value, where), fmt.Sprintf("%s; known keys here: %s", fix, strings.Join(names, ", ")))
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			d.fail(k, fmt.Sprintf("%s is set twice (also on line %d)", key(p), prev), "keep one")
			continue
		}
		seen[k.Value] = k.Line
		d.lines[p] = k.Line
		d.decode(val, v.Field(fi), p)
	}
}

// keyAliases are keys of other tools' configurations that users carry over, with the key
// ingestd uses instead: closest would suggest a key by spelling ("ssl" → "sasl"), not by
// meaning.
var keyAliases = map[string]struct{ key, fix string }{
	"ssl": {"tls", `TLS settings go under tls (e.g. tls: {ca_file: /etc/ingestd/kafka-ca.pem}); Kafka's security.protocol SSL is tls, SASL_SSL is tls and sasl`},
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// scalar returns n's value with ${VAR} and ${VAR:-default} expanded from the environment
// (once: an expanded value is never expanded or parsed again), or false after recording
// an error (not a scalar, an unset variable). ${HOSTNAME} (without a default) unset or
// empty is the host name (os.Hostname).
func (d *yamlDecoder) scalar(n *yaml.Node, path string, t reflect.Type) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.wrongShape(n, path, t)
		return "", false
	}
	if isNull(n) {
		return "", true
	}
	ok := true
	s := envRe.ReplaceAllStringFunc(n.Value, func(m string) string {
		sub := envRe.FindStringSubmatch(m)
		if v, set := os.LookupEnv(sub[1]); set && v != "" {
			return v
		}
		if sub[1] == "HOSTNAME" && !strings.Contains(m, ":-") {
			// bash sets HOSTNAME without exporting it, so ${HOSTNAME} works in a pod (the
			// kubelet exports it) but not from a shell: fall back to the host name.
			if h, err := os.Hostname(); err == nil && h != "" {
				return h
			}
		}
		if strings.Contains(m, ":-") {
			return sub[3]
		}
		ok = false
		d.fail(n, fmt.Sprintf("environment variable %s is not set (used by %s)", sub[1], key(path)),
			fmt.Sprintf("export %s=… or write ${%s:-default}", sub[1], sub[1]))
		return m
	})
	return s, ok
}

func (d *yamlDecoder) setScalar(n *yaml.Node, v reflect.Value, path, s string) {
	t := v.Type()
	bad := func() {
		shown := strconv.Quote(s)
		if secretKey(path) {
			shown = "[redacted]"
		}
		d.fail(n, fmt.Sprintf("%s: %s is not %s", key(path), shown, formOf(t)), "write "+formOf(t))
	}
	switch {
	case t == durationType:
		dur, err := time.ParseDuration(s)
		if err != nil {
			bad()
			return
		}
		v.SetInt(int64(dur))
		return
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		switch s {
		case "true", "True", "TRUE":
			v.SetBool(true)
		case "false", "False", "FALSE":
			v.SetBool(false)
		default:
			bad()
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			bad()
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(s, 10, t.Bits())
		if err != nil {
			bad()
			return
		}
		v.SetUint(u)
	default:
		d.errs = append(d.errs, errors.New("config decoder: unsupported field type "+t.String()))
	}
}

// closest returns the name within edit distance 2 of s (the smallest), or "".
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
