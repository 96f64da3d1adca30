package script

import (
	"context"
	"testing"
)

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
