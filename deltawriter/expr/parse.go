// Package expr parses and evaluates Spark SQL expressions as Delta stores them in table
// metadata (PROTOCOL.md, "Generated Columns": delta.generationExpression; later "CHECK
// Constraints": delta.constraints.*), with Spark's semantics for a documented subset.
//
// Parse turns the SQL text into an untyped syntax tree (a general expression grammar with
// Spark's operator precedence); Bind resolves its column names against a table schema
// (case-insensitively, as Spark does by default; backticked names may hold spaces and
// dots) and types every node, refusing, with the function or construct named, whatever
// the evaluator does not implement. A bound *Expr evaluates one row at a time on typed
// Values; NULL propagates as in Spark.
package expr

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Node is a node of the syntax tree Parse returns.
type Node interface{ node() }

// Syntax tree nodes. Every construct of the grammar has one, bound or not: Bind refuses
// the ones the evaluator does not implement yet, by name.
type (
	// Lit is a literal: Kind is "string", "integer", "decimal", "boolean" or "null".
	Lit struct {
		Kind string
		Text string // the string's value, the number's digits, "true"/"false"
	}
	// Col is a column reference: Parts are the dot-separated parts, backticks removed.
	Col struct{ Parts []string }
	// Call is a function call; Name is as written.
	Call struct {
		Name string
		Args []Node
	}
	// Cast is CAST(X AS Type); Type is the type name as written, lower-cased.
	Cast struct {
		X    Node
		Type string
	}
	// Unary is NOT x, -x or +x.
	Unary struct {
		Op string
		X  Node
	}
	// Binary is x op y: OR, AND, =, ==, <=>, <>, !=, <, <=, >, >=, +, -, *, /, %, ||.
	Binary struct {
		Op   string
		L, R Node
	}
	// IsNull is x IS [NOT] NULL.
	IsNull struct {
		X   Node
		Not bool
	}
	// In is x [NOT] IN (list).
	In struct {
		X    Node
		List []Node
		Not  bool
	}
	// Between is x [NOT] BETWEEN lo AND hi.
	Between struct {
		X, Lo, Hi Node
		Not       bool
	}
	// Like is x [NOT] LIKE pattern [ESCAPE 'c']; Escape is "" when the clause is absent
	// (the escape character is then \).
	Like struct {
		X, Pattern Node
		Not        bool
		Escape     string
	}
)

func (Lit) node()     {}
func (Col) node()     {}
func (Call) node()    {}
func (Cast) node()    {}
func (Unary) node()   {}
func (Binary) node()  {}
func (IsNull) node()  {}
func (In) node()      {}
func (Between) node() {}
func (Like) node()    {}

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tQuoted // `backticked` identifier
	tString
	tNumber
	tOp
)

type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the source
}

func lex(src string) ([]token, error) {
	var out []token
	i := 0
	for i < len(src) {
		r, w := utf8.DecodeRuneInString(src[i:])
		switch {
		case unicode.IsSpace(r):
			i += w
		case r == '`':
			var b strings.Builder
			j := i + 1
			for {
				k := strings.IndexByte(src[j:], '`')
				if k < 0 {
					return nil, fmt.Errorf("parse expression: unterminated `identifier at offset %d", i)
				}
				b.WriteString(src[j : j+k])
				j += k + 1
				if j < len(src) && src[j] == '`' { // `` is one backtick
					b.WriteByte('`')
					j++
					continue
				}
				break
			}
			out = append(out, token{tQuoted, b.String(), i})
			i = j
		case r == '\'' || r == '"':
			s, n, err := lexString(src[i:])
			if err != nil {
				return nil, fmt.Errorf("parse expression: %w at offset %d", err, i)
			}
			out = append(out, token{tString, s, i})
			i += n
		case r >= '0' && r <= '9' || r == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.') {
				j++
			}
			out = append(out, token{tNumber, src[i:j], i})
			i = j
		case r == '_' || unicode.IsLetter(r):
			j := i
			for j < len(src) {
				r2, w2 := utf8.DecodeRuneInString(src[j:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
					break
				}
				j += w2
			}
			out = append(out, token{tIdent, src[i:j], i})
			i = j
		default:
			op := ""
			for _, o := range []string{"<=>", "<=", ">=", "<>", "!=", "==", "||", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", "."} {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("parse expression: unexpected character %q at offset %d", r, i)
			}
			out = append(out, token{tOp, op, i})
			i += len(op)
		}
	}
	return append(out, token{tEOF, "", len(src)}), nil
}

