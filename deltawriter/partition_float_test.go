package deltawriter

import (
	"math"
	"testing"
)

// Java's Double/Float.toString for partition values (Spark writes a double partition
// value 1e7 as "1.0E7"): 1e-7, 1e21, the boundaries of the plain form, and subnormals,
// where Java keeps two digits ("4.9E-324").
func TestJavaFloatStringEdges(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits int
		want string
	}{
		{1e-7, 64, "1.0E-7"}, {1e21, 64, "1.0E21"}, {0.001, 64, "0.001"}, {9.999999e-4, 64, "9.999999E-4"},
		{1e7, 64, "1.0E7"}, {9999999.0, 64, "9999999.0"}, {123.456, 64, "123.456"}, {-0.05, 64, "-0.05"},
		{math.NaN(), 64, "NaN"}, {math.Inf(1), 64, "Infinity"}, {math.Inf(-1), 64, "-Infinity"},
		{float64(float32(0.1)), 32, "0.1"}, {float64(float32(1e10)), 32, "1.0E10"}, {float64(float32(3.4028235e38)), 32, "3.4028235E38"},
		{5e-324, 64, "4.9E-324"}, {float64(math.SmallestNonzeroFloat32), 32, "1.4E-45"}, {math.MaxFloat64, 64, "1.7976931348623157E308"}, {100, 64, "100.0"},
		{float64(float32(1.0e-3)), 32, "0.001"}, {float64(float32(9999999)), 32, "9999999.0"},
	} {
		if got := javaFloatString(c.f, c.bits); got != c.want {
			t.Errorf("javaFloatString(%v,%d) = %q, want %q", c.f, c.bits, got, c.want)
		}
	}
}
