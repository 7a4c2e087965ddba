package expr

import "fmt"

// References returns the column paths that the Spark SQL expression src names, each as its
// dot-separated parts with backticks removed (`a`.`b c` → ["a", "b c"]), in order of first
// appearance, without duplicates (compared exactly; resolving case-insensitively against
// a schema is the caller's job, deltalog.NameKey). It only parses: functions and casts
// the evaluator does not implement still yield their column arguments, so a table command
// can tell which columns a generated column (delta.generationExpression) or a CHECK
// constraint (delta.constraints.*) uses before renaming or dropping one (PROTOCOL.md,
// "Generated Columns" and "Check Constraints"). The error is Parse's for text that is not
// an expression.
func References(src string) ([][]string, error) {
	n, err := Parse(src)
	if err != nil {
		return nil, fmt.Errorf("find column references: %w", err)
	}
	var out [][]string
	seen := map[string]bool{}
	Walk(n, func(n Node) {
		if c, ok := n.(Col); ok {
			key := fmt.Sprintf("%q", c.Parts)
			if !seen[key] {
				seen[key] = true
				out = append(out, append([]string(nil), c.Parts...))
			}
		}
	})
	return out, nil
}

// Walk calls visit for n and then for every node below it, depth first, left to right
// (function arguments, cast operands, both sides of a binary operator, IN lists, BETWEEN
// bounds, LIKE patterns).
func Walk(n Node, visit func(Node)) {
	visit(n)
	switch n := n.(type) {
	case Call:
		for _, a := range n.Args {
			Walk(a, visit)
		}
	case Cast:
		Walk(n.X, visit)
	case Unary:
		Walk(n.X, visit)
	case Binary:
		Walk(n.L, visit)
		Walk(n.R, visit)
	case IsNull:
		Walk(n.X, visit)
	case In:
		Walk(n.X, visit)
		for _, x := range n.List {
			Walk(x, visit)
		}
	case Between:
		Walk(n.X, visit)
		Walk(n.Lo, visit)
		Walk(n.Hi, visit)
	case Like:
		Walk(n.X, visit)
		Walk(n.Pattern, visit)
	}
}
