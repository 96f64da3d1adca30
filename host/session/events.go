package session

import (
	"slices"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/protocol"
)

// queueEventLocked hands ev to the sink once the session's lock is let
// go, behind every change queued so far. Called with s.mu held.
func (s *Session) queueEventLocked(ev events.Event) {
	sink := s.h.Events
	s.out.Later(func() { sink.Event(ev) })
}

// aboutLocked names the session for an event. Called with s.mu held.
func (s *Session) aboutLocked() events.Session {
	return events.Session{URI: s.uri, ID: s.id, Title: s.state.Title, Owner: s.rec.Owner, Provider: s.provider}
}

// turnEventLocked tells the sink a turn of c ended: complete or in error.
// A cancelled turn is not told: somebody chose to end it (a person, a
// client, ahpd's own stop), and an automation's run says so as it ends.
// Called with s.mu held, as the action that ended it is applied.
func (s *Session) turnEventLocked(c *chats.Chat, a protocol.Action) {
	if s.h.Events == nil {
		return
	}
	ev := events.Event{Time: s.h.Now(), Session: s.aboutLocked(), Chat: c.URI()}
	switch a := a.(type) {
	case *protocol.ChatTurnCompleteAction:
		ev.Kind = events.TurnCompleted
		ev.Turn = &events.Turn{ID: a.TurnID, State: protocol.TurnStateComplete, Duration: time.Duration(a.Duration) * time.Millisecond}
	case *protocol.ChatErrorAction:
		ev.Kind = events.TurnFailed
		ev.Turn = &events.Turn{ID: a.TurnID, State: protocol.TurnStateError, Duration: time.Duration(a.Duration) * time.Millisecond,
			Error: &events.Error{Type: a.Part.Error.ErrorType, Message: a.Part.Error.Message, Resumable: a.Part.Resumable != nil && *a.Part.Resumable}}
	default:
		return
	}
	s.queueEventLocked(ev)
}

// inputEventsLocked tells the sink of each input request of c's that the
// session waits on now and did not in before, its InputNeeded before the
// chat's change was mirrored: a request that only changed (an answer
// typed into it) is not new. Called with s.mu held, deferred by
// mirrorChatLocked.
func (s *Session) inputEventsLocked(c *chats.Chat, before []protocol.SessionInputRequest) {
	now := s.state.InputNeeded
	if s.h.Events == nil || len(now) == 0 || (len(now) == len(before) && &now[0] == &before[0]) {
		return
	}
	var turnID string
	if at := c.State().ActiveTurn; at != nil {
		turnID = at.ID
	}
	for _, r := range now {
		id, chat := protocol.InputRequestOf(r)
		if chat != c.URI() || slices.ContainsFunc(before, func(b protocol.SessionInputRequest) bool {
			bid, bchat := protocol.InputRequestOf(b)
			return bid == id && bchat == chat
		}) {
			continue
		}
		req := events.RequestOf(r)
		if req == nil {
			continue
		}
		s.queueEventLocked(events.Event{Kind: events.NeedsInput, Time: s.h.Now(), Session: s.aboutLocked(), Chat: chat,
			Turn: &events.Turn{ID: turnID}, Request: req})
	}
}

// Tell queues ev, about the session, to be told once the session's lock
// is let go, in order with the session's other events.
func (s *Session) Tell(ev events.Event) {
	s.mu.Lock()
	defer s.unlock()
	ev.Session = s.aboutLocked()
	s.queueEventLocked(ev)
}
