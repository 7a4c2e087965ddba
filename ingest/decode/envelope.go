package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
)

// Envelopes of record values (table.envelope; docs/keyed-tables.md, Change data capture).
const (
	// EnvelopeDebezium: the value is Debezium's change event {before, after, source, op,
	// ts_ms, transaction}; the row is after (c, u, r) or before (d).
	EnvelopeDebezium = "debezium"
	// EnvelopeDebeziumFlattened: the value is the row as Debezium's ExtractNewRecordState
	// transform leaves it, with its add.fields (__op, __lsn, __source_ts_ms, __ts_ms, …)
	// and __deleted (delete.handling.mode rewrite); every field whose name starts with
	// "__" is the envelope's, not the row's.
	EnvelopeDebeziumFlattened = "debezium_flattened"
)

// Debezium's operation codes (the envelope's op, the flattened form's __op).
const (
	OpCreate   = 'c'
	OpUpdate   = 'u'
	OpRead     = 'r' // a snapshot read
	OpDelete   = 'd'
	OpTruncate = 't'
	OpMessage  = 'm' // a logical decoding message: no row
)

// Sequence paths of a change (table.sequence_by with an envelope).
const (
	SeqLSN        = "source.lsn"   // the Postgres log sequence number (flattened: __lsn)
	SeqSourceTsMs = "source.ts_ms" // when the database made the change, ms (flattened: __source_ts_ms)
	flatPrefix    = "__"           // the flattened form's envelope fields
)

// maxZeroItemsEnv bounds the loop over zero-byte items (arrays of null) in a skipped value.
const maxZeroItemsEnv = 1 << 20

// EnvelopeChange is one record's change as its envelope states it.
type EnvelopeChange struct {
	// Op is the operation (OpCreate, …). For the flattened form it is __op, or OpDelete
	// when __deleted is true, or OpUpdate when the record names none.
	Op byte
	// Row is the Avro binary of the row in the schema of Envelope.Row: after's for c, u
	// and r, before's for d (under REPLICA IDENTITY DEFAULT only its key columns are set);
	// nil for t and m. It aliases the record body, except for a flattened row whose "__"
	// fields sit between its own (copied).
	Row []byte
	// LSN is source.lsn (flattened: __lsn); HasLSN is false when it is absent or null.
	LSN    int64
	HasLSN bool
	// SourceTsMs is source.ts_ms (flattened: __source_ts_ms), ms since the Unix epoch.
	SourceTsMs    int64
	HasSourceTsMs bool
	// TsMs is the envelope's ts_ms (flattened: __ts_ms): when the connector handled the
	// change, ms since the Unix epoch.
	TsMs    int64
	HasTsMs bool
}

// Seq returns the value of sequence path p (SeqLSN, SeqSourceTsMs) and whether the change
// has one.
func (c *EnvelopeChange) Seq(p string) (int64, bool) {
	switch p {
	case SeqLSN:
		return c.LSN, c.HasLSN
	case SeqSourceTsMs:
		return c.SourceTsMs, c.HasSourceTsMs
	}
	return 0, false
}

// IsSequencePath reports whether table.sequence_by name p is an envelope path rather than
// a column.
func IsSequencePath(p string) bool { return p == SeqLSN || p == SeqSourceTsMs }

// Envelope reads the changes of one envelope writer schema: the row's writer schema, and
// per record its operation, sequence fields and row bytes (Split). Safe for concurrent
// use.
type Envelope struct {
	// Row is the writer schema of the rows: after's (else before's) record type for the
	// Debezium envelope, the value record without its "__" fields for the flattened form.
	// ID and Key are the envelope's (dead letters name the envelope's schema id); nil when
	// the envelope schema has neither before nor after (only t and m records).
	Row    *WriterSchema
	kind   string
	fields []envField
}

// envField is one field of the envelope's top-level record and what Split does with it.
type envField struct {
	name   string
	schema avro.Schema
	role   envRole
	source []envField // role roleSource: the source record's fields
}

type envRole uint8