// lexString reads a quoted string literal with Spark's default escapes
// (spark.sql.parser.escapedStringLiterals=false): \n, \t, \', \\, \uXXXX, … (\% and \_
// stay two characters, for LIKE; \101 is octal) and returns its value and length in bytes.
func lexString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\\' && i+3 < len(s) && (s[i+1] == '0' || s[i+1] == '1') && isOctal(s[i+2]) && isOctal(s[i+3]):
			// \[01][0-7][0-7]: one character by its octal code, as Spark's OCTAL_CHAR_PATTERN
			b.WriteRune(rune(s[i+1]-'0')<<6 | rune(s[i+2]-'0')<<3 | rune(s[i+3]-'0'))
			i += 3
		case c == '\\' && i+1 < len(s):
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case '0':
				b.WriteByte(0)
			case 'Z':
				b.WriteByte(26)
			case '%', '_': // kept escaped, as Spark's unescapeSQLString does, so LIKE 'a\_c' matches a literal _
				b.WriteByte('\\')
				b.WriteByte(e)
			case 'u':
				if i+4 < len(s) {
					if v, err := strconv.ParseUint(s[i+1:i+5], 16, 32); err == nil {
						b.WriteRune(rune(v))
						i += 4
						continue
					}
				}
				b.WriteByte('u')
			default: // \' \" \\ and any other escaped character stand for themselves
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated string literal")
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// Parse parses one Spark SQL expression. Errors name the offset and what was expected.
func Parse(src string) (Node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, src: src}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errorf(t, "unexpected %q after the expression", t.text)
	}
	return n, nil
}

type parser struct {
	toks []token
	i    int
	src  string
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) errorf(t token, format string, args ...any) error {
	return fmt.Errorf("parse expression %q: at offset %d: %s", p.src, t.pos, fmt.Sprintf(format, args...))
}

// keyword reports whether the next token is the keyword kw (case-insensitive) and
// consumes it if so.
func (p *parser) keyword(kw string) bool {
	if t := p.peek(); t.kind == tIdent && strings.EqualFold(t.text, kw) {
		p.i++
		return true
	}
	return false
}

