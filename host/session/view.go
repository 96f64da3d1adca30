package session

import (
	"slices"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// Views of a chat (subscribe's view.turns): a subscriber that asks for
// the last n finished turns gets a snapshot holding only those (and the
// turn under way), with a turnsNextCursor "before:K", K the index of the
// oldest turn shown, in the same numbering as the chat's own cursor (a
// turn's index in its backend's list). fetchTurns with that cursor pages
// the turns the chat holds older than K into the chat: a chat/turnsLoaded
// that every subscriber gets, a no-op for those that hold them (the
// reducer keeps a turn once, by id), after which the view's subscriber
// holds what everyone does and pages on with the chat's own cursor.
//
// While a view lacks turns the chat holds, a page of older turns that
// another client loads carries them too, so the view's subscriber has no
// hole in its turns; ChatEntry.views says which views are out.

// heldFrom is the index of the oldest turn a chat's state holds: what
// its turnsNextCursor says, 0 without one.
func heldFrom(cs *protocol.ChatState) int {
	if cs.TurnsNextCursor == nil {
		return 0
	}
	n, err := ParseTurnCursor(*cs.TurnsNextCursor)
	if err != nil {
		return 0
	}
	return n
}

// ViewOf returns the state a subscriber asking for the last n finished
// turns is given, and the index of the oldest turn it holds; cs itself,
// and -1, when it holds no more than n.
func ViewOf(cs *protocol.ChatState, n int) (*protocol.ChatState, int) {
	if n <= 0 || len(cs.Turns) <= n {
		return cs, -1
	}
	oldest := heldFrom(cs) + len(cs.Turns) - n
	view := *cs
	view.Turns = cs.Turns[len(cs.Turns)-n:]
	view.TurnsNextCursor = new(TurnCursor(oldest))
	return &view, oldest
}

// viewPage answers fetchTurns with a view's cursor: the turns the chat
// holds older than it, with the chat's own cursor. ok is false when the
// cursor is not one a view of the chat as it is could carry.
func viewPage(cs *protocol.ChatState, cursor string) (page *protocol.ChatTurnsLoadedAction, ok bool) {
	k, err := ParseTurnCursor(cursor)
	from := heldFrom(cs)
	if err != nil || k <= from || k > from+len(cs.Turns) {
		return nil, false
	}
	return &protocol.ChatTurnsLoadedAction{Turns: slices.Clone(cs.Turns[:k-from]), TurnsNextCursor: cs.TurnsNextCursor}, true
}

// setViewLocked records that c holds the chat's turns from oldest on
// (-1: all the chat holds). Entries of connections that ended go. Called
// with s.mu held.
func (e *ChatEntry) setViewLocked(c *conn.Conn, oldest int) {
	for v := range e.views {
		if v.Context().Err() != nil {
			delete(e.views, v)
		}
	}
	if oldest < 0 {
		delete(e.views, c)
		return
	}
	if e.views == nil {
		e.views = map[*conn.Conn]int{}
	}
	e.views[c] = oldest
}

// viewsLackLocked returns the turns the chat holds that some view out
// lacks: those older than the newest view's oldest turn. Called with
// s.mu held.
func (e *ChatEntry) viewsLackLocked(cs *protocol.ChatState) []protocol.Turn {
	from, upTo := heldFrom(cs), 0
	for c, oldest := range e.views {
		if c.Context().Err() == nil {
			upTo = max(upTo, oldest)
		}
	}
	if upTo <= from {
		return nil
	}
	return cs.Turns[:min(upTo-from, len(cs.Turns))]
}

// maxViewTurns bounds view.turns; a greater value is taken as it.
const maxViewTurns = 50

// ViewTurns reads subscribe's view.turns: 0 when there is none, else
// from 1 to maxViewTurns. Servers may return more or fewer turns than
// asked, so more than maxViewTurns is taken as maxViewTurns; none or
// fewer than one is a mistake, refused.
func ViewTurns(v *protocol.SubscribeView) (int, error) {
	if v == nil || v.Turns == nil {
		return 0, nil
	}
	if *v.Turns < 1 {
		return 0, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for subscribe: view.turns: %d, must be from 1 to %d", *v.Turns, maxViewTurns)
	}
	return int(min(*v.Turns, maxViewTurns)), nil
}
