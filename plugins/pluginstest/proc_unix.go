//go:build unix

package pluginstest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
)

// ProcessGone reports whether pid ends, waiting for it up to
// testwait.Hang: a killed process may take a while to go on a loaded
// machine. A killed process nobody has reaped yet is a zombie: it runs no
// more.
func ProcessGone(pid int) bool {
	for deadline := time.Now().Add(testwait.Hang); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err == nil {
			// The state follows the command name in parentheses.
			if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
				return true
			}
		}
	}
	return false
}