const (
	roleSkip envRole = iota
	roleBefore
	roleAfter
	roleSource
	roleOp
	roleTsMs
	roleLSN
	roleSourceTsMs
	roleDeleted
	roleRow // flattened: a field of the row
)

// NewEnvelope compiles the envelope kind (EnvelopeDebezium, EnvelopeDebeziumFlattened)
// of writer schema ws. Errors are *Error with ReasonSchemaMismatch naming what the schema
// lacks: a Debezium envelope needs a record with an op string and before or after a
// [null, record] of one record type; a flattened one a record with at least one field
// that is not "__".
func NewEnvelope(kind string, ws *WriterSchema) (*Envelope, error) {
	rec, ok := deref(ws.Avro).(*avro.RecordSchema)
	if !ok {
		return nil, newError(ReasonSchemaMismatch, "", fmt.Errorf("envelope %s: schema %d is a %s, not a record", kind, ws.ID, ws.Avro.Type()))
	}
	e := &Envelope{kind: kind}
	switch kind {
	case EnvelopeDebezium:
		return e, e.compileDebezium(ws, rec)
	case EnvelopeDebeziumFlattened:
		return e, e.compileFlattened(ws, rec)
	}
	return nil, fmt.Errorf("compile envelope: unknown envelope %q", kind)
}

func (e *Envelope) compileDebezium(ws *WriterSchema, rec *avro.RecordSchema) error {
	var row avro.Schema
	hasOp := false
	for _, f := range rec.Fields() {
		ef := envField{name: f.Name(), schema: f.Type()}
		switch f.Name() {
		case "before", "after":
			r := recordBranch(f.Type())
			if r == nil {
				return newError(ReasonSchemaMismatch, f.Name(), fmt.Errorf("envelope debezium: schema %d: %s is a %s, not a [null, record] union", ws.ID, f.Name(), f.Type().Type()))
			}
			if row != nil && !sameRow(row, r) {
				return newError(ReasonSchemaMismatch, f.Name(), fmt.Errorf("envelope debezium: schema %d: before and after are different record types", ws.ID))
			}
			row = r
			ef.role = roleBefore
			if f.Name() == "after" {
				ef.role = roleAfter
			}
		case "op":
			if deref(f.Type()).Type() != avro.String {
				return newError(ReasonSchemaMismatch, "op", fmt.Errorf("envelope debezium: schema %d: op is a %s, not a string", ws.ID, f.Type().Type()))
			}
			ef.role, hasOp = roleOp, true
		case "ts_ms":
			ef.role = longRole(f.Type(), roleTsMs)
		case "source":
			if src, ok := deref(f.Type()).(*avro.RecordSchema); ok {
				ef.role = roleSource
				for _, sf := range src.Fields() {
					s := envField{name: sf.Name(), schema: sf.Type()}
					switch sf.Name() {
					case "lsn":
						s.role = longRole(sf.Type(), roleLSN)
					case "ts_ms":
						s.role = longRole(sf.Type(), roleSourceTsMs)
					}
					ef.source = append(ef.source, s)
				}
			}
		}
		e.fields = append(e.fields, ef)
	}
	if !hasOp {
		return newError(ReasonSchemaMismatch, "op", fmt.Errorf("envelope debezium: schema %d (%s) has no op field: not a Debezium change event (for ExtractNewRecordState's output use envelope debezium_flattened)", ws.ID, rec.FullName()))
	}
	if row != nil {
		e.Row = rowSchema(ws, row)
	}
	return nil
}

