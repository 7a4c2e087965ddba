package tableops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

// CHECK constraints and NOT NULL (PROTOCOL.md, "Check Constraints", "Column Invariants"):
// `ingestd table alter --add-constraint 'name CHECK (expr)'`, --drop-constraint name,
// --set-not-null col and --drop-not-null col, each one commit shaped like Spark's
// (ALTER TABLE … ADD CONSTRAINT / DROP CONSTRAINT / CHANGE COLUMN … SET|DROP NOT NULL).
// Adding a constraint or NOT NULL first scans the snapshot's data files and is refused
// when existing rows violate it.

// ConstraintDef is a CHECK constraint to add: Name is lower-cased as Spark stores it.
type ConstraintDef struct {
	Name string
	Expr string
}

var constraintRe = regexp.MustCompile(`(?is)^\s*(` + "`(?:[^`]|``)*`" + `|[^\s]+)\s+CHECK\s*\((.*)\)\s*$`)

// identRe is an unquoted Spark SQL identifier (letters, digits, underscores).
var identRe = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// ParseConstraint parses --add-constraint's 'name CHECK (expr)'; name may be backticked
// (`ops.amount.max`) and is lower-cased, as Spark's ALTER TABLE … ADD CONSTRAINT does.
// Errors: no 'name CHECK (…)' shape, a bad name (see ParseConstraintName), an expression
// that does not parse.
func ParseConstraint(s string) (ConstraintDef, error) {
	m := constraintRe.FindStringSubmatch(s)
	if m == nil {
		return ConstraintDef{}, fmt.Errorf("parse constraint %q: want 'name CHECK (expression)', e.g. 'amount_pos CHECK (amount >= 0)'", s)
	}
	name, err := ParseConstraintName(m[1])
	if err != nil {
		return ConstraintDef{}, fmt.Errorf("parse constraint %q: %w", s, err)
	}
	src := strings.TrimSpace(m[2])
	if _, err := expr.Parse(src); err != nil {
		return ConstraintDef{}, fmt.Errorf("parse constraint %s: %w", name, err)
	}
	return ConstraintDef{Name: name, Expr: src}, nil
}

// ParseConstraintName parses a constraint name as Spark's ADD/DROP CONSTRAINT takes it:
// an identifier (letters, digits, underscores) or a backticked name (a backtick inside written twice)
// that may hold anything else, dots included; it returns the name lower-cased, as the
// table stores it after "delta.constraints.". Errors: an empty name, an unquoted name
// with other characters (naming the backticked form), an unbalanced backtick.
func ParseConstraintName(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`':
		inner := s[1 : len(s)-1]
		if strings.Contains(strings.ReplaceAll(inner, "``", ""), "`") {
			return "", fmt.Errorf("constraint name %s: a backtick inside a backticked name is written twice (``)", s)
		}
		if inner = strings.ReplaceAll(inner, "``", "`"); strings.TrimSpace(inner) == "" {
			return "", fmt.Errorf("constraint name %s is empty", s)
		}
		return strings.ToLower(inner), nil
	case s == "":
		return "", errors.New("constraint name is empty")
	case !identRe.MatchString(s):
		return "", fmt.Errorf("constraint name %s: an unquoted name has only letters, digits and underscores; quote it in backticks: `%s`", s, strings.ReplaceAll(s, "`", "``"))
	}
	return strings.ToLower(s), nil
}

