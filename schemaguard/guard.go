package schemaguard

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Policy is a table's schema policy (schema.policy; docs/schema-policies.md).
type Policy string

// Policies.
const (
	Evolve     Policy = "evolve"
	DeadLetter Policy = "dead_letter"
	Halt       Policy = "halt"
)

// Options configure Decide.
type Options struct {
	Policy Policy
	// OnIncompatible is what Evolve does with a change it cannot make: Halt or DeadLetter.
	OnIncompatible Policy
	// Table describes what the table already supports.
	Table TableState
	// Allow lists the table features Evolve may enable (schema.allow_table_features):
	// deltalog.FeatureTypeWidening, FeatureTimestampNtz, FeatureColumnMapping.
	Allow map[string]bool
	// CreateColumns, when set, completes the schema of a table the batch creates (built
	// from its first fitting writer schema) with the columns the writer itself adds:
	// generated columns (delta.generationExpression), so that the batch's writers are
	// decided against them. It returns the completed schema (it may modify its argument).
	CreateColumns func(*deltalog.StructType) *deltalog.StructType
	// KafkaColumns are the table's Kafka columns (table.kafka_columns: _kafka_key, …),
	// which ingestd fills from the record, not from its value. Drift rules apply to the
	// value schema only: the guard leaves these columns out of the comparison (they are
	// never missing, whatever their nullability), and a writer field named like one
	// (case-insensitively, deltalog.NameKey) is a KafkaColumnCollision, incompatible.
	KafkaColumns []string
	// PartitionColumns are the table's partition columns: a widening of one is evolvable
	// only when its partition values keep their form (deltalog.PartitionWidening: integer
	// widening); any other is a PartitionTypeChange, incompatible. `table alter --widen`
	// applies the same rule.
	PartitionColumns []string
	// AlterTable is how Explain's fix commands name the table: the arguments after
	// `ingestd table alter` (e.g. "--config pipelines/gold.yaml" or a table URI); empty:
	// "TABLE", for the reader to fill in.
	AlterTable string
}

// TableState is what the guard needs to know about the table besides its schema.
type TableState struct {
	TypeWidening  bool            // delta.enableTypeWidening=true
	ColumnMapping bool            // delta.columnMapping.mode is name or id
	Features      map[string]bool // reader and writer features of the protocol
}

// has reports whether the table already supports feature f.
func (t TableState) has(f string) bool {
	switch f {
	case deltalog.FeatureTypeWidening:
		return t.TypeWidening
	case deltalog.FeatureColumnMapping:
		return t.ColumnMapping
	}
	return t.Features[f]
}

// Action is what happens to the records of one writer schema.
type Action int

// Actions, in increasing severity.
const (
	Write          Action = iota // write as is (values may be upcast losslessly)
	EvolveAndWrite               // apply Evolve to the table schema in this commit, then write
	DeadLetterIt                 // send the records to the dead-letter topic
	HaltIt                       // stop before the first such record
)

func (a Action) String() string {
	return [...]string{"write", "evolve", "dead_letter", "halt"}[a]
}

// ChangeKind classifies one difference between writer schema and table schema.
type ChangeKind string

// Change kinds. AddColumn, Widen and RelaxNullability can be applied by Evolve; the others
// are incompatible.
const (
	AddColumn        ChangeKind = "add_column"
	Widen            ChangeKind = "widen"
	RelaxNullability ChangeKind = "relax_nullability"
	TypeMismatch     ChangeKind = "type_mismatch"
	MissingNotNull   ChangeKind = "missing_not_null"
	NameClash        ChangeKind = "name_clash"
	// NeedsFeature is an evolvable change whose table feature is neither on the table nor
	// allowed by schema.allow_table_features; Decide turns such changes into this kind.
	NeedsFeature ChangeKind = "needs_feature"
	// KafkaColumnCollision is a top-level writer field named like a Kafka column of the
	// table (Options.KafkaColumns); Decision.Reason is then kafka_column_collision.
	KafkaColumnCollision ChangeKind = "kafka_column_collision"
	// PartitionTypeChange is a widening of a partition column that would change how its
	// partition values are written (Options.PartitionColumns); Decide turns such Widen
	// changes into this kind, which is incompatible.
	PartitionTypeChange ChangeKind = "partition_type_change"
)

