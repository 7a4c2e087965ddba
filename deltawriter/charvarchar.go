package deltawriter

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// CharVarcharLimit is the length limit of one string leaf of a CHAR(n) or VARCHAR(n)
// column: Spark stores such a column as string (or array<string>, map<…>) with the field
// metadata __CHAR_VARCHAR_TYPE_STRING (deltalog.MetaCharVarcharType) holding the declared
// type, and Delta checks the length on every write (its constraint
// __CHAR_VARCHAR_STRING_LENGTH_CHECK__, error class DELTA_EXCEED_CHAR_VARCHAR_LIMIT). A
// value satisfies the limit when its length in Unicode code points is at most N; trailing
// spaces count (Delta's check is length(col) <= n, nothing is trimmed). NULL satisfies
// every limit.
type CharVarcharLimit struct {
	// Column is the leaf's logical path: "code", "s.code", "tags[]" (an array's
	// elements), "attrs{}" (a map's values), "attrs{key}" (a map's keys).
	Column string
	// Declared is the column's metadata value as Spark wrote it ("array<varchar(4)>").
	Declared string
	// Type is the leaf's own declared type: "char(3)" or "varchar(5)".
	Type string
	N    int  // the limit, in code points
	Char bool // CHAR(n) (Spark pads on read); false: VARCHAR(n)
	// Leaf is the path of the leaf in the table's Parquet schema (ParquetSchema under the
	// mode CharVarcharLimits was given: physical names, "list", "element", "key_value",
	// "key", "value").
	Leaf []string
}

