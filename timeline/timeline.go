// Package timeline turns a session's action stream into the events a
// person reads the morning after: a turn started, a tool ran, the model
// was called, somebody answered, the turn ended. It is pure: it reads
// envelopes and knows nothing of where they are kept (the journal) or
// who asks (the host checks that).
//
// Streamed text and reasoning (chat/delta, chat/reasoning) are the raw
// stream, not events: every event names the actions it summarizes by
// serverSeq, so a client can open the stream behind it.
package timeline

import (
	"strings"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// Kind is what an event is.
type Kind string

// The kinds of event.
const (
	Wake          Kind = "wake"
	Sleep         Kind = "sleep"
	Transition    Kind = "transition"
	TurnStarted   Kind = "turn_started"
	TurnCompleted Kind = "turn_completed"
	TurnCancelled Kind = "turn_cancelled"
	TurnFailed    Kind = "turn_failed"
	ToolCall      Kind = "tool_call"
	ToolResult    Kind = "tool_result"
	LLMCall       Kind = "llm_call"
	HumanInput    Kind = "human_input"
	Question      Kind = "question"
	Artifact      Kind = "artifact"
	Handoff       Kind = "handoff"
	Error         Kind = "error"
	Note          Kind = "note"
)

// Kinds lists every kind, for a filter to be checked against.
var Kinds = []Kind{Wake, Sleep, Transition, TurnStarted, TurnCompleted, TurnCancelled, TurnFailed,
	ToolCall, ToolResult, LLMCall, HumanInput, Question, Artifact, Handoff, Error, Note}

// Event is one step of a session's timeline.
type Event struct {
	Seq     int64     `json:"seq"`  // the serverSeq of the action it comes from
	Time    time.Time `json:"time"` // when it was recorded
	Kind    Kind      `json:"kind"`
	Channel string    `json:"channel"`
	TurnID  string    `json:"turnId,omitempty"`
	// Text says what happened, for a person: the message, the tool and
	// what it did, the error.
	Text string `json:"text,omitempty"`
	// Usage is a model round's, when the backend reports it.
	Usage *protocol.UsageInfo `json:"usage,omitempty"`
	// Actions are the serverSeqs of the actions the event summarizes.
	Actions []int64 `json:"actions"`
}

// maxText bounds an event's text: a timeline is for reading.
const maxText = 500

// Of returns the events an action makes, recorded at t: none for most
// (streamed text, state bookkeeping), one or two for the rest.
func Of(env protocol.ActionEnvelope, t time.Time) []Event {
	ev := func(k Kind, turn, text string) Event {
		return Event{Seq: env.ServerSeq, Time: t, Kind: k, Channel: env.Channel, TurnID: turn,
			Text: cut(text), Actions: []int64{env.ServerSeq}}
	}
	switch a := env.Action.(type) {
	case *protocol.ChatTurnStartedAction:
		out := []Event{ev(TurnStarted, a.TurnID, a.Message.Text)}
		if a.Message.Origin.Kind == protocol.MessageKindUser {
			out = append(out, ev(HumanInput, a.TurnID, a.Message.Text))
		}
		return out
	case *protocol.ChatTurnResumeAction:
		return []Event{ev(TurnStarted, a.TurnID, "resumed")}
	case *protocol.ChatTurnCompleteAction:
		return []Event{ev(TurnCompleted, a.TurnID, "")}
	case *protocol.ChatTurnCancelledAction:
		return []Event{ev(TurnCancelled, a.TurnID, "")}
	case *protocol.ChatErrorAction:
		e := a.Part.Error
		return []Event{ev(TurnFailed, a.TurnID, e.Message), ev(Error, a.TurnID, e.ErrorType+": "+e.Message)}
	case *protocol.ChatToolCallStartAction:
		return []Event{ev(ToolCall, a.TurnID, a.DisplayName)}
	case *protocol.ChatToolCallCompleteAction:
		out := []Event{ev(ToolResult, a.TurnID, a.Result.PastTenseMessage.Text)}
		if a.Result.Success && edits(a.Result) {
			out = append(out, ev(Artifact, a.TurnID, a.Result.PastTenseMessage.Text))
		}
		return out
	case *protocol.ChatUsageAction:
		e := ev(LLMCall, a.TurnID, model(a.Usage))
		e.Usage = &a.Usage
		return []Event{e}
	case *protocol.ChatToolCallConfirmedAction:
		verdict := "approved"
		if !a.Approved {
			verdict = "denied"
		}
		return []Event{ev(HumanInput, a.TurnID, verdict+" tool call "+a.ToolCallID)}
	case *protocol.ChatInputRequestedAction:
		return []Event{ev(Question, "", a.Request.Question())}
	case *protocol.ChatInputCompletedAction:
		return []Event{ev(HumanInput, "", "answered "+a.RequestID+" ("+string(a.Response)+")")}
	case *protocol.ChatPendingMessageSetAction:
		return []Event{ev(HumanInput, "", string(a.Kind)+": "+a.Message.Text)}
	case *protocol.SessionChatUpdatedAction:
		if a.Changes.Status != nil {
			return []Event{ev(Transition, "", a.Chat+" "+statusText(*a.Changes.Status))}
		}
	case *protocol.SessionChatRemovedAction:
		return []Event{ev(Handoff, "", a.Chat+" left the session")}
	case *protocol.SessionChatAddedAction:
		return []Event{ev(Handoff, "", a.Summary.Resource+" joined the session")}
	case *protocol.SessionWorkingDirectoryReplacedAction:
		return []Event{ev(Artifact, "", "works in "+a.Replacement)}
	case *protocol.SessionTitleChangedAction:
		return []Event{ev(Note, "", "titled "+a.Title)}
	case *protocol.SessionCreationFailedAction:
		return []Event{ev(Error, "", a.Error.ErrorType+": "+a.Error.Message)}
	}
	return nil
}

// edits reports whether a tool's result carries file edits.
func edits(r protocol.ToolCallResult) bool {
	for _, c := range r.Content {
		if _, ok := c.(*protocol.ToolResultFileEditContent); ok {
			return true
		}
	}
	return false
}

func model(u protocol.UsageInfo) string {
	if u.Model != nil {
		return *u.Model
	}
	return ""
}

// statusText names a status's activity for a person.
func statusText(s protocol.SessionStatus) string {
	switch s.Activity() {
	case protocol.StatusInputNeeded:
		return "needs input"
	case protocol.StatusInProgress:
		return "in progress"
	case protocol.StatusError:
		return "stopped at an error"
	}
	return "idle"
}

func cut(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxText {
		return s
	}
	i := maxText
	for i > 0 && !isRuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// OfResidency returns the event of a session waking or falling asleep
// after the action numbered seq, at t; none for anything else.
func OfResidency(session, what string, seq int64, t time.Time) []Event {
	kind := map[string]Kind{"wake": Wake, "sleep": Sleep}[what]
	if kind == "" {
		return nil
	}
	text := "its agents let go and its turns dropped until it is used"
	if kind == Wake {
		text = "used again"
	}
	return []Event{{Seq: seq, Time: t, Kind: kind, Channel: session, Text: text, Actions: []int64{}}}
}
