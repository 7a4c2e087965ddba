package decode

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Kafka Connect logical types (docs/formats.md, "Kafka Connect and Debezium logical
// types"). Kafka Connect gives a value a meaning beyond its physical type by naming its
// schema: org.apache.kafka.connect.data.Decimal on bytes, Debezium's
// io.debezium.time.MicroTimestamp on int64. A Connect Avro converter (Confluent's or
// Apicurio's AvroData) keeps the name as the Avro property "connect.name" and the schema's
// parameters as "connect.parameters", and for a few names also writes a standard Avro
// logicalType; JsonConverter writes them as the Connect schema's "name" and "parameters",
// which the Kafka Connect JSON transcoder turns into the same Avro properties
// (connectSchema.node). connectLogicals is the one table both formats are decided by.

const (
	connectNameProp   = "connect.name"
	connectParamsProp = "connect.parameters"

	connectDecimal   = "org.apache.kafka.connect.data.Decimal"
	debeziumVarScale = "io.debezium.data.VariableScaleDecimal"

	// maxVarScale bounds a VariableScaleDecimal's scale: PostgreSQL keeps at most 16383
	// digits after the point, and the bound keeps the text of one value small.
	maxVarScale = 16383
)

// connectLogical is how the values of one Connect logical type become a column.
type connectLogical struct {
	physical avro.Type // the Avro type of the name's Connect physical type
	base     kindBase  // how a value decodes (kinds.deltaType is its column type)
	// logical lists the standard Avro logicalTypes a converter may write beside the name
	// (same values, same unit); any other is a contradiction, refused.
	logical []string
}

// connectLogicals maps every supported Connect logical type name. Names under
// connectNamespaces that are not here (PostGIS geometry, pgvector's sparse vectors, …) are
// refused (unsupportedConnect).
var connectLogicals = map[string]connectLogical{
	// Kafka Connect's own: the same as their standard Avro logical types.
	connectDecimal:                            {avro.Bytes, kDecimalBytes, []string{"decimal"}},
	"org.apache.kafka.connect.data.Date":      {avro.Int, kDate, []string{"date"}},
	"org.apache.kafka.connect.data.Time":      {avro.Int, kTimeMillis, []string{"time-millis"}},
	"org.apache.kafka.connect.data.Timestamp": {avro.Long, kTsMillis, []string{"timestamp-millis"}},

	// Debezium's (io.debezium.time, io.debezium.data): dates and times without a zone
	// count from the epoch or midnight in the database's own clock, so a timestamp is
	// timestamp_ntz; a time of day is long microseconds since midnight (Delta has no time
	// type); sub-microsecond digits are cut (the earlier microsecond).
	"io.debezium.time.Date":           {avro.Int, kDate, []string{"date"}},
	"io.debezium.time.Time":           {avro.Int, kTimeMillisMicros, []string{"time-millis"}},
	"io.debezium.time.MicroTime":      {avro.Long, kTimeMicros, []string{"time-micros"}},
	"io.debezium.time.NanoTime":       {avro.Long, kTimeNanos, []string{"time-nanos"}},
	"io.debezium.time.Timestamp":      {avro.Long, kLocalTsMillis, []string{"timestamp-millis", "local-timestamp-millis"}},
	"io.debezium.time.MicroTimestamp": {avro.Long, kLocalTsMicros, []string{"timestamp-micros", "local-timestamp-micros"}},
	"io.debezium.time.NanoTimestamp":  {avro.Long, kLocalTsNanos, []string{"timestamp-nanos", "local-timestamp-nanos"}},
	"io.debezium.time.ZonedTimestamp": {avro.String, kZonedTs, nil},
	"io.debezium.time.ZonedTime":      {avro.String, kString, nil},
	"io.debezium.time.Year":           {avro.Int, kInt, nil},
	"io.debezium.time.MicroDuration":  {avro.Long, kLong, nil},
	"io.debezium.time.Interval":       {avro.String, kString, nil},
	"io.debezium.data.Json":           {avro.String, kString, nil},
	"io.debezium.data.Xml":            {avro.String, kString, nil},
	"io.debezium.data.Uuid":           {avro.String, kString, []string{"uuid"}},
	"io.debezium.data.Ltree":          {avro.String, kString, nil},
	"io.debezium.data.Enum":           {avro.String, kString, nil},
	"io.debezium.data.EnumSet":        {avro.String, kString, nil},
	"io.debezium.data.Bits":           {avro.Bytes, kBytes, nil},
	debeziumVarScale:                  {avro.Record, kVarDecimal, nil},
}

// connectNamespaces hold only logical type names: a name under them that connectLogicals
// lacks is a type ingestd does not know how to store, never an ordinary struct name.
var connectNamespaces = []string{"org.apache.kafka.connect.data.", "io.debezium.data.", "io.debezium.time."}

// connectNameOf returns the Connect schema name a primitive, fixed or record schema carries
// as the "connect.name" property ("" when none).
func connectNameOf(s avro.Schema) string {
	p, ok := deref(s).(interface{ Prop(string) any })
	if !ok {
		return ""
	}
	name, _ := p.Prop(connectNameProp).(string)
	return name
}

// isConnectLogical reports whether name is a Connect logical type name, supported or not.
func isConnectLogical(name string) bool {
	if _, ok := connectLogicals[name]; ok {
		return true
	}
	for _, ns := range connectNamespaces {
		if strings.HasPrefix(name, ns) {
			return true
		}
	}
	return false
}

func unsupportedConnect(name string) error {
	return fmt.Errorf("convert schema: Kafka Connect logical type %s is not supported: Delta has no type for it (leave the column out, e.g. with the connector's column.exclude.list)", name)
}

// classifyConnect returns the kind of a primitive or fixed schema named name, a Connect
// logical type: its physical type must be the name's, and a standard Avro logicalType
// beside it must be one of the name's (docs/formats.md, "Kafka Connect and Debezium
// logical types").
func classifyConnect(s avro.Schema, name string) (kind, error) {
	cl, ok := connectLogicals[name]
	if !ok {
		return kind{}, unsupportedConnect(name)
	}
	if s.Type() != cl.physical {
		return kind{}, fmt.Errorf("convert schema: Kafka Connect logical type %s on Avro %s, want %s", name, s.Type(), cl.physical)
	}
	lt := avroLogicalName(s)
	if lt != "" && !slices.Contains(cl.logical, lt) {
		return kind{}, fmt.Errorf("convert schema: Kafka Connect logical type %s contradicts the Avro logicalType %s beside it", name, lt)
	}
	k := kind{base: cl.base}
	if name == connectDecimal {
		p, sc, err := connectDecimalParams(connectParams(s))
		if err != nil {
			return kind{}, err
		}
		if d, ok := s.(*avro.PrimitiveSchema).Logical().(*avro.DecimalLogicalSchema); ok {
			// Without connect.decimal.precision AvroData writes its default precision
			// (64), which says nothing; a scale or a given precision must agree.
			_, given := connectParams(s)["connect.decimal.precision"]
			if d.Scale() != sc || (given && d.Precision() != p) {
				return kind{}, fmt.Errorf("convert schema: Kafka Connect Decimal(precision %d, scale %d) contradicts the Avro logicalType decimal(%d,%d) beside it", p, sc, d.Precision(), d.Scale())
			}
		}
		k.precision, k.scale = p, sc
	}
	return k, nil
}

// avroLogicalName is the logicalType a schema is annotated with, recognised by hamba/avro
// or not ("" when none).
func avroLogicalName(s avro.Schema) string {
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		return string(ls.Logical().Type())
	}
	if p, ok := s.(interface{ Prop(string) any }); ok {
		lt, _ := p.Prop("logicalType").(string)
		return lt
	}
	return ""
}

