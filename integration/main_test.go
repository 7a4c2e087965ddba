package integration

import (
	"os"
	"testing"
)

// TestMain runs the tests, then stops what the whole binary shares: the one Spark helper
// (startSpark).
func TestMain(m *testing.M) {
	code := m.Run()
	stopSpark()
	os.Exit(code)
}
