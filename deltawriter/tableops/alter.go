package tableops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/internal/backoff"
)

// alterRetry is the wait before a step commits again after another writer changed the
// table's metadata first (up to 5 times).
var alterRetry = backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.25}

// Alter is one `ingestd table alter` invocation. Its changes are committed in this order,
// each as one Delta commit: EnableFeatures (UPGRADE PROTOCOL), SetProperties (SET
// TBLPROPERTIES), AddColumns (ADD COLUMNS, all in one commit), Widen (CHANGE COLUMN, one
// commit per column), then the constraint changes (constraints.go: DROP CONSTRAINT, ADD
// CONSTRAINT, CHANGE COLUMN … SET NOT NULL, … DROP NOT NULL, one commit each), then the
// column mapping operations of columns.go: EnableColumnMapping (SET TBLPROPERTIES),
// RenameColumns (RENAME COLUMN, one commit each), DropColumns (DROP COLUMNS, one commit),
// MoveColumns (CHANGE COLUMN, one commit each).
type Alter struct {
	EnableFeatures []string // typeWidening, timestampNtz
	SetProperties  map[string]string
	AddColumns     []ColumnDef
	Widen          []ColumnDef

	AddConstraints  []ConstraintDef // CHECK constraints (ParseConstraint)
	DropConstraints []string        // constraint names
	SetNotNull      []string        // top-level column names
	DropNotNull     []string

	// Column mapping (columns.go).
	EnableColumnMapping string         // "name": upgrade a table without column mapping
	RenameColumns       []RenameColumn // need column mapping
	DropColumns         [][]string     // column paths; need column mapping
	MoveColumns         []MoveColumn   // FIRST / AFTER sibling
}

// Result is one commit made by Apply.
type Result struct {
	Version   int64
	Operation string
	Detail    string
}

// engineInfo goes into commitInfo.engineInfo.
const engineInfo = "ingestd table alter"

