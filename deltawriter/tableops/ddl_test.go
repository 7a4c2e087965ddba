package tableops

import (
	"strings"
	"testing"
)

func TestParseColumnDef(t *testing.T) {
	tests := []struct{ in, path, typ string }{
		{"channel STRING", "channel", "string"},
		{"amount decimal(12, 3)", "amount", "decimal(12,3)"},
		{"n bigint", "n", "long"},
		{"customer.details STRUCT<name: STRING, Email:string>", "customer/details", "struct<name:string,Email:string>"},
		{"tags array<string>", "tags", "array<string>"},
		{"m MAP<STRING, ARRAY<INT>>", "m", "map<string,array<integer>>"},
		{"`order id` STRING", "order id", "string"},
		{"ts TIMESTAMP_NTZ", "ts", "timestamp_ntz"},
		{"d DECIMAL", "d", "decimal(10,0)"},
	}
	for _, tt := range tests {
		c, err := ParseColumnDef(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if strings.Join(c.Path, "/") != tt.path || c.Type.String() != tt.typ {
			t.Errorf("%s: got %v %s, want %s %s", tt.in, c.Path, c.Type, tt.path, tt.typ)
		}
	}
	for _, bad := range []string{"channel", "channel STRIN", "a..b int", "x decimal(40,2)", "s struct<a int>", "m map<string int>"} {
		if _, err := ParseColumnDef(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
