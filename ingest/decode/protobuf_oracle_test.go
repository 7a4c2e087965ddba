package decode

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The dynamicpb transcoder the wire decoder (protowire.go) replaced, kept as the oracle of
// the differential tests: unmarshal into a dynamic message, then walk it.

func oracleToAvro(p *protoBody, dst, body []byte) (out []byte, err error) {
	defer recoverPanic(&err)
	m := dynamicpb.NewMessage(p.md)
	if err := protoUnmarshal.Unmarshal(body, m); err != nil {
		return nil, malformed("decode protobuf %s: %v", p.md.FullName(), err)
	}
	e := &pbEncoder{newAvroAppender(dst, len(body))}
	if err := e.message(p.top, m); err != nil {
		return nil, err
	}
	return e.b, nil
}

type pbEncoder struct{ avroAppender }

func (e *pbEncoder) message(pm *pbMsg, m protoreflect.Message) error {
	for i := range pm.fields {
		f := &pm.fields[i]
		switch {
		case f.isMap:
			mp := m.Get(f.fd).Map()
			if n := mp.Len(); n > 0 {
				type kv struct {
					k string
					v protoreflect.Value
				}
				kvs := make([]kv, 0, n)
				mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
					kvs = append(kvs, kv{mapKeyText(f.key, k), v})
					return true
				})
				slices.SortFunc(kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
				e.long(int64(n))
				for _, x := range kvs {
					e.text(x.k)
					if err := e.value(&f.typ, x.v, f.path); err != nil {
						return err
					}
				}
				if err := e.check(f.path); err != nil {
					return err
				}
			}
			e.b = append(e.b, 0)
		case f.list:
			l := m.Get(f.fd).List()
			if n := l.Len(); n > 0 {
				e.long(int64(n))
				for j := range n {
					if err := e.value(&f.typ, l.Get(j), f.path); err != nil {
						return err
					}
					if err := e.check(f.path); err != nil {
						return err
					}
				}
			}
			e.b = append(e.b, 0)
		case f.typ.kind == pbEmpty:
		case f.nullable:
			if !m.Has(f.fd) {
				e.b = append(e.b, 0) // union branch 0: null
				continue
			}
			e.b = append(e.b, 2) // union branch 1
			if err := e.value(&f.typ, m.Get(f.fd), f.path); err != nil {
				return err
			}
		default:
			if err := e.value(&f.typ, m.Get(f.fd), f.path); err != nil {
				return err
			}
		}
	}
	return nil
}

func mapKeyText(k pbKind, key protoreflect.MapKey) string {
	switch k {
	case pbString:
		return key.String()
	case pbBool:
		return strconv.FormatBool(key.Bool())
	case pbUint32, pbUint64:
		return strconv.FormatUint(key.Uint(), 10)
	}
	return strconv.FormatInt(key.Int(), 10)
}

func (e *pbEncoder) value(t *pbType, v protoreflect.Value, path string) error {
	switch t.kind {
	case pbBool:
		if v.Bool() {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
		}
	case pbInt32, pbInt64:
		e.long(v.Int())
	case pbUint32:
		e.long(int64(v.Uint()))
	case pbUint64:
		e.uint64Decimal(v.Uint())
	case pbFloat:
		e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(float32(v.Float())))
	case pbDouble:
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v.Float()))
	case pbString:
		e.text(v.String())
	case pbBytes:
		e.str(v.Bytes())
	case pbEnum:
		n := v.Enum()
		if ev := t.enum.Values().ByNumber(n); ev != nil {
			e.text(string(ev.Name()))
		} else { // proto3 enums are open: an unknown number is kept as its text
			e.str(strconv.AppendInt(nil, int64(n), 10))
		}
	case pbMessage:
		return e.message(t.msg, v.Message())
	case pbTimestamp:
		m := v.Message()
		fs := m.Descriptor().Fields()
		sec, nanos := m.Get(fs.ByNumber(1)).Int(), m.Get(fs.ByNumber(2)).Int()
		if sec < minTimestampSeconds || sec > maxTimestampSeconds || nanos < 0 || nanos > 999_999_999 {
			return newError(ReasonDecodeError, path, fmt.Errorf("google.protobuf.Timestamp {seconds: %d, nanos: %d} is outside 0001-01-01..9999-12-31 or not normalised", sec, nanos))
		}
		e.long(sec*1_000_000 + nanos/1000) // nanoseconds below the microsecond are dropped
	case pbDuration:
		m := v.Message()
		fs := m.Descriptor().Fields()
		sec, nanos := m.Get(fs.ByNumber(1)).Int(), m.Get(fs.ByNumber(2)).Int()
		if sec < -maxDurationSeconds || sec > maxDurationSeconds || nanos < -999_999_999 || nanos > 999_999_999 || (sec > 0 && nanos < 0) || (sec < 0 && nanos > 0) {
			return newError(ReasonDecodeError, path, fmt.Errorf("google.protobuf.Duration {seconds: %d, nanos: %d} is out of range or its signs differ", sec, nanos))
		}
		e.long(sec*1_000_000 + nanos/1000) // truncated toward zero
	case pbWrapper:
		m := v.Message()
		return e.value(t.wrapped, m.Get(m.Descriptor().Fields().ByNumber(1)), path)
	case pbJSON:
		j, err := json.Marshal(wktJSON(v.Message(), 0))
		if err != nil {
			return newError(ReasonDecodeError, path, fmt.Errorf("encode %s as JSON: %w", v.Message().Descriptor().FullName(), err))
		}
		e.str(j)
	case pbAny:
		m := v.Message()
		fs := m.Descriptor().Fields()
		j, err := json.Marshal(struct {
			Type  string `json:"@type"`
			Value string `json:"value"`
		}{m.Get(fs.ByNumber(1)).String(), base64.StdEncoding.EncodeToString(m.Get(fs.ByNumber(2)).Bytes())})
		if err != nil {
			return newError(ReasonDecodeError, path, fmt.Errorf("encode google.protobuf.Any as JSON: %w", err))
		}
		e.str(j)
	case pbEmpty:
	}
	return nil
}

// wktJSON is a google.protobuf.Struct, Value or ListValue as a Go value json.Marshal
// writes as its JSON mapping (object keys sorted); nesting beyond maxProtoRecursion is
// cut (the body's own recursion limit already bounds it).
func wktJSON(m protoreflect.Message, depth int) any {
	if depth > maxProtoRecursion {
		return nil
	}
	fs := m.Descriptor().Fields()
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct":
		out := map[string]any{}
		m.Get(fs.ByNumber(1)).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			out[k.String()] = wktJSON(v.Message(), depth+1)
			return true
		})
		return out
	case "google.protobuf.ListValue":
		l := m.Get(fs.ByNumber(1)).List()
		out := make([]any, l.Len())
		for i := range out {
			out[i] = wktJSON(l.Get(i).Message(), depth+1)
		}
		return out
	}
	od := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind"))
	if od == nil {
		return nil
	}
	v := m.Get(od)
	switch od.Name() {
	case "number_value":
		f := v.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return strconv.FormatFloat(f, 'g', -1, 64) // JSON has no such number: its text, as protojson writes it
		}
		return f
	case "string_value":
		return v.String()
	case "bool_value":
		return v.Bool()
	case "struct_value", "list_value":
		return wktJSON(v.Message(), depth+1)
	}
	return nil // null_value
}
