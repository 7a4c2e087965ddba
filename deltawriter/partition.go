package deltawriter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

// HiveDefaultPartition is the directory name of a null partition value (Spark, Hive).
const HiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// CheckPartitionColumns checks that every column of partitionColumns is a top-level
// column of schema whose type ingestd can serialise as a partition value (PROTOCOL.md,
// "Partition Value Serialization"): string, byte, short, integer, long, boolean, date,
// timestamp, timestamp_ntz, decimal, float, double. Errors: a column schema lacks, or a
// binary or nested one (deltalog.ErrPartitionType), each naming the column.
func CheckPartitionColumns(schema *deltalog.StructType, partitionColumns []string) error {
	for _, c := range partitionColumns {
		f := PartitionField(schema, c)
		if f == nil {
			return fmt.Errorf("partition column %q is not a top-level column of the schema", c)
		}
		if err := checkPartitionType(f.Type); err != nil {
			return fmt.Errorf("partition column %q: %w", c, err)
		}
	}
	return nil
}

// PartitionField returns the top-level field of schema that partition column name
// (a logical name) refers to, matched as Delta matches names (deltalog.NameKey), or nil.
func PartitionField(schema *deltalog.StructType, name string) *deltalog.StructField {
	k := deltalog.NameKey(name)
	for _, f := range schema.Fields {
		if deltalog.NameKey(f.Name) == k {
			return f
		}
	}
	return nil
}

func checkPartitionType(t deltalog.DataType) error {
	switch t := t.(type) {
	case deltalog.DecimalType:
		return nil
	case deltalog.PrimitiveType:
		switch t {
		case deltalog.String, deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Long, deltalog.Boolean,
			deltalog.Date, deltalog.Timestamp, deltalog.TimestampNtz, deltalog.Float, deltalog.Double:
			return nil
		case deltalog.Binary:
			return fmt.Errorf("%w: binary (raw bytes are not valid JSON in the log for non-UTF-8 values; partition by a string or a generated column instead)", deltalog.ErrPartitionType)
		}
	}
	return fmt.Errorf("%w: %s", deltalog.ErrPartitionType, t)
}

// PartitionValue serialises v, the value of a top-level partition column of type t as
// the flush buffers it (the Parquet physical value of deltawriter.ParquetSchema's
// layout), into its add.partitionValues string (PROTOCOL.md, "Partition Value
// Serialization"). It returns nil for a null value and for an empty string (the protocol:
// an empty string is a null partition value). Renderings:
//   - string as is; byte, short, integer, long in decimal; boolean "true" / "false";
//   - date "2023-01-09" (days since the epoch, proleptic Gregorian);
//   - timestamp "2024-06-15T19:30:45.000000Z": UTC ISO-8601, always six fraction
//     digits, seconds by floor division (-1 µs → "1969-12-31T23:59:59.999999Z");
//   - timestamp_ntz "2024-06-15 19:30:45" or "2024-06-15 23:59:59.999999": zone-less,
//     the fraction without trailing zeros and omitted when zero (Spark's rendering);
//   - decimal with its scale ("42.00", "-0.05");
//   - float and double as Java's Float/Double.toString ("1.0E7", "0.001", "NaN"),
//     -0.0 as "0.0" (Spark: the same partition as 0.0).
//
// Errors: a type CheckPartitionColumns refuses, or a value of the wrong physical kind.
func PartitionValue(t deltalog.DataType, v parquet.Value) (*string, error) {
	if v.IsNull() {
		return nil, nil
	}
	var s string
	switch t := t.(type) {
	case deltalog.DecimalType:
		s = formatDecimal(unscaled(v), t.Scale)
	case deltalog.PrimitiveType:
		switch t {
		case deltalog.String:
			if v.Kind() != parquet.ByteArray {
				return nil, fmt.Errorf("serialise string partition value: got a %s value", v.Kind())
			}
			s = string(v.ByteArray())
			if s == "" {
				return nil, nil
			}
		case deltalog.Byte, deltalog.Short, deltalog.Integer:
			s = strconv.FormatInt(int64(v.Int32()), 10)
		case deltalog.Long:
			s = strconv.FormatInt(v.Int64(), 10)
		case deltalog.Boolean:
			s = strconv.FormatBool(v.Boolean())
		case deltalog.Date:
			s = time.Unix(int64(v.Int32())*86400, 0).UTC().Format(time.DateOnly)
		case deltalog.Timestamp:
			s = time.UnixMicro(v.Int64()).UTC().Format("2006-01-02T15:04:05.000000Z")
		case deltalog.TimestampNtz:
			s = formatSparkTimestamp(v.Int64())
		case deltalog.Float:
			s = javaFloatString(float64(v.Float()), 32)
		case deltalog.Double:
			s = javaFloatString(v.Double(), 64)
		default:
			return nil, checkPartitionType(t)
		}
	default:
		return nil, checkPartitionType(t)
	}
	return &s, nil
}

