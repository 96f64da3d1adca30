package host

import "errors"

// Ready reports whether the host takes work: its sessions are loaded (New
// returned), it is not closing, and its journal, when it keeps one, takes
// appends. The error says which part is not, in words that reveal
// nothing else, for a readiness probe.
func (h *Host) Ready() error {
	h.mu.Lock()
	closing := h.closing
	h.mu.Unlock()
	switch {
	case closing:
		return errors.New("shutting down")
	case h.health.trouble.Load() != nil:
		return errors.New("the journal does not take appends")
	}
	return nil
}
