package client

import (
	"strings"

	"github.com/ahpd/ahpd/protocol"
)

// What a turn waits on a person for, read from a chat's state: the
// questions it asked and the tool calls it wants approved. Every surface
// that answers (the command line, the HTTP API, the dashboard) finds them
// the same way, so none answers what another would not show.

// Waiting is one thing a chat's running turn waits on a person for: an
// input request (Request set) or a tool call to approve (Tool set).
type Waiting struct {
	Chat    string
	TurnID  string
	ID      string // the request's or the tool call's id
	Request *protocol.ChatInputRequest
	Tool    *protocol.ToolCallPendingConfirmationState
}

// Kind is "question" for an input request, "approval" for a tool call.
func (w Waiting) Kind() string {
	if w.Tool != nil {
		return "approval"
	}
	return "question"
}

// Text is what it asks, on one line: the questions, or what the tool
// call would do.
func (w Waiting) Text() string {
	if w.Tool != nil {
		text := w.Tool.InvocationMessage.Text
		if text == "" {
			text = w.Tool.DisplayName
		}
		return oneLine(w.Tool.DisplayName + ": " + text)
	}
	return oneLine(RequestText(w.Request))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// permissionMeta is the _meta member of a tool call the session's
// permissions decided (chats.PermissionMeta, docs/PERMISSIONS.md).
const permissionMeta = "ahpd.permission"

// DecidedByPermissions reports whether a tool call's _meta says the
// session's permissions decided it. A call they deny passes through
// pending-confirmation on its way to cancelled (two actions, which a
// client may see apart): it waits on nobody.
func DecidedByPermissions(meta protocol.Object) bool {
	_, ok := meta[permissionMeta]
	return ok
}

// WaitingIn lists what cs's running turn waits on, in the turn's order:
// not a call the session's permissions are denying.
func WaitingIn(cs *protocol.ChatState) []Waiting {
	if cs == nil || cs.ActiveTurn == nil {
		return nil
	}
	at := cs.ActiveTurn
	var out []Waiting
	for _, p := range at.ResponseParts {
		switch p := p.(type) {
		case *protocol.InputRequestResponsePart:
			if p.Response == nil {
				out = append(out, Waiting{Chat: cs.Resource, TurnID: at.ID, ID: p.Request.ID, Request: &p.Request})
			}
		case *protocol.ToolCallResponsePart:
			if tc, ok := p.ToolCall.(*protocol.ToolCallPendingConfirmationState); ok && !DecidedByPermissions(tc.Meta) {
				out = append(out, Waiting{Chat: cs.Resource, TurnID: at.ID, ID: tc.ToolCallID, Tool: tc})
			}
		}
	}
	return out
}

// Found says where Find found an id in a chat.
type Found int

// The answers of Find.
const (
	// NotFound: the chat has no question or tool call of that id.
	NotFound Found = iota
	// FoundOpen: the running turn waits on it.
	FoundOpen
	// FoundSettled: the running turn has it, and it was answered (or the
	// tool call approved or denied) already.
	FoundSettled
	// FoundEnded: it belongs to a turn that has ended.
	FoundEnded
)

// Find looks for the question or tool call id in cs: waiting, settled in
// the running turn, or in an ended turn. The Waiting is set when it is
// open.
func Find(cs *protocol.ChatState, id string) (Waiting, Found) {
	if cs == nil {
		return Waiting{}, NotFound
	}
	for _, open := range WaitingIn(cs) {
		if open.ID == id {
			return open, FoundOpen
		}
	}
	if at := cs.ActiveTurn; at != nil && hasPart(at.ResponseParts, id) {
		return Waiting{}, FoundSettled
	}
	for i := len(cs.Turns) - 1; i >= 0; i-- {
		if hasPart(cs.Turns[i].ResponseParts, id) {
			return Waiting{}, FoundEnded
		}
	}
	return Waiting{}, NotFound
}

// hasPart reports whether parts hold an input request or a tool call of
// id.
func hasPart(parts []protocol.ResponsePart, id string) bool {
	for _, p := range parts {
		switch p := p.(type) {
		case *protocol.InputRequestResponsePart:
			if p.Request.ID == id {
				return true
			}
		case *protocol.ToolCallResponsePart:
			if protocol.ToolCallIDOf(p.ToolCall) == id {
				return true
			}
		}
	}
	return false
}

// RequestText is an input request's message, else its questions joined.
func RequestText(r *protocol.ChatInputRequest) string {
	if r.Message != nil && *r.Message != "" {
		return *r.Message
	}
	var texts []string
	for _, q := range r.Questions {
		if m := QuestionOf(q).Message; m != "" {
			texts = append(texts, m)
		}
	}
	return strings.Join(texts, " / ")
}
