package session

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// A chat made from another (createChat with a source, docs/SESSIONS.md)
// starts where the source's conversation was at one of its turns:
//
//   - a fork shows the source's turns up to and including that turn, and
//     its agent goes on from there;
//   - a side chat shows none of them, but its agent has them as its
//     context (the turn may be the source's running one, as it stands).
//
// The backend copies its conversation (plugins.Forker) before the chat is
// stored; the chat's record then names the copy as started, so its agent
// resumes it, now and after a restart. The record keeps the chat's origin,
// and for a side chat the last turn of its context (ContextThrough), which
// the turns read back from the backend's copy leave out.

// ForkPoint is what a chat made from another starts from, as ForkFrom
// read it from the source chat.
type ForkPoint struct {
	// Origin is the new chat's origin.
	Origin protocol.ChatOrigin
	// Side says it is a side chat.
	Side bool
	// Options are the backend's, but for the new conversation (Into).
	Options plugins.ForkOptions
	// Turns are the turns the new chat shows: for a fork, the source's
	// up to the turn; none for a side chat.
	Turns []protocol.Turn
	// senders and timing are the source record's of Turns.
	senders map[string]string
	timing  map[string]turnTiming
}

// ForkFrom reads where a chat made from src (by source, a fork or a side
// chat) starts, having loaded src's turns as the protocol asks (a turn
// outside those held must be loaded before it is referred to). It refuses
// a turn src does not have, and for a fork a turn still running, with
// -32602 saying which.
func (s *Session) ForkFrom(ctx context.Context, src *ChatEntry, source protocol.ChatSource) (*ForkPoint, error) {
	s.LoadTurns(ctx, src)
	s.mu.Lock()
	defer s.unlock()
	fp := &ForkPoint{}
	var turnID string
	switch so := source.(type) {
	case *protocol.ForkChatSource:
		turnID = so.TurnID
		fp.Origin = &protocol.ChatOriginFork{Chat: so.Chat, TurnID: so.TurnID}
	case *protocol.SideChatSource:
		turnID, fp.Side = so.TurnID, true
		if so.Selection != nil && so.Selection.Text == "" {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source.selection.text is empty: a side chat's selection must hold the text selected")
		}
		fp.Origin = &protocol.ChatOriginSideChat{Chat: so.Chat, TurnID: so.TurnID, Selection: so.Selection}
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source: a source is a fork or a side chat")
	}
	cs := src.chat.State()
	i := slices.IndexFunc(cs.Turns, func(t protocol.Turn) bool { return t.ID == turnID })
	var partial *protocol.Turn
	switch {
	case i < 0 && cs.ActiveTurn != nil && cs.ActiveTurn.ID == turnID && fp.Side:
		// A side chat from the running turn has it as it stands now;
		// what the turn does later is not the side chat's.
		at := cs.ActiveTurn
		partial = &protocol.Turn{ID: at.ID, StartedAt: new(at.StartedAt), Message: at.Message,
			ResponseParts: slices.Clone(at.ResponseParts), Usage: at.Usage, State: protocol.TurnStateCancelled}
	case i < 0 && cs.ActiveTurn != nil && cs.ActiveTurn.ID == turnID:
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source.turnId: turn %s of %s is still running: a fork starts from a finished turn (wait for it to end, or make a side chat)", turnID, src.rec.URI)
	case i < 0:
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source.turnId: chat %s has no turn %s", src.rec.URI, protocol.Quote(turnID))
	}
	through := cs.Turns
	if i >= 0 {
		through = cs.Turns[:i+1]
	}
	if !fp.Side {
		fp.Turns = slices.Clone(through) // the reducers change no turn in place: sharing them is safe
	}
	fp.senders, fp.timing = map[string]string{}, map[string]turnTiming{}
	for _, t := range fp.Turns {
		if who, ok := src.rec.Senders[t.ID]; ok {
			fp.senders[t.ID] = who
		}
		if tt, ok := src.rec.Timing[t.ID]; ok {
			fp.timing[t.ID] = tt
		}
	}
	fp.Options = plugins.ForkOptions{
		From:    plugins.Conversation{ID: src.rec.Conversation, Dir: s.WorkDir()},
		TurnID:  turnID,
		Last:    partial == nil && i == len(cs.Turns)-1 && cs.ActiveTurn == nil,
		Partial: partial,
	}
	if i >= 0 {
		seen := cs.Turns[i]
		fp.Options.Seen = &seen
	}
	return fp, nil
}

// AddForkedChatRecord is AddChatRecord for a chat made from another: its
// conversation is the backend's copy conv, which the backend has
// (started), and its state and record start where fp says.
func (s *Session) AddForkedChatRecord(uri, request, conv string, fp *ForkPoint) (*ChatRecord, *protocol.ChatState, error) {
	origin, err := json.Marshal(fp.Origin)
	if err != nil {
		return nil, nil, protocol.Errorf(protocol.CodeInternalError, "createChat: encoding the chat's origin: %v", err)
	}
	return s.addChatRecord(uri, request, func(rec *ChatRecord, cs *protocol.ChatState) {
		rec.Conversation, rec.Started, rec.Origin = conv, true, origin
		if len(fp.senders) > 0 {
			rec.Senders = maps.Clone(fp.senders)
		}
		if len(fp.timing) > 0 {
			rec.Timing = maps.Clone(fp.timing)
		}
		if fp.Side {
			rec.ContextThrough = fp.Options.TurnID
		}
		cs.Origin = fp.Origin
		cs.Turns = slices.Clone(fp.Turns)
	})
}

// originOf is the origin a chat's record keeps, user when it keeps none
// or one this version cannot read.
func originOf(rec *ChatRecord) protocol.ChatOrigin {
	if len(rec.Origin) > 0 {
		if o, err := protocol.UnmarshalChatOrigin(rec.Origin); err == nil {
			return o
		}
	}
	return &protocol.ChatOriginUser{}
}

// visible leaves out of turns read back from a side chat's backend copy
// those that are its context: the source's, through ContextThrough.
func (e *ChatEntry) visible(turns []protocol.Turn) []protocol.Turn {
	if e.rec.ContextThrough == "" {
		return turns
	}
	i := slices.IndexFunc(turns, func(t protocol.Turn) bool { return t.ID == e.rec.ContextThrough })
	return turns[i+1:] // all of them when the copy has no such turn (-1)
}