// Change is one difference at a field path ("a.b", "items[].qty", "m{}.v").
type Change struct {
	Kind       ChangeKind
	Path       string
	TableType  string // "" for AddColumn
	WriterType string // "" for MissingNotNull
	Feature    string // the table feature the change needs, "" if none
	// Holds is set on a TypeMismatch of two decimals of a column evolution may change:
	// the narrowest decimal type that holds every value of both exactly
	// (deltalog.CommonDecimal), a type widening of the table's; "" when there is none.
	// A decimal whose scale grows while its integer digits shrink (PostgreSQL's
	// numeric(10,2) → numeric(10,4)) is no widening either way, but both fit this one.
	Holds string
}

func (c Change) String() string {
	switch c.Kind {
	case AddColumn:
		return fmt.Sprintf("new field %s %s", c.Path, c.WriterType)
	case Widen:
		return fmt.Sprintf("field %s widens %s → %s", c.Path, c.TableType, c.WriterType)
	case RelaxNullability:
		return fmt.Sprintf("field %s is nullable in the writer schema but NOT NULL in the table", c.Path)
	case MissingNotNull:
		return fmt.Sprintf("field %s (NOT NULL %s) is missing from the writer schema", c.Path, c.TableType)
	case NameClash:
		return fmt.Sprintf("fields at %s differ only in case: %s", c.Path, c.WriterType)
	case KafkaColumnCollision:
		return fmt.Sprintf("field %s %s collides with Kafka column %s, which ingestd fills from the record (table.kafka_columns)", c.Path, c.WriterType, c.TableType)
	case PartitionTypeChange:
		return fmt.Sprintf("partition column %s widens %s → %s, which would change the form of its partition values (only byte→short→integer→long keep it)", c.Path, c.TableType, c.WriterType)
	case NeedsFeature:
		what := "new field " + c.Path + " " + c.WriterType
		if c.TableType != "" {
			what = fmt.Sprintf("field %s widens %s → %s", c.Path, c.TableType, c.WriterType)
		}
		return fmt.Sprintf("%s needs table feature %s, which the table lacks and schema.allow_table_features does not list", what, c.Feature)
	default:
		msg := fmt.Sprintf("field %s is %s in the writer schema but %s in the table", c.Path, c.WriterType, c.TableType)
		if c.Holds != "" {
			msg += fmt.Sprintf(", neither a widening of the other (%s holds both)", c.Holds)
		}
		return msg
	}
}

func (k ChangeKind) incompatible() bool {
	return k == TypeMismatch || k == MissingNotNull || k == NameClash || k == NeedsFeature || k == KafkaColumnCollision || k == PartitionTypeChange
}

// partitionTypeChange reports whether c widens a top-level partition column of cols in a
// way that changes its partition values' form (deltalog.PartitionWidening).
func partitionTypeChange(c Change, cols []string) bool {
	if c.Kind != Widen || strings.ContainsAny(c.Path, ".[{") {
		return false
	}
	return partitionColumn(c.Path, cols) && !deltalog.PartitionWidening(primitiveNamed(c.TableType), primitiveNamed(c.WriterType))
}

// partitionColumn reports whether path is a top-level partition column of cols.
func partitionColumn(path string, cols []string) bool {
	for _, p := range cols {
		if deltalog.NameKey(p) == deltalog.NameKey(path) {
			return true
		}
	}
	return false
}

// primitiveNamed is the integer type named s (a DataType's String()), nil for any other.
func primitiveNamed(s string) deltalog.DataType {
	for _, t := range []deltalog.DataType{deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Long} {
		if t.String() == s {
			return t
		}
	}
	return nil
}

