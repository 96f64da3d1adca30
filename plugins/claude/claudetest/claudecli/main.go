// Command claudecli prints the path of the Claude Code CLI the tests run,
// installing the pinned version first if it is missing: what
// claudetest.CLI does for a test, for .ci/run to do up front.
package main

import (
	"fmt"
	"os"

	"github.com/ahpd/ahpd/plugins/claude/claudetest"
)

func main() {
	path, err := claudetest.FindCLI()
	if err != nil {
		fmt.Fprintln(os.Stderr, "claudecli:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
