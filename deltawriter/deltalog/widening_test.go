package deltalog

import "testing"

// The one type-widening table (PROTOCOL.md, "Type Widening"): automatic changes are what
// schema evolution applies, manual ones only ALTER.
func TestWidening(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     WideningKind
	}{
		{"byte", "short", WideningAutomatic},
		{"byte", "long", WideningAutomatic},
		{"short", "integer", WideningAutomatic},
		{"integer", "long", WideningAutomatic},
		{"float", "double", WideningAutomatic},
		{"date", "timestamp_ntz", WideningAutomatic},
		{"decimal(10,2)", "decimal(12,2)", WideningAutomatic},
		{"decimal(10,2)", "decimal(12,4)", WideningAutomatic},
		{"decimal(10,2)", "decimal(11,3)", WideningAutomatic},
		{"byte", "double", WideningManual},
		{"short", "double", WideningManual},
		{"integer", "double", WideningManual},
		{"byte", "decimal(10,0)", WideningManual},
		{"short", "decimal(11,1)", WideningManual},
		{"integer", "decimal(12,2)", WideningManual},
		{"long", "decimal(20,0)", WideningManual},
		{"long", "decimal(21,1)", WideningManual},

		{"long", "long", WideningNone},
		{"decimal(10,2)", "decimal(10,2)", WideningNone},
		{"long", "integer", WideningNone},
		{"long", "double", WideningNone},
		{"double", "float", WideningNone},
		{"float", "long", WideningNone},
		{"integer", "float", WideningNone},
		{"date", "timestamp", WideningNone},
		{"timestamp", "timestamp_ntz", WideningNone},
		{"timestamp_ntz", "date", WideningNone},
		{"string", "binary", WideningNone},
		{"integer", "string", WideningNone},
		{"decimal(10,2)", "decimal(11,2)", WideningAutomatic},
		{"decimal(10,2)", "decimal(10,3)", WideningNone}, // loses an integer digit
		{"decimal(10,2)", "decimal(12,1)", WideningNone}, // loses a fractional digit
		{"decimal(10,0)", "long", WideningNone},
		{"decimal(10,0)", "double", WideningNone},
		{"byte", "decimal(4,1)", WideningNone}, // Delta 3 preview only; Delta 4 refuses such tables
		{"byte", "decimal(9,0)", WideningNone},
		{"integer", "decimal(10,1)", WideningNone},
		{"long", "decimal(20,1)", WideningNone},
		{"long", "decimal(19,0)", WideningNone},
	} {
		from, err1 := ParsePrimitive(tc.from)
		to, err2 := ParsePrimitive(tc.to)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := Widening(from, to); got != tc.want {
			t.Errorf("Widening(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	st := &StructType{Fields: []*StructField{{Name: "a", Type: Integer}}}
	if got := Widening(st, st); got != WideningNone {
		t.Errorf("struct: %v", got)
	}
	if got := Widening(&ArrayType{ElementType: Integer}, &ArrayType{ElementType: Long}); got != WideningNone {
		t.Errorf("array as a whole: %v", got)
	}
}

// CommonDecimal is the least decimal both types widen to: the more integer digits and the
// larger scale of the two, refused past precision 38.
func TestCommonDecimal(t *testing.T) {
	dec := func(p, s int) DecimalType { return DecimalType{Precision: p, Scale: s} }
	for _, tc := range []struct {
		a, b, want DecimalType
		ok         bool
	}{
		{dec(10, 2), dec(10, 4), dec(12, 4), true}, // PostgreSQL numeric(10,2) → numeric(10,4)
		{dec(10, 4), dec(10, 2), dec(12, 4), true},
		{dec(10, 2), dec(14, 2), dec(14, 2), true}, // one widens to the other: that one
		{dec(10, 2), dec(12, 4), dec(12, 4), true},
		{dec(5, 0), dec(5, 5), dec(10, 5), true},
		{dec(38, 0), dec(38, 0), dec(38, 0), true},
		{dec(38, 0), dec(1, 1), DecimalType{}, false}, // 38 integer digits and 1 decimal: 39
		{dec(30, 2), dec(20, 10), dec(38, 10), true},
		{dec(30, 2), dec(20, 11), DecimalType{}, false},
	} {
		got, ok := CommonDecimal(tc.a, tc.b)
		if got != tc.want || ok != tc.ok {
			t.Errorf("CommonDecimal(%v, %v) = %v, %v; want %v, %v", tc.a, tc.b, got, ok, tc.want, tc.ok)
			continue
		}
		for _, from := range []DecimalType{tc.a, tc.b} {
			if ok && from != got && Widening(from, got) != WideningAutomatic {
				t.Errorf("CommonDecimal(%v, %v) = %v, which %v does not widen to", tc.a, tc.b, got, from)
			}
		}
	}
}
