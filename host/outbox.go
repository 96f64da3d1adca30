package host

import (
	"github.com/ahpd/ahpd/host/outbox"
)

// outboxes is the host as the sink of its outboxes (package outbox): a
// type of its own, so that Host's exported methods stay the host's API.
type outboxes Host

func (h *Host) outboxes() *outboxes { return (*outboxes)(h) }

// Publish sends a run of actions to the bus, written down first in the
// journal named (journal.go).
func (o *outboxes) Publish(journal string, run []outbox.Effect) int64 {
	return (*Host)(o).publish(journal, run)
}

// Go runs fn on a goroutine Close waits for.
func (o *outboxes) Go(fn func()) { o.wg.Go(fn) }

// unlockRoot lets root's lock go and hands on what its changes queued.
func (h *Host) unlockRoot() { outbox.Release(&h.rootMu, h.rootOut, h.outboxes()) }
