package host

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// Agents: root's list of the backends, kept current. A backend's models
// may change once it has run (an ACP agent reports its own), and a backend
// that cannot run is listed as unavailable with its error until a later
// start succeeds. Neither stops the host.

// unavailableMeta is the _meta key of an unavailable agent's error.
const unavailableMeta = "ahpd.unavailable"

// checkBackends asks every backend that can tell whether it can run.
func (h *Host) checkBackends() {
	for _, p := range h.opts.Backends.Providers() {
		b, _ := h.opts.Backends.Get(p)
		c, ok := b.(plugins.Checker)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		if err := c.Check(ctx); err != nil {
			h.log.Warn("an agent is unavailable", "provider", p, "err", err)
			h.unavailable[p] = err.Error()
		}
		cancel()
	}
}

// agentsLocked returns root's list of agents as the backends describe them
// now. The caller holds rootMu.
func (h *Host) agentsLocked() []protocol.AgentInfo {
	infos := h.opts.Backends.Infos()
	for i, info := range infos {
		if info.ProtectedResources == nil {
			// An agent that needs no sign-in says so: without the member,
			// VS Code asks signed-out people to sign in to Copilot first.
			info.ProtectedResources = []protocol.ProtectedResourceMetadata{}
			infos[i] = info
		}
		why, ok := h.unavailable[info.Provider]
		if !ok {
			continue
		}
		info.Description = "Unavailable: " + why
		meta, _ := json.Marshal(map[string]string{unavailableMeta: why})
		info.Extra = protocol.Object{"_meta": meta}
		infos[i] = info
	}
	return infos
}

// backendStarted records how a backend's last start went, and publishes
// root/agentsChanged when that or what the backend says of itself changed.
func (h *Host) backendStarted(provider string, err error) {
	h.rootMu.Lock()
	defer h.unlockRoot()
	why, was := h.unavailable[provider]
	switch {
	case plugins.IsUnavailable(err):
		if !was || why != err.Error() {
			h.log.Warn("an agent is unavailable", "provider", provider, "err", err)
		}
		h.unavailable[provider] = err.Error()
	case err == nil && was:
		h.log.Info("an agent is available again", "provider", provider)
		delete(h.unavailable, provider)
	}
	agents := h.agentsLocked()
	if session.SameJSON(agents, h.root.Agents) {
		return
	}
	h.applyRootLocked(&protocol.RootAgentsChangedAction{Agents: agents}, nil)
}
