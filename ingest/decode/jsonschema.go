package decode

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
)

// JSON Schema records (docs/formats.md, "JSON Schema"): the Confluent frame, then a JSON
// document. The registry's schema (drafts 4 to 2020-12, references resolved through the
// registry) is compiled with santhosh-tekuri/jsonschema, which validates every record; its
// columns are a jNode tree, transcoded like plain JSON's.

// jsonSchemaBase is the URL the schema texts are loaded under: references resolve against
// it, and nothing is ever fetched from it.
const jsonSchemaBase = "https://ingestd.invalid/schemas/"

// loadJSONSchema compiles a JSON registry answer, its references fetched from the registry
// (each subject version once), and derives its columns.
func (r *Registry) loadJSONSchema(ctx context.Context, id int, s sr.Schema) (*WriterSchema, error) {
	files := map[string]string{}
	if err := r.jsonRefs(ctx, id, s.References, files, 0); err != nil {
		return nil, err
	}
	return CompileJSONSchema(id, s.Schema, files)
}

func (r *Registry) jsonRefs(ctx context.Context, id int, refs []sr.SchemaReference, files map[string]string, depth int) error {
	if depth > maxReferenceDepth {
		return newError(ReasonSchemaParseError, "", fmt.Errorf("look up schema %d: references nested deeper than %d", id, maxReferenceDepth))
	}
	for _, ref := range refs {
		if _, done := files[ref.Name]; done {
			continue
		}
		rs, err := r.client.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return r.classify(fmt.Sprintf("look up schema %d reference %s (subject %q version %d)", id, ref.Name, ref.Subject, ref.Version), err)
		}
		if rs.Type != sr.TypeJSON {
			return newError(ReasonSchemaParseError, "", fmt.Errorf("look up schema %d reference %s: schema type %s, want JSON", id, ref.Name, rs.Type))
		}
		files[ref.Name] = rs.Schema.Schema
		if err := r.jsonRefs(ctx, id, rs.References, files, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// noLoader refuses every URL that was not added as a resource: a schema's $ref never
// reaches the network or the file system.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is not among the schema's registry references", url)
}

// CompileJSONSchema compiles the JSON Schema text of schema id (files holds the texts of
// its references by the names its $refs use) and returns its writer schema. Errors: an
// *Error with ReasonSchemaParseError when a text is not JSON or not a valid schema. A
// schema whose columns cannot be derived has DeltaErr set (ReasonUnsupportedType, with
// the path).
func CompileJSONSchema(id int, text string, files map[string]string) (*WriterSchema, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.AssertFormat() // format is then compiled (date-time → timestamp) and checked
	add := func(name, txt string) error {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(txt))
		if err != nil {
			return newError(ReasonSchemaParseError, "", fmt.Errorf("parse JSON schema %d (%s): %w", id, name, err))
		}
		if err := c.AddResource(jsonSchemaBase+name, doc); err != nil {
			return newError(ReasonSchemaParseError, "", fmt.Errorf("add JSON schema %d (%s): %w", id, name, err))
		}
		return nil
	}
	for name, txt := range files {
		if err := add(name, txt); err != nil {
			return nil, err
		}
	}
	const main = "ingestd-registry-schema.json"
	if err := add(main, text); err != nil {
		return nil, err
	}
	sch, err := c.Compile(jsonSchemaBase + main)
	if err != nil {
		return nil, newError(ReasonSchemaParseError, "", fmt.Errorf("compile JSON schema %d: %w", id, err))
	}
	g := &jsGen{}
	top, err := g.node(sch, "", 0)
	if err == nil && top.kind != jStruct {
		err = newError(ReasonUnsupportedType, "", errors.New("convert schema: the top level is not an object with properties"))
	}
	if err != nil {
		return &WriterSchema{ID: id, Format: FormatJSONSchema, DeltaErr: err}, nil
	}
	if g.needs != "" {
		top.clearChecks() // the validator reads every document: the one pass stays as it was
	}
	ws := jsonWriter(id, 0, FormatJSONSchema, top)
	if ws.body != nil {
		ws.body = &jsonSchemaBody{sch: sch, json: ws.body.(*jsonBody), needs: g.needs}
	}
	return ws, nil
}

