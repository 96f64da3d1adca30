package host

import (
	"context"
	"encoding/json"
	"fmt"
)

// fresh brings the copy of a session this host has up to date, for a
// session it has just taken: another host may have run it since this one
// last did, and written its journal (and, with records in the cluster,
// its record). A session asleep here with nobody using it is made again
// from its record and its journal's tail, as after a restart, and a turn
// the other host left running ends as cut short. One in use here is
// left as it is.
func (h *Host) fresh(ctx context.Context, id string) error {
	if h.opts.Journal == nil {
		return nil
	}
	s := h.byID(id)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	idle := s.asleep && s.pins == 0 && s.falling == nil && !s.provisional && !s.disposed
	// A copy of its own: the old copy's chat records stay the old copy's.
	data, err := json.Marshal(&s.rec)
	s.unlock()
	if err != nil {
		return err
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return err
	}
	if !idle {
		return nil
	}
	rc, err := h.recoverSession(ctx, rec.URI)
	if err != nil {
		return fmt.Errorf("reading the journal's tail: %w", err)
	}
	if rc == nil {
		return nil
	}
	// Its changes here are numbered after the other host's.
	h.bus.AtLeast(rc.newest)
	ns, err := h.restore(&rec, rc)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if h.sessions[id] != s {
		h.mu.Unlock()
		return nil // changed meanwhile: left to whoever changed it
	}
	h.sessions[id] = ns
	h.mu.Unlock()
	h.order.remove(s)
	h.order.add(ns, ns.summary.ModifiedAt)
	s.mu.Lock()
	s.disposed = true // whoever still has the old copy does nothing with it
	s.unlock()
	h.marks.note(ns.uri, rc.mark.ServerSeq, rc.mark.Seq)
	h.endCutTurns([]*session{ns}, map[*session]bool{ns: rc.stale})
	return nil
}
