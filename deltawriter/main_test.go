package deltawriter

import (
	"os"
	"testing"
)

// TestMain removes the conformance tables extracted for this test binary
// (extractedTestdata): about 28 MB per run, left in the temporary directory before.
func TestMain(m *testing.M) {
	code := m.Run()
	if extractDir != "" {
		_ = os.RemoveAll(extractDir)
	}
	os.Exit(code)
}