// jsGen derives a schema's jNode tree and decides whether the validator must read each
// document: needs is "" when every constraint of the schema is one the one-pass
// transcoder enforces with the validator's verdict or a stricter one (a type, a property
// of an open object, items, a map's values, required, nullability, format date and
// date-time, a string's enum), given the checks it adds for JSON Schema (jsChecks); else it names the
// first keyword (and its schema's location) that only the validator checks.
type jsGen struct {
	stack []*jsonschema.Schema
	needs string
}

// jsChecks are a JSON Schema node's one-pass checks, beyond those of its column type.
type jsChecks uint8

const (
	jsNoNull    jsChecks = 1 << iota // never null (an optional property whose schema refuses null, a string enum without null)
	jsPresent                        // a required property whose schema admits null: null, never absent
	jsExactKeys                      // a struct's keys match its properties exactly (plain JSON also matches them by case)
	jsRFC3339                        // a date-time reads as RFC 3339 only (the validator's grammar), never as time.Parse does
)

func (n *jNode) clearChecks() {
	n.js, n.enum = 0, nil
	for _, f := range n.fields {
		f.node.clearChecks()
	}
	if n.elem != nil {
		n.elem.clearChecks()
	}
	if n.values != nil {
		n.values.clearChecks()
	}
}

// jsOwnKeywords are the compiled schema's fields the derivation reads (node checks each
// use) or that assert nothing (identifiers, annotations). Every other field, set, is a
// keyword only the validator checks; a field a newer library adds is one too.
var jsOwnKeywords = map[string]bool{
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true, "RecursiveAnchor": true, "DynamicAnchor": true,
	"Types": true, "Ref": true, "AnyOf": true, "OneOf": true, "Format": true, "Enum": true,
	"Required": true, "Properties": true, "AdditionalProperties": true, "Items": true, "Items2020": true,
	"Title": true, "Description": true, "Default": true, "Comment": true, "ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
}

// validatorKeyword is the first set field of s that only the validator checks, or "".
func validatorKeyword(s *jsonschema.Schema) string {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && !jsOwnKeywords[f.Name] && !v.Field(i).IsZero() {
			return f.Name
		}
	}
	return ""
}

// shapeKeyword is the first set field of s among those the derivation reads, but
// ignores in keys: what node's branch for s does not account for.
func shapeKeyword(s *jsonschema.Schema, keys ...string) string {
	set := map[string]bool{
		"Ref": s.Ref != nil, "OneOf": len(s.OneOf) > 0, "AnyOf": len(s.AnyOf) > 0, "Format": s.Format != nil, "Enum": s.Enum != nil,
		"Required": len(s.Required) > 0, "Properties": len(s.Properties) > 0, "AdditionalProperties": s.AdditionalProperties != nil,
		"Items": s.Items != nil, "Items2020": s.Items2020 != nil,
	}
	for _, k := range []string{"Ref", "OneOf", "AnyOf", "Format", "Enum", "Required", "Properties", "AdditionalProperties", "Items", "Items2020"} {
		if set[k] && !slices.Contains(keys, k) {
			return k
		}
	}
	return ""
}

// need records the first reason the validator must read each document.
func (g *jsGen) need(s *jsonschema.Schema, why string) {
	if g.needs == "" {
		g.needs = why + " (" + s.Location + ")"
	}
}