// connectParams are a schema's "connect.parameters" (values that are not strings are
// left out: Connect's parameters are strings).
func connectParams(s avro.Schema) map[string]string {
	p, ok := deref(s).(interface{ Prop(string) any })
	if !ok {
		return nil
	}
	m, _ := p.Prop(connectParamsProp).(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if str, ok := v.(string); ok {
			out[k] = str
		}
	}
	return out
}

// connectDecimalParams reads a Connect Decimal's precision and scale from its parameters:
// "scale" (required), "connect.decimal.precision" (else 38, Delta's largest). Precision
// above 38 or a negative scale has no Delta decimal: refused, never rescaled.
func connectDecimalParams(params map[string]string) (precision, scale int, err error) {
	scale, err = strconv.Atoi(params["scale"])
	precision = maxDecimalPrecision
	if p, ok := params["connect.decimal.precision"]; ok && err == nil {
		precision, err = strconv.Atoi(p)
	}
	if err != nil || precision < 1 || precision > maxDecimalPrecision || scale < 0 || scale > precision {
		return 0, 0, fmt.Errorf("convert schema: Kafka Connect Decimal with scale %q and precision %q is outside Delta's decimal(1..38, 0..p) (Debezium: decimal.handling.mode=string keeps such a column exact as text)", params["scale"], params["connect.decimal.precision"])
	}
	return precision, scale, nil
}

