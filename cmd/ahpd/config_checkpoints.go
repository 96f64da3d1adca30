package main

import (
	"fmt"

	"github.com/ahpd/ahpd/checkpoints"
)

// checkpointsConfig is what the daemon does with sessions' checkpoints
// beyond recording them (docs/SESSIONS.md, docs/CLUSTER.md).
type checkpointsConfig struct {
	// Push is the remote every session's checkpoints are pushed to, and
	// fetched from by a host waking a session that lacks them: a remote's
	// name, looked up in each session's repository (origin), or a URL or
	// path. "" pushes nothing.
	Push string `yaml:"push"`
}

// checkCheckpoints refuses a remote git could read as an option, or that
// cannot name one, before anything starts.
func checkCheckpoints(cfg *config) error {
	if cfg.Checkpoints.Push == "" {
		return nil
	}
	if err := checkpoints.CheckRemote(cfg.Checkpoints.Push); err != nil {
		return fmt.Errorf("--push-checkpoints: %w", err)
	}
	return nil
}