// DiffValue is Diff for a record's value schema against a table with Kafka columns
// kafka (Options.KafkaColumns): the Kafka columns are left out of the comparison, and
// each writer field named like one (case-insensitively) is a KafkaColumnCollision change
// (TableType names the column), listed first. Without Kafka columns it is Diff.
func DiffValue(table, writer *deltalog.StructType, kafka []string) []Change {
	if len(kafka) == 0 {
		return Diff(table, writer)
	}
	reserved := make(map[string]string, len(kafka))
	for _, k := range kafka {
		reserved[deltalog.NameKey(k)] = k
	}
	var out []Change
	w := &deltalog.StructType{}
	for _, f := range writer.Fields {
		if col, ok := reserved[deltalog.NameKey(f.Name)]; ok {
			out = append(out, Change{Kind: KafkaColumnCollision, Path: f.Name, TableType: col, WriterType: f.Type.String()})
			continue
		}
		w.Fields = append(w.Fields, f)
	}
	t := &deltalog.StructType{}
	for _, f := range table.Fields {
		if _, ok := reserved[deltalog.NameKey(f.Name)]; !ok {
			t.Fields = append(t.Fields, f)
		}
	}
	return append(out, Diff(t, w)...)
}

// Decision is the guard's verdict for one writer schema against one table schema.
type Decision struct {
	Action   Action
	Reason   string   // dead-letter reason code when Action is DeadLetterIt or HaltIt: schema_mismatch
	Field    string   // path of the first change that decided it, "" for Write
	Changes  []Change // every difference found, in schema order
	Features []string // table features to enable with EvolveAndWrite (allowed and needed)
}

