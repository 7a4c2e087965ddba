package deltawriter

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// The integer → decimal widenings of PROTOCOL.md "Type Widening": byte, short and int
// need decimal(10+k1, k2), long decimal(20+k1, k2), with k1 >= k2 >= 0.
func TestWideningIntegerToDecimal(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"byte", "decimal(4,1)", false}, // Delta 3 preview only; Delta 4 refuses such tables
		{"byte", "decimal(9,0)", false},
		{"byte", "decimal(10,0)", true},
		{"short", "decimal(6,1)", false},
		{"short", "decimal(11,1)", true},
		{"short", "decimal(11,2)", false},
		{"integer", "decimal(11,1)", true},
		{"integer", "decimal(10,1)", false},
		{"long", "decimal(21,1)", true},
		{"long", "decimal(20,1)", false},
		{"long", "decimal(19,0)", false},
	} {
		from, _ := deltalog.ParsePrimitive(tc.from)
		to, _ := deltalog.ParsePrimitive(tc.to)
		if got := deltalog.Widening(from, to) != deltalog.WideningNone; got != tc.ok {
			t.Errorf("%s → %s: %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
}

func TestCheckWritableTypeChanges(t *testing.T) {
	schema := func(changes string) *deltalog.StructType {
		s, err := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},
			{"name":"m","type":{"type":"map","keyType":"string","valueType":"decimal(12,1)","valueContainsNull":true},"nullable":true,
			 "metadata":{"delta.typeChanges":` + changes + `}}]}`)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	p := UpgradeProtocol(deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, "typeWidening")
	m := &deltalog.Metadata{ID: "x", Configuration: map[string]string{deltalog.PropEnableTypeWidening: "true"}}
	ok := `[{"fromType":"integer","toType":"decimal(11,1)","fieldPath":"value"},{"fromType":"decimal(11,1)","toType":"decimal(12,1)","fieldPath":"value"}]`
	if err := checkWritable(&p, m, schema(ok)); err != nil {
		t.Errorf("valid widenings refused: %v", err)
	}
	for _, tc := range []struct{ changes, want string }{
		{`[{"fromType":"short","toType":"decimal(6,1)","fieldPath":"value"}]`, `column "m (value)" recorded the type change short → decimal(6,1)`},
		{`[{"fromType":"long","toType":"integer"}]`, `recorded the type change long → integer`},
		{`[{"fromType":"nonsense","toType":"long"}]`, `entry`},
		{`{"fromType":"integer","toType":"long"}`, `not a list`},
	} {
		err := checkWritable(&p, m, schema(tc.changes))
		if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrUnsupportedFeature containing %q", tc.changes, err, tc.want)
		}
	}
}

// delta-kernel-rs' type-widening table comes from Delta 3.3's preview and records
// byte → decimal(4,1): ingestd refuses to write it, naming the column.
func TestCheckWritableGoldenTypeWidening(t *testing.T) {
	s, err := openGolden(filepath.Join(kernelTestdata(t), "data", "type-widening"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckWritable()
	if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), `column "byte_decimal" recorded the type change byte → decimal(4,1)`) {
		t.Errorf("CheckWritable = %v, want the byte_decimal type change refused", err)
	}
}
