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

// The ids of the options a tool call's confirmation offers, as VS Code's
// own agent host names the first two: a client answers with one as its
// chat/toolCallConfirmed's selectedOptionId.
const (
	// OptionAllowSession allows the call and adds an allow rule for
	// its tool to the session's permissions (plugins.Policy.SessionRule),
	// so the next calls like it run without asking.
	OptionAllowSession = "allow-session"
	// OptionAllowOnce allows this call alone.
	OptionAllowOnce = "allow-once"
	// OptionDeny refuses it.
	OptionDeny = "deny"
)

// confirmOptions are the options of a confirmation, in the order and
// groups VS Code's own host gives them (the session's allow first, a
// divider before the denial): allow in this session only when a rule can
// say it (rule), allow once, deny. Clients that draw them send the id
// chosen, so the host can tell the session's allow from allow once.
func confirmOptions(rule string) []protocol.ConfirmationOption {
	var opts []protocol.ConfirmationOption
	if rule != "" {
		opts = append(opts, protocol.ConfirmationOption{ID: OptionAllowSession, Label: "Allow in this Session",
			Kind: protocol.ConfirmationOptionKindApprove, Group: new(int64(1))})
	}
	return append(opts,
		protocol.ConfirmationOption{ID: OptionAllowOnce, Label: "Allow Once", Kind: protocol.ConfirmationOptionKindApprove},
		protocol.ConfirmationOption{ID: OptionDeny, Label: "Deny", Kind: protocol.ConfirmationOptionKindDeny, Group: new(int64(2))},
	)
}

// Granter is an Owner that keeps what a person allows in this session:
// the owner's permissions, which the options a confirmation offers are
// worked out from, and the rules OptionAllowSession adds to them.
type Granter interface {
	// PolicyLocked returns the session's permissions as they are now,
	// bound to the folder its agents work in. Called with the owner's
	// lock held; the policy is used after it is let go.
	PolicyLocked() *plugins.Policy

	// AllowLocked adds rule to the session's allow rules, as a change of
	// its config every client sees and the session keeps. It returns a
	// function, run holding no lock, that hands the changed config to the
	// session's running agents and returns once they have it; nil when
	// nothing changed. Called with the owner's lock held.
	AllowLocked(c *Chat, rule string) (configure func())
}

// pendingConfirm is a confirmation the runner waits on.
type pendingConfirm struct {
	ch   chan confirmAnswer
	rule string // the rule OptionAllowSession adds; "": not offered
}

// confirmAnswer is a person's answer to a confirmation.
type confirmAnswer struct {
	ok        bool
	configure func() // set when the answer added a rule: tell the agents
}

// sessionRule returns the rule allowing call in this session would add,
// or "" when the owner keeps no such rules or none can say it. The policy
// is read under the owner's lock and asked outside it: deciding a call
// resolves its paths on disk.
func (t *turn) sessionRule(call plugins.ToolCall) string {
	g, ok := t.c.owner.(Granter)
	if !ok {
		return ""
	}
	var pol *plugins.Policy
	t.c.owner.Do(func() { pol = g.PolicyLocked() })
	return pol.SessionRule(call)
}

// answerConfirmLocked reads a client's chat/toolCallConfirmed for the
// runner waiting on p. approved decides, whatever option is named; an
// approval naming OptionAllowSession, when it was offered, adds its rule
// to the session's permissions first, so the rule is there when the agent
// goes on. An option id the host did not offer is taken by approved
// alone. Called with the owner's lock held.
func (c *Chat) answerConfirmLocked(p *pendingConfirm, a *protocol.ChatToolCallConfirmedAction) confirmAnswer {
	ans := confirmAnswer{ok: a.Approved}
	if !a.Approved || p.rule == "" || a.SelectedOptionID == nil || *a.SelectedOptionID != OptionAllowSession {
		return ans
	}
	if g, ok := c.owner.(Granter); ok {
		ans.configure = g.AllowLocked(c, p.rule)
	}
	return ans
}

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
