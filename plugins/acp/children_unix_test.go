//go:build unix

package acp_test

import (
	"strings"
	"testing"

	"github.com/ahpd/ahpd/plugins/acp"
	"github.com/ahpd/ahpd/plugins/pluginstest"
)

// TestCloseEndsAgentsChildren: what the agent process itself starts and
// leaves running (a tool, a language server) ends when the agent is
// closed, which asks the agent to exit and then kills its group.
func TestCloseEndsAgentsChildren(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)
	// sh records its pid, then becomes sleep under it: the agent's child,
	// holding nothing of the agent's open.
	got := mustPrompt(t, a, `spawn sh -c 'echo $$ > pid; exec sleep 300'`).Response()
	if !strings.HasPrefix(got, "spawned ") {
		t.Fatalf("spawn: %q", got)
	}
	pid := pluginstest.WaitForPID(t, f.path("pid"))
	agentPID := acp.AgentPID(a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !pluginstest.ProcessGone(agentPID) {
		t.Errorf("the agent (pid %d) outlived Close", agentPID)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the agent's child (pid %d) outlived Close", pid)
	}
}
