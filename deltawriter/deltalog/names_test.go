package deltalog

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// NameKey is the one definition of "same column". Before it, the schema guard used
// ToLower(NFC), the decoder this fold, and deltawriter an ASCII-only fold; they disagreed
// on the names below. The fold (strings.EqualFold after NFC) is the rule kept.
func TestNameKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"order_id", "ORDER_ID", true},
		{"s", "ſ", true},                  // U+017F LATIN SMALL LETTER LONG S folds to s; ToLower leaves it
		{"S", "ſ", true},                  //
		{"k", "\u212a", true},             // KELVIN SIGN
		{"Écart", "écart", true},          // non-ASCII case: the old ASCII fold said different
		{"caf\u00e9", "cafe\u0301", true}, // NFC: precomposed é vs e + combining acute
		{"CAF\u00c9", "cafe\u0301", true},
		{"straße", "STRASSE", false}, // full case folding is not simple folding
		{"İd", "id", false},          // U+0130 has no simple fold; ToLower maps it to i
		{"a.b", "A.B", true},         // dotted paths keep their dots
		{"a", "b", false},
		{"", "", true},
	} {
		if got := NameKey(tc.a) == NameKey(tc.b); got != tc.same {
			t.Errorf("NameKey(%q) == NameKey(%q): %v, want %v", tc.a, tc.b, got, tc.same)
		}
		if want := strings.EqualFold(norm.NFC.String(tc.a), norm.NFC.String(tc.b)); want != tc.same {
			t.Errorf("test case %q, %q disagrees with EqualFold of the NFC forms", tc.a, tc.b)
		}
	}
}

// Keys agree exactly when EqualFold of the NFC forms does, over every pair of a sample
// that covers the case-folding orbits with more than two members.
func TestNameKeyIsEqualFold(t *testing.T) {
	sample := []string{"s", "S", "ſ", "k", "K", "\u212a", "µ", "μ", "Μ", "ß", "ẞ", "σ", "ς", "Σ",
		"ǅ", "ǆ", "Ǆ", "θ", "ϑ", "Θ", "i", "I", "ı", "İ", "Å", "å", "\u212b", "A\u030a", "Ω", "\u2126", "ω"}
	for _, a := range sample {
		for _, b := range sample {
			got := NameKey(a) == NameKey(b)
			want := strings.EqualFold(norm.NFC.String(a), norm.NFC.String(b))
			if got != want {
				t.Errorf("NameKey(%q) == NameKey(%q): %v, EqualFold says %v", a, b, got, want)
			}
		}
	}
}

func TestFieldByKey(t *testing.T) {
	s := &StructType{Fields: []*StructField{{Name: "Id", Type: Long}, {Name: "ſum", Type: Long}, {Name: "id", Type: Integer}}}
	if f := s.FieldByKey("id"); f == nil || f.Type != Integer {
		t.Errorf("exact match must win: %v", f)
	}
	if f := s.FieldByKey("ID"); f == nil || f.Name != "Id" {
		t.Errorf("first case-insensitive match: %v", f)
	}
	if f := s.FieldByKey("SUM"); f == nil || f.Name != "ſum" {
		t.Errorf("ſum matches SUM: %v", f)
	}
	if f := s.FieldByKey("x"); f != nil {
		t.Errorf("x: %v", f)
	}
	if f := (*StructType)(nil).FieldByKey("x"); f != nil {
		t.Errorf("nil struct: %v", f)
	}
}

func TestNeedsColumnMapping(t *testing.T) {
	for name, want := range map[string]bool{"order_id": false, "y--1": false, "Écart": false, "order id": true, "a,b": true,
		"a;b": true, "a{b": true, "a}b": true, "f(x)": true, "a\nb": true, "a\tb": true, "a=b": true} {
		if got := NeedsColumnMapping(name); got != want {
			t.Errorf("NeedsColumnMapping(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestNameKeyASCIIDoesNotAllocate(t *testing.T) {
	if got := NameKey("Order_ID.x"); got != "order_id.x" {
		t.Errorf("NameKey(Order_ID.x) = %q", got)
	}
	if got := NameKey("ſum"); got != "sum" {
		t.Errorf("NameKey(ſum) = %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = NameKey("order_id_0001") }); n != 0 {
		t.Errorf("NameKey of a lower-case ASCII name allocates %v times", n)
	}
}