func (e *Envelope) compileFlattened(ws *WriterSchema, rec *avro.RecordSchema) error {
	var keep []*avro.Field
	for _, f := range rec.Fields() {
		ef := envField{name: f.Name(), schema: f.Type(), role: roleRow}
		if strings.HasPrefix(f.Name(), flatPrefix) {
			ef.role = roleSkip
			switch f.Name() {
			case "__op":
				if deref(nonNull(f.Type())).Type() == avro.String {
					ef.role = roleOp
				}
			case "__deleted":
				switch deref(nonNull(f.Type())).Type() {
				case avro.String, avro.Boolean:
					ef.role = roleDeleted
				}
			case "__lsn":
				ef.role = longRole(f.Type(), roleLSN)
			case "__source_ts_ms":
				ef.role = longRole(f.Type(), roleSourceTsMs)
			case "__ts_ms":
				ef.role = longRole(f.Type(), roleTsMs)
			}
		} else {
			keep = append(keep, f)
		}
		e.fields = append(e.fields, ef)
	}
	if len(keep) == 0 {
		return newError(ReasonSchemaMismatch, "", fmt.Errorf("envelope debezium_flattened: schema %d has only __ fields: no row", ws.ID))
	}
	if len(keep) == len(rec.Fields()) {
		e.Row = rowSchema(ws, rec)
		return nil
	}
	fields := make([]*avro.Field, len(keep))
	for i, f := range keep {
		var opts []avro.SchemaOption
		if f.HasDefault() {
			opts = append(opts, avro.WithDefault(f.Default()))
		}
		if len(f.Props()) > 0 {
			opts = append(opts, avro.WithProps(f.Props()))
		}
		nf, err := avro.NewField(f.Name(), f.Type(), opts...)
		if err != nil {
			return newError(ReasonSchemaParseError, f.Name(), fmt.Errorf("envelope debezium_flattened: schema %d: %w", ws.ID, err))
		}
		fields[i] = nf
	}
	row, err := avro.NewRecordSchema(rec.Name(), rec.Namespace(), fields)
	if err != nil {
		return newError(ReasonSchemaParseError, "", fmt.Errorf("envelope debezium_flattened: schema %d: the row without its __ fields: %w", ws.ID, err))
	}
	e.Row = rowSchema(ws, row)
	return nil
}

// rowSchema is the writer schema of the rows of envelope ws: Avro row, ws's id, key and
// format. It has no body transcoder whatever ws's format: Split slices the row out of the
// envelope's Avro binary (for a Kafka Connect JSON envelope, the body transcoded first,
// WriterSchema.Transcode), so the row's bytes are Avro already and decode as such
// (CompileRecord), while its format still names the record's for dead letters.
func rowSchema(ws *WriterSchema, row avro.Schema) *WriterSchema {
	r := &WriterSchema{ID: ws.ID, Format: ws.Format, key: ws.key, Avro: row}
	r.Delta, r.DeltaErr = ToDelta(row)
	return r
}

// sameRow reports whether before's and after's record types a and b are one row type:
// the same schema (as a converter that names the type once and references it writes
// them), or records of the same fields in the same order with the
// same types, logical types and Connect names, whatever their record names. Kafka
// Connect JSON gives before and after one Connect struct (<prefix>.<schema>.<table>.Value),
// but its derived Avro schema names each struct on its own (WriterSchema.Avro).
func sameRow(a, b avro.Schema) bool {
	return sameShape(a, b, 0)
}

// sameShape compares two schemas structurally (sameRow), ignoring the names of records,
// enums and fixed types and any property other than the logical type and the Connect
// name and parameters.
func sameShape(a, b avro.Schema, depth int) bool {
	a, b = deref(a), deref(b)
	if a == b {
		return true
	}
	if a.Type() != b.Type() || depth > maxJSONDepth {
		return false
	}
	if avroLogicalName(a) != avroLogicalName(b) || connectNameOf(a) != connectNameOf(b) || !maps.Equal(connectParams(a), connectParams(b)) {
		return false
	}
	switch x := a.(type) {
	case *avro.RecordSchema:
		y := b.(*avro.RecordSchema)
		if len(x.Fields()) != len(y.Fields()) {
			return false
		}
		for i, f := range x.Fields() {
			if g := y.Fields()[i]; f.Name() != g.Name() || !sameShape(f.Type(), g.Type(), depth+1) {
				return false
			}
		}
		return true
	case *avro.UnionSchema:
		y := b.(*avro.UnionSchema)
		if len(x.Types()) != len(y.Types()) {
			return false
		}
		for i, t := range x.Types() {
			if !sameShape(t, y.Types()[i], depth+1) {
				return false
			}
		}
		return true
	case *avro.ArraySchema:
		return sameShape(x.Items(), b.(*avro.ArraySchema).Items(), depth+1)
	case *avro.MapSchema:
		return sameShape(x.Values(), b.(*avro.MapSchema).Values(), depth+1)
	case *avro.FixedSchema:
		return x.Size() == b.(*avro.FixedSchema).Size() && sameDecimal(x, b.(*avro.FixedSchema))
	case *avro.EnumSchema:
		return slices.Equal(x.Symbols(), b.(*avro.EnumSchema).Symbols())
	case *avro.PrimitiveSchema:
		return sameDecimal(x, b.(*avro.PrimitiveSchema))
	}
	return true
}

