package deltalog

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// NameKey returns the key under which Delta matches a column name: two names denote the
// same column exactly when their keys are equal, that is when strings.EqualFold holds
// for their Unicode NFC forms (Delta resolves column names case-insensitively, keeping
// the table's spelling). Each rune of the NFC form is replaced by the smallest rune of
// its simple case-folding orbit, so "ſ" (U+017F), "s" and "S" share a key, as do "K"
// (U+212A KELVIN SIGN), "k" and "K".
//
// Use it for every comparison of column names (schema diff and evolution, decoding,
// ALTER, statistics and partition column lists); field paths compare segment by segment
// or as dotted strings, which keep their dots.
func NameKey(name string) string {
	n := norm.NFC.String(name)
	var b strings.Builder
	b.Grow(len(n))
	for _, r := range n {
		low := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			low = min(low, f)
		}
		b.WriteRune(low)
	}
	return b.String()
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
