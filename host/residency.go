package host

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/protocol"
)

// Sleep and residency.
//
// A session is resident while it runs an agent or the host holds its
// chats' turns. An idle session is let go after Options.SleepAfter of
// quiet, and when more than Options.ResidencyLimit sessions are resident
// the least recently used go first: its agents are closed (their
// conversations stay with the backend) and its turns dropped (they come
// back from the transcript). A session that sleeps keeps its place in the
// catalogue, its chats and its config; anything that needs it wakes it.
//
// Quiet means nothing in hand: no turn running or waiting on somebody, no
// pending message, no background work, no client subscribed to the session
// or a chat of it, and no action for SleepAfter. A session whose agents
// cannot be resumed never sleeps.

// markUsedLocked records a use of the session, for the LRU order.
func (s *session) markUsedLocked() {
	s.used = s.h.now()
	s.setAwakeLocked(true)
}

func (s *session) setAwakeLocked(awake bool) {
	s.asleep = !awake
	s.awake.Store(awake)
}

// idleLocked reports whether the session has nothing in hand.
func (s *session) idleLocked() bool {
	if s.disposed || s.provisional || len(s.busy) > 0 {
		return false
	}
	for _, e := range s.chats {
		if !e.chat.Idle() {
			return false
		}
	}
	return true
}

// watchedLocked reports whether a client watches the session or a chat.
func (s *session) watchedLocked() bool {
	if s.h.bus.subscribers(s.uri) > 0 {
		return true
	}
	for uri := range s.chats {
		if s.h.bus.subscribers(uri) > 0 {
			return true
		}
	}
	return false
}

// sleep lets the session's agents go and, with unload, drops its turns.
// It does nothing, and reports false, when the session is not idle, is
// being woken, or has an agent that cannot be resumed.
func (h *Host) sleep(s *session, unload bool) bool {
	if !s.transit.TryLock() {
		return false // a client is using it right now
	}
	defer s.transit.Unlock()
	s.mu.Lock()
	if s.asleep || !s.idleLocked() || (unload && s.watchedLocked()) {
		s.mu.Unlock()
		return false
	}
	entries := make([]*chatEntry, 0, len(s.order))
	for _, uri := range s.order {
		entries = append(entries, s.chats[uri])
	}
	s.mu.Unlock()
	for _, e := range entries {
		if !e.chat.CanLetGo() {
			return false
		}
	}
	for _, e := range entries {
		if err := e.chat.Close(); err != nil {
			h.log.Warn("an agent did not close cleanly", "chat", e.rec.URI, "err", err)
		}
	}
	if unload {
		for _, e := range entries {
			e.loadMu.Lock()
		}
		s.mu.Lock()
		for _, e := range entries {
			cs := *e.chat.State()
			cs.Turns, cs.TurnsNextCursor = []protocol.Turn{}, nil
			e.chat.SetState(&cs)
			e.loaded = false
		}
		s.setAwakeLocked(false)
		channels := map[string]bool{s.uri: true}
		for _, e := range entries {
			channels[e.rec.URI] = true
		}
		s.mu.Unlock()
		for _, e := range entries {
			e.loadMu.Unlock()
		}
		h.bus.forget(channels)
		h.metrics.unloaded.Add(1) // its heap is garbage now (memory.go)
	}
	h.log.Debug("session asleep", "session", s.uri, "turnsDropped", unload)
	return true
}

// wake readies a sleeping session for a client: the caller holds
// s.transit for reading until it is done, so the session cannot fall
// asleep under it.
func (s *session) wake() {
	s.mu.Lock()
	s.markUsedLocked()
	s.mu.Unlock()
	s.h.poke()
}

// poke asks for a residency check soon.
func (h *Host) poke() {
	select {
	case h.pokes <- struct{}{}:
	default:
	}
}

// keepResidency runs residency checks when poked, and at least every
// SleepAfter/2 by the host's clock (a minute when that is longer or off).
// Each next timer is set from when the last check began (from start for
// the first), so a clock moved on during a check fires the next at once.
func (h *Host) keepResidency(start time.Time) {
	defer h.wg.Done()
	every := time.Minute
	if d := h.opts.SleepAfter / 2; d > 0 && d < every {
		every = max(d, 10*time.Millisecond)
	}
	began := start
	for {
		due, stop := h.opts.Clock.At(began.Add(every))
		select {
		case <-h.ctx.Done():
			stop()
			return
		case <-due:
		case <-h.pokes:
		}
		stop()
		began = h.now()
		h.balance()
		if h.opts.residencyPassed != nil {
			h.opts.residencyPassed(began)
		}
	}
}

