package corpus

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
)

// What the benchmarks that read a corpus measure of the process: its
// memory, from /proc/self/status (Linux).

// ProcStatus returns a /proc/self/status figure (VmRSS, VmHWM, ...) in
// bytes.
func ProcStatus(key string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok || name != key {
			continue
		}
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
			return 0, fmt.Errorf("/proc/self/status %s: %w", key, err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no " + key + " in /proc/self/status")
}

// ResetPeakRSS resets VmHWM to the current RSS, so the next reading is the
// peak since now.
func ResetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
