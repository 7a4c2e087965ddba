package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain runs the tests, then stops and removes what the whole binary shares: the one
// Spark helper (startSpark) and the ingestd binary built for the run (ingestdBin).
func TestMain(m *testing.M) {
	code := m.Run()
	stopSpark()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