// resident is a session in the residency count, with what orders it.
type resident struct {
	s        *session
	used     time.Time
	quiet    time.Time
	archived bool
}

// balance puts quiet sessions to sleep and keeps the residency limit.
func (h *Host) balance() {
	now := h.now()
	h.forgetClients(now)
	var live []resident
	for _, s := range h.sessionList() {
		s.mu.Lock()
		if !s.asleep && !s.provisional && !s.disposed {
			// Woken counts as used: a session resumed a moment ago is not
			// quiet, however long ago its last action was.
			quiet := s.lastAction
			if s.used.After(quiet) {
				quiet = s.used
			}
			live = append(live, resident{s, s.used, quiet, s.state.Status&protocol.StatusIsArchived != 0})
		}
		s.mu.Unlock()
	}
	kept := live[:0]
	for _, r := range live {
		quiet := h.opts.SleepAfter > 0 && now.Sub(r.quiet) >= h.opts.SleepAfter
		if (quiet || r.archived) && h.sleep(r.s, true) {
			continue
		}
		kept = append(kept, r)
	}
	limit := h.opts.ResidencyLimit
	if limit <= 0 || len(kept) <= limit {
		return
	}
	slices.SortFunc(kept, func(a, b resident) int { return cmp.Compare(a.used.UnixNano(), b.used.UnixNano()) })
	over := len(kept) - limit
	for _, r := range kept {
		if over == 0 {
			break
		}
		if h.sleep(r.s, true) {
			over--
		}
	}
}

// Status answers the side-effect-free probe: "active" when the session is
// in memory, "inactive" when it is known but asleep. It loads, wakes and
// changes nothing, and allocates nothing for a known session.
func (h *Host) Status(uri string) (string, error) { return h.status(nil, uri) }

// status is Status as c may know it: another client's provisional session
// is unknown to it.
func (h *Host) status(c *conn, uri string) (string, error) {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return "", &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	h.mu.Lock()
	s := h.sessions[su.ID]
	h.mu.Unlock()
	if s != nil && c != nil && !s.visibleTo(c) {
		s = nil
	}
	if s == nil {
		// A session only the catalogue knows is known, and not in memory.
		if p := su.Provider(); p != "" && h.cat != nil {
			if _, ok := h.cat.Lookup(p, su.ID); ok {
				return "inactive", nil
			}
		}
		return "", &protocol.Error{Code: protocol.CodeProviderNotFound, Message: "no session " + protocol.Quote(uri),
			Data: map[string]string{"sessionId": su.ID}}
	}
	if s.awake.Load() {
		return "active", nil
	}
	return "inactive", nil
}

// suspend puts a session to sleep now, as ahpd/suspendSession asks. A turn
// waiting on somebody is interrupted first; a running turn is refused as
// busy, or left alone with ifIdle.
func (h *Host) suspend(ctx context.Context, s *session, ifIdle bool) error {
	s.mu.Lock()
	if s.asleep {
		s.mu.Unlock()
		return nil
	}
	var waiting []<-chan struct{}
	busy := false
	for _, e := range s.chats {
		switch {
		case e.chat.Waiting():
			waiting = append(waiting, e.chat.Cancel())
		case !e.chat.Idle():
			busy = true
		}
	}
	if busy && len(waiting) == 0 {
		s.mu.Unlock()
		if ifIdle {
			return nil
		}
		return protocol.Errorf(protocol.CodeTurnInProgress, "session %s is running a turn: cancel it before suspending the session", s.uri)
	}
	s.mu.Unlock()
	for _, d := range waiting {
		select {
		case <-d:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// A watched session keeps its turns: its clients hold them too.
	if !h.sleep(s, true) && !h.sleep(s, false) && !ifIdle {
		return protocol.Errorf(protocol.CodeTurnInProgress, "session %s has work in hand and cannot be suspended now", s.uri)
	}
	return nil
}

// resume starts a sleeping session's agents and returns at once.
func (h *Host) resume(s *session) {
	s.mu.Lock()
	s.markUsedLocked()
	list := make([]*chats.Chat, 0, len(s.chats))
	for _, e := range s.chats {
		list = append(list, e.chat)
	}
	s.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for _, c := range list {
			if err := c.Warm(h.ctx); err != nil {
				h.log.Warn("could not resume a chat", "chat", c.URI(), "err", err)
			}
		}
	}()
	h.poke()
}
