package host

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/host/conn"
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

// markUsedLocked records a use of the session, for the LRU order.
func (s *session) markUsedLocked() {
	s.used = s.h.now()
	if s.asleep && s.h.opts.Journal != nil {
		s.out.Later(func() { s.h.writeResidency(s.uri, "wake") })
	}
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

// watched reports whether a client watches the session or a chat. It
// asks the bus, so it is called without s.mu; chats lists the session's
// chat URIs.
func (s *session) watched(chats []string) bool {
	if s.h.bus.Subscribers(s.uri) > 0 {
		return true
	}
	for _, uri := range chats {
		if s.h.bus.Subscribers(uri) > 0 {
			return true
		}
	}
	return false
}

// sleep lets the session's agents go and, with unload, drops its turns.
// It does nothing, and reports false, when the session is not idle, is
// pinned by a client, or (with unload) is watched, or, unless force (a
// client suspends it), when an agent could not be resumed later.
func (h *Host) sleep(s *session, unload, force bool) bool {
	chats := s.chatOrder()
	// Only a client pinning the session subscribes to it, and none can
	// while it falls asleep: a session not watched now stays so.
	if unload && s.watched(chats) {
		return false
	}
	entries, falling := s.startFalling(chats)
	if falling == nil {
		return false
	}
	// No client can pin the session until falling is closed, so nothing
	// starts a turn, loads turns or subscribes while the agents go.
	defer func() {
		s.clearFalling()
		close(falling)
	}()
	for _, e := range entries {
		if !force && !e.chat.CanLetGo() {
			return false
		}
	}
	for _, e := range entries {
		if err := e.chat.Close(); err != nil {
			h.log.Warn("an agent did not close cleanly", "chat", e.rec.URI, "err", err)
		}
	}
	if unload && (s.watched(chats) || !s.unload(entries)) {
		return false
	}
	h.log.Debug("session asleep", "session", s.uri, "turnsDropped", unload)
	return true
}

// chatOrder is a copy of the session's chat URIs in order: sleep asks the
// bus whether they are watched holding no lock, and checks again under it
// that they have not changed meanwhile.
func (s *session) chatOrder() []string {
	s.mu.Lock()
	defer s.unlock()
	return slices.Clone(s.order)
}

// startFalling marks the session as falling asleep, so that no client
// pins it while its agents go, and returns its chats in order with the
// channel pins wait on, which sleep closes when done. It returns a nil
// channel, and marks nothing, when the session is pinned, falling asleep
// or asleep already, not idle, or has chats other than those sleep found
// unwatched.
func (s *session) startFalling(chats []string) ([]*chatEntry, chan struct{}) {
	s.mu.Lock()
	defer s.unlock()
	if s.pins > 0 || s.falling != nil || s.asleep || !s.idleLocked() || !slices.Equal(chats, s.order) {
		return nil, nil
	}
	entries := make([]*chatEntry, 0, len(s.order))
	for _, uri := range s.order {
		entries = append(entries, s.chats[uri])
	}
	falling := make(chan struct{})
	s.falling = falling
	return entries, falling
}

// clearFalling ends what startFalling began: pins that came meanwhile
// wait for the channel to be closed, which the caller does after.
func (s *session) clearFalling() {
	s.mu.Lock()
	s.falling = nil
	s.unlock()
}

// unload drops the turns of a session whose agents have gone, and the
// replay of its channels. It reports false when a change came in while the
// agents were closing (a background task), and keeps the turns.
//
// With a journal, the turns go once a restart point holds them (or says
// where they are), so that they come back from the journal as clients saw
// them (turntrack.go); a session woken meanwhile keeps them. Without one
// they go at once, and come back from the backend's transcript.
func (s *session) unload(entries []*chatEntry) bool {
	s.mu.Lock()
	if !s.idleLocked() {
		s.unlock()
		return false
	}
	channels := map[string]bool{s.uri: true}
	for _, e := range entries {
		channels[e.rec.URI] = true
	}
	s.setAwakeLocked(false)
	s.sleeps++
	if s.h.opts.Journal == nil {
		for _, e := range entries {
			e.chat.ForgetTurns()
			e.loaded = false
		}
	} else {
		sleeps := s.sleeps
		s.queueRestartPointLocked("", nil, func(turnsAt map[*chatEntry]uint64) {
			if s.sleeps == sleeps && s.asleep {
				s.forgetTurnsLocked(turnsAt)
			}
		})
		s.out.Later(func() { s.h.writeResidency(s.uri, "sleep") })
	}
	s.unlock()
	s.h.letGo(s.id) // asleep, it may wake on any host
	s.h.bus.Forget(channels)
	s.h.metrics.unloaded.Add(1) // its heap is garbage now (memory.go)
	return true
}

// forgetTurnsLocked drops the finished turns of the session's chats whose
// turns the journal holds where turnsAt says. Called with s.mu held.
func (s *session) forgetTurnsLocked(turnsAt map[*chatEntry]uint64) {
	for e, at := range turnsAt {
		if at != 0 && e.loaded && e.rec.TurnsAt == at && e.chat.Idle() {
			e.chat.ForgetTurns()
			e.loaded = false
		}
	}
}

// pin keeps the session from falling asleep until unpin, waiting for one
// falling asleep now to finish. With wake, it counts as a use of the
// session: it is not quiet, and a sleeping one is readied for the client.
func (s *session) pin(wake bool) {
	s.mu.Lock()
	for s.falling != nil {
		falling := s.falling
		s.unlock()
		<-falling
		s.mu.Lock()
	}
	s.pins++
	if wake {
		s.markUsedLocked()
	}
	s.unlock()
	if wake {
		s.h.poke()
	}
}

func (s *session) unpin() {
	s.mu.Lock()
	s.pins--
	// The last pin going may be what kept an idle session awake.
	check := s.pins == 0 && !s.asleep && s.idleLocked()
	s.unlock()
	if check {
		s.h.poke()
	}
}

// wake counts a use of a pinned session, as pin(true) does.
func (s *session) wake() {
	s.mu.Lock()
	s.markUsedLocked()
	s.unlock()
	s.h.poke()
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

// resident is a session in the residency count, with what orders it.
type resident struct {
	s        *session
	used     time.Time
	quiet    time.Time
	archived bool
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
	return []upkeepTask{
		{"clients away too long", h.forgetClients},                               // clients.go
		{"mirrors nobody watches", func(time.Time) { h.dropUnwatchedMirrors() }}, // mirror.go
		{"relays of connections gone quiet", h.dropIdleRelays},                   // forwarded.go
		{"leases of sessions nobody uses", h.releaseUnused},                      // cluster.go
		{"the schedules' lease", func(time.Time) { h.keepScheduling() }},         // cluster.go
	}
}

// balance puts quiet sessions to sleep and keeps the residency limit.
func (h *Host) balance(now time.Time) {
	var live []resident
	for _, s := range h.sessionList() {
		if r, ok := s.asResident(); ok {
			live = append(live, r)
		}
	}
	kept := live[:0]
	for _, r := range live {
		quiet := h.opts.SleepAfter > 0 && now.Sub(r.quiet) >= h.opts.SleepAfter
		if (quiet || r.archived) && h.sleep(r.s, true, false) {
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
		if h.sleep(r.s, true, false) {
			over--
		}
	}
}

// asResident is the session as balance orders it, read under its lock at
// once; ok is false when it is not in the residency count (asleep,
// provisional or disposed of).
func (s *session) asResident() (r resident, ok bool) {
	s.mu.Lock()
	defer s.unlock()
	if s.asleep || s.provisional || s.disposed {
		return resident{}, false
	}
	// Woken counts as used: a session resumed a moment ago is not quiet,
	// however long ago its last action was.
	quiet := s.lastAction
	if s.used.After(quiet) {
		quiet = s.used
	}
	return resident{s, s.used, quiet, s.state.Status&protocol.StatusIsArchived != 0}, true
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
	if s != nil && c != nil && !s.visibleTo(c) {
		s = nil
	}
	if s == nil {
		// A session only the catalogue knows is known, and not in memory.
		if p := su.Provider(); p != "" && h.ext.cat != nil {
			if _, ok := h.ext.cat.Lookup(p, su.ID); ok {
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
	asleep, waiting, busy := s.cancelWaiting()
	if asleep {
		return nil
	}
	if busy && len(waiting) == 0 {
		if ifIdle {
			return nil
		}
		return protocol.Errorf(protocol.CodeTurnInProgress, "session %s is running a turn: cancel it before suspending the session", s.uri)
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
		return protocol.Errorf(protocol.CodeTurnInProgress, "session %s has work in hand and cannot be suspended now", s.uri)
	}
	return nil
}

// cancelWaiting is suspend's look at the session under its lock: whether
// it is asleep already and, if not, each chat's turn waiting on somebody
// cancelled (what to wait for before it sleeps) and whether a chat runs a
// turn. A session with a running turn and none waiting has none cancelled.
func (s *session) cancelWaiting() (asleep bool, waiting []<-chan struct{}, busy bool) {
	s.mu.Lock()
	defer s.unlock()
	if s.asleep {
		return true, nil, false
	}
	for _, e := range s.chats {
		switch {
		case e.chat.Waiting():
			waiting = append(waiting, e.chat.Cancel())
		case !e.chat.Idle():
			busy = true
		}
	}
	return false, waiting, busy
}

// resume starts a sleeping session's agents and returns at once.
func (h *Host) resume(s *session) {
	list := s.markResumed()
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

// markResumed counts a use of the session, which wakes it, and returns its
// chats, whose agents resume starts holding no lock.
func (s *session) markResumed() []*chats.Chat {
	s.mu.Lock()
	defer s.unlock()
	s.markUsedLocked()
	list := make([]*chats.Chat, 0, len(s.chats))
	for _, e := range s.chats {
		list = append(list, e.chat)
	}
	return list
}
