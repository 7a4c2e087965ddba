package tableops

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

// Column mapping upgrade, rename, drop and reorder (PROTOCOL.md, "Column Mapping"): the
// schema operations that only change metadata because Parquet files are read through each
// field's delta.columnMapping.physicalName, never by its (logical) name. No data file is
// read or rewritten by any of them.

// RenameColumn is `--rename-column 'path TO name'`: the field at Path (nested: s.a) gets
// the new leaf name To in the same struct; its physical name and id stay, so its data
// stays (Spark's ALTER TABLE … RENAME COLUMN).
type RenameColumn struct {
	Path []string
	To   string
}

// MoveColumn is `--move-column 'path FIRST'` or `'path AFTER sibling'`: the field at Path
// moves within its struct, first or after the sibling After (a leaf name; nil means FIRST)
// (Spark's ALTER TABLE … CHANGE COLUMN path FIRST|AFTER sibling).
type MoveColumn struct {
	Path  []string
	After string // "" for FIRST
}

// ParseRename parses "path TO name" (backticks quote names with dots or spaces: "`a b` TO c").
func ParseRename(s string) (RenameColumn, error) {
	path, rest, err := parsePath(s)
	if err != nil {
		return RenameColumn{}, fmt.Errorf("parse rename %q: %w", s, err)
	}
	kw, to := cutWord(rest)
	if !strings.EqualFold(kw, "TO") || to == "" {
		return RenameColumn{}, fmt.Errorf("parse rename %q: write 'column TO new_name' (nested: 's.a TO b')", s)
	}
	np, tail, err := parsePath(to)
	if err != nil || tail != "" {
		return RenameColumn{}, fmt.Errorf("parse rename %q: the new name must be one name (quote dots and spaces with backticks)", s)
	}
	// Spark accepts `RENAME COLUMN s.a TO s.b` as well as `TO b`: the new name's parent
	// must then be the old one's.
	if len(np) > 1 {
		if len(np) != len(path) || !samePath(np[:len(np)-1], path[:len(path)-1]) {
			return RenameColumn{}, fmt.Errorf("parse rename %q: a column stays in its struct; write 'column TO new_name'", s)
		}
	}
	return RenameColumn{Path: path, To: np[len(np)-1]}, nil
}

// ParseMove parses "path FIRST" or "path AFTER sibling".
func ParseMove(s string) (MoveColumn, error) {
	path, rest, err := parsePath(s)
	if err != nil {
		return MoveColumn{}, fmt.Errorf("parse move %q: %w", s, err)
	}
	kw, arg := cutWord(rest)
	switch {
	case strings.EqualFold(kw, "FIRST") && arg == "":
		return MoveColumn{Path: path}, nil
	case strings.EqualFold(kw, "AFTER") && arg != "":
		ap, tail, err := parsePath(arg)
		if err != nil || tail != "" {
			return MoveColumn{}, fmt.Errorf("parse move %q: AFTER takes one column", s)
		}
		if len(ap) > 1 && (len(ap) != len(path) || !samePath(ap[:len(ap)-1], path[:len(path)-1])) {
			return MoveColumn{}, fmt.Errorf("parse move %q: a column moves within its struct; AFTER names a sibling", s)
		}
		return MoveColumn{Path: path, After: ap[len(ap)-1]}, nil
	}
	return MoveColumn{}, fmt.Errorf("parse move %q: write 'column FIRST' or 'column AFTER other_column'", s)
}

// ParseColumnPath parses a column path for --drop-column ("tier", "s.a", "`a.b`").
func ParseColumnPath(s string) ([]string, error) {
	p, rest, err := parsePath(s)
	if err == nil && rest != "" {
		err = fmt.Errorf("unexpected %q after the column", rest)
	}
	if err != nil {
		return nil, fmt.Errorf("parse column %q: %w", s, err)
	}
	return p, nil
}