func (p *parser) isKeyword(kw string, ahead int) bool {
	if p.i+ahead >= len(p.toks) {
		return false
	}
	t := p.toks[p.i+ahead]
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

func (p *parser) op(o string) bool {
	if t := p.peek(); t.kind == tOp && t.text == o {
		p.i++
		return true
	}
	return false
}

func (p *parser) expect(o string) error {
	if !p.op(o) {
		t := p.peek()
		return p.errorf(t, "expected %q, found %q", o, t.text)
	}
	return nil
}

// Precedence, lowest first (Spark's SqlBase grammar): OR; AND; NOT; comparison and
// predicates (=, <=>, <, IS NULL, IN, BETWEEN, LIKE); || and + -; * / %; unary - +.
func (p *parser) or() (Node, error) {
	l, err := p.and()
	for err == nil && p.keyword("OR") {
		var r Node
		if r, err = p.and(); err == nil {
			l = Binary{"OR", l, r}
		}
	}
	return l, err
}

func (p *parser) and() (Node, error) {
	l, err := p.not()
	for err == nil && p.keyword("AND") {
		var r Node
		if r, err = p.not(); err == nil {
			l = Binary{"AND", l, r}
		}
	}
	return l, err
}

func (p *parser) not() (Node, error) {
	if p.keyword("NOT") {
		x, err := p.not()
		return Unary{"NOT", x}, err
	}
	return p.predicate()
}

func (p *parser) predicate() (Node, error) {
	l, err := p.additive()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind == tOp {
			switch t.text {
			case "=", "==", "<=>", "<>", "!=", "<", "<=", ">", ">=":
				p.i++
				r, err := p.additive()
				if err != nil {
					return nil, err
				}
				l = Binary{t.text, l, r}
				continue
			}
			return l, nil
		}
		if p.keyword("IS") {
			not := p.keyword("NOT")
			if !p.keyword("NULL") {
				return nil, p.errorf(p.peek(), "expected NULL after IS")
			}
			l = IsNull{l, not}
			continue
		}
		not := false
		if p.isKeyword("NOT", 0) && (p.isKeyword("IN", 1) || p.isKeyword("BETWEEN", 1) || p.isKeyword("LIKE", 1)) {
			p.i++
			not = true
		}
		switch {
		case p.keyword("IN"):
			if err := p.expect("("); err != nil {
				return nil, err
			}
			list, err := p.list()
			if err != nil {
				return nil, err
			}
			l = In{l, list, not}
		case p.keyword("BETWEEN"):
			lo, err := p.additive()
			if err != nil {
				return nil, err
			}
			if !p.keyword("AND") {
				return nil, p.errorf(p.peek(), "expected AND in BETWEEN")
			}
			hi, err := p.additive()
			if err != nil {
				return nil, err
			}
			l = Between{l, lo, hi, not}
		case p.keyword("LIKE"):
			pat, err := p.additive()
			if err != nil {
				return nil, err
			}
			esc := ""
			if p.keyword("ESCAPE") {
				t := p.next()
				if t.kind != tString {
					return nil, p.errorf(t, "expected a string literal after ESCAPE")
				}
				esc = t.text
				if utf8.RuneCountInString(esc) != 1 {
					return nil, p.errorf(t, "the ESCAPE string must be one character, not %q", esc)
				}
			}
			l = Like{l, pat, not, esc}
		default:
			return l, nil
		}
	}
}

// list parses "x, y, …)" after an opening parenthesis.
func (p *parser) list() ([]Node, error) {
	var out []Node
	if p.op(")") {
		return out, nil
	}
	for {
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		out = append(out, x)
		if p.op(")") {
			return out, nil
		}
		if !p.op(",") {
			t := p.peek()
			return nil, p.errorf(t, "expected \",\" or \")\", found %q", t.text)
		}
	}
}

func (p *parser) additive() (Node, error) {
	l, err := p.multiplicative()
	for err == nil {
		t := p.peek()
		if t.kind != tOp || (t.text != "+" && t.text != "-" && t.text != "||") {
			break
		}
		p.i++
		var r Node
		if r, err = p.multiplicative(); err == nil {
			l = Binary{t.text, l, r}
		}
	}
	return l, err
}

func (p *parser) multiplicative() (Node, error) {
	l, err := p.unary()
	for err == nil {
		t := p.peek()
		if t.kind != tOp || (t.text != "*" && t.text != "/" && t.text != "%") {
			break
		}
		p.i++
		var r Node
		if r, err = p.unary(); err == nil {
			l = Binary{t.text, l, r}
		}
	}
	return l, err
}

func (p *parser) unary() (Node, error) {
	if t := p.peek(); t.kind == tOp && (t.text == "-" || t.text == "+") {
		p.i++
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if l, ok := x.(Lit); ok && t.text == "-" && (l.Kind == "integer" || l.Kind == "decimal") {
			return Lit{l.Kind, "-" + l.Text}, nil
		}
		return Unary{t.text, x}, nil
	}
	return p.primary()
}

