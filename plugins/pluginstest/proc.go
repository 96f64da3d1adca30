package pluginstest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// WaitForPID waits up to ten seconds for a command to write its pid, and
// a newline, to path, and returns it. It fails the test if none comes.
func WaitForPID(t testing.TB, path string) int {
	t.Helper()
	b := WaitFileFor(t, path, 10*time.Second, func(b []byte) bool { return strings.HasSuffix(string(b), "\n") })
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	return pid
}
