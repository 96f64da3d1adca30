package pluginstest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WaitForPID waits up to ten seconds for a command to write its pid, and
// a newline, to path, and returns it. It fails the test if none comes.
func WaitForPID(t testing.TB, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		return pid
	}
	t.Fatal("the command wrote no pid")
	return 0
}