// CharVarcharLimits returns the CHAR/VARCHAR limits of a table with this schema, in
// schema order, with their Parquet leaves under column mapping mode. Top-level and
// nested fields (in structs, arrays and maps) are read; a struct's fields carry their own
// metadata (Spark's layout), so a declared struct<…> type is not read for them. Errors
// (wrapping ErrUnsupportedFeature, naming the column): a metadata value that is not a
// type string, or one whose shape does not match the field's Delta type (a char(n) on a
// field that is not a string).
func CharVarcharLimits(schema *deltalog.StructType, mode deltalog.ColumnMappingMode) ([]CharVarcharLimit, error) {
	if schema == nil {
		return nil, nil
	}
	var out []CharVarcharLimit
	var walkStruct func(st *deltalog.StructType, path string, leaf []string) error
	var walkType func(t deltalog.DataType, path string, leaf []string) error
	walkType = func(t deltalog.DataType, path string, leaf []string) error {
		switch t := t.(type) {
		case *deltalog.StructType:
			return walkStruct(t, path, leaf)
		case *deltalog.ArrayType:
			return walkType(t.ElementType, path+"[]", appendPath(leaf, "list", "element"))
		case *deltalog.MapType:
			if err := walkType(t.KeyType, path+"{key}", appendPath(leaf, "key_value", "key")); err != nil {
				return err
			}
			return walkType(t.ValueType, path+"{}", appendPath(leaf, "key_value", "value"))
		}
		return nil
	}
	walkStruct = func(st *deltalog.StructType, prefix string, leaf []string) error {
		for _, f := range st.Fields {
			path := f.Name
			if prefix != "" {
				path = prefix + "." + f.Name
			}
			fleaf := appendPath(leaf, f.PhysicalName(mode))
			if raw, ok := f.Metadata[deltalog.MetaCharVarcharType]; ok {
				s, _ := raw.(string)
				decl, err := parseSparkType(s)
				if err != nil {
					return fmt.Errorf("read %s of column %q (%v): %w: %w", deltalog.MetaCharVarcharType, path, raw, err, ErrUnsupportedFeature)
				}
				if out, err = appendLimits(out, s, f.Type, decl, path, fleaf); err != nil {
					return fmt.Errorf("read %s of column %q (%s): %w: %w", deltalog.MetaCharVarcharType, path, s, err, ErrUnsupportedFeature)
				}
			}
			if err := walkType(f.Type, path, fleaf); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walkStruct(schema, "", nil); err != nil {
		return nil, err
	}
	return out, nil
}

func appendPath(p []string, names ...string) []string {
	return append(append(make([]string, 0, len(p)+len(names)), p...), names...)
}

// appendLimits walks the Delta type t and the declared type d of a field together and
// appends a limit for each string leaf declared char(n) or varchar(n). A declared struct
// is not descended into: its fields have metadata of their own.
func appendLimits(out []CharVarcharLimit, declared string, t deltalog.DataType, d *sparkType, path string, leaf []string) ([]CharVarcharLimit, error) {
	switch d.name {
	case "char", "varchar":
		if t != deltalog.String {
			return nil, fmt.Errorf("%s(%d) declared for %s of type %s, not string", d.name, d.n, path, t)
		}
		return append(out, CharVarcharLimit{Column: path, Declared: declared, Type: fmt.Sprintf("%s(%d)", d.name, d.n), N: d.n, Char: d.name == "char", Leaf: leaf}), nil
	case "array":
		at, ok := t.(*deltalog.ArrayType)
		if !ok {
			return nil, fmt.Errorf("array declared for %s of type %s", path, t)
		}
		return appendLimits(out, declared, at.ElementType, d.args[0], path+"[]", appendPath(leaf, "list", "element"))
	case "map":
		mt, ok := t.(*deltalog.MapType)
		if !ok {
			return nil, fmt.Errorf("map declared for %s of type %s", path, t)
		}
		out, err := appendLimits(out, declared, mt.KeyType, d.args[0], path+"{key}", appendPath(leaf, "key_value", "key"))
		if err != nil {
			return nil, err
		}
		return appendLimits(out, declared, mt.ValueType, d.args[1], path+"{}", appendPath(leaf, "key_value", "value"))
	}
	return out, nil // string, struct<…> (its fields carry their own), any other type
}

// sparkType is a parsed Spark catalog type string: name "char"/"varchar" with n,
// "array" with one arg, "map" with two, "struct" (fields not kept), or any other name.
type sparkType struct {
	name string
	n    int
	args []*sparkType
}

// parseSparkType parses a Spark DataType.catalogString ("varchar(5)",
// "array<map<string,char(2)>>", "struct<a:int,`b c`:varchar(3)>", "decimal(10,2)").
func parseSparkType(s string) (*sparkType, error) {
	p := &typeParser{s: s}
	t, err := p.parse()
	if err != nil {
		return nil, err
	}
	if p.i != len(s) {
		return nil, fmt.Errorf("parse type %q: unexpected %q at %d", s, s[p.i:], p.i)
	}
	return t, nil
}

type typeParser struct {
	s string
	i int
}

func (p *typeParser) eat(c byte) bool {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *typeParser) ident() string {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	j := p.i
	for p.i < len(p.s) && (p.s[p.i] == '_' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z' || p.s[p.i] >= '0' && p.s[p.i] <= '9') {
		p.i++
	}
	return strings.ToLower(p.s[j:p.i])
}

func (p *typeParser) fail(what string) error {
	return fmt.Errorf("parse type %q: want %s at %d", p.s, what, p.i)
}

func (p *typeParser) parse() (*sparkType, error) {
	t := &sparkType{name: p.ident()}
	if t.name == "" {
		return nil, p.fail("a type name")
	}
	switch t.name {
	case "array", "map":
		if !p.eat('<') {
			return nil, p.fail("<")
		}
		for {
			a, err := p.parse()
			if err != nil {
				return nil, err
			}
			t.args = append(t.args, a)
			if !p.eat(',') {
				break
			}
		}
		if !p.eat('>') || t.name == "array" && len(t.args) != 1 || t.name == "map" && len(t.args) != 2 {
			return nil, p.fail(">")
		}
	case "struct":
		if !p.eat('<') {
			return nil, p.fail("<")
		}
		if p.eat('>') {
			return t, nil
		}
		for {
			if err := p.fieldName(); err != nil {
				return nil, err
			}
			if !p.eat(':') {
				return nil, p.fail(":")
			}
			if _, err := p.parse(); err != nil {
				return nil, err
			}
			if rest := strings.TrimLeft(p.s[p.i:], " "); strings.HasPrefix(strings.ToUpper(rest), "NOT NULL") {
				p.i = len(p.s) - len(rest) + len("NOT NULL")
			}
			if !p.eat(',') {
				break
			}
		}
		if !p.eat('>') {
			return nil, p.fail(">")
		}
	default:
		if p.eat('(') {
			j := p.i
			for p.i < len(p.s) && p.s[p.i] != ')' {
				p.i++
			}
			args := p.s[j:p.i]
			if !p.eat(')') {
				return nil, p.fail(")")
			}
			if t.name == "char" || t.name == "varchar" {
				n, err := strconv.Atoi(strings.TrimSpace(args))
				if err != nil || n < 0 {
					return nil, fmt.Errorf("parse type %q: %s length %q is not a count", p.s, t.name, args)
				}
				t.n = n
			}
		} else if t.name == "char" || t.name == "varchar" {
			return nil, p.fail("(")
		}
	}
	return t, nil
}

// fieldName skips a struct field name: a backquoted name (“ is a backquote) or a plain one.
func (p *typeParser) fieldName() error {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '`' {
		for p.i++; p.i < len(p.s); p.i++ {
			if p.s[p.i] == '`' {
				if p.i+1 < len(p.s) && p.s[p.i+1] == '`' {
					p.i++
					continue
				}
				p.i++
				return nil
			}
		}
		return p.fail("a closing backquote")
	}
	j := p.i
	for p.i < len(p.s) && p.s[p.i] != ':' {
		p.i++
	}
	if p.i == j {
		return p.fail("a field name")
	}
	return nil
}