// node maps a compiled schema (docs/formats.md, "JSON Schema to Delta types").
func (g *jsGen) node(s *jsonschema.Schema, path string, depth int) (*jNode, error) {
	refuse := func(format string, args ...any) (*jNode, error) {
		return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: "+format, args...))
	}
	if depth > maxJSONDepth {
		return refuse("nested deeper than %d", maxJSONDepth)
	}
	if slices.Contains(g.stack, s) {
		return refuse("recursive schema (%s)", s.Location)
	}
	g.stack = append(g.stack, s)
	defer func() { g.stack = g.stack[:len(g.stack)-1] }()
	if k := validatorKeyword(s); k != "" {
		g.need(s, k)
	}
	var types []string
	if s.Types != nil {
		types = s.Types.ToStrings()
	}
	if s.Ref != nil && len(types) == 0 {
		if k := shapeKeyword(s, "Ref"); k != "" {
			g.need(s, k+" beside $ref")
		}
		return g.node(s.Ref, path, depth+1)
	}
	if s.Ref != nil {
		g.need(s, "$ref beside type") // the derivation reads the type only
	}
	nullable := slices.Contains(types, "null")
	types = slices.DeleteFunc(types, func(t string) bool { return t == "null" })
	if len(types) == 0 {
		// The validator's verdict is the branch's when the other branches are exactly
		// {"type": "null"}, oneOf's or anyOf's alone, and (oneOf) one of them matches null.
		if k := shapeKeyword(s, "OneOf", "AnyOf"); k != "" || s.Types != nil || len(s.OneOf) > 0 && len(s.AnyOf) > 0 {
			g.need(s, "oneOf or anyOf beside "+cmp.Or(k, "another oneOf, anyOf or type"))
		}
		var branches []*jsonschema.Schema
		nulls := 0
		for _, b := range append(slices.Clone(s.OneOf), s.AnyOf...) {
			if b.Types != nil && slices.Equal(b.Types.ToStrings(), []string{"null"}) {
				nullable = true
				if nulls++; validatorKeyword(b) != "" || shapeKeyword(b) != "" {
					g.need(b, "a null branch with other keywords")
				}
				continue
			}
			branches = append(branches, b)
		}
		if len(branches) != 1 {
			return refuse("a value without one type (a union of %d non-null schemas, or no type): no column type fits it", len(branches))
		}
		n, err := g.node(branches[0], path, depth+1)
		if n != nil {
			if len(s.OneOf) > 0 && (nulls > 1 || nulls == 1 && n.nullable) {
				g.need(s, "oneOf with branches that both match null")
			}
			n.nullable = n.nullable || nullable
		}
		return n, err
	}
	if len(s.OneOf) > 0 || len(s.AnyOf) > 0 {
		g.need(s, "oneOf or anyOf beside type") // the derivation reads the type only
	}
	if len(types) > 1 {
		if slices.Sort(types); slices.Equal(types, []string{"integer", "number"}) { // Types.ToStrings gives number first
			types = []string{"number"}
		} else {
			return refuse("a union of the types %v: no column type fits them", types)
		}
	}
	n := &jNode{nullable: nullable}
	// A keyword of another type than the schema's (required on a string) asserts nothing
	// on its values; such rare schemas are left to the validator all the same.
	switch types[0] {
	case "boolean", "integer", "number":
		n.kind = map[string]jKind{"boolean": jBool, "integer": jLong, "number": jDouble}[types[0]]
		if k := shapeKeyword(s); k != "" {
			g.need(s, k)
		}
	case "string":
		n.kind = jString
		if k := shapeKeyword(s, "Format", "Enum"); k != "" {
			g.need(s, k)
		}
		if s.Format != nil {
			switch s.Format.Name {
			case "date-time":
				n.kind = jTimestamp
				n.js |= jsRFC3339
			case "date":
				n.kind = jDate // time.Parse(time.DateOnly), as the validator's format
			default:
				g.need(s, "format "+s.Format.Name)
			}
		}
		if s.Enum != nil {
			// The one pass takes a string only among the enum's strings (its raw text
			// has no escapes: it is the value), and null only when the enum has it.
			if n.kind != jString {
				g.need(s, "Enum of a date or date-time")
			}
			n.enum = map[string]bool{}
			null := false
			for _, v := range s.Enum.Values {
				switch v := v.(type) {
				case string:
					n.enum[v] = true
				case nil:
					null = true
				}
			}
			if !null {
				n.js |= jsNoNull
			}
		}
	case "array":
		if k := shapeKeyword(s, "Items", "Items2020"); k != "" {
			g.need(s, k)
		}
		items, _ := s.Items.(*jsonschema.Schema)
		if s.Items2020 != nil {
			items = s.Items2020
		}
		if items == nil {
			return refuse("an array without one items schema")
		}
		e, err := g.node(items, path+"[]", depth+1)
		if err != nil {
			return nil, err
		}
		n.kind, n.elem = jArray, e
	case "object":
		if k := shapeKeyword(s, "Properties", "AdditionalProperties", "Required"); k != "" {
			g.need(s, k)
		}
		if len(s.Properties) == 0 {
			if len(s.Required) > 0 {
				g.need(s, "Required of a map")
			}
			vs, ok := s.AdditionalProperties.(*jsonschema.Schema)
			if !ok {
				return refuse("an object without properties nor an additionalProperties schema")
			}
			v, err := g.node(vs, path+"{}", depth+1)
			if err != nil {
				return nil, err
			}
			n.kind, n.values = jMap, v
			break
		}
		n.kind, n.open = jStruct, true
		n.js |= jsExactKeys
		if ap, ok := s.AdditionalProperties.(bool); s.AdditionalProperties != nil && !(ok && ap) {
			g.need(s, "AdditionalProperties beside properties")
		}
		for _, r := range s.Required {
			if s.Properties[r] == nil {
				g.need(s, "Required "+r+" outside properties")
			}
		}
		names := make([]string, 0, len(s.Properties))
		for k := range s.Properties {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			c, err := g.node(s.Properties[k], joinPath(path, k), depth+1)
			if err != nil {
				return nil, err
			}
			switch req := slices.Contains(s.Required, k); {
			case !req && !c.nullable:
				c.nullable, c.js = true, c.js|jsNoNull
			case req && c.nullable:
				c.js |= jsPresent
			}
			n.fields = append(n.fields, jField{k, c})
		}
		n.index()
	default:
		return refuse("type %s", types[0])
	}
	return n, nil
}

