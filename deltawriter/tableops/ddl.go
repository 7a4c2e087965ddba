// Package tableops implements `ingestd table`: reading a Delta table's schema, history and
// details, and altering it (add columns, widen types, set properties, enable table
// features) with one Delta commit per change, as Spark's ALTER TABLE does. It works on any
// Delta table ingestd can read, not only on tables ingestd created.
package tableops

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// ParseType parses a type in Spark SQL's DDL spelling, case-insensitively: STRING, BIGINT
// or LONG, INT or INTEGER, SMALLINT or SHORT, TINYINT or BYTE, DOUBLE, FLOAT or REAL,
// BOOLEAN, BINARY, DATE, TIMESTAMP, TIMESTAMP_NTZ, DECIMAL(p,s) (DECIMAL alone is
// decimal(10,0)), STRUCT<name: TYPE, …>, ARRAY<TYPE>, MAP<STRING, TYPE>. Field names in
// structs keep their case. Nested fields, elements and values are nullable.
func ParseType(s string) (deltalog.DataType, error) {
	p := &typeParser{s: s}
	t, err := p.parse()
	if err != nil {
		return nil, fmt.Errorf("parse type %q: %w", s, err)
	}
	p.space()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("parse type %q: unexpected %q at %d", s, p.s[p.i:], p.i)
	}
	return t, nil
}

type typeParser struct {
	s string
	i int
}

func (p *typeParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *typeParser) word() string {
	p.space()
	start := p.i
	for p.i < len(p.s) && (isWordByte(p.s[p.i])) {
		p.i++
	}
	return p.s[start:p.i]
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *typeParser) expect(c byte) error {
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != c {
		return fmt.Errorf("expected %q at %d", c, p.i)
	}
	p.i++
	return nil
}

func (p *typeParser) peek(c byte) bool {
	p.space()
	return p.i < len(p.s) && p.s[p.i] == c
}

var simpleTypes = map[string]deltalog.PrimitiveType{
	"STRING": deltalog.String, "BIGINT": deltalog.Long, "LONG": deltalog.Long, "INT": deltalog.Integer,
	"INTEGER": deltalog.Integer, "SMALLINT": deltalog.Short, "SHORT": deltalog.Short, "TINYINT": deltalog.Byte,
	"BYTE": deltalog.Byte, "DOUBLE": deltalog.Double, "FLOAT": deltalog.Float, "REAL": deltalog.Float,
	"BOOLEAN": deltalog.Boolean, "BINARY": deltalog.Binary, "DATE": deltalog.Date,
	"TIMESTAMP": deltalog.Timestamp, "TIMESTAMP_NTZ": deltalog.TimestampNtz,
}

func (p *typeParser) parse() (deltalog.DataType, error) {
	w := strings.ToUpper(p.word())
	if t, ok := simpleTypes[w]; ok {
		return t, nil
	}
	switch w {
	case "DECIMAL", "DEC", "NUMERIC":
		if !p.peek('(') {
			return deltalog.DecimalType{Precision: 10}, nil
		}
		p.i++
		prec, err := strconv.Atoi(p.word())
		if err != nil {
			return nil, fmt.Errorf("decimal precision: %w", err)
		}
		scale := 0
		if p.peek(',') {
			p.i++
			if scale, err = strconv.Atoi(p.word()); err != nil {
				return nil, fmt.Errorf("decimal scale: %w", err)
			}
		}
		if err := p.expect(')'); err != nil {
			return nil, err
		}
		return deltalog.ParsePrimitive(fmt.Sprintf("decimal(%d,%d)", prec, scale))
	case "ARRAY":
		if err := p.expect('<'); err != nil {
			return nil, err
		}
		e, err := p.parse()
		if err != nil {
			return nil, err
		}
		return &deltalog.ArrayType{ElementType: e, ContainsNull: true}, p.expect('>')
	case "MAP":
		if err := p.expect('<'); err != nil {
			return nil, err
		}
		k, err := p.parse()
		if err != nil {
			return nil, err
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
		v, err := p.parse()
		if err != nil {
			return nil, err
		}
		return &deltalog.MapType{KeyType: k, ValueType: v, ValueContainsNull: true}, p.expect('>')
	case "STRUCT":
		if err := p.expect('<'); err != nil {
			return nil, err
		}
		st := &deltalog.StructType{}
		for !p.peek('>') {
			name := p.word()
			if name == "" {
				return nil, fmt.Errorf("expected a field name at %d", p.i)
			}
			if err := p.expect(':'); err != nil {
				return nil, err
			}
			t, err := p.parse()
			if err != nil {
				return nil, err
			}
			st.Fields = append(st.Fields, &deltalog.StructField{Name: name, Type: t, Nullable: true, Metadata: map[string]any{}})
			if !p.peek(',') {
				break
			}
			p.i++
		}
		return st, p.expect('>')
	case "":
		return nil, fmt.Errorf("expected a type at %d", p.i)
	}
	return nil, fmt.Errorf("unknown type %s", w)
}

// ColumnDef is one `path TYPE` argument, e.g. "channel STRING" or
// "customer.details STRUCT<name: STRING>". Path segments are separated by dots; a segment
// may be quoted with backticks to contain dots or spaces.
type ColumnDef struct {
	Path []string
	Type deltalog.DataType
}

// ParseColumnDef parses "path TYPE".
func ParseColumnDef(s string) (ColumnDef, error) {
	s = strings.TrimSpace(s)
	var path []string
	var cur strings.Builder
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '`':
			j := strings.IndexByte(s[i+1:], '`')
			if j < 0 {
				return ColumnDef{}, fmt.Errorf("parse column %q: unclosed backtick", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '.':
			path = append(path, cur.String())
			cur.Reset()
		case c == ' ' || c == '\t':
			goto typ
		default:
			cur.WriteByte(c)
		}
	}
typ:
	path = append(path, cur.String())
	for _, seg := range path {
		if seg == "" {
			return ColumnDef{}, fmt.Errorf("parse column %q: empty name in path", s)
		}
	}
	t, err := ParseType(s[i:])
	if err != nil {
		return ColumnDef{}, fmt.Errorf("parse column %q: %w", s, err)
	}
	return ColumnDef{Path: path, Type: t}, nil
}

func (c ColumnDef) String() string { return strings.Join(c.Path, ".") + " " + c.Type.String() }