// Apply makes the changes of a against the latest snapshot of table and returns the
// commits made. It validates everything before the first commit: a column that already
// exists (ignoring case), a parent that is missing or not a struct, a widening Delta does
// not allow or a table without type widening, an unknown feature, and the refusals of the
// column mapping operations (checkColumnChanges, columns.go). A commit that loses to a
// concurrent metadata change is retried on the new snapshot (up to 5 times).
func Apply(ctx context.Context, table *deltawriter.Table, a Alter) ([]Result, error) {
	for _, f := range a.EnableFeatures {
		switch f {
		case deltalog.FeatureTypeWidening, deltalog.FeatureTimestampNtz:
		case deltalog.FeatureColumnMapping:
			return nil, fmt.Errorf("enable feature %s: use --enable-column-mapping name, which also gives every column its id and physical name", f)
		default:
			return nil, fmt.Errorf("enable feature %q: use %s or %s", f, deltalog.FeatureTypeWidening, deltalog.FeatureTimestampNtz)
		}
	}
	for k, v := range a.SetProperties {
		if why, ok := featureProperties[k]; ok {
			return nil, fmt.Errorf("set property %s: %s", k, why)
		}
		if why := managedProperty(k); why != "" {
			return nil, fmt.Errorf("set property %s: %s", k, why)
		}
		if err := checkPropertyValue(k, v); err != nil {
			return nil, fmt.Errorf("set property %s=%s: %w", k, v, err)
		}
	}
	// Dry-run every change on the current snapshot so nothing is committed when any fails.
	snap, err := table.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read table: %w", err)
	}
	if v, ok := a.SetProperties[deltalog.PropGenerationTimeZone]; ok {
		gen, err := deltawriter.GeneratedColumns(snap.Schema, snap.Metadata.Configuration)
		if err != nil {
			return nil, fmt.Errorf("set property %s: %w", deltalog.PropGenerationTimeZone, err)
		}
		if _, err := deltalog.GenerationTimeZone(map[string]string{deltalog.PropGenerationTimeZone: v}); err != nil {
			return nil, fmt.Errorf("set property: %w", err)
		}
		if cur, _ := deltalog.GenerationTimeZone(snap.Metadata.Configuration); len(gen) > 0 && cur.String() != v {
			return nil, fmt.Errorf("set property %s=%s: the table has generated columns (%s, …) computed in %s; changing the zone would change them for new rows only. Recreate the table instead",
				deltalog.PropGenerationTimeZone, v, gen[0].Field.Name, cur)
		}
	}
	dry := snap.Schema.Clone()
	for _, c := range a.AddColumns {
		if dry, err = addColumn(dry, c); err != nil {
			return nil, err
		}
	}
	widening := snap.Metadata.Configuration[deltalog.PropEnableTypeWidening] == "true" || slices.Contains(a.EnableFeatures, deltalog.FeatureTypeWidening)
	for _, c := range a.Widen {
		if !widening {
			return nil, fmt.Errorf("widen %s: the table does not have type widening enabled; add --enable-feature typeWidening (an irreversible protocol upgrade)", strings.Join(c.Path, "."))
		}
		if err := checkPartitionWidening(dry, snap.Metadata.PartitionColumns, c); err != nil {
			return nil, err
		}
		if dry, _, err = widen(dry, c); err != nil {
			return nil, err
		}
	}
	if err := checkColumnChanges(snap, dry, a); err != nil {
		return nil, err
	}

	if err := checkConstraintChanges(ctx, table, snap, a); err != nil {
		return nil, err
	}

	var out []Result
	step := func(op string, build func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error)) error {
		for attempt := 0; ; attempt++ {
			s, err := table.Snapshot(ctx)
			if err != nil {
				return fmt.Errorf("read table: %w", err)
			}
			c, detail, err := build(s)
			if err != nil {
				return err
			}
			c.ReadVersion, c.Operation, c.EngineInfo = s.Version, op, engineInfo
			if c.OperationMetrics == nil && len(c.Adds) == 0 && len(c.Removes) == 0 {
				c.OperationMetrics = map[string]string{} // Spark writes {} for a metadata-only ALTER TABLE
			}
			v, err := table.Commit(ctx, c)
			if errors.Is(err, deltawriter.ErrMetadataChanged) && attempt < 5 {
				if err := alterRetry.Sleep(ctx, attempt); err != nil {
					return fmt.Errorf("commit %s: %w", op, err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("commit %s: %w", op, err)
			}
			out = append(out, Result{Version: v, Operation: op, Detail: detail})
			return nil
		}
	}
	if len(a.EnableFeatures) > 0 {
		err := step("UPGRADE PROTOCOL", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			proto := deltawriter.UpgradeProtocol(s.Protocol, a.EnableFeatures...)
			meta := s.Metadata
			meta.Configuration = cloneConf(meta.Configuration)
			if slices.Contains(a.EnableFeatures, deltalog.FeatureTypeWidening) {
				meta.Configuration[deltalog.PropEnableTypeWidening] = "true"
			}
			return deltawriter.Commit{Protocol: &proto, Metadata: &meta,
				OperationParameters: map[string]string{"newProtocol": mustJSON(proto)}}, "features " + strings.Join(a.EnableFeatures, ", "), nil
		})
		if err != nil {
			return out, err
		}
	}
	if len(a.SetProperties) > 0 {
		err := step("SET TBLPROPERTIES", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			meta := s.Metadata
			meta.Configuration = cloneConf(meta.Configuration)
			maps.Copy(meta.Configuration, a.SetProperties)
			return deltawriter.Commit{Metadata: &meta, OperationParameters: map[string]string{"properties": mustJSON(a.SetProperties)}},
				fmt.Sprint(a.SetProperties), nil
		})
		if err != nil {
			return out, err
		}
	}
	if len(a.AddColumns) > 0 {
		err := step("ADD COLUMNS", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			schema := s.Schema
			var cols []map[string]any
			var names []string
			for _, c := range a.AddColumns {
				var err error
				if schema, err = addColumn(schema, c); err != nil {
					return deltawriter.Commit{}, "", err
				}
				cols = append(cols, map[string]any{"column": map[string]any{"name": strings.Join(c.Path, "."), "type": c.Type.String(), "nullable": true, "metadata": map[string]any{}}})
				names = append(names, c.String())
			}
			// PrepareSchemaChange assigns column mapping ids and upgrades the protocol when a
			// new column needs a feature (timestamp_ntz → timestampNtz).
			change, _, err := deltawriter.PrepareSchemaChange(s, deltawriter.SchemaChange{Schema: schema})
			if err != nil {
				return deltawriter.Commit{}, "", err
			}
			return deltawriter.Commit{Metadata: change.Metadata, Protocol: change.Protocol, OperationParameters: map[string]string{"columns": mustJSON(cols)}},
				strings.Join(names, ", "), nil
		})
		if err != nil {
			return out, err
		}
	}
	for _, c := range a.Widen {
		err := step("CHANGE COLUMN", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			if err := checkPartitionWidening(s.Schema, s.Metadata.PartitionColumns, c); err != nil {
				return deltawriter.Commit{}, "", err
			}
			schema, from, err := widen(s.Schema, c)
			if err != nil {
				return deltawriter.Commit{}, "", err
			}
			change, _, err := deltawriter.PrepareSchemaChange(s, deltawriter.SchemaChange{Schema: schema}) // records delta.typeChanges
			if err != nil {
				return deltawriter.Commit{}, "", err
			}
			col := map[string]any{"name": strings.Join(c.Path, "."), "type": c.Type.String(), "nullable": true}
			return deltawriter.Commit{Metadata: change.Metadata, Protocol: change.Protocol, OperationParameters: map[string]string{"column": mustJSON(col)}},
				fmt.Sprintf("%s %s → %s", strings.Join(c.Path, "."), from, c.Type), nil
		})
		if err != nil {
			return out, err
		}
	}
	if err := applyConstraints(ctx, table, snap, a, step); err != nil {
		return out, err
	}
	if err := applyColumnChanges(a, step); err != nil {
		return out, err
	}
	return out, nil
}