// checkConstraintChanges validates a's constraint and NOT NULL changes against snap
// (before anything is committed): a constraint that already exists or does not, an
// expression outside the evaluator's subset or not boolean, an unknown column, and then
// existing rows that violate a constraint or NOT NULL to add (scanViolations over every
// data file of snap), so that a refused alter commits none of its changes.
func checkConstraintChanges(ctx context.Context, table *deltawriter.Table, snap *deltawriter.Snapshot, a Alter) error {
	conf := snap.Metadata.Configuration
	for _, c := range a.AddConstraints {
		if old, ok := conf[deltalog.PropConstraintPrefix+c.Name]; ok {
			return fmt.Errorf("add constraint %s: the table already has it: CHECK (%s); drop it first (--drop-constraint %s)", c.Name, old, c.Name)
		}
		if _, err := deltawriter.Constraints(snap.Schema, map[string]string{deltalog.PropConstraintPrefix + c.Name: c.Expr}); err != nil {
			return fmt.Errorf("add constraint %s: %w", c.Name, err)
		}
	}

	for _, n := range a.DropConstraints {
		if _, ok := conf[deltalog.PropConstraintPrefix+strings.ToLower(n)]; !ok {
			return fmt.Errorf("drop constraint %s: the table has no such constraint (it has: %s)", n, strings.Join(constraintNames(conf), ", "))
		}
	}
	for _, col := range append(slices.Clone(a.SetNotNull), a.DropNotNull...) {
		if f := snap.Schema.FieldByKey(col); f == nil {
			return fmt.Errorf("change column %s: the table has no top-level column of that name", col)
		}
	}
	for _, c := range a.AddConstraints {
		if err := scanConstraint(ctx, table, snap, c, nil); err != nil {
			return err
		}
	}
	for _, col := range a.SetNotNull {
		if err := scanNotNull(ctx, table, snap, snap.Schema.FieldByKey(col).Name, nil); err != nil {
			return err
		}
	}
	return nil
}

// scanConstraint refuses CHECK constraint c when a row of snap's data files, other than
// those in done (already scanned), violates it.
func scanConstraint(ctx context.Context, table *deltawriter.Table, snap *deltawriter.Snapshot, c ConstraintDef, done *deltawriter.FileSet) error {
	cons, err := deltawriter.Constraints(snap.Schema, map[string]string{deltalog.PropConstraintPrefix + c.Name: c.Expr})
	if err != nil {
		return fmt.Errorf("add constraint %s: %w", c.Name, err)
	}
	if err := scanViolations(ctx, table, snap, cons[0].Expr, "", "CHECK constraint "+c.Name+" ("+c.Expr+")", done); err != nil {
		return fmt.Errorf("add constraint %s: %w", c.Name, err)
	}
	return nil
}

// scanNotNull refuses NOT NULL on top-level column col when a row of snap's data files,
// other than those in done (already scanned), has NULL in it.
func scanNotNull(ctx context.Context, table *deltawriter.Table, snap *deltawriter.Snapshot, col string, done *deltawriter.FileSet) error {
	if err := scanViolations(ctx, table, snap, nil, col, "NOT NULL constraint on "+col, done); err != nil {
		return fmt.Errorf("set not null %s: %w", col, err)
	}
	return nil
}

func constraintNames(conf map[string]string) []string {
	var out []string
	for k := range conf {
		if n, ok := strings.CutPrefix(k, deltalog.PropConstraintPrefix); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		out = []string{"none"}
	}
	return out
}

