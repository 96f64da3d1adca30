package host

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ahpd/ahpd/protocol"
)

// The provider of a session whose maker names none is the daemon's to
// choose (Options.DefaultProvider): it knows which backends are real
// agents and which can run here. The host asks it each time, so an agent
// installed, or gone, since the start counts at once.

// defaultProvider is the provider a session naming none runs on, or why
// there is none.
func (h *Host) defaultProvider() (string, error) {
	if h.opts.DefaultProvider == nil {
		names := h.opts.Backends.Providers()
		if len(names) == 0 {
			return "", errors.New("this host has no agents")
		}
		return names[0], nil
	}
	p, err := h.opts.DefaultProvider()
	if err != nil {
		return "", err
	}
	if _, ok := h.opts.Backends.Get(p); !ok {
		return "", fmt.Errorf("the default provider %s is not on this host (it has %s)", protocol.Quote(p), strings.Join(h.opts.Backends.Providers(), ", "))
	}
	return p, nil
}

// checkDefaultFor refuses an automation's session template that names no
// provider when there is no default to run it on, as the automation is
// made or its template changed: refused then, not at its first run.
func (h *Host) checkDefaultFor(tmpl protocol.AutomationSessionTemplate) error {
	if tmpl.Provider != nil && *tmpl.Provider != "" {
		return nil // checkAutomationPlaces checks it
	}
	_, err := h.defaultProvider()
	return err
}