// sameDecimal compares the precision and scale of two decimal logical types (true for
// any other pair: avroLogicalName compared the kinds).
func sameDecimal(a, b avro.LogicalTypeSchema) bool {
	x, ok1 := a.Logical().(*avro.DecimalLogicalSchema)
	y, ok2 := b.Logical().(*avro.DecimalLogicalSchema)
	if !ok1 || !ok2 {
		return ok1 == ok2
	}
	return x.Precision() == y.Precision() && x.Scale() == y.Scale()
}

// longRole is role when s is a long or a [null, long] union, else roleSkip.
func longRole(s avro.Schema, role envRole) envRole {
	switch deref(nonNull(s)).Type() {
	case avro.Long, avro.Int:
		return role
	}
	return roleSkip
}

// recordBranch is the record type of a [null, record] (or [record, null]) union, else nil.
func recordBranch(s avro.Schema) avro.Schema {
	u, ok := s.(*avro.UnionSchema)
	if !ok || len(u.Types()) != 2 {
		return nil
	}
	for _, t := range u.Types() {
		if r, ok := deref(t).(*avro.RecordSchema); ok {
			return r
		}
	}
	return nil
}

// nonNull is the non-null branch of a two-branch union with null, else s.
func nonNull(s avro.Schema) avro.Schema {
	if u, ok := s.(*avro.UnionSchema); ok && len(u.Types()) == 2 {
		for _, t := range u.Types() {
			if t.Type() != avro.Null {
				return t
			}
		}
	}
	return s
}

// Split reads one record body of the envelope: its operation, sequence fields and row
// (EnvelopeChange). Errors are *Error: truncated, trailing_bytes, decode_error (malformed
// Avro, an op that is not c, u, r, d, t or m, a c, u or r without after), missing_key
// (a d without before).
func (e *Envelope) Split(body []byte) (EnvelopeChange, error) {
	s := envReader{b: body}
	var ch EnvelopeChange
	var before, after []byte
	var op string
	var rowSpans [][2]int
	deleted := false
	for i := range e.fields {
		f := &e.fields[i]
		start := s.i
		var err error
		switch f.role {
		case roleBefore, roleAfter:
			var span []byte
			span, err = s.optional(f.schema)
			if f.role == roleBefore {
				before = span
			} else {
				after = span
			}
		case roleSource:
			for j := range f.source {
				sf := &f.source[j]
				switch sf.role {
				case roleLSN:
					ch.LSN, ch.HasLSN, err = s.optLong(sf.schema)
				case roleSourceTsMs:
					ch.SourceTsMs, ch.HasSourceTsMs, err = s.optLong(sf.schema)
				default:
					err = s.skip(sf.schema)
				}
				if err != nil {
					return ch, withField(err, f.name+"."+sf.name)
				}
			}
		case roleOp:
			var b []byte
			var ok bool
			b, ok, err = s.optString(f.schema)
			if ok {
				op = string(b)
			}
		case roleTsMs:
			ch.TsMs, ch.HasTsMs, err = s.optLong(f.schema)
		case roleLSN:
			ch.LSN, ch.HasLSN, err = s.optLong(f.schema)
		case roleSourceTsMs:
			ch.SourceTsMs, ch.HasSourceTsMs, err = s.optLong(f.schema)
		case roleDeleted:
			deleted, err = s.deleted(f.schema)
		case roleRow:
			err = s.skip(f.schema)
			if err == nil {
				if n := len(rowSpans); n > 0 && rowSpans[n-1][1] == start {
					rowSpans[n-1][1] = s.i
				} else {
					rowSpans = append(rowSpans, [2]int{start, s.i})
				}
			}
		default:
			err = s.skip(f.schema)
		}
		if err != nil {
			return ch, withField(err, f.name)
		}
	}
	if s.i != len(body) {
		return ch, newError(ReasonTrailingBytes, "", fmt.Errorf("%d bytes after the envelope", len(body)-s.i))
	}
	if e.kind == EnvelopeDebeziumFlattened {
		return e.flatChange(ch, body, op, deleted, rowSpans)
	}
	if len(op) != 1 {
		return ch, newError(ReasonDecodeError, "op", fmt.Errorf("op %q is not one of Debezium's c, u, r, d, t, m", op))
	}
	ch.Op = op[0]
	switch ch.Op {
	case OpCreate, OpUpdate, OpRead:
		if after == nil {
			return ch, newError(ReasonDecodeError, "after", fmt.Errorf("op %q with a null after: no row to write", op))
		}
		ch.Row = after
	case OpDelete:
		if before == nil {
			return ch, newError(ReasonMissingKey, "before", errors.New("op \"d\" with a null before: no key to delete (the source table's REPLICA IDENTITY is NOTHING?)"))
		}
		ch.Row = before
	case OpTruncate, OpMessage:
	default:
		return ch, newError(ReasonDecodeError, "op", fmt.Errorf("op %q is not one of Debezium's c, u, r, d, t, m", op))
	}
	return ch, nil
}

