package acp

import (
	"time"

	"github.com/ahpd/ahpd/plugins"
)

// AgentPID returns the process id of a running agent.
func AgentPID(a plugins.Agent) int { return a.(*Agent).pid() }

// SetCancelGrace changes how long a cancelled turn waits for the agent.
func SetCancelGrace(b *Backend, d time.Duration) { b.cancelGrace = d }