// applyConstraints commits a's constraint changes through step, in this order: drop
// constraints, add constraints, set NOT NULL, drop NOT NULL. checkConstraintChanges has
// scanned the data files of snapshot scanned; a step scans only the files added since.
func applyConstraints(ctx context.Context, table *deltawriter.Table, scanned *deltawriter.Snapshot, a Alter, step func(op string, build func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error)) error) error {
	for _, n := range a.DropConstraints {
		name := strings.ToLower(n)
		err := step("DROP CONSTRAINT", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			meta := s.Metadata
			meta.Configuration = cloneConf(meta.Configuration)
			old, ok := meta.Configuration[deltalog.PropConstraintPrefix+name]
			if !ok {
				return deltawriter.Commit{}, "", fmt.Errorf("drop constraint %s: the table has no such constraint", name)
			}
			delete(meta.Configuration, deltalog.PropConstraintPrefix+name)
			return deltawriter.Commit{Metadata: &meta, OperationParameters: map[string]string{"name": name, "expr": old, "existed": "true"}}, name + " CHECK (" + old + ")", nil
		})
		if err != nil {
			return err
		}
	}
	for _, c := range a.AddConstraints {
		err := step("ADD CONSTRAINT", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			if err := scanConstraint(ctx, table, s, c, scanned.Files); err != nil {
				return deltawriter.Commit{}, "", err
			}
			meta := s.Metadata
			meta.Configuration = cloneConf(meta.Configuration)
			meta.Configuration[deltalog.PropConstraintPrefix+c.Name] = c.Expr
			proto := protocolWith(s.Protocol, deltalog.FeatureCheckConstraints, 3)
			return deltawriter.Commit{Metadata: &meta, Protocol: proto, OperationParameters: map[string]string{"name": c.Name, "expr": c.Expr}, ReadsData: true},
				c.Name + " CHECK (" + c.Expr + ")", nil
		})
		if err != nil {
			return err
		}
	}
	for _, cols := range []struct {
		names   []string
		notNull bool
	}{{a.SetNotNull, true}, {a.DropNotNull, false}} {
		for _, col := range cols.names {
			err := step("CHANGE COLUMN", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
				schema := s.Schema.Clone()
				f := schema.FieldByKey(col)
				if f == nil {
					return deltawriter.Commit{}, "", fmt.Errorf("change column %s: the table has no top-level column of that name", col)
				}
				if cols.notNull {
					if err := scanNotNull(ctx, table, s, f.Name, scanned.Files); err != nil {
						return deltawriter.Commit{}, "", err
					}
				}
				f.Nullable = !cols.notNull
				meta := s.Metadata
				js, err := schema.MarshalJSON()
				if err != nil {
					return deltawriter.Commit{}, "", fmt.Errorf("encode schema: %w", err)
				}
				meta.SchemaString = string(js)
				var proto *deltalog.Protocol
				if cols.notNull {
					proto = protocolWith(s.Protocol, deltalog.FeatureInvariants, 2)
				}
				fj, err := json.Marshal(f)
				if err != nil {
					return deltawriter.Commit{}, "", fmt.Errorf("encode column %s: %w", f.Name, err)
				}
				detail := f.Name + " DROP NOT NULL"
				if cols.notNull {
					detail = f.Name + " SET NOT NULL"
				}
				// SET NOT NULL read the data files (isBlindAppend false, as ADD CONSTRAINT);
				// DROP NOT NULL did not (Spark: isBlindAppend true).
				return deltawriter.Commit{Metadata: &meta, Protocol: proto, OperationParameters: map[string]string{"column": string(fj)}, ReadsData: cols.notNull}, detail, nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// protocolWith returns the protocol to commit for a table that needs feature f, nil when p
// already supports it: a legacy protocol is raised to writer version legacy (as Spark does
// for a legacy table), a table-features protocol lists f.
func protocolWith(p deltalog.Protocol, f string, legacy int) *deltalog.Protocol {
	if p.MinWriterVersion < 7 {
		if p.MinWriterVersion >= legacy {
			return nil
		}
		out := p
		out.MinWriterVersion = legacy
		return &out
	}
	if slices.Contains(p.WriterFeatures, f) {
		return nil
	}
	out := deltawriter.UpgradeProtocol(p, f)
	return &out
}

// scanViolations reads every live data file of snap and counts the rows that violate the
// new constraint: e false or NULL (or not evaluable), or, when e is nil, column notNull
// NULL. Files in done (already scanned) are skipped. It returns nil when there are none, else an error naming how many, the
// constraint, and one example row (the columns it reads) with its file. Memory: one file
// and one row group's columns at a time. Files with deletion vectors are refused (the
// scan would count deleted rows).
func scanViolations(ctx context.Context, table *deltawriter.Table, snap *deltawriter.Snapshot, e *expr.Expr, notNull, what string, done *deltawriter.FileSet) error {
	cm, err := snap.Metadata.ColumnMappingMode()
	if err != nil {
		return err
	}
	var cols []*deltalog.StructField
	if e != nil {
		cols = e.Columns()
	} else {
		cols = []*deltalog.StructField{snap.Schema.FieldByKey(notNull)}
	}
	part := map[string]bool{}
	for _, p := range snap.Metadata.PartitionColumns {
		part[deltalog.NameKey(p)] = true
	}
	paths := make([]string, 0, snap.Files.Len())
	adds := map[string]deltalog.Add{}
	for k, a := range snap.Files.All() {
		if done.Has(k) {
			continue
		}
		paths = append(paths, k)
		adds[k] = a
	}
	slices.Sort(paths)
	var count int64
	example := ""
	args := make([]expr.Value, len(cols))
	for _, k := range paths {
		a := adds[k]
		if a.DeletionVector != nil {
			return fmt.Errorf("scan %s: the file has a deletion vector, which ingestd does not apply; add the constraint with Spark", a.Path)
		}
		p, err := url.PathUnescape(a.Path)
		if err != nil {
			return fmt.Errorf("scan %s: %w", a.Path, err)
		}
		b, err := table.Store().Get(ctx, p)
		if err != nil {
			return fmt.Errorf("scan %s: %w", a.Path, err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return fmt.Errorf("scan %s: %w", a.Path, err)
		}
		leaf := make([]int, len(cols)) // leaf column index per constraint column, -1: partition or absent
		for i, c := range cols {
			leaf[i] = -1
			if part[deltalog.NameKey(c.Name)] {
				continue
			}
			if _, ok := c.Type.(deltalog.PrimitiveType); !ok && !isDecimal(c.Type) {
				return fmt.Errorf("scan %s: column %s of type %s is not a primitive", a.Path, c.Name, c.Type)
			}
			if lc, ok := f.Schema().Lookup(c.PhysicalName(cm)); ok {
				leaf[i] = lc.ColumnIndex
			}
		}
		for _, rg := range f.RowGroups() {
			n := rg.NumRows()
			vals := make([][]parquet.Value, len(cols))
			for i, c := range cols {
				if leaf[i] < 0 {
					continue
				}
				vs, err := readColumn(rg.ColumnChunks()[leaf[i]], n)
				if err != nil {
					return fmt.Errorf("scan %s column %s: %w", a.Path, c.Name, err)
				}
				vals[i] = vs
			}
			for r := int64(0); r < n; r++ {
				for i, c := range cols {
					switch {
					case part[deltalog.NameKey(c.Name)]:
						v, err := partitionValue(c, c.PhysicalName(cm), a.PartitionValues)
						if err != nil {
							return fmt.Errorf("scan %s: %w", a.Path, err)
						}
						args[i] = v
					case vals[i] == nil:
						args[i] = expr.Null(c.Type)
					default:
						v, err := expr.FromParquet(c.Type, vals[i][r])
						if err != nil {
							return fmt.Errorf("scan %s: %w", a.Path, err)
						}
						args[i] = v
					}
				}
				bad := false
				if e == nil {
					bad = args[0].Null
				} else {
					v, err := e.Eval(args)
					bad = err != nil || v.Null || v.Int == 0
				}
				if bad {
					count++
					if example == "" {
						parts := make([]string, len(cols))
						for i, c := range cols {
							parts[i] = c.Name + " = " + args[i].String()
						}
						example = strings.Join(parts, ", ") + " (in " + a.Path + ")"
					}
				}
			}
		}
	}
	if count > 0 {
		rows := "rows in %s violate"
		if count == 1 {
			rows = "row in %s violates"
		}
		return fmt.Errorf("%d "+rows+" the new %s, for example %s; fix or delete them first (DELTA_NEW_CHECK_CONSTRAINT_VIOLATION)", count, table, what, example)
	}
	return nil
}

func isDecimal(t deltalog.DataType) bool { _, ok := t.(deltalog.DecimalType); return ok }

// readColumn reads the n values (one per row: a top-level primitive) of a column chunk.
func readColumn(cc parquet.ColumnChunk, n int64) ([]parquet.Value, error) {
	out := make([]parquet.Value, 0, n)
	pages := cc.Pages()
	defer pages.Close()
	for int64(len(out)) < n {
		p, err := pages.ReadPage()
		if err != nil {
			return nil, err
		}
		buf := make([]parquet.Value, p.NumValues())
		m, err := p.Values().ReadValues(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			parquet.Release(p)
			return nil, err
		}
		for _, v := range buf[:m] {
			out = append(out, v.Clone())
		}
		parquet.Release(p)
	}
	return out, nil
}

// partitionValue converts the serialised partition value of column c, keyed by its
// physical name phys in pvs (add.partitionValues; PROTOCOL.md, "Partition Value
// Serialization", "Column Mapping") to a Value: NULL for a missing or null value.
func partitionValue(c *deltalog.StructField, phys string, pvs map[string]*string) (expr.Value, error) {
	var s *string
	for k, v := range pvs {
		if deltalog.NameKey(k) == deltalog.NameKey(phys) {
			s = v
		}
	}
	if s == nil {
		return expr.Null(c.Type), nil
	}
	v, err := expr.CastString(*s, c.Type)
	if err != nil {
		return expr.Value{}, fmt.Errorf("read partition value %s=%q: %w", c.Name, *s, err)
	}
	return v, nil
}