// flatChange finishes the change of a flattened record: its op from __op and __deleted,
// its row the bytes of its non-"__" fields.
func (e *Envelope) flatChange(ch EnvelopeChange, body []byte, op string, deleted bool, spans [][2]int) (EnvelopeChange, error) {
	switch {
	case deleted:
		ch.Op = OpDelete
	case op == "":
		ch.Op = OpUpdate
	case len(op) == 1 && strings.Contains("curdtm", op):
		ch.Op = op[0]
	default:
		return ch, newError(ReasonDecodeError, "__op", fmt.Errorf("__op %q is not one of Debezium's c, u, r, d, t, m", op))
	}
	switch {
	case len(spans) == 1:
		ch.Row = body[spans[0][0]:spans[0][1]:spans[0][1]]
	default: // "__" fields between the row's: copy the row's fields together
		n := 0
		for _, sp := range spans {
			n += sp[1] - sp[0]
		}
		row := make([]byte, 0, n)
		for _, sp := range spans {
			row = append(row, body[sp[0]:sp[1]]...)
		}
		ch.Row = row
	}
	return ch, nil
}

// envReader walks the Avro binary of an envelope (Avro 1.11 specification, "Binary
// Encoding"), skipping what Split does not read.
type envReader struct {
	b     []byte
	i     int
	zeros int // zero-byte array and map items skipped so far
}

func (s *envReader) long() (int64, error) {
	v, n := binary.Varint(s.b[s.i:])
	if n <= 0 {
		if n == 0 {
			return 0, truncated()
		}
		return 0, malformed("varint overflows 64 bits")
	}
	s.i += n
	return v, nil
}

func (s *envReader) advance(n int64) error {
	if n < 0 {
		return malformed("negative length %d", n)
	}
	if n > int64(len(s.b)-s.i) {
		return truncated()
	}
	s.i += int(n)
	return nil
}

