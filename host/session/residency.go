package session

import (
	"slices"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/protocol"
)

// markUsedLocked records a use of the session, for the LRU order.
func (s *Session) markUsedLocked() {
	s.used = s.h.Now()
	if s.asleep && s.h.Journaled {
		s.out.Later(func() { s.h.WriteResidency(s.uri, "wake") })
	}
	s.setAwakeLocked(true)
}

func (s *Session) setAwakeLocked(awake bool) {
	s.asleep = !awake
	s.awake.Store(awake)
}

// idleLocked reports whether the session has nothing in hand.
func (s *Session) idleLocked() bool {
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

// Watched reports whether a client watches the session or a chat. It
// asks the bus, so it is called without s.mu; chats lists the session's
// chat URIs.
func (s *Session) Watched(chats []string) bool {
	if s.h.Bus.Subscribers(s.uri) > 0 {
		return true
	}
	for _, uri := range chats {
		if s.h.Bus.Subscribers(uri) > 0 {
			return true
		}
	}
	return false
}

// ChatOrder is a copy of the session's chat URIs in order: sleep asks the
// bus whether they are watched holding no lock, and checks again under it
// that they have not changed meanwhile.
func (s *Session) ChatOrder() []string {
	s.mu.Lock()
	defer s.unlock()
	return slices.Clone(s.order)
}

// StartFalling marks the session as falling asleep, so that no client
// pins it while its agents go, and returns its chats in order with the
// channel pins wait on, which sleep closes when done. It returns a nil
// channel, and marks nothing, when the session is pinned, falling asleep
// or asleep already, not idle, or has chats other than those sleep found
// unwatched.
func (s *Session) StartFalling(chats []string) ([]*ChatEntry, chan struct{}) {
	s.mu.Lock()
	defer s.unlock()
	if s.pins > 0 || s.falling != nil || s.asleep || !s.idleLocked() || !slices.Equal(chats, s.order) {
		return nil, nil
	}
	entries := make([]*ChatEntry, 0, len(s.order))
	for _, uri := range s.order {
		entries = append(entries, s.chats[uri])
	}
	falling := make(chan struct{})
	s.falling = falling
	return entries, falling
}

// ClearFalling ends what startFalling began: pins that came meanwhile
// wait for the channel to be closed, which the caller does after.
func (s *Session) ClearFalling() {
	s.mu.Lock()
	s.falling = nil
	s.unlock()
}

// Unload drops the turns of a session whose agents have gone, and the
// replay of its channels. It reports false when a change came in while the
// agents were closing (a background task), and keeps the turns.
//
// With a journal, the turns go once a restart point holds them (or says
// where they are), so that they come back from the journal as clients saw
// them (turntrack.go); a session woken meanwhile keeps them. Without one
// they go at once, and come back from the backend's transcript.
func (s *Session) Unload(entries []*ChatEntry) bool {
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
	if !s.h.Journaled {
		for _, e := range entries {
			e.chat.ForgetTurns()
			e.loaded = false
		}
	} else {
		sleeps := s.sleeps
		s.queueRestartPointLocked("", nil, func(turnsAt map[*ChatEntry]uint64) {
			if s.sleeps == sleeps && s.asleep {
				s.forgetTurnsLocked(turnsAt)
			}
		})
		s.out.Later(func() { s.h.WriteResidency(s.uri, "sleep") })
	}
	s.unlock()
	s.h.LetGo(s.id) // asleep, it may wake on any host
	s.h.Bus.Forget(channels)
	s.h.Unloaded() // its heap is garbage now (memory.go)
	return true
}

// forgetTurnsLocked drops the finished turns of the session's chats whose
// turns the journal holds where turnsAt says. Called with s.mu held.
func (s *Session) forgetTurnsLocked(turnsAt map[*ChatEntry]uint64) {
	for e, at := range turnsAt {
		if at != 0 && e.loaded && e.rec.TurnsAt == at && e.chat.Idle() {
			e.chat.ForgetTurns()
			e.loaded = false
		}
	}
}

// Pin keeps the session from falling asleep until unpin, waiting for one
// falling asleep now to finish. With wake, it counts as a use of the
// session: it is not quiet, and a sleeping one is readied for the client.
func (s *Session) Pin(wake bool) {
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
		s.h.Poke()
	}
}

func (s *Session) Unpin() {
	s.mu.Lock()
	s.pins--
	// The last pin going may be what kept an idle session awake.
	check := s.pins == 0 && !s.asleep && s.idleLocked()
	s.unlock()
	if check {
		s.h.Poke()
	}
}

// wake counts a use of a pinned session, as pin(true) does.
func (s *Session) wake() {
	s.mu.Lock()
	s.markUsedLocked()
	s.unlock()
	s.h.Poke()
}

// Resident is a session in the residency count, with what orders it.
type Resident struct {
	S        *Session
	Used     time.Time
	Quiet    time.Time
	Archived bool
}

// AsResident is the session as balance orders it, read under its lock at
// once; ok is false when it is not in the residency count (asleep,
// provisional or disposed of).
func (s *Session) AsResident() (r Resident, ok bool) {
	s.mu.Lock()
	defer s.unlock()
	if s.asleep || s.provisional || s.disposed {
		return Resident{}, false
	}
	// Woken counts as used: a session resumed a moment ago is not quiet,
	// however long ago its last action was.
	quiet := s.lastAction
	if s.used.After(quiet) {
		quiet = s.used
	}
	return Resident{s, s.used, quiet, s.state.Status&protocol.StatusIsArchived != 0}, true
}

// CancelWaiting is suspend's look at the session under its lock: whether
// it is asleep already and, if not, each chat's turn waiting on somebody
// cancelled (what to wait for before it sleeps) and whether a chat runs a
// turn. A session with a running turn and none waiting has none cancelled.
func (s *Session) CancelWaiting() (asleep bool, waiting []<-chan struct{}, busy bool) {
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

// MarkResumed counts a use of the session, which wakes it, and returns its
// chats, whose agents resume starts holding no lock.
func (s *Session) MarkResumed() []*chats.Chat {
	s.mu.Lock()
	defer s.unlock()
	s.markUsedLocked()
	list := make([]*chats.Chat, 0, len(s.chats))
	for _, e := range s.chats {
		list = append(list, e.chat)
	}
	return list
}
