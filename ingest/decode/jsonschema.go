package decode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	ws := jsonWriter(id, 0, FormatJSONSchema, top)
	if ws.body != nil {
		ws.body = &jsonSchemaBody{sch: sch, json: ws.body.(*jsonBody)}
	}
	return ws, nil
}

type jsGen struct{ stack []*jsonschema.Schema }

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
	var types []string
	if s.Types != nil {
		types = s.Types.ToStrings()
	}
	if s.Ref != nil && len(types) == 0 {
		return g.node(s.Ref, path, depth+1)
	}
	nullable := slices.Contains(types, "null")
	types = slices.DeleteFunc(types, func(t string) bool { return t == "null" })
	if len(types) == 0 {
		var branches []*jsonschema.Schema
		for _, b := range append(slices.Clone(s.OneOf), s.AnyOf...) {
			if b.Types != nil && slices.Equal(b.Types.ToStrings(), []string{"null"}) {
				nullable = true
				continue
			}
			branches = append(branches, b)
		}
		if len(branches) != 1 {
			return refuse("a value without one type (a union of %d non-null schemas, or no type): no column type fits it", len(branches))
		}
		n, err := g.node(branches[0], path, depth+1)
		if n != nil {
			n.nullable = n.nullable || nullable
		}
		return n, err
	}
	if len(types) > 1 {
		if slices.Equal(types, []string{"integer", "number"}) {
			types = []string{"number"}
		} else {
			return refuse("a union of the types %v: no column type fits them", types)
		}
	}
	n := &jNode{nullable: nullable}
	switch types[0] {
	case "boolean":
		n.kind = jBool
	case "integer":
		n.kind = jLong
	case "number":
		n.kind = jDouble
	case "string":
		n.kind = jString
		if s.Format != nil {
			switch s.Format.Name {
			case "date-time":
				n.kind = jTimestamp
			case "date":
				n.kind = jDate
			}
		}
	case "array":
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
		if len(s.Properties) == 0 {
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
			if !slices.Contains(s.Required, k) {
				c.nullable = true
			}
			n.fields = append(n.fields, jField{k, c})
		}
		n.index()
	default:
		return refuse("type %s", types[0])
	}
	return n, nil
}

// jsonSchemaBody validates each document against its schema, then transcodes it.
type jsonSchemaBody struct {
	sch  *jsonschema.Schema
	json *jsonBody
}

func (j *jsonSchemaBody) toAvro(dst, body []byte) (out []byte, err error) {
	defer recoverPanic(&err)
	// One pass gives both the Avro body and the document the validator reads.
	if out, v, ok := fastJSON(dst, body, j.json.top, false, true); ok {
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
