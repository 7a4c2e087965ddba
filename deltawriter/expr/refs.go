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
	var walk func(Node)
	walk = func(n Node) {
		switch n := n.(type) {
		case Col:
			key := fmt.Sprintf("%q", n.Parts)
			if !seen[key] {
				seen[key] = true
				out = append(out, append([]string(nil), n.Parts...))
			}
		case Call:
			for _, a := range n.Args {
				walk(a)
			}
		case Cast:
			walk(n.X)
		case Unary:
			walk(n.X)
		case Binary:
			walk(n.L)
			walk(n.R)
		case IsNull:
			walk(n.X)
		case In:
			walk(n.X)
			for _, x := range n.List {
				walk(x)
			}
		case Between:
			walk(n.X)
			walk(n.Lo)
			walk(n.Hi)
		case Like:
			walk(n.X)
			walk(n.Pattern)
		}
	}
	walk(n)
	return out, nil
}
