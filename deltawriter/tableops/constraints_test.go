package tableops

import (
	"context"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

const consSchema = `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}},{"name":"status","type":"string","nullable":true,"metadata":{}}]}`

func TestParseConstraint(t *testing.T) {
	for in, want := range map[string]string{
		"amount_pos CHECK (amount >= 0)":         "amount_pos|amount >= 0",
		"Amount_Pos check(amount >= 0 AND x)":    "amount_pos|amount >= 0 AND x",
		"`ops.amount.max` CHECK (amount < 1e6x)": "",
		"`ops.amount.max` CHECK (amount < 100)":  "ops.amount.max|amount < 100",
		"`Back``Tick` CHECK (amount < 100)":      "back`tick|amount < 100",
		"`it's \"q\"` CHECK (amount < 100)":      "it's \"q\"|amount < 100",
		"`` CHECK (amount < 100)":                "",
		"`  ` CHECK (amount < 100)":              "",
		"`abc CHECK (amount < 100)":              "",
		"a.b CHECK (amount < 100)":               "",
		"`a`b` CHECK (amount < 100)":             "",
	} {
		c, err := ParseConstraint(in)
		got := c.Name + "|" + c.Expr
		if err != nil {
			got = ""
		}
		if got != want {
			t.Errorf("ParseConstraint(%q) = %q (%v), want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"amount >= 0":             `parse constraint "amount >= 0": want 'name CHECK (expression)', e.g. 'amount_pos CHECK (amount >= 0)'`,
		"p CHECK (amount >= (0)":  `parse constraint p: parse expression "amount >= (0": at offset 12: expected ")", found ""`,
		"`` CHECK (amount >= 0)":  "parse constraint \"`` CHECK (amount >= 0)\": constraint name `` is empty",
		"a.b CHECK (amount >= 0)": "parse constraint \"a.b CHECK (amount >= 0)\": constraint name a.b: an unquoted name has only letters, digits and underscores; quote it in backticks: `a.b`",
	} {
		if _, err := ParseConstraint(in); err == nil || err.Error() != want {
			t.Errorf("ParseConstraint(%q): %v, want %s", in, err, want)
		}
	}
}

// TestParseConstraintName: the names ADD and DROP CONSTRAINT take, as Spark's parser does:
// an identifier or a backticked name; never empty, never split on dots.
func TestParseConstraintName(t *testing.T) {
	for in, want := range map[string]string{
		"Amount_Pos":       "amount_pos",
		"`Ops.Amount.Max`": "ops.amount.max",
		"`back``tick`":     "back`tick",
		" `x y` ":          "x y",
		"":                 "error: constraint name is empty",
		"``":               "error: constraint name `` is empty",
		"ops.amount.max":   "error: constraint name ops.amount.max: an unquoted name has only letters, digits and underscores; quote it in backticks: `ops.amount.max`",
		"`a`b`":            "error: constraint name `a`b`: a backtick inside a backticked name is written twice (``)",
	} {
		got, err := ParseConstraintName(in)
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != want {
			t.Errorf("ParseConstraintName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Each constraint change is one commit shaped like Spark's; every refusal names the
// constraint and the fix, before anything is committed.
func TestAlterConstraints(t *testing.T) {
	ctx := context.Background()
	tbl, _ := newTable(t, consSchema)
	c, _ := ParseConstraint("`Ops.Amount.Max` CHECK (amount < 1000000)")
	res, err := Apply(ctx, tbl, Alter{AddConstraints: []ConstraintDef{c}, SetNotNull: []string{"ORDER_ID"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Operation != "ADD CONSTRAINT" || res[0].Detail != "ops.amount.max CHECK (amount < 1000000)" ||
		res[1].Operation != "CHANGE COLUMN" || res[1].Detail != "order_id SET NOT NULL" {
		t.Fatalf("results %+v", res)
	}
	snap, _ := tbl.Snapshot(ctx)
	if got := snap.Metadata.Configuration["delta.constraints.ops.amount.max"]; got != "amount < 1000000" {
		t.Errorf("delta.constraints.ops.amount.max = %q", got)
	}
	if p := snap.Protocol; p.MinWriterVersion < 3 || (p.MinWriterVersion == 7 && !strings.Contains(strings.Join(p.WriterFeatures, ","), deltalog.FeatureCheckConstraints)) {
		t.Errorf("protocol %+v does not support checkConstraints", p)
	}
	if f := snap.Schema.FieldByKey("order_id"); f.Nullable {
		t.Errorf("order_id still nullable")
	}
	for _, tc := range []struct {
		a    Alter
		want string
	}{
		{Alter{AddConstraints: []ConstraintDef{{Name: "ops.amount.max", Expr: "amount > 0"}}},
			"add constraint ops.amount.max: the table already has it: CHECK (amount < 1000000); drop it first (--drop-constraint ops.amount.max)"},
		{Alter{AddConstraints: []ConstraintDef{{Name: "s", Expr: "regexp_like(status, '^[A-Z]+$')"}}},
			`add constraint s: check CHECK constraint "s" (regexp_like(status, '^[A-Z]+$')) (feature checkConstraints): bind expression "regexp_like(status, '^[A-Z]+$')": function regexp_like in regexp_like(` + "`status`" + `, '^[A-Z]+$'): not supported by ingestd's expression evaluator`},
		{Alter{AddConstraints: []ConstraintDef{{Name: "n", Expr: "amount + 1"}}},
			`add constraint n: check CHECK constraint "n" (amount + 1) (feature checkConstraints): the expression is of type decimal(11,2), not boolean: unsupported Delta table feature`},
		{Alter{AddConstraints: []ConstraintDef{{Name: "m", Expr: "missing > 0"}}},
			`add constraint m: check CHECK constraint "m" (missing > 0) (feature checkConstraints): bind expression "missing > 0": column ` + "`missing`" + ` does not exist in the table`},
		{Alter{DropConstraints: []string{"nope"}}, "drop constraint nope: the table has no such constraint (it has: ops.amount.max)"},
		{Alter{SetNotNull: []string{"nope"}}, "change column nope: the table has no top-level column of that name"},
	} {
		_, err := Apply(ctx, tbl, tc.a)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Apply(%+v): %v\n want %s", tc.a, err, tc.want)
		}
	}
	before, _ := tbl.Snapshot(ctx)
	res, err = Apply(ctx, tbl, Alter{DropConstraints: []string{"OPS.AMOUNT.MAX"}, DropNotNull: []string{"order_id"}})
	if err != nil || len(res) != 2 || res[0].Operation != "DROP CONSTRAINT" || res[1].Detail != "order_id DROP NOT NULL" || res[0].Version != before.Version+1 {
		t.Fatalf("drop: %+v %v", res, err)
	}
	snap, _ = tbl.Snapshot(ctx)
	if _, ok := snap.Metadata.Configuration["delta.constraints.ops.amount.max"]; ok || !snap.Schema.FieldByKey("order_id").Nullable {
		t.Errorf("after the drops: %v, order_id nullable %v", snap.Metadata.Configuration, snap.Schema.FieldByKey("order_id").Nullable)
	}
}