func (p *parser) primary() (Node, error) {
	t := p.next()
	switch t.kind {
	case tString:
		s := t.text
		for p.peek().kind == tString { // adjacent literals concatenate, as in Spark
			s += p.next().text
		}
		return Lit{"string", s}, nil
	case tNumber:
		kind := "integer"
		if strings.Contains(t.text, ".") {
			kind = "decimal"
		}
		return Lit{kind, t.text}, nil
	case tOp:
		if t.text == "(" {
			x, err := p.or()
			if err != nil {
				return nil, err
			}
			return x, p.expect(")")
		}
	case tQuoted:
		return p.column(t.text)
	case tIdent:
		switch strings.ToUpper(t.text) {
		case "NULL":
			return Lit{"null", ""}, nil
		case "TRUE", "FALSE":
			return Lit{"boolean", strings.ToLower(t.text)}, nil
		case "CAST", "TRY_CAST":
			if p.op("(") {
				x, err := p.or()
				if err != nil {
					return nil, err
				}
				if !p.keyword("AS") {
					return nil, p.errorf(p.peek(), "expected AS in CAST")
				}
				typ, err := p.typeName()
				if err != nil {
					return nil, err
				}
				if strings.EqualFold(t.text, "TRY_CAST") {
					return Call{"try_cast", []Node{x, Lit{"string", typ}}}, p.expect(")")
				}
				return Cast{x, typ}, p.expect(")")
			}
		}
		if p.op("(") {
			args, err := p.list()
			if err != nil {
				return nil, err
			}
			return Call{t.text, args}, nil
		}
		return p.column(t.text)
	}
	if t.kind == tEOF {
		return nil, p.errorf(t, "unexpected end of expression")
	}
	return nil, p.errorf(t, "unexpected %q", t.text)
}

// column parses the rest of a possibly dotted column reference after its first part.
func (p *parser) column(first string) (Node, error) {
	parts := []string{first}
	for p.op(".") {
		t := p.next()
		if t.kind != tIdent && t.kind != tQuoted {
			return nil, p.errorf(t, "expected a field name after '.'")
		}
		parts = append(parts, t.text)
	}
	return Col{parts}, nil
}

// typeName parses a type in CAST: a name with optional (p, s) parameters, lower-cased.
func (p *parser) typeName() (string, error) {
	t := p.next()
	if t.kind != tIdent {
		return "", p.errorf(t, "expected a type name")
	}
	name := strings.ToLower(t.text)
	if p.op("(") {
		var ps []string
		for {
			n := p.next()
			if n.kind != tNumber {
				return "", p.errorf(n, "expected a number in the type's parameters")
			}
			ps = append(ps, n.text)
			if p.op(")") {
				break
			}
			if err := p.expect(","); err != nil {
				return "", err
			}
		}
		name += "(" + strings.Join(ps, ",") + ")"
	}
	return name, nil
}

// String renders a node back as SQL (column parts backticked), for messages.
func String(n Node) string {
	switch n := n.(type) {
	case Lit:
		switch n.Kind {
		case "string":
			return "'" + strings.ReplaceAll(strings.ReplaceAll(n.Text, `\`, `\\`), "'", `\'`) + "'"
		case "null":
			return "NULL"
		}
		return n.Text
	case Col:
		q := make([]string, len(n.Parts))
		for i, s := range n.Parts {
			q[i] = "`" + strings.ReplaceAll(s, "`", "``") + "`"
		}
		return strings.Join(q, ".")
	case Call:
		a := make([]string, len(n.Args))
		for i, x := range n.Args {
			a[i] = String(x)
		}
		return n.Name + "(" + strings.Join(a, ", ") + ")"
	case Cast:
		return "CAST(" + String(n.X) + " AS " + strings.ToUpper(n.Type) + ")"
	case Unary:
		if n.Op == "NOT" {
			return "NOT " + String(n.X)
		}
		return n.Op + String(n.X)
	case Binary:
		return "(" + String(n.L) + " " + n.Op + " " + String(n.R) + ")"
	case IsNull:
		if n.Not {
			return String(n.X) + " IS NOT NULL"
		}
		return String(n.X) + " IS NULL"
	case In:
		a := make([]string, len(n.List))
		for i, x := range n.List {
			a[i] = String(x)
		}
		return String(n.X) + notStr(n.Not) + " IN (" + strings.Join(a, ", ") + ")"
	case Between:
		return String(n.X) + notStr(n.Not) + " BETWEEN " + String(n.Lo) + " AND " + String(n.Hi)
	case Like:
		s := String(n.X) + notStr(n.Not) + " LIKE " + String(n.Pattern)
		if n.Escape != "" {
			s += " ESCAPE " + String(Lit{"string", n.Escape})
		}
		return s
	}
	return fmt.Sprintf("%v", n)
}

func notStr(not bool) string {
	if not {
		return " NOT"
	}
	return ""
}
