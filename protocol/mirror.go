package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Mirroring: how a session's state follows its chats. A session's state
// carries a summary of each chat (its entry in Chats), the input requests
// its chats wait on (InputNeeded, so a client watching only the session
// can answer them), and, for its default chat, the same read and archived
// marks. The functions here say what a session must be told after a chat
// changed, as actions its reducer applies, and how a session's status
// follows its chats. They are pure, like the reducers, and tested with
// vectors like them (testdata/ahp-1.0/mirror).

// MirrorChat returns the session actions that bring s up to date with its
// chat c, in the order to apply them: the chat's entry, the input requests
// it no longer waits on and those it now does (by id), and, when c is the
// default chat, its marks. None when s already mirrors c.
func MirrorChat(s *SessionState, c *ChatState, isDefault bool) []Action {
	var out []Action
	for _, entry := range s.Chats {
		if entry.Resource != c.Resource {
			continue
		}
		if changes, ok := chatEntryChanges(entry, c); ok {
			out = append(out, &SessionChatUpdatedAction{Chat: c.Resource, Changes: changes})
		}
		break
	}
	out = append(out, MirrorInputs(s, c.Resource, WaitingOn(c))...)
	if isDefault {
		want, have := c.Status&(StatusIsRead|StatusIsArchived), s.Status&(StatusIsRead|StatusIsArchived)
		if want&StatusIsRead != have&StatusIsRead {
			out = append(out, &SessionIsReadChangedAction{IsRead: want&StatusIsRead != 0})
		}
		if want&StatusIsArchived != have&StatusIsArchived {
			out = append(out, &SessionIsArchivedChangedAction{IsArchived: want&StatusIsArchived != 0})
		}
	}
	return out
}

// chatEntryChanges returns the fields of a chat's entry in its session
// that differ from the chat's own state.
func chatEntryChanges(entry ChatSummary, cs *ChatState) (PartialChatSummary, bool) {
	var ch PartialChatSummary
	changed := false
	if entry.Title != cs.Title {
		ch.Title, changed = new(cs.Title), true
	}
	if entry.Status != cs.Status {
		ch.Status, changed = new(cs.Status), true
	}
	// An entry's activity is cleared with "": no activity and "" are the
	// same, or a cleared one would be cleared again on every change.
	if textOf(entry.Activity) != textOf(cs.Activity) {
		if cs.Activity == nil {
			ch.Activity = new("")
		} else {
			ch.Activity = cs.Activity
		}
		changed = true
	}
	if entry.ModifiedAt != cs.ModifiedAt {
		ch.ModifiedAt, changed = new(cs.ModifiedAt), true
	}
	if !slices.Equal(entry.WorkingDirectories, cs.WorkingDirectories) && cs.WorkingDirectories != nil {
		ch.WorkingDirectories, changed = cs.WorkingDirectories, true
	}
	if movable := cs.Movable != nil && *cs.Movable; movable != (entry.Movable != nil && *entry.Movable) {
		ch.Movable, changed = new(movable), true
	}
	return ch, changed
}

func textOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// MirrorInputs returns the session actions that make s's input requests of
// chat the ones in want (by id): removals of those it no longer waits on
// or that changed, then the new and changed ones, sorted by id. A chat
// that is gone wants none.
func MirrorInputs(s *SessionState, chat string, want map[string]SessionInputRequest) []Action {
	var out []Action
	left := make(map[string]bool, len(want))
	for id := range want {
		left[id] = true
	}
	for _, r := range s.InputNeeded {
		id, on := InputRequestOf(r)
		if on != chat {
			continue
		}
		if w, ok := want[id]; ok {
			if sameJSON(w, r) {
				delete(left, id)
			}
			continue
		}
		out = append(out, &SessionInputNeededRemovedAction{ID: id})
	}
	ids := make([]string, 0, len(left))
	for id := range left {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		out = append(out, &SessionInputNeededSetAction{Request: want[id]})
	}
	return out
}

// WaitingOn lists what a chat's active turn waits on somebody for, by id:
// tool calls to confirm (or whose results to confirm) and open questions.
func WaitingOn(cs *ChatState) map[string]SessionInputRequest {
	out := map[string]SessionInputRequest{}
	t := cs.ActiveTurn
	if t == nil {
		return out
	}
	for _, p := range t.ResponseParts {
		switch p := p.(type) {
		case *ToolCallResponsePart:
			var tc ToolCallConfirmationState
			var id string
			switch st := p.ToolCall.(type) {
			case *ToolCallPendingConfirmationState:
				tc, id = st, st.ToolCallID
			case *ToolCallPendingResultConfirmationState:
				tc, id = st, st.ToolCallID
			default:
				continue
			}
			out[id] = &SessionToolConfirmationRequest{ID: id, Chat: cs.Resource, TurnID: t.ID, ToolCall: tc}
		case *InputRequestResponsePart:
			if p.Response == nil {
				out[p.Request.ID] = &SessionChatInputRequest{ID: p.Request.ID, Chat: cs.Resource, Request: p.Request}
			}
		}
	}
	return out
}

// InputRequestOf returns a session input request's id and the chat it is
// of; a kind this version does not know is read by its members.
func InputRequestOf(r SessionInputRequest) (id, chat string) {
	switch r := r.(type) {
	case *SessionChatInputRequest:
		return r.ID, r.Chat
	case *SessionToolConfirmationRequest:
		return r.ID, r.Chat
	case *SessionToolClientExecutionRequest:
		return r.ID, r.Chat
	case *SessionToolAuthenticationRequest:
		return r.ID, r.Chat
	case *Unknown:
		return r.member("id"), r.member("chat")
	}
	return "", ""
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// SessionActivity returns a session's status and activity text as its
// chats make them, by the protocol's rules for a session of several chats:
// the activity is the default chat's, promoted to InputNeeded while any
// chat waits on somebody, else Error while any chat stopped at an error,
// else InProgress while any chat runs (a list must not show idle work that
// runs), and the text is that of the chat that gave the activity, or the
// session's own. The read and archived bits are the session's own. chats
// are in the session's order; deflt is the default chat's resource.
func SessionActivity(own SessionStatus, ownText *string, deflt string, chats []*ChatState) (SessionStatus, *string) {
	var by *ChatState
	activity := StatusIdle
	if i := slices.IndexFunc(chats, func(c *ChatState) bool { return c.Resource == deflt }); i >= 0 {
		by = chats[i]
		activity = by.Status.Activity()
	}
	for _, want := range []SessionStatus{StatusInputNeeded, StatusError, StatusInProgress} {
		if activity == want {
			break
		}
		if i := slices.IndexFunc(chats, func(c *ChatState) bool { return c.Status.Activity() == want }); i >= 0 {
			activity, by = want, chats[i]
			break
		}
	}
	if activity == 0 {
		activity = StatusIdle
	}
	text := ownText
	if by != nil && by.Activity != nil {
		text = by.Activity
	}
	return own.WithActivity(activity), text
}