func parsePath(s string) ([]string, string, error) {
	s = strings.TrimSpace(s)
	var path []string
	var cur strings.Builder
	i := 0
loop:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`':
			j := strings.IndexByte(s[i+1:], '`')
			if j < 0 {
				return nil, "", fmt.Errorf("unclosed backtick")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '.':
			path = append(path, cur.String())
			cur.Reset()
		case c == ' ' || c == '\t':
			break loop
		default:
			cur.WriteByte(c)
		}
	}
	path = append(path, cur.String())
	for _, seg := range path {
		if seg == "" {
			return nil, "", fmt.Errorf("empty name in column path")
		}
	}
	return path, strings.TrimSpace(s[i:]), nil
}

func cutWord(s string) (string, string) {
	w, rest, _ := strings.Cut(strings.TrimSpace(s), " ")
	return w, strings.TrimSpace(rest)
}

func samePath(a, b []string) bool {
	return slices.EqualFunc(a, b, func(x, y string) bool { return deltalog.NameKey(x) == deltalog.NameKey(y) })
}

func pathString(p []string) string { return strings.Join(p, ".") }

// hasColumnChanges reports whether a asks for any operation of this file.
func (a Alter) hasColumnChanges() bool {
	return a.EnableColumnMapping != "" || len(a.RenameColumns)+len(a.DropColumns)+len(a.MoveColumns) > 0
}

// checkColumnChanges dry-runs the column mapping upgrade, renames, drops and moves of a,
// in Apply's order, on snap with schema dry (the schema after Apply's earlier changes), so
// that nothing is committed when one of them is refused.
func checkColumnChanges(snap *deltawriter.Snapshot, dry *deltalog.StructType, a Alter) error {
	if !a.hasColumnChanges() {
		return nil
	}
	meta := snap.Metadata
	schema := dry
	mode := snap.ColumnMapping
	if a.EnableColumnMapping != "" {
		s := *snap
		s.Schema = dry
		var err error
		if meta, schema, _, err = enableColumnMapping(&s, a.EnableColumnMapping); err != nil {
			return err
		}
		mode = deltalog.ColumnMappingName
	}
	for _, r := range a.RenameColumns {
		var err error
		if schema, err = renameColumn(schema, &meta, mode, r); err != nil {
			return err
		}
	}
	if len(a.DropColumns) > 0 {
		var err error
		if schema, err = dropColumns(schema, &meta, mode, a.DropColumns); err != nil {
			return err
		}
	}
	for _, m := range a.MoveColumns {
		var err error
		if schema, _, err = moveColumn(schema, m); err != nil {
			return err
		}
	}
	return nil
}

// stepFunc is Apply's commit step: build the commit on the latest snapshot, commit it,
// retry on a concurrent metadata change.
type stepFunc func(op string, build func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error)) error