// jsonSchemaBody validates each document against its schema, then transcodes it; or,
// when the schema asks nothing of a document the one-pass transcoder does not check
// (needs ""), takes the one pass's verdict: a document it gives up on reads as before.
type jsonSchemaBody struct {
	sch   *jsonschema.Schema
	json  *jsonBody
	needs string // jsGen.needs
}

func (j *jsonSchemaBody) toAvro(dst, body []byte) (out []byte, err error) {
	defer recoverPanic(&err)
	if j.needs == "" {
		if out, _, ok := fastJSON(dst, body, j.json.top, false, false); ok {
			return out, nil
		}
	} else if out, v, ok := fastJSON(dst, body, j.json.top, false, true); ok {
		// One pass gives both the Avro body and the document the validator reads.
		if err := j.validate(v); err != nil {
			return nil, err
		}
		return out, nil
	}
	sc := &jScanner{b: body}
	if err := sc.skip(0); err != nil { // bounds the depth before the validator recurses
		return nil, err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return nil, malformed("decode JSON: %v", err)
	}
	if err := j.validate(v); err != nil {
		return nil, err
	}
	return j.json.slowAvro(dst, body)
}

// validate checks a decoded document against the schema.
func (j *jsonSchemaBody) validate(v any) error {
	if err := j.sch.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		field := ""
		if errors.As(err, &ve) {
			if l := deepestLocation(ve); len(l) > 0 {
				field = strings.Join(l, ".")
			}
		}
		return newError(ReasonDecodeError, field, fmt.Errorf("the record does not match its JSON schema: %v", err))
	}
	return nil
}

// deepestLocation is the instance location of the first leaf cause of a validation error.
func deepestLocation(ve *jsonschema.ValidationError) []string {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve.InstanceLocation
}
