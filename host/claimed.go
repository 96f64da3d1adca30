package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
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
	data, unused, err := s.UnusedRecord()
	if !unused || err != nil {
		return err
	}
	var rec session.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return err
	}
	rc, err := h.recoverSession(ctx, rec.URI)
	if err != nil {
		return fmt.Errorf("reading the journal's tail: %w", err)
	}
	if rc == nil {
		return nil
	}
	// Its changes here are numbered after the other host's.
	h.bus.AtLeast(rc.Newest)
	ns, err := h.restore(&rec, rc)
	if err != nil {
		return err
	}
	if !h.replaceSession(s, ns) {
		return nil // changed meanwhile: left to whoever changed it
	}
	h.marks.note(ns.URI(), rc.Mark.ServerSeq, rc.Mark.Seq)
	h.endCutTurns([]*session.Session{ns}, map[*session.Session]bool{ns: rc.Stale})
	return nil
}

func (h *Host) replaceSession(old, ns *session.Session) bool {
	chats := ns.ChatOrder()
	h.mu.Lock()
	if h.sessions[ns.ID()] != old {
		h.mu.Unlock()
		return false
	}
	h.sessions[ns.ID()] = ns
	for _, chat := range chats {
		if cu, err := protocol.ParseChatURI(chat); err == nil && cu.Session != ns.URI() {
			h.homes[chat] = ns.ID() // a chat moved into it
		}
	}
	h.mu.Unlock()
	if old != nil {
		h.order.Remove(old)
		old.MarkDisposed()
	}
	h.order.Add(ns, ns.CurrentSummary().ModifiedAt)
	return true
}
