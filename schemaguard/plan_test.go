package schemaguard

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestPlanBatch decides whole batches: table creation from the first writer schema that
// can define a table, cumulative evolution, and the re-decision against the final schema.
func TestPlanBatch(t *testing.T) {
	v1 := st(notNull("id", dl.Long), notNull("status", dl.String))
	v2 := st(notNull("id", dl.Long), notNull("status", dl.String), null("channel", dl.String))
	v3 := st(notNull("id", dl.Long), notNull("status", dl.String), null("coupon", dl.Integer))
	v3long := st(notNull("id", dl.Long), notNull("status", dl.String), null("coupon", dl.Long))
	ntz := st(notNull("id", dl.Long), null("at", dl.TimestampNtz))
	table := st(null("id", dl.Long), null("status", dl.String))
	cases := []struct {
		name    string
		table   *dl.StructType
		writers []Writer
		opts    Options
		// want: "create=<bool> base=<schema> schema=<schema> evolved=<kinds> enable=<features> decisions=<id:action,...>"
		want string
	}{
		{"no table: the first writer creates it, all nullable", nil, []Writer{{1, v1}, {2, v2}},
			Options{Policy: DeadLetter, OnIncompatible: Halt},
			"create=true base=struct<id:long,status:string> schema=struct<id:long,status:string> evolved=[] enable=[] decisions=1:write,2:dead_letter"},
		{"no table: a writer needing a feature that is not allowed follows the policy; the next creates", nil, []Writer{{7, ntz}, {1, v1}},
			Options{Policy: DeadLetter, OnIncompatible: Halt},
			"create=true base=struct<id:long,status:string> schema=struct<id:long,status:string> evolved=[] enable=[] decisions=1:write,7:dead_letter"},
		{"no table: allowed feature is enabled by the creating writer", nil, []Writer{{7, ntz}},
			Options{Policy: Halt, OnIncompatible: Halt, Allow: map[string]bool{dl.FeatureTimestampNtz: true}},
			"create=true base=struct<id:long,at:timestamp_ntz> schema=struct<id:long,at:timestamp_ntz> evolved=[] enable=[timestampNtz] decisions=7:write"},
		{"no table and no writer can define one", nil, []Writer{{7, ntz}},
			Options{Policy: Halt, OnIncompatible: Halt},
			"create=false base=<nil> schema=<nil> evolved=[] enable=[] decisions=7:halt"},
		{"evolve: two writers' new fields applied cumulatively", table, []Writer{{2, v2}, {3, v3}},
			Options{Policy: Evolve, OnIncompatible: Halt},
			"create=false base=struct<id:long,status:string> schema=struct<id:long,status:string,channel:string,coupon:integer> evolved=[add_column add_column] enable=[] decisions=2:evolve,3:evolve"},
		{"evolve: the same new field with two types; the second no longer fits the final schema", table, []Writer{{3, v3}, {4, v3long}},
			Options{Policy: Evolve, OnIncompatible: DeadLetter},
			"create=false base=struct<id:long,status:string> schema=struct<id:long,status:string,coupon:integer> evolved=[add_column] enable=[] decisions=3:evolve,4:dead_letter"},
		{"dead_letter: a new field is not applied", table, []Writer{{1, v1}, {2, v2}},
			Options{Policy: DeadLetter, OnIncompatible: Halt},
			"create=false base=struct<id:long,status:string> schema=struct<id:long,status:string> evolved=[] enable=[] decisions=1:write,2:dead_letter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := PlanBatch(c.table, c.writers, c.opts)
			if got := describePlan(p); got != c.want {
				t.Errorf("plan\n got %s\nwant %s", got, c.want)
			}
			if p.Create {
				for _, f := range p.Base.Fields {
					if !f.Nullable {
						t.Errorf("created column %s is NOT NULL", f.Name)
					}
				}
			}
		})
	}
}

func describePlan(p BatchPlan) string {
	str := func(s *dl.StructType) string {
		if s == nil {
			return "<nil>"
		}
		return s.String()
	}
	var kinds []string
	for _, c := range p.Evolved {
		kinds = append(kinds, string(c.Kind))
	}
	var ds []string
	for id, d := range p.Decisions {
		ds = append(ds, fmt.Sprintf("%d:%v", id, d.Action))
	}
	slices.Sort(ds)
	return fmt.Sprintf("create=%v base=%s schema=%s evolved=%v enable=%v decisions=%s",
		p.Create, str(p.Base), str(p.Schema), kinds, p.Enable, strings.Join(ds, ","))
}
