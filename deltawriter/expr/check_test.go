package expr

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// ordersSchema is the orders table of TestCheckConstraintsPerRow: order_id bigint,
// amount decimal(10,2), qty int, line_total decimal(10,2), status string, `unit price`
// double (a name with a space), note string.
func ordersSchema() *deltalog.StructType {
	dec := deltalog.DecimalType{Precision: 10, Scale: 2}
	return &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true},
		{Name: "amount", Type: dec, Nullable: true},
		{Name: "qty", Type: deltalog.Integer, Nullable: true},
		{Name: "line_total", Type: dec, Nullable: true},
		{Name: "status", Type: deltalog.String, Nullable: true},
		{Name: "unit price", Type: deltalog.Double, Nullable: true},
		{Name: "note", Type: deltalog.String, Nullable: true},
	}}
}

// ordersRow is a row of ordersSchema by column name; absent keys are the valid row's
// values (amount 1.00, qty 1, line_total 1.00, status 'NEW', unit price 2.5, note 'ok'), a
// nil value is NULL, an int64 is cents.
func ordersRow(t *testing.T, over map[string]any) map[string]Value {
	dec := deltalog.DecimalType{Precision: 10, Scale: 2}
	cents := func(c int64) Value { return Decimal(dec, big.NewInt(c)) }
	row := map[string]Value{"order_id": Int(deltalog.Long, 1), "amount": cents(100), "qty": Int(deltalog.Integer, 1),
		"line_total": cents(100), "status": Str("NEW"), "unit price": Float(deltalog.Double, 2.5), "note": Str("ok")}
	for k, v := range over {
		switch v := v.(type) {
		case nil:
			row[k] = Null(row[k].Type)
		case int64: // cents
			row[k] = cents(v)
		case int:
			row[k] = Int(deltalog.Integer, int64(v))
		case float64:
			row[k] = Float(deltalog.Double, v)
		case string:
			row[k] = Str(v)
		default:
			t.Fatalf("row value %T", v)
		}
	}
	return row
}

// TestCheckConstraintsPerRow evaluates six CHECK constraints (among them `unit price` > 0,
// a backticked name with a space, and ops.amount.max, a name with dots) on a valid row and
// on rows r1–r12 that each change it, with the protocol's rule (a row violates a
// constraint unless it is true: a NULL result is a violation, as Spark has it), and checks
// the exact set of violated constraints per row: NULL amounts (r1), status, note and
// NULL operands; exact decimals (0.10 × 3 = 0.30 passes, r8; binary floating point would
// give 0.30000000000000004); case-sensitive strings (r3); length counting characters, not
// bytes ('Zoë!!' is 5, r5); NaN greater than every other value (r11 passes).
func TestCheckConstraintsPerRow(t *testing.T) {
	constraints := map[string]string{
		"amount_pos":     "amount >= 0",
		"status_known":   "status IN ('NEW', 'PAID', 'SHIPPED')",
		"price_positive": "`unit price` > 0",
		"note_short":     "length(note) <= 5",
		"line_total_ok":  "amount * qty = line_total",
		"ops.amount.max": "amount < 1000000",
	}
	exprs := map[string]*Expr{}
	for name, src := range constraints {
		e, err := Compile(src, ordersSchema(), Options{})
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		if e.Type() != deltalog.Boolean {
			t.Fatalf("%s: type %v", name, e.Type())
		}
		exprs[name] = e
	}
	rows := []struct {
		name string
		over map[string]any
		want string // violated constraints, sorted, comma-separated
	}{
		{"valid", nil, ""},
		{"r1", map[string]any{"amount": nil, "line_total": nil}, "amount_pos,line_total_ok,ops.amount.max"},
		{"r2", map[string]any{"amount": int64(-1), "line_total": int64(-1)}, "amount_pos"},
		{"r3", map[string]any{"status": "new"}, "status_known"},
		{"r4", map[string]any{"status": nil}, "status_known"},
		{"r5", map[string]any{"note": "Zoë!!"}, ""},
		{"r6", map[string]any{"note": "Zoë!!!"}, "note_short"},
		{"r7", map[string]any{"note": nil}, "note_short"},
		{"r8", map[string]any{"amount": int64(10), "qty": 3, "line_total": int64(30)}, ""},
		{"r9", map[string]any{"amount": int64(10), "qty": 3, "line_total": int64(31)}, "line_total_ok"},
		{"r10", map[string]any{"unit price": 0.0}, "price_positive"},
		{"r11", map[string]any{"unit price": math.NaN()}, ""},
		{"r12", map[string]any{"amount": int64(100000000), "line_total": int64(100000000)}, "ops.amount.max"},
	}
	names := []string{"amount_pos", "line_total_ok", "note_short", "ops.amount.max", "price_positive", "status_known"}
	for _, r := range rows {
		row := ordersRow(t, r.over)
		var got []string
		for _, name := range names {
			e := exprs[name]
			args := make([]Value, len(e.Columns()))
			for i, c := range e.Columns() {
				args[i] = row[c.Name]
			}
			v, err := e.Eval(args)
			if err != nil {
				t.Fatalf("%s %s: %v", r.name, name, err)
			}
			if v.Null || v.Int == 0 {
				got = append(got, name)
			}
		}
		if g := strings.Join(got, ","); g != r.want {
			t.Errorf("%s violates %q, want %q", r.name, g, r.want)
		}
	}
}

