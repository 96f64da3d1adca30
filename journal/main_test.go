package journal

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(appenderEnv); dir != "" {
		// This process is the appender TestKillKeepsAckedEntries kills.
		runAppender(dir)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