// applyColumnChanges commits the column changes of a, each as one commit shaped like
// Spark's: SET TBLPROPERTIES for the column mapping upgrade (with the protocol upgrade in
// the same commit), one RENAME COLUMN per rename, one DROP COLUMNS for all drops, one
// CHANGE COLUMN per move. Each is validated again on the snapshot it commits against.
func applyColumnChanges(a Alter, step stepFunc) error {
	if a.EnableColumnMapping != "" {
		err := step("SET TBLPROPERTIES", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			meta, _, proto, err := enableColumnMapping(s, a.EnableColumnMapping)
			if err != nil {
				return deltawriter.Commit{}, "", err
			}
			props := map[string]string{deltalog.PropColumnMappingMode: a.EnableColumnMapping}
			if proto.MinWriterVersion < 7 {
				props["delta.minReaderVersion"] = strconv.Itoa(proto.MinReaderVersion)
				props["delta.minWriterVersion"] = strconv.Itoa(proto.MinWriterVersion)
			}
			return deltawriter.Commit{Metadata: &meta, Protocol: &proto, OperationParameters: map[string]string{"properties": mustJSON(props)}},
				fmt.Sprintf("column mapping %s (protocol %d/%d, maxColumnId %s)", a.EnableColumnMapping, proto.MinReaderVersion, proto.MinWriterVersion,
					meta.Configuration[deltalog.PropColumnMappingMaxColumnID]), nil
		})
		if err != nil {
			return err
		}
	}
	for _, r := range a.RenameColumns {
		err := step("RENAME COLUMN", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			meta := s.Metadata
			schema, err := renameColumn(s.Schema, &meta, s.ColumnMapping, r)
			if err != nil {
				return deltawriter.Commit{}, "", err
			}
			if err := setSchema(&meta, schema); err != nil {
				return deltawriter.Commit{}, "", err
			}
			newPath := pathString(append(slices.Clone(r.Path[:len(r.Path)-1]), r.To))
			return deltawriter.Commit{Metadata: &meta, OperationParameters: map[string]string{"oldColumnPath": pathString(r.Path), "newColumnPath": newPath}},
				pathString(r.Path) + " TO " + newPath, nil
		})
		if err != nil {
			return err
		}
	}
	if len(a.DropColumns) > 0 {
		err := step("DROP COLUMNS", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			meta := s.Metadata
			schema, err := dropColumns(s.Schema, &meta, s.ColumnMapping, a.DropColumns)
			if err != nil {
				return deltawriter.Commit{}, "", err
			}
			if err := setSchema(&meta, schema); err != nil {
				return deltawriter.Commit{}, "", err
			}
			var names []string
			for _, p := range a.DropColumns {
				names = append(names, pathString(p))
			}
			return deltawriter.Commit{Metadata: &meta, OperationParameters: map[string]string{"columns": mustJSON(names)}},
				strings.Join(names, ", "), nil
		})
		if err != nil {
			return err
		}
	}
	for _, m := range a.MoveColumns {
		err := step("CHANGE COLUMN", func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error) {
			meta := s.Metadata
			schema, f, err := moveColumn(s.Schema, m)
			if err != nil {
				return deltawriter.Commit{}, "", err
			}
			if err := setSchema(&meta, schema); err != nil {
				return deltawriter.Commit{}, "", err
			}
			pos := "FIRST"
			if m.After != "" {
				pos = "AFTER " + m.After
			}
			col := map[string]any{"name": pathString(m.Path), "type": f.Type, "nullable": f.Nullable, "metadata": f.Metadata}
			return deltawriter.Commit{Metadata: &meta, OperationParameters: map[string]string{"column": mustJSON(col), "position": pos}},
				pathString(m.Path) + " " + pos, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func setSchema(meta *deltalog.Metadata, schema *deltalog.StructType) error {
	b, err := json.Marshal(schema)
	if err != nil {
		return fmt.Errorf("write schema: %w", err)
	}
	meta.SchemaString = string(b)
	meta.Configuration = cloneConf(meta.Configuration)
	meta.PartitionColumns = slices.Clone(meta.PartitionColumns)
	return nil
}

// enableColumnMapping returns the metadata, schema and protocol of snap with column
// mapping mode name, as Spark's ALTER TABLE … SET TBLPROPERTIES
// ('delta.columnMapping.mode'='name') makes them (PROTOCOL.md, "Column Mapping" and
// "Table Features"): every field, nested ones too, gets delta.columnMapping.id (1, 2, …)
// and delta.columnMapping.physicalName equal to its current name, so existing Parquet
// files, whose columns carry those names, read unchanged; delta.columnMapping.maxColumnId
// is the largest id. The protocol becomes reader 2 / writer 5 for a table on legacy
// versions, or gains the columnMapping reader and writer feature on a table with table
// features. Only "name" is accepted: Delta allows no other change from none.
func enableColumnMapping(snap *deltawriter.Snapshot, mode string) (deltalog.Metadata, *deltalog.StructType, deltalog.Protocol, error) {
	fail := func(format string, args ...any) (deltalog.Metadata, *deltalog.StructType, deltalog.Protocol, error) {
		return deltalog.Metadata{}, nil, deltalog.Protocol{}, fmt.Errorf("enable column mapping: "+format, args...)
	}
	if mode != string(deltalog.ColumnMappingName) {
		return fail("mode %q: Delta changes a table's mapping mode only from none to name (id mode is set when a table is created); use --enable-column-mapping name", mode)
	}
	if snap.ColumnMapping != deltalog.ColumnMappingNone {
		return fail("the table already uses column mapping mode %s", snap.ColumnMapping)
	}
	schema := snap.Schema.Clone()
	var id int64
	if err := physicalNamesFromNames(schema, &id); err != nil {
		return fail("%w", err)
	}
	meta := snap.Metadata
	if err := setSchema(&meta, schema); err != nil {
		return fail("%w", err)
	}
	meta.Configuration[deltalog.PropColumnMappingMode] = mode
	meta.Configuration[deltalog.PropColumnMappingMaxColumnID] = strconv.FormatInt(id, 10)
	p := snap.Protocol
	proto := deltalog.Protocol{MinReaderVersion: max(p.MinReaderVersion, 2), MinWriterVersion: max(p.MinWriterVersion, 5),
		ReaderFeatures: slices.Clone(p.ReaderFeatures), WriterFeatures: slices.Clone(p.WriterFeatures)}
	if p.MinWriterVersion >= 7 {
		proto = deltawriter.UpgradeProtocol(p, deltalog.FeatureColumnMapping)
	}
	return meta, schema, proto, nil
}

// physicalNamesFromNames gives every field under t an id (pre-order, as Spark numbers
// them) and its own name as physical name. A field that already has one is an error: a
// table without column mapping must not carry stale mapping metadata.
func physicalNamesFromNames(t deltalog.DataType, id *int64) error {
	switch t := t.(type) {
	case *deltalog.StructType:
		for _, f := range t.Fields {
			if _, ok := f.FieldID(); ok {
				return fmt.Errorf("field %q already has %s while column mapping is off; remove it first", f.Name, deltalog.MetaColumnMappingID)
			}
			*id++
			if f.Metadata == nil {
				f.Metadata = map[string]any{}
			}
			f.Metadata[deltalog.MetaColumnMappingID] = float64(*id)
			f.Metadata[deltalog.MetaColumnMappingPhysicalName] = f.Name
			if err := physicalNamesFromNames(f.Type, id); err != nil {
				return err
			}
		}
	case *deltalog.ArrayType:
		return physicalNamesFromNames(t.ElementType, id)
	case *deltalog.MapType:
		if err := physicalNamesFromNames(t.KeyType, id); err != nil {
			return err
		}
		return physicalNamesFromNames(t.ValueType, id)
	}
	return nil
}

// needMapping refuses op on a table without column mapping: without it Parquet columns
// are found by name, so a renamed column would read NULL and a dropped one would come
// back when a column of that name is added again.
func needMapping(op string, mode deltalog.ColumnMappingMode) error {
	if mode != deltalog.ColumnMappingNone {
		return nil
	}
	return fmt.Errorf("%s needs column mapping, which this table does not have (Parquet columns are found by name without it); "+
		"run `ingestd table alter --table URI --enable-column-mapping name` first (a protocol upgrade to reader 2 / writer 5 that readers older than Delta 1.2 cannot follow)", op)
}

// checkUnused refuses to rename or drop path when a partition column, a generated
// column's expression or a CHECK constraint (delta.constraints.*) uses it or a field
// inside it: they name columns by their logical names, which would then point nowhere.
func checkUnused(op string, path []string, schema *deltalog.StructType, meta *deltalog.Metadata) error {
	if len(path) == 1 {
		for _, c := range meta.PartitionColumns {
			if deltalog.NameKey(c) == deltalog.NameKey(path[0]) {
				return fmt.Errorf("%s %s: it is a partition column; Delta does not rename or drop partition columns (repartition the table with Spark: CREATE TABLE … AS SELECT)", op, pathString(path))
			}
		}
	}
	overlaps := func(ref []string) bool {
		n := min(len(ref), len(path))
		return samePath(ref[:n], path[:n])
	}
	var users []string
	var walk func(prefix []string, t deltalog.DataType) error
	walk = func(prefix []string, t deltalog.DataType) error {
		st, ok := t.(*deltalog.StructType)
		if !ok {
			return nil
		}
		for _, f := range st.Fields {
			p := append(slices.Clone(prefix), f.Name)
			if g, ok := f.Metadata[deltalog.MetaGenerationExpression].(string); ok {
				refs, err := expr.References(g)
				if err != nil {
					return fmt.Errorf("%s %s: generated column %s: %w", op, pathString(path), pathString(p), err)
				}
				if slices.ContainsFunc(refs, overlaps) {
					users = append(users, fmt.Sprintf("generated column %s (GENERATED ALWAYS AS (%s))", pathString(p), g))
				}
			}
			if err := walk(p, f.Type); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(nil, schema); err != nil {
		return err
	}
	keys := make([]string, 0)
	for k := range meta.Configuration {
		if strings.HasPrefix(k, deltalog.PropConstraintPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		refs, err := expr.References(meta.Configuration[k])
		if err != nil {
			return fmt.Errorf("%s %s: CHECK constraint %s: %w", op, pathString(path), strings.TrimPrefix(k, deltalog.PropConstraintPrefix), err)
		}
		if slices.ContainsFunc(refs, overlaps) {
			users = append(users, fmt.Sprintf("CHECK constraint %s (%s)", strings.TrimPrefix(k, deltalog.PropConstraintPrefix), meta.Configuration[k]))
		}
	}
	if len(users) > 0 {
		return fmt.Errorf("%s %s: %s uses it; drop that first", op, pathString(path), strings.Join(users, " and "))
	}
	return nil
}

// renameColumn returns a copy of schema with r applied; meta is read for partition
// columns, generated columns and constraints, and its delta.dataSkippingStatsColumns
// follows the rename.
func renameColumn(schema *deltalog.StructType, meta *deltalog.Metadata, mode deltalog.ColumnMappingMode, r RenameColumn) (*deltalog.StructType, error) {
	op := "rename column"
	if err := needMapping(op, mode); err != nil {
		return nil, err
	}
	out := schema.Clone()
	parent, f, err := lookup(out, r.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if f == nil {
		return nil, fmt.Errorf("%s %s: no such column", op, pathString(r.Path))
	}
	for _, x := range parent.Fields {
		if x != f && deltalog.NameKey(x.Name) == deltalog.NameKey(r.To) {
			return nil, fmt.Errorf("%s %s TO %s: the table already has a column %s (names match ignoring case)", op, pathString(r.Path), r.To,
				pathString(append(slices.Clone(r.Path[:len(r.Path)-1]), x.Name)))
		}
	}
	if err := checkUnused(op, r.Path, schema, meta); err != nil {
		return nil, err
	}
	f.Name = r.To
	renamed := append(slices.Clone(r.Path[:len(r.Path)-1]), r.To)
	editStatsColumns(meta, func(p []string) []string {
		if len(p) >= len(r.Path) && samePath(p[:len(r.Path)], r.Path) {
			return append(slices.Clone(renamed), p[len(r.Path):]...)
		}
		return p
	})
	return out, nil
}

// editStatsColumns rewrites the column list of delta.dataSkippingStatsColumns (comma
// separated, backticks quoting names) in meta through edit, which returns the new path of
// an entry or nil to remove it, as Spark does on RENAME COLUMN and DROP COLUMNS: the
// property names logical columns. meta's configuration is copied before it changes.
func editStatsColumns(meta *deltalog.Metadata, edit func([]string) []string) {
	v, ok := meta.Configuration[deltalog.PropStatsColumns]
	if !ok || strings.TrimSpace(v) == "" {
		return
	}
	var out []string
	for _, entry := range strings.Split(v, ",") {
		p, rest, err := parsePath(entry)
		if err != nil || rest != "" {
			out = append(out, strings.TrimSpace(entry)) // not ours to judge: kept as written
			continue
		}
		if p = edit(p); p != nil {
			out = append(out, quotePath(p))
		}
	}
	meta.Configuration = cloneConf(meta.Configuration)
	meta.Configuration[deltalog.PropStatsColumns] = strings.Join(out, ",")
}

// quotePath writes a column path as Spark SQL does, backticking parts that are not plain
// identifiers.
func quotePath(p []string) string {
	parts := make([]string, len(p))
	for i, s := range p {
		plain := s != ""
		for _, c := range s {
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				plain = false
			}
		}
		if plain {
			parts[i] = s
		} else {
			parts[i] = "`" + strings.ReplaceAll(s, "`", "``") + "`"
		}
	}
	return strings.Join(parts, ".")
}

// dropColumns returns a copy of schema without the fields at paths (and without them in
// meta's delta.dataSkippingStatsColumns).
func dropColumns(schema *deltalog.StructType, meta *deltalog.Metadata, mode deltalog.ColumnMappingMode, paths [][]string) (*deltalog.StructType, error) {
	op := "drop column"
	if err := needMapping(op, mode); err != nil {
		return nil, err
	}
	out := schema.Clone()
	for _, p := range paths {
		parent, f, err := lookup(out, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		if f == nil {
			return nil, fmt.Errorf("%s %s: no such column", op, pathString(p))
		}
		if err := checkUnused(op, p, schema, meta); err != nil {
			return nil, err
		}
		if len(parent.Fields) == 1 {
			if len(p) == 1 {
				return nil, fmt.Errorf("%s %s: it is the table's last column; a Delta table needs at least one", op, pathString(p))
			}
			return nil, fmt.Errorf("%s %s: it is the last field of struct %s; drop %s instead", op, pathString(p), pathString(p[:len(p)-1]), pathString(p[:len(p)-1]))
		}
		parent.Fields = slices.DeleteFunc(parent.Fields, func(x *deltalog.StructField) bool { return x == f })
		editStatsColumns(meta, func(sp []string) []string {
			if len(sp) >= len(p) && samePath(sp[:len(p)], p) {
				return nil
			}
			return sp
		})
	}
	return out, nil
}

// moveColumn returns a copy of schema with m applied and the moved field. Reordering
// needs no column mapping: readers find Parquet columns by (physical) name, not position.
func moveColumn(schema *deltalog.StructType, m MoveColumn) (*deltalog.StructType, *deltalog.StructField, error) {
	op := "move column"
	out := schema.Clone()
	parent, f, err := lookup(out, m.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	if f == nil {
		return nil, nil, fmt.Errorf("%s %s: no such column", op, pathString(m.Path))
	}
	rest := slices.DeleteFunc(slices.Clone(parent.Fields), func(x *deltalog.StructField) bool { return x == f })
	at := 0
	if m.After != "" {
		at = slices.IndexFunc(rest, func(x *deltalog.StructField) bool { return deltalog.NameKey(x.Name) == deltalog.NameKey(m.After) })
		if at < 0 {
			if deltalog.NameKey(m.After) == deltalog.NameKey(f.Name) {
				return nil, nil, fmt.Errorf("%s %s AFTER %s: a column cannot move after itself", op, pathString(m.Path), m.After)
			}
			return nil, nil, fmt.Errorf("%s %s AFTER %s: no such column %s", op, pathString(m.Path), m.After,
				pathString(append(slices.Clone(m.Path[:len(m.Path)-1]), m.After)))
		}
		at++
	}
	parent.Fields = slices.Insert(rest, at, f)
	return out, f, nil
}
