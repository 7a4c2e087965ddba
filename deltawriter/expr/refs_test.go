package expr

import (
	"fmt"
	"testing"
)

func TestReferences(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"amount >= 0", `[[amount]]`},
		{"amount * qty = line_total", `[[amount] [qty] [line_total]]`},
		{"`unit price` > 0 AND `s`.`a.b` IS NOT NULL", `[[unit price] [s a.b]]`},
		{"CAST(date_format(ts, 'yyyy') AS INT) BETWEEN lo AND hi", `[[ts] [lo] [hi]]`},
		{"status IN ('NEW', x) OR note LIKE pat OR NOT flag", `[[status] [x] [note] [pat] [flag]]`},
		{"coalesce(a, a, -b) = a", `[[a] [b]]`},
		{"regexp_like(status, '^[A-Z]+$')", `[[status]]`},
		{"1 = 1", `[]`},
	} {
		got, err := References(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("References(%q) = %s, want %s", tc.src, s, tc.want)
		}
	}
	if _, err := References("a >"); err == nil {
		t.Error("References of a broken expression: no error")
	}
}
