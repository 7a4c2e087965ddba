package deltalog

import (
	"strings"
	"testing"
	"time"
)

// GenerationTimeZone: UTC without the property, the named IANA zone with it, and an error
// naming the property and its value for an empty value, "Local" and an unknown name.
func TestGenerationTimeZone(t *testing.T) {
	if loc, err := GenerationTimeZone(nil); err != nil || loc != time.UTC {
		t.Fatalf("no property: %v, %v; want UTC", loc, err)
	}
	if loc, err := GenerationTimeZone(map[string]string{PropGenerationTimeZone: "Australia/Melbourne"}); err != nil || loc.String() != "Australia/Melbourne" {
		t.Fatalf("Australia/Melbourne: %v, %v", loc, err)
	}
	for _, v := range []string{"", "Local", "local", "Mars/Olympus"} {
		_, err := GenerationTimeZone(map[string]string{PropGenerationTimeZone: v})
		if err == nil || !strings.Contains(err.Error(), `ingestd.generation.timeZone="`+v+`"`) {
			t.Errorf("%q: error %v, want one naming the property and the value", v, err)
		}
	}
}