// span reads a bytes or string value.
func (s *envReader) span() ([]byte, error) {
	n, err := s.long()
	if err != nil {
		return nil, err
	}
	start := s.i
	if err := s.advance(n); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// branch reads a union's branch index and returns the branch's schema.
func (s *envReader) branch(u *avro.UnionSchema) (avro.Schema, error) {
	idx, err := s.long()
	if err != nil {
		return nil, err
	}
	if idx < 0 || idx >= int64(len(u.Types())) {
		return nil, malformed("union branch %d of %d", idx, len(u.Types()))
	}
	return u.Types()[idx], nil
}

// optional reads a [null, record] union: nil for null, else the record's bytes.
func (s *envReader) optional(sc avro.Schema) ([]byte, error) {
	t, err := s.branch(sc.(*avro.UnionSchema))
	if err != nil {
		return nil, err
	}
	if t.Type() == avro.Null {
		return nil, nil
	}
	start := s.i
	if err := s.skip(t); err != nil {
		return nil, err
	}
	return s.b[start:s.i:s.i], nil
}

// optLong reads a long, int or a union of them with null.
func (s *envReader) optLong(sc avro.Schema) (int64, bool, error) {
	if u, ok := sc.(*avro.UnionSchema); ok {
		t, err := s.branch(u)
		if err != nil {
			return 0, false, err
		}
		if t.Type() == avro.Null {
			return 0, false, nil
		}
		sc = t
	}
	v, err := s.long()
	return v, err == nil, err
}

// optString reads a string or a union of it with null.
func (s *envReader) optString(sc avro.Schema) ([]byte, bool, error) {
	if u, ok := sc.(*avro.UnionSchema); ok {
		t, err := s.branch(u)
		if err != nil {
			return nil, false, err
		}
		if t.Type() == avro.Null {
			return nil, false, nil
		}
	}
	b, err := s.span()
	return b, err == nil, err
}

// deleted reads __deleted: the string "true" or the boolean true (ExtractNewRecordState
// writes a string; some converters a boolean); null is false.
func (s *envReader) deleted(sc avro.Schema) (bool, error) {
	if u, ok := sc.(*avro.UnionSchema); ok {
		t, err := s.branch(u)
		if err != nil || t.Type() == avro.Null {
			return false, err
		}
		sc = t
	}
	if deref(sc).Type() == avro.Boolean {
		if s.i >= len(s.b) {
			return false, truncated()
		}
		c := s.b[s.i]
		s.i++
		if c > 1 {
			return false, badBool(c)
		}
		return c == 1, nil
	}
	b, err := s.span()
	return err == nil && strings.EqualFold(string(b), "true"), err
}

// skip walks one value of schema sc.
func (s *envReader) skip(sc avro.Schema) error {
	switch t := deref(sc).(type) {
	case *avro.RecordSchema:
		for _, f := range t.Fields() {
			if err := s.skip(f.Type()); err != nil {
				return withField(err, f.Name())
			}
		}
		return nil
	case *avro.UnionSchema:
		b, err := s.branch(t)
		if err != nil {
			return err
		}
		return s.skip(b)
	case *avro.ArraySchema:
		return s.blocks(func() error { return s.skip(t.Items()) })
	case *avro.MapSchema:
		return s.blocks(func() error {
			if _, err := s.span(); err != nil {
				return err
			}
			return s.skip(t.Values())
		})
	case *avro.FixedSchema:
		return s.advance(int64(t.Size()))
	case *avro.EnumSchema:
		_, err := s.long()
		return err
	}
	switch sc.Type() {
	case avro.Null:
		return nil
	case avro.Boolean:
		return s.advance(1)
	case avro.Int, avro.Long:
		_, err := s.long()
		return err
	case avro.Float:
		return s.advance(4)
	case avro.Double:
		return s.advance(8)
	case avro.Bytes, avro.String:
		_, err := s.span()
		return err
	}
	return malformed("cannot skip a %s", sc.Type())
}

// blocks walks an array's or map's blocks, item per item (a block with its byte size is
// stepped over whole).
func (s *envReader) blocks(item func() error) error {
	for {
		n, err := s.long()
		if err != nil || n == 0 {
			return err
		}
		if n < 0 {
			size, err := s.long()
			if err != nil {
				return err
			}
			if err := s.advance(size); err != nil {
				return err
			}
			continue
		}
		for ; n > 0; n-- {
			at := s.i
			if err := item(); err != nil {
				return err
			}
			if s.i == at {
				if s.zeros++; s.zeros > maxZeroItemsEnv {
					return malformed("more than %d zero-byte items in one envelope", maxZeroItemsEnv)
				}
			}
		}
	}
}
