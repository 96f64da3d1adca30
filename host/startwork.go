package host

import (
	"slices"

	"github.com/ahpd/ahpd/grants"
)

// StartChoices is what a form that starts a session offers a person
// before they send it (the dashboard's New session form): the host
// still checks everything createSession is given.
type StartChoices struct {
	// Roots are the allowed roots the person is held to, in the order
	// the host was given them; none when they are held to none.
	Roots []string
	// DefaultFolder is where a session naming no folder works.
	DefaultFolder string
	// DefaultProvider is the agent a session naming none runs on; ""
	// when there is none, NoProvider saying why.
	DefaultProvider, NoProvider string
}

// StartChoices answers what p may choose from when starting a session.
func (h *Host) StartChoices(p grants.Principal) StartChoices {
	sc := StartChoices{DefaultFolder: h.opts.DefaultDirectory}
	if h.heldToRoots(p) {
		sc.Roots = slices.Clone(h.roots)
	}
	if name, err := h.defaultProvider(); err != nil {
		sc.NoProvider = err.Error()
	} else {
		sc.DefaultProvider = name
	}
	return sc
}
