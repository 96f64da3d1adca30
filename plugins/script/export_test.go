package script

import (
	"context"
	"testing"
	"time"
)

// SetStopGrace changes the time between SIGTERM and SIGKILL for the rest
// of the test; call it before starting an agent.
func SetStopGrace(t *testing.T, d time.Duration) {
	old := stopGrace
	stopGrace = d
	t.Cleanup(func() { stopGrace = old })
}

// SkippedLines returns how many lines of the transcript at path do not
// decode.
func SkippedLines(t *testing.T, path string) int {
	t.Helper()
	_, skipped, err := readTranscript(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return skipped
}
