package deltalog

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// NameKey returns the key under which Delta matches a column name: two names denote the
// same column exactly when their keys are equal, that is when strings.EqualFold holds
// for their Unicode NFC forms (Delta resolves column names case-insensitively, keeping
// the table's spelling). Each rune of the NFC form is replaced by one fixed member of its
// simple case-folding orbit: its ASCII lower-case letter if it has one, else its smallest
// rune. So "ſ" (U+017F), "s" and "S" share the key "s", and "K" (U+212A KELVIN SIGN), "k"
// and "K" the key "k"; a name of ASCII letters, digits and punctuation gets its ASCII
// lower-case form, without allocating when it has no upper-case letter.
//
// Use it for every comparison of column names (schema diff and evolution, decoding,
// ALTER, statistics and partition column lists); dotted paths keep their dots.
func NameKey(name string) string {
	upper := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= utf8.RuneSelf {
			return foldKey(name)
		}
		upper = upper || ('A' <= c && c <= 'Z')
	}
	if !upper {
		return name
	}
	return strings.ToLower(name) // ASCII only: lower-cases A-Z, nothing else
}

// foldKey is NameKey for a name with a non-ASCII byte.
func foldKey(name string) string {
	n := norm.NFC.String(name)
	var b strings.Builder
	b.Grow(len(n))
	for _, r := range n {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune returns the member of r's simple case-folding orbit that stands for it: the
// ASCII lower-case letter when the orbit has an ASCII letter, else the smallest rune.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	low := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldRune(f)
		}
		low = min(low, f)
	}
	return low
}

// FieldByKey returns the field of s whose name matches name the way Delta matches
// column names (NameKey), or nil. An exact match wins over a case-insensitive one.
func (s *StructType) FieldByKey(name string) *StructField {
	if s == nil {
		return nil
	}
	if f := s.Field(name); f != nil {
		return f
	}
	k := NameKey(name)
	for _, f := range s.Fields {
		if NameKey(f.Name) == k {
			return f
		}
	}
	return nil
}

// invalidNameChars are the characters a column name may not contain without column
// mapping (PROTOCOL.md, "Column Mapping"; Spark's " ,;{}()\n\t=").
const invalidNameChars = " ,;{}()\n\t="

// NeedsColumnMapping reports whether a column name is legal only in a table with column
// mapping (PROTOCOL.md, "Column Mapping"): it contains a space or one of ,;{}()\n\t=.
func NeedsColumnMapping(name string) bool { return strings.ContainsAny(name, invalidNameChars) }