// Diff lists the differences between writer and table, recursively through structs, array
// elements and map values. Field names match as Delta matches them (deltalog.NameKey:
// case-insensitively after Unicode NFC), keeping the table's spelling in paths
// (docs/schema-policies.md, "Column names").
func Diff(table, writer *deltalog.StructType) []Change {
	var out []Change
	diffStruct(&out, "", table, writer)
	return out
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func diffStruct(out *[]Change, prefix string, table, writer *deltalog.StructType) {
	byKey := make(map[string]*deltalog.StructField, len(table.Fields))
	for _, f := range table.Fields {
		byKey[deltalog.NameKey(f.Name)] = f
	}
	seen := make(map[string]string, len(writer.Fields))
	for _, wf := range writer.Fields {
		k := deltalog.NameKey(wf.Name)
		if prev, dup := seen[k]; dup {
			*out = append(*out, Change{Kind: NameClash, Path: join(prefix, wf.Name), WriterType: prev + ", " + wf.Name})
			continue
		}
		seen[k] = wf.Name
		tf, ok := byKey[k]
		if !ok {
			*out = append(*out, Change{Kind: AddColumn, Path: join(prefix, wf.Name), WriterType: wf.Type.String(), Feature: featureFor(wf)})
			continue
		}
		path := join(prefix, tf.Name)
		if Generated(tf) {
			// Computed by the writer and checked against a supplied value per record:
			// never relaxed or widened by evolution. A value type that upcasts into it fits.
			if tf.Type.String() != wf.Type.String() && !Upcasts(wf.Type, tf.Type) {
				*out = append(*out, Change{Kind: TypeMismatch, Path: path, TableType: tf.Type.String(), WriterType: wf.Type.String()})
			}
			continue
		}
		if wf.Nullable && !tf.Nullable {
			*out = append(*out, Change{Kind: RelaxNullability, Path: path, TableType: tf.Type.String(), WriterType: wf.Type.String()})
		}
		diffType(out, path, tf.Type, wf.Type)
	}
	for _, tf := range table.Fields {
		if _, ok := seen[deltalog.NameKey(tf.Name)]; !ok && !tf.Nullable && !Generated(tf) {
			*out = append(*out, Change{Kind: MissingNotNull, Path: join(prefix, tf.Name), TableType: tf.Type.String()})
		}
	}
}

func diffType(out *[]Change, path string, table, writer deltalog.DataType) {
	switch t := table.(type) {
	case *deltalog.StructType:
		if w, ok := writer.(*deltalog.StructType); ok {
			diffStruct(out, path, t, w)
			return
		}
	case *deltalog.ArrayType:
		if w, ok := writer.(*deltalog.ArrayType); ok {
			if w.ContainsNull && !t.ContainsNull {
				*out = append(*out, Change{Kind: RelaxNullability, Path: path + "[]", TableType: t.ElementType.String(), WriterType: w.ElementType.String()})
			}
			diffType(out, path+"[]", t.ElementType, w.ElementType)
			return
		}
	case *deltalog.MapType:
		if w, ok := writer.(*deltalog.MapType); ok {
			if w.KeyType.String() != t.KeyType.String() {
				*out = append(*out, Change{Kind: TypeMismatch, Path: path + "{}", TableType: t.String(), WriterType: w.String()})
				return
			}
			if w.ValueContainsNull && !t.ValueContainsNull {
				*out = append(*out, Change{Kind: RelaxNullability, Path: path + "{}", TableType: t.ValueType.String(), WriterType: w.ValueType.String()})
			}
			diffType(out, path+"{}", t.ValueType, w.ValueType)
			return
		}
	default:
		if table.String() == writer.String() || Upcasts(writer, table) {
			return
		}
		if deltalog.Widening(table, writer) == deltalog.WideningAutomatic {
			*out = append(*out, Change{Kind: Widen, Path: path, TableType: table.String(), WriterType: writer.String(), Feature: deltalog.FeatureTypeWidening})
			return
		}
		td, tok := table.(deltalog.DecimalType)
		wd, wok := writer.(deltalog.DecimalType)
		if tok && wok {
			c := Change{Kind: TypeMismatch, Path: path, TableType: table.String(), WriterType: writer.String()}
			if common, ok := deltalog.CommonDecimal(td, wd); ok {
				c.Holds = common.String()
			}
			*out = append(*out, c)
			return
		}
	}
	*out = append(*out, Change{Kind: TypeMismatch, Path: path, TableType: table.String(), WriterType: writer.String()})
}

// Upcasts reports whether every value of type from is written into a column of type to
// without change: the same primitive or decimal type, or a Delta type widening that
// schema evolution applies (deltalog.WideningAutomatic) other than date→timestamp_ntz:
// byte→short→integer→long, float→double, and decimal(p,s) into decimal(p',s') with
// s' >= s and p'-s' >= p-s.
func Upcasts(from, to deltalog.DataType) bool {
	switch from.(type) {
	case deltalog.PrimitiveType, deltalog.DecimalType:
	default:
		return false
	}
	if from.String() == to.String() {
		return true
	}
	return from != deltalog.Date && deltalog.Widening(from, to) == deltalog.WideningAutomatic
}

// featureFor returns the table feature a new field needs: columnMapping if any name in it
// needs mapping, else timestampNtz if it holds a timestamp_ntz, else "".
func featureFor(f *deltalog.StructField) string {
	var ntz, cm bool
	var walk func(name string, t deltalog.DataType)
	walk = func(name string, t deltalog.DataType) {
		if deltalog.NeedsColumnMapping(name) {
			cm = true
		}
		switch t := t.(type) {
		case *deltalog.StructType:
			for _, c := range t.Fields {
				walk(c.Name, c.Type)
			}
		case *deltalog.ArrayType:
			walk("", t.ElementType)
		case *deltalog.MapType:
			walk("", t.KeyType)
			walk("", t.ValueType)
		case deltalog.PrimitiveType:
			ntz = ntz || t == deltalog.TimestampNtz
		}
	}
	walk(f.Name, f.Type)
	switch {
	case cm:
		return deltalog.FeatureColumnMapping
	case ntz:
		return deltalog.FeatureTimestampNtz
	}
	return ""
}

// Decide applies the decision table (docs/schema-policies.md, "Decision table") to the
// changes of one writer schema. An evolvable change that needs a table feature is
// evolvable only when the table has the feature or opts.Allow lists it (then
// Decision.Features names it); otherwise it becomes a NeedsFeature change, which is
// incompatible.
func Decide(changes []Change, opts Options) Decision {
	d := Decision{Action: Write}
	var first *Change
	evolvable, incompatible := false, false
	enable := map[string]bool{}
	for i := range changes {
		c := changes[i]
		if partitionTypeChange(c, opts.PartitionColumns) {
			c.Kind, c.Feature = PartitionTypeChange, ""
		}
		if (c.Kind == AddColumn || c.Kind == Widen) && c.Feature != "" && !opts.Table.has(c.Feature) {
			if opts.Allow[c.Feature] {
				enable[c.Feature] = true
			} else {
				c.Kind = NeedsFeature
			}
		}
		d.Changes = append(d.Changes, c)
		cp := &d.Changes[len(d.Changes)-1]
		switch {
		case c.Kind.incompatible():
			if !incompatible {
				first = cp
			}
			incompatible = true
		case c.Kind == AddColumn || c.Kind == Widen:
			if first == nil {
				first = cp
			}
			evolvable = true
		case c.Kind == RelaxNullability && opts.Policy == Evolve:
			if first == nil {
				first = cp
			}
			evolvable = true
		}
		// RelaxNullability under dead_letter and halt writes; the decoder enforces NOT NULL
		// per record (a null is a not_null_violation).
	}
	if first == nil {
		return d
	}
	d.Field, d.Reason = first.Path, "schema_mismatch"
	if first.Kind == KafkaColumnCollision {
		d.Reason = string(KafkaColumnCollision)
	}
	switch {
	case incompatible && opts.Policy == Evolve:
		d.Action = fromPolicy(opts.OnIncompatible)
	case incompatible:
		d.Action = fromPolicy(opts.Policy)
	case evolvable && opts.Policy == Evolve:
		d.Action = EvolveAndWrite
		d.Reason = ""
		for _, f := range []string{deltalog.FeatureColumnMapping, deltalog.FeatureTimestampNtz, deltalog.FeatureTypeWidening} {
			if enable[f] {
				d.Features = append(d.Features, f)
			}
		}
	default:
		d.Action = fromPolicy(opts.Policy)
	}
	return d
}

func fromPolicy(p Policy) Action {
	if p == DeadLetter {
		return DeadLetterIt
	}
	return HaltIt
}

// Apply returns a copy of table with the evolvable changes of writer applied: new fields
// appended (nullable) at the end of their struct, nested ones inside their parent struct,
// array element struct or map value struct; NOT NULL relaxed; types widened when
// typeWidening is true. Existing columns are never dropped, reordered or renamed, and
// applying the same writer twice changes nothing the second time. It returns the new
// schema and the changes it applied; the schema is table itself (not a copy) when nothing
// changed. Recording widenings in delta.typeChanges and any protocol upgrade is the Delta
// writer's part (deltawriter.PrepareSchemaChange), done when the change is committed.
func Apply(table, writer *deltalog.StructType, typeWidening bool) (*deltalog.StructType, []Change) {
	out := table.Clone()
	var applied []Change
	applyStruct(&applied, "", out, writer, typeWidening)
	if len(applied) == 0 {
		return table, nil
	}
	return out, applied
}

func applyStruct(applied *[]Change, prefix string, table, writer *deltalog.StructType, widen bool) {
	byKey := make(map[string]*deltalog.StructField, len(table.Fields))
	for _, f := range table.Fields {
		byKey[deltalog.NameKey(f.Name)] = f
	}
	for _, wf := range writer.Fields {
		k := deltalog.NameKey(wf.Name)
		tf, ok := byKey[k]
		if !ok {
			nf := &deltalog.StructField{Name: wf.Name, Type: nullableType(wf.Type), Nullable: true, Metadata: map[string]any{}}
			table.Fields = append(table.Fields, nf)
			byKey[k] = nf
			*applied = append(*applied, Change{Kind: AddColumn, Path: join(prefix, wf.Name), WriterType: wf.Type.String()})
			continue
		}
		path := join(prefix, tf.Name)
		if Generated(tf) {
			continue // evolution never changes a generated column
		}
		if wf.Nullable && !tf.Nullable {
			tf.Nullable = true
			*applied = append(*applied, Change{Kind: RelaxNullability, Path: path})
		}
		tf.Type = applyType(applied, path, tf.Type, wf.Type, widen)
	}
}

func applyType(applied *[]Change, path string, table, writer deltalog.DataType, widen bool) deltalog.DataType {
	switch t := table.(type) {
	case *deltalog.StructType:
		if w, ok := writer.(*deltalog.StructType); ok {
			applyStruct(applied, path, t, w, widen)
		}
	case *deltalog.ArrayType:
		if w, ok := writer.(*deltalog.ArrayType); ok {
			if w.ContainsNull && !t.ContainsNull {
				t.ContainsNull = true
				*applied = append(*applied, Change{Kind: RelaxNullability, Path: path + "[]"})
			}
			t.ElementType = applyType(applied, path+"[]", t.ElementType, w.ElementType, widen)
		}
	case *deltalog.MapType:
		if w, ok := writer.(*deltalog.MapType); ok {
			if w.ValueContainsNull && !t.ValueContainsNull {
				t.ValueContainsNull = true
				*applied = append(*applied, Change{Kind: RelaxNullability, Path: path + "{}"})
			}
			t.ValueType = applyType(applied, path+"{}", t.ValueType, w.ValueType, widen)
		}
	default:
		if widen && deltalog.Widening(table, writer) == deltalog.WideningAutomatic {
			*applied = append(*applied, Change{Kind: Widen, Path: path, TableType: table.String(), WriterType: writer.String(), Feature: deltalog.FeatureTypeWidening})
			return writer
		}
	}
	return table
}

// nullableType makes every nested field, element and value of a new column nullable, as
// columns ingestd adds are nullable all the way down.
func nullableType(t deltalog.DataType) deltalog.DataType {
	switch t := t.(type) {
	case *deltalog.StructType:
		out := &deltalog.StructType{Fields: make([]*deltalog.StructField, len(t.Fields))}
		for i, f := range t.Fields {
			out.Fields[i] = &deltalog.StructField{Name: f.Name, Type: nullableType(f.Type), Nullable: true, Metadata: map[string]any{}}
		}
		return out
	case *deltalog.ArrayType:
		return &deltalog.ArrayType{ElementType: nullableType(t.ElementType), ContainsNull: true}
	case *deltalog.MapType:
		return &deltalog.MapType{KeyType: t.KeyType, ValueType: nullableType(t.ValueType), ValueContainsNull: true}
	}
	return t
}

// Explain renders a decision for a person, like Delta's schema-mismatch error: what
// changed and where, the table version and writer schema id, both schemas side by side,
// and the setting or command that would let the records through. The same text goes to
// logs, the halt status and the dead-letter header __connect.errors.exception.message.
// It returns "" for Write and EvolveAndWrite.
func Explain(d Decision, table *deltalog.StructType, tableName string, tableVersion int64, writer *deltalog.StructType, schemaID int, opts Options) string {
	if d.Action == Write || d.Action == EvolveAndWrite {
		return ""
	}
	var b strings.Builder
	if tableVersion < 0 {
		// The batch's first fitting schema creates the table in this flush's commit.
		fmt.Fprintf(&b, "writer schema id %d does not fit table %s as this flush creates it", schemaID, tableName)
	} else {
		fmt.Fprintf(&b, "writer schema id %d does not fit table %s at version %d", schemaID, tableName, tableVersion)
	}
	fmt.Fprintf(&b, " under policy %s", opts.Policy)
	if opts.Policy == Evolve {
		fmt.Fprintf(&b, " (on_incompatible %s)", opts.OnIncompatible)
	}
	b.WriteString(":\n")
	for _, c := range d.Changes {
		if c.Kind == RelaxNullability && opts.Policy != Evolve {
			continue
		}
		b.WriteString("  - " + c.String() + "\n")
	}
	b.WriteString(sideBySide(table, writer, schemaID, 40))
	b.WriteString("To let it through: ")
	alter := "ingestd table alter " + cmp.Or(opts.AlterTable, "TABLE")
	var fixes []string
	// Nothing to alter: no table, and none that this flush creates from other records
	// (then table holds the schema it creates, and the alter applies once it committed).
	noTable := tableVersion < 0 && (table == nil || len(table.Fields) == 0)
	for _, c := range d.Changes {
		switch c.Kind {
		case AddColumn:
			if !noTable {
				fixes = append(fixes, fmt.Sprintf("%s --add-column '%s %s'", alter, c.Path, strings.ToUpper(c.WriterType)))
			}
		case Widen:
			if !noTable {
				fixes = append(fixes, fmt.Sprintf("%s --widen '%s %s'", alter, c.Path, strings.ToUpper(c.WriterType)))
			}
		case NeedsFeature:
			fixes = append(fixes, fmt.Sprintf("add %s to schema.allow_table_features (an irreversible protocol upgrade)", c.Feature))
		case KafkaColumnCollision:
			fixes = append(fixes, fmt.Sprintf("rename field %s in the producer's schema, or remove %s from table.kafka_columns", c.Path, strings.TrimPrefix(c.TableType, "_kafka_")))
		case TypeMismatch:
			if c.Holds != "" && !noTable && !partitionColumn(c.Path, opts.PartitionColumns) {
				// Both the table's values and the writer's fit a wider decimal: widening
				// the column to it rewrites nothing, and each record is then written
				// exactly (the narrower scale rescaled up, never down).
				enable := ""
				if !opts.Table.TypeWidening {
					enable = " --enable-feature typeWidening"
				}
				fixes = append(fixes, fmt.Sprintf("%s%s --widen '%s %s' (holds the table's %s and the writer's %s values exactly), or fix the producer's schema at %s",
					alter, enable, c.Path, strings.ToUpper(c.Holds), c.TableType, c.WriterType, c.Path))
				break
			}
			fixes = append(fixes, fmt.Sprintf("fix the producer's schema at %s (Delta cannot store this change without rewriting the table)", c.Path))
		case NameClash, MissingNotNull:
			fixes = append(fixes, fmt.Sprintf("fix the producer's schema at %s (Delta cannot store this change without rewriting the table)", c.Path))
		}
	}
	fixes = uniqueFixes(fixes)
	if opts.Policy != Evolve && (hasKind(d.Changes, AddColumn) || hasKind(d.Changes, Widen)) {
		if len(fixes) > 0 {
			fixes = append(fixes, "or set schema.policy: evolve")
		} else {
			fixes = append(fixes, "set schema.policy: evolve")
		}
	}
	b.WriteString(strings.Join(fixes, ", "))
	if d.Action == HaltIt {
		b.WriteString("; then restart ingestd (a halted partition stays halted until the pipeline restarts)")
	}
	return b.String()
}

// uniqueFixes drops repeated fixes, keeping the first of each: several columns may need
// the same table feature.
func uniqueFixes(fixes []string) []string {
	seen := make(map[string]bool, len(fixes))
	out := fixes[:0]
	for _, f := range fixes {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// sideBySide lists the leaves of both schemas in two columns, at most max rows.
func sideBySide(table, writer *deltalog.StructType, schemaID, maxRows int) string {
	var left, right []string
	flatten(&left, "", table)
	flatten(&right, "", writer)
	n := max(len(left), len(right))
	width := len("table schema")
	for _, l := range left[:min(len(left), maxRows)] {
		width = max(width, len(l))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %-*s | writer schema (id %d)\n", width, "table schema", schemaID)
	for i := range min(n, maxRows) {
		var l, r string
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		b.WriteString(strings.TrimRight(fmt.Sprintf("  %-*s | %s", width, l, r), " ") + "\n")
	}
	if n > maxRows {
		fmt.Fprintf(&b, "  … %d more rows\n", n-maxRows)
	}
	return b.String()
}

func flatten(out *[]string, prefix string, s *deltalog.StructType) {
	if s == nil {
		return
	}
	for _, f := range s.Fields {
		line := join(prefix, f.Name) + " " + shortType(f.Type)
		if !f.Nullable {
			line += " NOT NULL"
		}
		*out = append(*out, line)
		if st, ok := f.Type.(*deltalog.StructType); ok {
			flatten(out, join(prefix, f.Name), st)
		}
	}
}

func shortType(t deltalog.DataType) string {
	if _, ok := t.(*deltalog.StructType); ok {
		return "struct"
	}
	return t.String()
}

func hasKind(cs []Change, k ChangeKind) bool {
	for _, c := range cs {
		if c.Kind == k {
			return true
		}
	}
	return false
}

// Generated reports whether f is a generated column (delta.generationExpression; PROTOCOL.md,
// "Generated Columns"): the writer computes it, so a writer schema may lack it (even
// NOT NULL) and supplies it only as a value to check; evolution never relaxes or widens it.
func Generated(f *deltalog.StructField) bool {
	_, ok := f.Metadata[deltalog.MetaGenerationExpression]
	return ok
}
