package host

import (
	"context"
	"encoding/json"
	"fmt"

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
	data, unused, err := s.unusedRecord()
	if !unused || err != nil {
		return err
	}
	var rec record
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
	h.bus.AtLeast(rc.newest)
	ns, err := h.restore(&rec, rc)
	if err != nil {
		return err
	}
	if !h.replaceSession(s, ns) {
		return nil // changed meanwhile: left to whoever changed it
	}
	h.marks.note(ns.uri, rc.mark.ServerSeq, rc.mark.Seq)
	h.endCutTurns([]*session{ns}, map[*session]bool{ns: rc.stale})
	return nil
}

// unusedLocked reports whether nothing here uses the session: asleep, no
// client pinning it, not falling asleep, made and not disposed of. Such a
// copy may be made again from elsewhere (fresh, recordChanged), and its
// lease given up (releaseUnused).
func (s *session) unusedLocked() bool {
	return s.asleep && s.pins == 0 && s.falling == nil && !s.provisional && !s.disposed
}

// replaceSession puts ns in the place of old (nil: a session new here),
// unless the host's copy changed meanwhile; old is marked disposed, so
// whoever still has it does nothing with it.
// unusedRecord encodes the session's record, when nothing holds the
// session: a copy of its own for a new copy to be made from, as the old
// copy's chat records stay the old copy's.
func (s *session) unusedRecord() (data []byte, unused bool, err error) {
	s.mu.Lock()
	defer s.unlock()
	if !s.unusedLocked() {
		return nil, false, nil
	}
	data, err = json.Marshal(&s.rec)
	return data, true, err
}

func (h *Host) replaceSession(old, ns *session) bool {
	h.mu.Lock()
	if h.sessions[ns.id] != old {
		h.mu.Unlock()
		return false
	}
	h.sessions[ns.id] = ns
	for _, cr := range ns.rec.Chats {
		if cu, err := protocol.ParseChatURI(cr.URI); err == nil && cu.Session != ns.uri {
			h.homes[cr.URI] = ns.id // a chat moved into it
		}
	}
	h.mu.Unlock()
	if old != nil {
		h.order.remove(old)
		old.markDisposed()
	}
	h.order.add(ns, ns.summary.ModifiedAt)
	return true
}

// markDisposed marks the session disposed of, so that whoever still has it
// does nothing with it.
func (s *session) markDisposed() {
	s.mu.Lock()
	defer s.unlock()
	s.disposed = true
}