// TestEvalSQL checks single expressions against the results Spark 4 (ANSI mode) gives.
func TestEvalSQL(t *testing.T) {
	for src, want := range map[string]string{
		"0.10 * 3":                     "0.30",
		"0.10 * 3 = 0.30":              "true",
		"1 / 3":                        "0.3333333333333333",
		"1.0 / 3":                      "0.333333",
		"CAST(1 AS DECIMAL(10,2)) / 3": "0.333333",
		"10 % 3":                       "1",
		"-7 % 3":                       "-1",
		"1.5 + 1":                      "2.5",
		"NULL > 1":                     "NULL",
		"NOT (NULL > 1)":               "NULL",
		"false AND NULL":               "false",
		"true OR NULL":                 "true",
		"true AND NULL":                "NULL",
		"1 IN (2, NULL)":               "NULL",
		"1 IN (1, NULL)":               "true",
		"1 NOT IN (2, 3)":              "true",
		"2 BETWEEN 1 AND 3":            "true",
		"5 BETWEEN NULL AND 3":         "false",
		"'abc' LIKE 'a_c'":             "true",
		"'abc' LIKE 'a%'":              "true",
		"'a%c' LIKE 'a\\\\%c'":         "true",
		"'abc' LIKE 'a\\\\%c'":         "false",
		"'abc' LIKE 'a\\_c'":           "false", // Spark keeps \_ and \% escaped in a literal (unescapeSQLString)
		"'a_c' LIKE 'a\\_c'":           "true",
		"'a%c' LIKE 'a\\%c'":           "true",
		"'abc' LIKE 'a\\%'":            "false",
		"'a\\_c' = 'a\\\\_c'":          "true",
		"'\\101\\0' = 'A\\u0000'":      "true", // octal \[01][0-7][0-7] as Spark's unescapeSQLString; \0 alone is NUL
		"length('\\012')":              "1",
		"'a_c' LIKE 'a!_c' ESCAPE '!'": "true",
		"'Zoë' LIKE 'Zo_'":             "true",
		"coalesce(NULL, 2, 3)":         "2",
		"length('Zoë!!')":              "5",
		"upper('abc')":                 "ABC",
		// Spark 4.2 (Java's full case mapping): upper('ß') = 'SS', length 2; upper('ﬁ') = 'FI';
		// lower('İ') = 'i̇' (i + U+0307), upper('straße') = 'STRASSE'; and the final sigma.
		"upper('ß')":                                    "SS",
		"length(upper('ß'))":                            "2",
		"upper('straße')":                               "STRASSE",
		"upper('ﬁ')":                                    "FI",
		"lower('İ') = 'i\u0307'":                        "true",
		"length(lower('İ'))":                            "2",
		"lower('ΟΔΟΣ ΣΑΣ')":                             "οδος σας",
		"upper('Zoë') = 'ZOË'":                          "true",
		"upper('ß') = 'SS'":                             "true",
		"trim('  a b  ')":                               "a b",
		"CAST('NaN' AS DOUBLE) = CAST('NaN' AS DOUBLE)": "true",
		"CAST('NaN' AS DOUBLE) > 1000000.0":             "true",
		"CAST(' +19 ' AS INT)":                          "19",
		"CAST(2.5 AS INT)":                              "2",
		"CAST(-2.5 AS INT)":                             "-2",
		"CAST(0.125 AS DECIMAL(3,2))":                   "0.13",
		"CAST(-0.125 AS DECIMAL(3,2))":                  "-0.13",
		"CAST('2024-02-29' AS DATE)":                    "2024-02-29",
		"CAST('2024-02-29 12:30:00' AS TIMESTAMP)":      "2024-02-29 12:30:00Z",
		"CAST(CAST('2024-02-29 12:30:00.5' AS TIMESTAMP) AS STRING)": "2024-02-29 12:30:00.5",
		"CAST(0.1 AS DOUBLE)":                       "0.1",
		"CAST(12345678.5 AS DOUBLE)":                "1.23456785E7",
		"CAST(1 AS BOOLEAN)":                        "true",
		"'b' > 'B'":                                 "true",
		"CAST('2024-01-01' AS DATE) < '2024-01-02'": "true",
	} {
		e, err := Compile(src, ordersSchema(), Options{})
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		v, err := e.Eval(nil)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if v.String() != want {
			t.Errorf("%s = %s, want %s", src, v, want)
		}
	}
}

// TestEvalErrors checks the values Spark's ANSI mode fails a query on.
func TestEvalErrors(t *testing.T) {
	for src, want := range map[string]string{
		"1 / 0":                              "DIVIDE_BY_ZERO",
		"1.0 % 0":                            "DIVIDE_BY_ZERO",
		"2147483647 + 1":                     "ARITHMETIC_OVERFLOW",
		"CAST('x' AS INT)":                   "CAST_INVALID_INPUT",
		"CAST('1.9' AS INT)":                 "CAST_INVALID_INPUT", // ANSI: UTF8String.toIntExact takes no decimal point
		"CAST('1.' AS BIGINT)":               "CAST_INVALID_INPUT",
		"CAST('+-1' AS INT)":                 "CAST_INVALID_INPUT",
		"CAST(1000 AS DECIMAL(3,1))":         "NUMERIC_VALUE_OUT_OF_RANGE",
		"CAST(CAST('NaN' AS DOUBLE) AS INT)": "CAST_OVERFLOW",
		"'a' LIKE 'a\\\\'":                   "ESC_AT_THE_END",
	} {
		e, err := Compile(src, ordersSchema(), Options{})
		if err != nil {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %s", src, err, want)
			}
			continue
		}
		if _, err := e.Eval(nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", src, err, want)
		}
	}
}