// varDecimal is the layout of a VariableScaleDecimal record: the positions of its scale
// (int) and value (bytes: the unscaled big-endian two's complement) fields.
type varDecimal struct{ scale, value int }

// varDecimalOf checks a record named io.debezium.data.VariableScaleDecimal.
func varDecimalOf(rs *avro.RecordSchema) (varDecimal, error) {
	vd := varDecimal{-1, -1}
	for i, f := range rs.Fields() {
		switch t := deref(f.Type()).Type(); {
		case f.Name() == "scale" && t == avro.Int:
			vd.scale = i
		case f.Name() == "value" && t == avro.Bytes:
			vd.value = i
		}
	}
	if vd.scale < 0 || vd.value < 0 || len(rs.Fields()) != 2 {
		return vd, fmt.Errorf("convert schema: %s must be a record {scale: int, value: bytes}, got %s", debeziumVarScale, rs.String())
	}
	return vd, nil
}

// plainDecimal renders unscaled × 10^-scale as Java's BigDecimal.toPlainString does: no
// exponent, every digit of the scale kept ("-12.340", "0.05", "1200" for scale -2).
func plainDecimal(unscaled []byte, scale int32) ([]byte, error) {
	if len(unscaled) == 0 {
		return nil, malformed("VariableScaleDecimal with an empty value")
	}
	if scale > maxVarScale || scale < -maxVarScale {
		return nil, malformed("VariableScaleDecimal scale %d outside ±%d", scale, maxVarScale)
	}
	x := new(big.Int).SetBytes(unscaled)
	if unscaled[0]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(unscaled))))
	}
	neg := x.Sign() < 0
	digits := x.Abs(x).String()
	out := make([]byte, 0, len(digits)+int(max(scale, -scale))+3)
	if neg {
		out = append(out, '-')
	}
	switch n := int(scale); {
	case n <= 0:
		out = append(out, digits...)
		if digits != "0" {
			out = append(out, strings.Repeat("0", -n)...)
		}
	case len(digits) > n:
		out = append(out, digits[:len(digits)-n]...)
		out = append(out, '.')
		out = append(out, digits[len(digits)-n:]...)
	default:
		out = append(out, "0."...)
		out = append(out, strings.Repeat("0", n-len(digits))...)
		out = append(out, digits...)
	}
	return out, nil
}

// connectRecordType maps a record that carries a Connect logical type name (ok false for
// an ordinary struct).
func connectRecordType(rs *avro.RecordSchema) (t deltalog.DataType, ok bool, err error) {
	name := connectNameOf(rs)
	if name == "" {
		name = rs.FullName()
	}
	if !isConnectLogical(name) {
		return nil, false, nil
	}
	if name != debeziumVarScale {
		return nil, true, unsupportedConnect(name)
	}
	if _, err := varDecimalOf(rs); err != nil {
		return nil, true, err
	}
	return deltalog.String, true, nil
}

// zonedMicros reads a Debezium ZonedTimestamp, an ISO-8601 date-time with an offset
// ("2026-12-06T12:00:00.123456Z", "…+05:30"), as microseconds since the epoch UTC; digits
// past the microsecond are cut (the earlier microsecond). A text Go's RFC 3339 parser
// refuses (a year outside 0000-9999, PostgreSQL's "infinity") and an instant outside
// Delta's range in UTC (year 0000, "9999-12-31T23:00:00-05:00") are decode_errors.
func zonedMicros(b []byte) (int64, error) {
	ts, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return 0, malformed("ZonedTimestamp %q is not an ISO-8601 date-time with an offset", b)
	}
	us := ts.UnixMicro()
	if us < deltalog.TimestampMinMicros || us > deltalog.TimestampMaxMicros {
		return 0, malformed("ZonedTimestamp %q is outside Delta's range 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z", b)
	}
	return us, nil
}
