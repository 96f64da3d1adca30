package host

import (
	"context"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// A host sharing sessions appends to a session's journal only while its
// claim of the session is the newest (journal.Claim, made as it takes the
// lease): a holder frozen past its lease and woken after another host
// took the session over is refused by the journal's server, not by its
// own clock. What it refuses is not sent (publish), and the session
// stops here at once: fencedOut.

// claimFirst claims a session this host holds in the journal before its
// first append, when taking it could not (the host had no copy of it yet:
// one being made here, or made later from another host's record). A
// claim that fails leaves the append unfenced, and the journal's trouble
// to the append.
//
// A host that loses a session's lease keeps its claim: what it still
// appends (the ends of the turns it stops) is refused once another host
// claimed the session, and taken while none did.
func (h *Host) claimFirst(ctx context.Context, uri string) {
	if h.cluster == nil {
		return // every publish comes here: a host alone goes no further
	}
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return // root's journal, which no one holds
	}
	if _, ok := h.unclaimed.LoadAndDelete(su.ID); !ok || !h.cluster.Holds(su.ID) {
		return
	}
	if _, err := h.opts.Journal.Claim(ctx, uri, h.hostName()); err != nil {
		h.log.Warn("could not claim a session in the journal; its appends go unfenced", "session", uri, "err", err)
		return
	}
	h.fenced.Delete(uri)
}

// fencedOut stops a session here whose append the journal refused, once
// until this host claims it again: its lease is let go, its turns end
// here (their ends are refused too, and go nowhere), and the connections
// watching it here are cut with a reason saying it moved, so that their
// clients reconnect and follow it where it runs now (a reconnect is sent
// snapshots: what they saw here of it since the other host took it was
// never its).
func (h *Host) fencedOut(uri string) {
	if _, already := h.fenced.LoadOrStore(uri, true); already {
		return
	}
	su, err := protocol.ParseSessionURI(uri)
	if err != nil || h.cluster == nil {
		return
	}
	s := h.byID(su.ID)
	if s == nil {
		return
	}
	h.log.Warn("the journal refused this host's append of a session another host took over; it stops here", "session", uri)
	channels := append([]string{uri}, s.ChatOrder()...)
	cut := map[*conn.Conn]bool{}
	for _, ch := range channels {
		for _, sub := range h.bus.Drop(ch) {
			c := sub.(*conn.Conn)
			c.Forget(ch)
			cut[c] = true
		}
	}
	h.mu.Lock()
	for c := range cut {
		if cl := h.clients[c.Client()]; cl != nil {
			cl.moved = true
		}
	}
	h.mu.Unlock()
	for c := range cut {
		c.Cut(conn.CloseNormal, "moved: another host runs session "+uri+" now; reconnect")
	}
	id := s.ID()
	h.wg.Go(func() { h.cluster.Fenced(id) })
}