// PartitionDirValue is the directory rendering of a partition value before escaping, as
// Spark names partition directories: pv itself, except a timestamp, which Spark renders
// in UTC as "2024-06-15 19:30:45[.ffffff]" (the fraction without trailing zeros,
// whatever the process zone), and null, which is HiveDefaultPartition. micros is the
// timestamp's value.
func PartitionDirValue(t deltalog.DataType, pv *string, micros int64) string {
	if pv == nil {
		return HiveDefaultPartition
	}
	if t == deltalog.Timestamp {
		return formatSparkTimestamp(micros)
	}
	return *pv
}

// PartitionDir returns the relative directory of a data file: "col=value" segments joined
// by "/", each name and value escaped with EscapePartitionName. names and values are
// parallel (values from PartitionDirValue).
func PartitionDir(names, values []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(EscapePartitionName(n))
		b.WriteByte('=')
		b.WriteString(EscapePartitionName(values[i]))
	}
	return b.String()
}

// EscapePartitionName escapes a partition column name or value for a directory name as
// Spark does (ExternalCatalogUtils.escapePathName, copied from Hive): bytes 0x01–0x1F,
// `"` `#` `%` `'` `*` `/` `:` `=` `?` `\` 0x7F `{` `[` `]` `^` become %XX (upper-case
// hex); everything else, non-ASCII included, is kept.
func EscapePartitionName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if hiveEscaped(c) {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func hiveEscaped(c byte) bool {
	if c >= 0x01 && c <= 0x1F || c == 0x7F {
		return true
	}
	return strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0
}

// escapePath turns a store path into add.path, a relative URI, as Spark does (Hadoop's
// Path.toUri, i.e. java.net.URI's quoting of a path): '%', space, '"', '<', '>', '\',
// '^', '`', '{', '|', '}', '#', '?', '[', ']', control characters and non-ASCII space or
// control characters are percent-encoded (UTF-8); other non-ASCII characters are kept
// ("region=München/" stays as it is). The store layer decodes add.path exactly once
// (deltalog.CanonicalPath), so the object key is the store path.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		switch {
		case r < 0x80:
			c := byte(r)
			if c <= 0x20 || c == 0x7F || strings.IndexByte("%\"<>\\^`{|}#?[]", c) >= 0 {
				fmt.Fprintf(&b, "%%%02X", c)
				continue
			}
			b.WriteByte(c)
		case unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError:
			var buf [utf8.UTFMax]byte
			n := utf8.EncodeRune(buf[:], r)
			for _, c := range buf[:n] {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// formatSparkTimestamp renders µs since the epoch in UTC as "2006-01-02 15:04:05" with
// the fraction (floor division) appended without trailing zeros when not zero.
func formatSparkTimestamp(micros int64) string {
	t := time.UnixMicro(micros).UTC()
	s := t.Format(time.DateTime)
	if us := t.Nanosecond() / 1000; us != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", us), "0")
	}
	return s
}

// ParsePartitionTimestamp parses a timestamp partition value in either form readers meet
// (PROTOCOL.md, "Partition Value Serialization"): the UTC ISO-8601 form Delta 3.3+ and
// ingestd write ("2024-06-15T19:30:45.000000Z", any fraction length or none, a "Z" or
// numeric offset), or the legacy zone-less "2024-06-15 19:30:45[.ffffff]" that older
// Spark wrote in its session zone, which is read in loc (UTC unless a table says
// otherwise). It returns µs since the epoch.
func ParsePartitionTimestamp(s string, loc *time.Location) (int64, error) {
	if loc == nil {
		loc = time.UTC
	}
	if strings.Contains(s, "T") {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("parse timestamp partition value %q: %w", s, err)
		}
		return t.UnixMicro(), nil
	}
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999999", s, loc)
	if err != nil {
		return 0, fmt.Errorf("parse timestamp partition value %q: %w", s, err)
	}
	return t.UnixMicro(), nil
}

// NormalizePartitionValue returns the canonical form of an add.partitionValues string of
// a column of type t, so that values written by different writers for the same
// partition compare equal: timestamps in ingestd's UTC ISO form (legacy zone-less values
// read in loc), booleans in lower case; other values unchanged. A value it cannot parse
// is returned unchanged with an error.
func NormalizePartitionValue(t deltalog.DataType, pv *string, loc *time.Location) (*string, error) {
	if pv == nil || *pv == "" {
		return nil, nil
	}
	switch t {
	case deltalog.Timestamp:
		us, err := ParsePartitionTimestamp(*pv, loc)
		if err != nil {
			return pv, err
		}
		s := time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z")
		return &s, nil
	case deltalog.Boolean:
		s := strings.ToLower(*pv)
		return &s, nil
	}
	return pv, nil
}

// javaFloatString is expr.JavaFloatString for a partition value: -0.0 is rendered "0.0",
// as Spark writes it (the same partition as 0.0).
func javaFloatString(f float64, bits int) string {
	if f == 0 {
		return "0.0"
	}
	return expr.JavaFloatString(f, bits)
}
