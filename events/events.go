// Package events says what happened in the host that somebody outside it
// may want to be told of: a turn waits on a person, a turn ended, an
// automation run ended. The host makes an Event where the thing happens
// and hands it to a Sink (host.Options.Events); what the sink does with it
// (package webhooks posts it to the receivers a config names) is none of
// the host's business.
//
// It owns the description of those events and the reading of a protocol
// input request into one (RequestOf). It must not deliver, store or wait
// on anything, nor import the host: it is the small vocabulary the host
// and the modules that listen to it share.
package events

import (
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// Kind is what happened.
type Kind string

// The kinds of event.
const (
	// NeedsInput: a running turn waits on a person, for an answer to a
	// question or for a tool call to be approved. One event per request.
	NeedsInput Kind = "needs_input"
	// TurnCompleted: a turn ended complete.
	TurnCompleted Kind = "turn_completed"
	// TurnFailed: a turn ended in an error (the agent failed, died, or
	// the host stopped under it). A cancelled turn is not an event:
	// somebody chose to end it.
	TurnFailed Kind = "turn_failed"
	// AutomationRunFinished: an automation's run ended: completed,
	// failed or cancelled.
	AutomationRunFinished Kind = "automation_run_finished"
)

// Kinds lists every kind, in the order the documentation gives them.
func Kinds() []Kind {
	return []Kind{NeedsInput, TurnCompleted, TurnFailed, AutomationRunFinished}
}

// Event is one thing that happened. Strings in it may be whatever a
// client or an agent wrote, of any length: a sink bounds what it keeps.
type Event struct {
	Kind Kind
	Time time.Time
	// Session is the session it happened in; its URI is empty for a run
	// that ended before it made one.
	Session Session
	// Chat is the chat of a turn or a request: its URI.
	Chat string
	// Turn is the turn that ended, or that asks (NeedsInput).
	Turn *Turn
	// Request is what a NeedsInput turn waits on.
	Request *Request
	// Run is the run that ended (AutomationRunFinished).
	Run *Run
}

// Session names a session for someone who is not looking at it.
type Session struct {
	URI      string
	ID       string // as the HTTP API names it (/v1/sessions/{id})
	Title    string
	Owner    string // user:<id> or root:<host>; "" on a host without users
	Provider string
}

// Turn is a turn: the one that ended, or the one that waits.
type Turn struct {
	ID string
	// State is protocol.TurnStateComplete or TurnStateError for a turn
	// that ended; "" for one still running (NeedsInput).
	State protocol.TurnState
	// Duration is how long it ran, for a turn that ended.
	Duration time.Duration
	// Error is why it failed.
	Error *Error
}

// Error is why a turn or a run failed.
type Error struct {
	Type    string
	Message string
	// Resumable says the turn may be continued (chat/turnResume): its
	// agent was interrupted rather than failing.
	Resumable bool
}

// The kinds of Request.
const (
	RequestQuestion = "question" // an input request: answer it
	RequestApproval = "approval" // a tool call: approve or deny it
)

// Request is what a turn waits on a person for.
type Request struct {
	ID   string // the input request's id, or the tool call's
	Kind string // RequestQuestion or RequestApproval
	// Text is what it asks, as a person would read it: the request's
	// message or its questions, or what the tool call would do.
	Text string
	// Tool is the tool of an approval, as the agent names it.
	Tool      string
	Questions []Question
	// Options are the choices an approval offers beyond yes and no.
	Options []Option
}

// Question is one question of an input request.
type Question struct {
	ID       string
	Kind     string // text, number, integer, boolean, single-select, multi-select
	Message  string
	Required bool
	Options  []Option // of a select question
}

// Option is a choice a question or an approval offers.
type Option struct {
	ID    string
	Label string
	Kind  string // of an approval's option: approve, deny, ...
}

// Run is an automation run that ended.
type Run struct {
	URI        string
	Automation string // the automation's URI
	// Outcome is completed, failed or cancelled.
	Outcome string
	Error   string // why it failed
}

// Sink is told of events. Event is called as things happen, from the
// goroutines that make them happen (a session handing on its changes, the
// automations engine), holding none of the host's locks, in the order the
// things happened within a session. It must return at once: it may queue,
// never wait on the network or a disk, and never call back into the host.
type Sink interface {
	Event(Event)
}

// RequestOf reads a session's input request (protocol.WaitingOn makes
// them) as a Request; nil for a kind it does not know.
func RequestOf(r protocol.SessionInputRequest) *Request {
	switch r := r.(type) {
	case *protocol.SessionChatInputRequest:
		return questionOf(&r.Request)
	case *protocol.SessionToolConfirmationRequest:
		switch tc := r.ToolCall.(type) {
		case *protocol.ToolCallPendingConfirmationState:
			return approvalOf(tc.ToolCallID, tc.ToolName, tc.DisplayName, tc.InvocationMessage.Text, tc.Options)
		case *protocol.ToolCallPendingResultConfirmationState:
			text := tc.PastTenseMessage.Text
			if text == "" {
				text = tc.InvocationMessage.Text
			}
			return approvalOf(tc.ToolCallID, tc.ToolName, tc.DisplayName, text, nil)
		}
	}
	return nil
}

func approvalOf(id, tool, display, what string, opts []protocol.ConfirmationOption) *Request {
	name := display
	if name == "" {
		name = tool
	}
	text := name
	if what != "" && what != name {
		text = name + ": " + what
	}
	req := &Request{ID: id, Kind: RequestApproval, Text: text, Tool: tool}
	for _, o := range opts {
		req.Options = append(req.Options, Option{ID: o.ID, Label: o.Label, Kind: string(o.Kind)})
	}
	return req
}

func questionOf(r *protocol.ChatInputRequest) *Request {
	req := &Request{ID: r.ID, Kind: RequestQuestion}
	var texts []string
	for _, q := range r.Questions {
		qq, ok := questionFrom(q)
		if !ok {
			continue
		}
		req.Questions = append(req.Questions, qq)
		if qq.Message != "" {
			texts = append(texts, qq.Message)
		}
	}
	switch {
	case r.Message != nil && *r.Message != "":
		req.Text = *r.Message
	case len(texts) > 0:
		req.Text = texts[0]
		for _, t := range texts[1:] {
			req.Text += " / " + t
		}
	case r.URL != nil:
		req.Text = *r.URL
	}
	return req
}

// questionFrom reads one question; false for a kind this version does not
// know.
func questionFrom(q protocol.ChatInputQuestion) (Question, bool) {
	req := func(b *bool) bool { return b != nil && *b }
	opts := func(list []protocol.ChatInputOption) []Option {
		var out []Option
		for _, o := range list {
			out = append(out, Option{ID: o.ID, Label: o.Label})
		}
		return out
	}
	switch q := q.(type) {
	case *protocol.ChatInputTextQuestion:
		return Question{ID: q.ID, Kind: "text", Message: q.Message, Required: req(q.Required)}, true
	case *protocol.ChatInputNumberQuestion:
		kind := "number"
		if q.Kind == "integer" {
			kind = "integer"
		}
		return Question{ID: q.ID, Kind: kind, Message: q.Message, Required: req(q.Required)}, true
	case *protocol.ChatInputBooleanQuestion:
		return Question{ID: q.ID, Kind: "boolean", Message: q.Message, Required: req(q.Required)}, true
	case *protocol.ChatInputSingleSelectQuestion:
		return Question{ID: q.ID, Kind: "single-select", Message: q.Message, Required: req(q.Required), Options: opts(q.Options)}, true
	case *protocol.ChatInputMultiSelectQuestion:
		return Question{ID: q.ID, Kind: "multi-select", Message: q.Message, Required: req(q.Required), Options: opts(q.Options)}, true
	}
	return Question{}, false
}