func cloneConf(m map[string]string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// lookup walks path in s (deltalog.NameKey, as Delta matches names) and returns the
// struct holding the last segment and the field, which is nil when absent.
func lookup(s *deltalog.StructType, path []string) (*deltalog.StructType, *deltalog.StructField, error) {
	parent := s
	for i, seg := range path {
		var f *deltalog.StructField
		for _, x := range parent.Fields {
			if deltalog.NameKey(x.Name) == deltalog.NameKey(seg) {
				f = x
				break
			}
		}
		if i == len(path)-1 {
			return parent, f, nil
		}
		if f == nil {
			return nil, nil, fmt.Errorf("column %s: %s does not exist", strings.Join(path, "."), strings.Join(path[:i+1], "."))
		}
		st, ok := f.Type.(*deltalog.StructType)
		if !ok {
			return nil, nil, fmt.Errorf("column %s: %s is %s, not a struct", strings.Join(path, "."), strings.Join(path[:i+1], "."), f.Type)
		}
		parent = st
	}
	return nil, nil, fmt.Errorf("empty column path")
}

// addColumn returns a copy of s with c appended (nullable) at the end of its parent struct.
func addColumn(s *deltalog.StructType, c ColumnDef) (*deltalog.StructType, error) {
	out := s.Clone()
	parent, f, err := lookup(out, c.Path)
	if err != nil {
		return nil, fmt.Errorf("add column: %w", err)
	}
	if f != nil {
		return nil, fmt.Errorf("add column %s: the table already has %s %s", strings.Join(c.Path, "."), f.Name, f.Type)
	}
	name := c.Path[len(c.Path)-1]
	if deltalog.NeedsColumnMapping(name) {
		return nil, fmt.Errorf("add column %q: the name needs column mapping, which this table does not have", name)
	}
	parent.Fields = append(parent.Fields, &deltalog.StructField{Name: name, Type: c.Type, Nullable: true, Metadata: map[string]any{}})
	return out, nil
}

// widen returns a copy of s with the column at c.Path widened to c.Type, and the old
// type. Only Delta's type-widening changes are accepted; deltawriter.PrepareSchemaChange records
// the change in delta.typeChanges when it is committed.
// checkPartitionWidening refuses to widen a partition column (alter cannot drop columns
// at all) to a type whose partition values are serialised differently: its values are in
// every add.partitionValues and directory name, serialised for its type (PROTOCOL.md,
// "Partition Value Serialization"), and such a type would need every file rewritten.
// Integer widenings keep the serialisation and are allowed (deltalog.PartitionWidening,
// the rule evolve applies too). s is the schema before the change.
func checkPartitionWidening(s *deltalog.StructType, partitionColumns []string, c ColumnDef) error {
	if len(c.Path) != 1 {
		return nil
	}
	for _, pc := range partitionColumns {
		if deltalog.NameKey(pc) != deltalog.NameKey(c.Path[0]) {
			continue
		}
		for _, f := range s.Fields {
			if deltalog.NameKey(f.Name) == deltalog.NameKey(pc) && deltalog.PartitionWidening(f.Type, c.Type) {
				return nil
			}
		}
		return fmt.Errorf("widen %s: it is a partition column, whose values are serialised in every file's partitionValues; "+
			"only byte→short→int→long keep that form (repartition the table with Spark for other types: CREATE TABLE … AS SELECT)", c.Path[0])
	}
	return nil
}

func widen(s *deltalog.StructType, c ColumnDef) (*deltalog.StructType, deltalog.DataType, error) {
	out := s.Clone()
	_, f, err := lookup(out, c.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("widen: %w", err)
	}
	if f == nil {
		return nil, nil, fmt.Errorf("widen %s: no such column", strings.Join(c.Path, "."))
	}
	if g, ok := f.Metadata[deltalog.MetaGenerationExpression].(string); ok {
		return nil, nil, fmt.Errorf("widen %s: it is a generated column (GENERATED ALWAYS AS (%s)); its type is its expression's and cannot change", strings.Join(c.Path, "."), g)
	}
	if deltalog.Widening(f.Type, c.Type) == deltalog.WideningNone {
		return nil, nil, fmt.Errorf("widen %s: %s → %s is not a Delta type widening (allowed: byte→short→int→long, float→double, byte/short/int→double, integer types→a decimal wide enough, date→timestamp_ntz, decimal precision/scale increase)", strings.Join(c.Path, "."), f.Type, c.Type)
	}
	from := f.Type
	f.Type = c.Type
	return out, from, nil
}

// featureProperties are table properties that turn on a table feature: setting them alone
// would leave the protocol without the feature, which readers refuse.
var featureProperties = map[string]string{
	deltalog.PropEnableTypeWidening:                           "use --enable-feature typeWidening, which also upgrades the protocol",
	deltalog.PropColumnMappingMode:                            "use --enable-column-mapping name, which also gives every column its id and physical name and upgrades the protocol",
	deltalog.PropEnableDeletionVectors:                        "deletion vectors need a table feature ingestd does not write; use Spark",
	deltalog.PropEnableRowTracking:                            "row tracking needs a table feature ingestd does not write; use Spark",
	deltalog.PropEnableInCommitTimestamps:                     "in-commit timestamps need a table feature ingestd does not write; use Spark",
	deltalog.PropEnableChangeDataFeed:                         "the change data feed needs a table feature; use Spark",
	deltalog.PropFeaturePrefix + deltalog.FeatureTypeWidening: "use --enable-feature typeWidening",
	deltalog.PropFeaturePrefix + deltalog.FeatureTimestampNtz: "use --enable-feature timestampNtz",
}

// managedProperty returns why key may not be set with --set-property, "" when it may:
// a CHECK constraint (delta.constraints.<name>) set as a property would skip the scan of
// the existing rows, the protocol upgrade to checkConstraints and the lower-casing of
// its name (Spark refuses it too: "use ALTER TABLE ADD CONSTRAINT");
// delta.columnMapping.maxColumnId is maintained by Delta, never by the user; and
// delta.minReaderVersion / delta.minWriterVersion are protocol upgrades in Spark, not
// properties (stored as one, the protocol would not change).
func managedProperty(key string) string {
	switch {
	case strings.HasPrefix(strings.ToLower(key), deltalog.PropConstraintPrefix):
		return "CHECK constraints are added with --add-constraint 'name CHECK (expression)' (which checks the existing rows and upgrades the protocol) and dropped with --drop-constraint name"
	case strings.EqualFold(key, deltalog.PropColumnMappingMaxColumnID):
		return "Delta maintains it (the largest column mapping id in use); --enable-column-mapping, --add-column and evolve set it"
	case strings.EqualFold(key, "delta.minReaderVersion"), strings.EqualFold(key, "delta.minWriterVersion"), strings.EqualFold(key, "delta.ignoreProtocolDefaults"):
		return "the protocol is not a table property (Spark's SET TBLPROPERTIES turns this one into a protocol upgrade; ingestd would only store the string): the commands that need a feature upgrade the protocol themselves (--enable-feature, --enable-column-mapping, --add-constraint, --set-not-null)"
	}
	return ""
}

// checkPropertyValue refuses a value Delta readers would reject or misread for the
// well-known delta.* table properties (PROTOCOL.md, Table Properties and the feature
// sections): booleans must be true or false, counts whole numbers in range, durations
// "interval <n> <unit>". Other keys pass unchanged.
func checkPropertyValue(key, value string) error {
	switch key {
	case deltalog.PropAppendOnly, deltalog.PropEnableTypeWidening, deltalog.PropEnableChangeDataFeed,
		deltalog.PropCheckpointStatsAsJSON, deltalog.PropCheckpointStatsAsStruct,
		deltalog.PropEnableExpiredLogCleanup, deltalog.PropRandomizeFilePrefixes:
		if value != "true" && value != "false" {
			return errors.New("want true or false")
		}
	case deltalog.PropCheckpointInterval:
		if n, err := strconv.Atoi(value); err != nil || n < 1 {
			return errors.New("want a whole number of commits, at least 1")
		}
	case deltalog.PropNumIndexedCols:
		if n, err := strconv.Atoi(value); err != nil || n < -1 {
			return errors.New("want a whole number of columns, -1 for all")
		}
	case deltalog.PropLogRetentionDuration, deltalog.PropDeletedFileRetention, deltalog.PropTxnRetentionDuration:
		if !intervalRe.MatchString(value) {
			return errors.New(`want an interval such as "interval 30 days"`)
		}
	case deltalog.PropLegacyTimestampZone:
		if _, err := time.LoadLocation(value); err != nil || value == "" || value == "Local" {
			return errors.New(`want an IANA time zone name such as "America/Los_Angeles" (the session zone of the Spark that wrote the legacy values)`)
		}
	}
	return nil
}

var intervalRe = regexp.MustCompile(`^(?i)interval\s+\d+\s+(nanosecond|microsecond|millisecond|second|minute|hour|day|week)s?$`)
