package chats

import (
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// What a turn does with a person: the tool calls the session's
// permissions decided without one (Decided), and how long it waits for
// one (the inputTimeout).

// ErrorInputTimeout is the errorType of a turn stopped because it waited
// for a person longer than its session's inputTimeout.
const ErrorInputTimeout = "inputTimeout"

// PermissionMeta is the _meta member of a tool call the session's
// permissions decided: the rule that did, as plugins.Decision.Rule says
// it (`mode bypass`, `allow "edit(src/**)"`, `deny "execute"`).
const PermissionMeta = "ahpd.permission"

// Batcher is an Owner that can apply a run of a chat's actions as one
// change: what it derives from the chat's state (a session mirroring its
// chats' waits and status) is brought up to date once, after the last,
// so a state the run passes through shows only in the chat's own actions.
// Called with the owner's lock held.
type Batcher interface {
	EmitBatch(c *Chat, as []protocol.Action)
}

// emitBatchLocked applies as one change when the owner can, one by one
// when it cannot. Called with the owner's lock held.
func (c *Chat) emitBatchLocked(as []protocol.Action) {
	if b, ok := c.owner.(Batcher); ok {
		b.EmitBatch(c, as)
		return
	}
	for _, a := range as {
		c.owner.Emit(c, a)
	}
}

// Decided shows a call the session's permissions decided. An allowed call
// runs, confirmed by a setting (AHP's "setting"); a denied one is asked
// and denied in one change (toolCallReady, then toolCallConfirmed with
// approved false and the reason), which the reducer takes to the denied
// state a person's refusal leaves; the session never shows it waiting.
// Both carry the rule in _meta.
func (t *turn) Decided(call plugins.ToolCall, d plugins.Decision) {
	if d.Verdict != plugins.Allow && d.Verdict != plugins.Deny {
		return
	}
	rule, _ := jsontext.AppendQuote(nil, d.Rule)
	meta := protocol.Object{PermissionMeta: jsontext.Value(rule)}
	t.c.owner.Do(func() {
		t.startLocked(call)
		ready := &protocol.ChatToolCallReadyAction{
			TurnID:            t.r.turnID,
			ToolCallID:        call.ID,
			Meta:              meta,
			InvocationMessage: call.Invocation,
			ToolInput:         protocol.InlineInput(call.Input),
		}
		if d.Verdict == plugins.Allow {
			ready.Confirmed = new(protocol.ToolCallConfirmationReasonSetting)
			t.c.owner.Emit(t.c, ready)
			return
		}
		t.c.emitBatchLocked([]protocol.Action{ready, &protocol.ChatToolCallConfirmedAction{
			TurnID:        t.r.turnID,
			ToolCallID:    call.ID,
			Meta:          meta,
			Approved:      false,
			Reason:        new(protocol.ToolCallCancellationReasonDenied),
			ReasonMessage: new(protocol.Plain(d.Reason())),
		}})
	})
}

// inputWait is the timer of one wait for a person, if the session has an
// inputTimeout; due is nil (never ready) if not.
type inputWait struct {
	due  <-chan time.Time
	stop func()
	d    time.Duration
}

func (w inputWait) release() {
	if w.stop != nil {
		w.stop()
	}
}

// waitLocked sets the timer of a wait that begins now. It is set before
// the wait is published, so a client that sees the wait can count on it.
// Called with the owner's lock held.
func (c *Chat) waitLocked() inputWait {
	if c.timeout == nil {
		return inputWait{}
	}
	d := c.timeout()
	if d <= 0 {
		return inputWait{}
	}
	due, stop := c.clock.At(c.clock.Now().Add(d))
	return inputWait{due: due, stop: stop, d: d}
}

// expire stops the turn whose wait w timed out, the timeout its cause, and
// returns the error the waiting agent is given.
func (t *turn) expire(w inputWait, what string) error {
	err := &plugins.InputTimeoutError{Waited: w.d, For: what}
	t.r.stop(err)
	return err
}
