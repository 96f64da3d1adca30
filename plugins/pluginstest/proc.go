package pluginstest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/internal/testwait"
)

// WaitForPID waits for a command to write its pid, and a newline, to path,
// and returns it. It fails the test if none comes (testwait.Hang).
func WaitForPID(t testing.TB, path string) int {
	t.Helper()
	b := WaitFileFor(t, path, testwait.Hang, func(b []byte) bool { return strings.HasSuffix(string(b), "\n") })
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	return pid
}
