package host

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
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
// cannot be resumed never falls asleep of itself; suspend lets them go.

// sleep lets the session's agents go and, with unload, drops its turns.
// It does nothing, and reports false, when the session is not idle, is
// pinned by a client, or (with unload) is watched, or, unless force (a
// client suspends it), when an agent could not be resumed later.
func (h *Host) sleep(s *session.Session, unload, force bool) bool {
	chats := s.ChatOrder()
	// Only a client pinning the session subscribes to it, and none can
	// while it falls asleep: a session not watched now stays so.
	if unload && s.Watched(chats) {
		return false
	}
	entries, falling := s.StartFalling(chats)
	if falling == nil {
		return false
	}
	// No client can pin the session until falling is closed, so nothing
	// starts a turn, loads turns or subscribes while the agents go.
	defer func() {
		s.ClearFalling()
		close(falling)
	}()
	for _, e := range entries {
		if !force && !e.Chat().CanLetGo() {
			return false
		}
	}
	for _, e := range entries {
		if err := e.Chat().Close(); err != nil {
			h.log.Warn("an agent did not close cleanly", "chat", e.Record().URI, "err", err)
		}
	}
	if unload && (s.Watched(chats) || !s.Unload(entries)) {
		return false
	}
	h.log.Debug("session asleep", "session", s.URI(), "turnsDropped", unload)
	return true
}

// poke asks for a residency check soon.
func (h *Host) poke() {
	select {
	case h.pokes <- struct{}{}:
	default:
	}
}

// keepResidency runs the host's tick (upkeep, then residency) when poked,
// and at least every SleepAfter/2 by the host's clock (a minute when that is longer or off).
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
		h.tick(began)
		if h.opts.residencyPassed != nil {
			h.opts.residencyPassed(began)
		}
	}
}

// tick is the host's periodic work, at now by its clock: the upkeep of
// what clients and other hosts left behind, then residency.
func (h *Host) tick(now time.Time) {
	for _, task := range h.upkeep() {
		task.run(now)
	}
	h.balance(now)
}

// upkeepTask is one task of the host's periodic upkeep.
type upkeepTask struct {
	name string // what it keeps, for a reader of the list
	run  func(now time.Time)
}

// upkeep is what each tick keeps, in order, before residency.
func (h *Host) upkeep() []upkeepTask {
	tasks := []upkeepTask{
		{"clients away too long", h.forgetClients}, // clients.go
	}
	if h.cluster != nil {
		// Mirrors nobody watches, relays of connections gone quiet, leases
		// of sessions nobody uses, and the schedules' lease.
		tasks = append(tasks, upkeepTask{"what sharing sessions leaves behind", h.cluster.Upkeep}) // host/shared
	}
	return tasks
}

// balance puts quiet sessions to sleep and keeps the residency limit.
func (h *Host) balance(now time.Time) {
	var live []session.Resident
	for _, s := range h.sessionList() {
		// Most of a large host's sessions are asleep, and a check runs as
		// every turn ends: one asleep is passed over without its lock.
		if !s.Awake() {
			continue
		}
		if r, ok := s.AsResident(); ok {
			live = append(live, r)
		}
	}
	kept := live[:0]
	for _, r := range live {
		quiet := h.opts.SleepAfter > 0 && now.Sub(r.Quiet) >= h.opts.SleepAfter
		if (quiet || r.Archived) && h.sleep(r.S, true, false) {
			continue
		}
		kept = append(kept, r)
	}
	limit := h.opts.ResidencyLimit
	if limit <= 0 || len(kept) <= limit {
		return
	}
	slices.SortFunc(kept, func(a, b session.Resident) int { return cmp.Compare(a.Used.UnixNano(), b.Used.UnixNano()) })
	over := len(kept) - limit
	for _, r := range kept {
		if over == 0 {
			break
		}
		if h.sleep(r.S, true, false) {
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
func (h *Host) status(c *conn.Conn, uri string) (string, error) {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return "", &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	h.mu.Lock()
	s := h.sessions[su.ID]
	h.mu.Unlock()
	if s != nil && c != nil && !s.VisibleTo(c) {
		s = nil
	}
	if s == nil {
		// A session only the catalogue knows is known, and not in memory.
		if p := su.Provider(); p != "" {
			if _, ok := h.ext.Lookup(p, su.ID); ok {
				return "inactive", nil
			}
		}
		return "", &protocol.Error{Code: protocol.CodeProviderNotFound, Message: "no session " + protocol.Quote(uri),
			Data: map[string]string{"sessionId": su.ID}}
	}
	if s.Awake() {
		return "active", nil
	}
	return "inactive", nil
}

// suspend puts a session to sleep now, as ahpd/suspendSession asks. A turn
// waiting on somebody is interrupted first; a running turn is refused as
// busy, or left alone with ifIdle.
func (h *Host) suspend(ctx context.Context, s *session.Session, ifIdle bool) error {
	asleep, waiting, busy := s.CancelWaiting()
	if asleep {
		return nil
	}
	if busy && len(waiting) == 0 {
		if ifIdle {
			return nil
		}
		return protocol.Errorf(protocol.CodeTurnInProgress, "session %s is running a turn: cancel it before suspending the session", s.URI())
	}
	for _, d := range waiting {
		select {
		case <-d:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// A watched session keeps its turns: its clients hold them too.
	// Asked for, it lets go even an agent that cannot resume: the chat's
	// next turn says the agent does not remember (chats.RestartNote).
	if !h.sleep(s, true, true) && !h.sleep(s, false, true) && !ifIdle {
		return protocol.Errorf(protocol.CodeTurnInProgress, "session %s has work in hand and cannot be suspended now", s.URI())
	}
	return nil
}

// resume starts a sleeping session's agents and returns at once.
func (h *Host) resume(s *session.Session) {
	list := s.MarkResumed()
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
