package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// turnEvent is one thing that happened in a turn, as `ahpd run` shows it
// (and, with --json, prints it: one object a line).
type turnEvent struct {
	Event string `json:"event"` // session, text, reasoning, tool, input, approval, end

	Session  string `json:"session,omitempty"`
	Chat     string `json:"chat,omitempty"`
	Turn     string `json:"turn,omitempty"`
	Provider string `json:"provider,omitempty"` // session: the agent it runs on

	Text string `json:"text,omitempty"` // text, reasoning: what was added

	ID      string `json:"id,omitempty"`      // tool, input, approval
	Tool    string `json:"tool,omitempty"`    // tool, approval
	State   string `json:"state,omitempty"`   // tool: running, pending-confirmation, completed, failed, cancelled; end: complete, error, cancelled, needs-input
	Message string `json:"message,omitempty"` // tool: what it does or did; input: the question; approval, end: why

	Approved *bool  `json:"approved,omitempty"` // approval
	By       string `json:"by,omitempty"`       // approval: terminal, or permissions (Message the rule that decided)

	Error      string `json:"error,omitempty"`      // end
	DurationMs *int64 `json:"durationMs,omitempty"` // end
	Exit       *int   `json:"exit,omitempty"`       // end
}

// view shows a turn's events.
type view interface {
	show(ev turnEvent)
	// tick redraws what moves with time (a terminal's progress line).
	tick(activity string)
	// done leaves the display clean.
	done()
}

// differ turns successive states of a turn into the events between them.
type differ struct {
	printed map[int]int       // a text part's bytes already shown, by index
	tools   map[string]string // a tool call's last state shown
	asked   map[string]bool   // input requests shown
	decided map[string]bool   // tool calls whose permissions decision was shown
}

func newDiffer() *differ {
	return &differ{printed: map[int]int{}, tools: map[string]string{}, asked: map[string]bool{}, decided: map[string]bool{}}
}

// diff returns what parts add to what was shown before.
func (d *differ) diff(parts []protocol.ResponsePart) []turnEvent {
	var out []turnEvent
	for i, p := range parts {
		switch p := p.(type) {
		case *protocol.MarkdownResponsePart:
			if n := d.printed[i]; len(p.Content) > n {
				out = append(out, turnEvent{Event: "text", Text: p.Content[n:]})
				d.printed[i] = len(p.Content)
			}
		case *protocol.ReasoningResponsePart:
			if n := d.printed[i]; len(p.Content) > n {
				out = append(out, turnEvent{Event: "reasoning", Text: p.Content[n:]})
				d.printed[i] = len(p.Content)
			}
		case *protocol.ToolCallResponsePart:
			ev, ok := toolEvent(p.ToolCall)
			if !ok || d.tools[ev.ID] == ev.State {
				continue
			}
			if dec, ok := decision(p.ToolCall); ok && !d.decided[dec.ID] {
				// The session's permissions decided it, before it ran.
				d.decided[dec.ID] = true
				out = append(out, dec)
			}
			if _, seen := d.tools[ev.ID]; !seen && (ev.State == "completed" || ev.State == "failed") {
				// It ran between two looks: it is shown starting too.
				out = append(out, turnEvent{Event: "tool", ID: ev.ID, Tool: ev.Tool, State: "running", Message: invocation(p.ToolCall)})
			}
			d.tools[ev.ID] = ev.State
			out = append(out, ev)
		case *protocol.InputRequestResponsePart:
			if !d.asked[p.Request.ID] {
				d.asked[p.Request.ID] = true
				out = append(out, turnEvent{Event: "input", ID: p.Request.ID, Message: client.RequestText(&p.Request)})
			}
		}
	}
	return out
}

// toolEvent describes a tool call's state; streaming calls are not shown
// until they run or ask.
func toolEvent(tc protocol.ToolCallState) (turnEvent, bool) {
	ev := turnEvent{Event: "tool"}
	switch tc := tc.(type) {
	case *protocol.ToolCallPendingConfirmationState:
		if client.DecidedByPermissions(tc.Meta) {
			// Being denied by the session's permissions: it waits on
			// nobody, and its end shows next.
			return ev, false
		}
		ev.ID, ev.Tool, ev.State, ev.Message = tc.ToolCallID, tc.DisplayName, "pending-confirmation", tc.InvocationMessage.Text
	case *protocol.ToolCallRunningState:
		ev.ID, ev.Tool, ev.State, ev.Message = tc.ToolCallID, tc.DisplayName, "running", tc.InvocationMessage.Text
	case *protocol.ToolCallCompletedState:
		ev.ID, ev.Tool, ev.State, ev.Message = tc.ToolCallID, tc.DisplayName, "completed", tc.PastTenseMessage.Text
		if !tc.Success {
			ev.State = "failed"
			if tc.Error != nil && tc.Error.Message != "" {
				ev.Message += ": " + tc.Error.Message
			}
		}
	case *protocol.ToolCallCancelledState:
		ev.ID, ev.Tool, ev.State, ev.Message = tc.ToolCallID, tc.DisplayName, "cancelled", tc.InvocationMessage.Text
	default:
		return ev, false
	}
	return ev, true
}

// decision is the approval event of a tool call the session's
// permissions decided (docs/PERMISSIONS.md): one that runs, ran or was
// cancelled with the rule in its _meta.
func decision(tc protocol.ToolCallState) (turnEvent, bool) {
	var meta protocol.Object
	approved := true
	var id, tool string
	switch tc := tc.(type) {
	case *protocol.ToolCallRunningState:
		meta, id, tool = tc.Meta, tc.ToolCallID, tc.DisplayName
	case *protocol.ToolCallCompletedState:
		meta, id, tool = tc.Meta, tc.ToolCallID, tc.DisplayName
	case *protocol.ToolCallCancelledState:
		if tc.Reason != protocol.ToolCallCancellationReasonDenied {
			return turnEvent{}, false
		}
		meta, id, tool, approved = tc.Meta, tc.ToolCallID, tc.DisplayName, false
	default:
		return turnEvent{}, false
	}
	var rule string
	if v, ok := meta[chats.PermissionMeta]; !ok || json.Unmarshal(v, &rule) != nil || rule == "" {
		return turnEvent{}, false
	}
	return turnEvent{Event: "approval", ID: id, Tool: tool, Approved: &approved, By: "permissions", Message: rule}, true
}

// invocation is what a finished tool call was asked to do.
func invocation(tc protocol.ToolCallState) string {
	if tc, ok := tc.(*protocol.ToolCallCompletedState); ok {
		return tc.InvocationMessage.Text
	}
	return ""
}

// follow shows a turn until it ends, answering what it asks through a,
// and returns the exit status: 0 complete, 1 failed, 130 interrupted (ctx
// ended: the turn is cancelled first).
func follow(ctx context.Context, c *client.Client, chat, turnID string, v view, a *answerer) int {
	d := newDiffer()
	started := time.Now()
	var ticker <-chan time.Time
	if _, ok := v.(*textView); ok && v.(*textView).tty {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		ticker = t.C
	}
	interrupted := false
	waitCtx := ctx
	for {
		changed := c.Changed()
		cs, _ := c.State(chat).(*protocol.ChatState)
		if cs == nil {
			v.done()
			return exitFailed
		}
		parts, ended := turnParts(cs, turnID)
		for _, ev := range d.diff(parts) {
			v.show(ev)
		}
		if ended != nil {
			return finish(v, ended, interrupted, started)
		}
		if !interrupted {
			if w := a.answer(ctx, c, chat, turnID, parts); w != nil {
				// Left open for somebody to answer from elsewhere.
				ms := time.Since(started).Milliseconds()
				code := exitNeedsInput
				v.show(turnEvent{Event: "end", State: "needs-input", ID: w.ID, Message: needsInput(a.session, w), DurationMs: &ms, Exit: &code})
				v.done()
				return code
			}
		}
		select {
		case <-changed:
		case <-ticker:
			v.tick(activity(parts, time.Since(started)))
		case <-waitCtx.Done():
			if interrupted {
				v.done()
				fmt.Fprintln(a.io.stderr, "ahpd run: the turn did not end after it was cancelled")
				return exitInterrupt
			}
			interrupted = true
			cancelTurn(c, chat, turnID, started)
			var cancel context.CancelFunc
			waitCtx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
		case <-c.Disconnected():
			if err := reconnect(waitCtx, c); err != nil {
				v.done()
				fmt.Fprintf(a.io.stderr, "ahpd run: lost the connection to ahpd (%v); the turn may go on: `ahpd show %s`\n", err, sessionID(sessionOfChat(c, chat)))
				return exitFailed
			}
		}
	}
}

// turnParts finds the turn: its parts while it runs, or the ended turn.
func turnParts(cs *protocol.ChatState, turnID string) ([]protocol.ResponsePart, *protocol.Turn) {
	if at := cs.ActiveTurn; at != nil && at.ID == turnID {
		return at.ResponseParts, nil
	}
	for i := len(cs.Turns) - 1; i >= 0; i-- {
		if cs.Turns[i].ID == turnID {
			return cs.Turns[i].ResponseParts, &cs.Turns[i]
		}
	}
	return nil, nil
}

// finish shows a turn's end and returns the exit status: 0 complete,
// 4 complete but its last tool call failed (the agent stopped on a
// failure it did not get past), 1 failed or cancelled, 130 interrupted.
func finish(v view, t *protocol.Turn, interrupted bool, started time.Time) int {
	ev := turnEvent{Event: "end", State: string(t.State), DurationMs: t.Duration}
	if ev.DurationMs == nil {
		ms := time.Since(started).Milliseconds()
		ev.DurationMs = &ms
	}
	code := exitFailed
	switch {
	case interrupted:
		code = exitInterrupt
		ev.Message = "interrupted"
	case t.State == protocol.TurnStateComplete:
		code = exitOK
		if what, failed := lastToolFailed(t.ResponseParts); failed {
			code = exitToolFailed
			ev.Message = fmt.Sprintf("the turn completed, but its last tool call failed: %s (exit status %d)", what, exitToolFailed)
		}
	}
	if e := t.ErrorPart(); e != nil {
		ev.Error = e.Error.Message
	}
	ev.Exit = &code
	v.show(ev)
	v.done()
	return code
}

// lastToolFailed reports whether the last tool call of a turn failed,
// and what it was.
func lastToolFailed(parts []protocol.ResponsePart) (string, bool) {
	for i := len(parts) - 1; i >= 0; i-- {
		p, ok := parts[i].(*protocol.ToolCallResponsePart)
		if !ok {
			continue
		}
		ev, _ := toolEvent(p.ToolCall)
		return ev.Tool + ": " + ev.Message, ev.State == "failed"
	}
	return "", false
}

// cancelTurn asks the host to cancel the turn; the turn's end is what
// follow waits for.
func cancelTurn(c *client.Client, chat, turnID string, started time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = c.Dispatch(ctx, chat, &protocol.ChatTurnCancelledAction{TurnID: turnID, Duration: time.Since(started).Milliseconds()})
}

// reconnect tries to get the connection back a few times.
func reconnect(ctx context.Context, c *client.Client) error {
	var err error
	for i := range 3 {
		if i > 0 {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = c.Reconnect(rctx)
		cancel()
		if err == nil || errors.Is(err, client.ErrClosed) {
			return err
		}
	}
	return err
}

// sessionOfChat is the session a chat URI belongs to.
func sessionOfChat(_ *client.Client, chat string) string {
	if u, err := protocol.ParseChatURI(chat); err == nil {
		return u.Session
	}
	return chat
}

// activity says what a running turn is doing now, for the progress line.
func activity(parts []protocol.ResponsePart, elapsed time.Duration) string {
	what := "thinking"
	for _, p := range parts {
		switch p := p.(type) {
		case *protocol.MarkdownResponsePart:
			what = "writing"
		case *protocol.ToolCallResponsePart:
			if ev, ok := toolEvent(p.ToolCall); ok {
				switch ev.State {
				case "running":
					what = "running " + ev.Tool
				case "pending-confirmation":
					what = "waiting for approval of " + ev.Tool
				default:
					what = "thinking"
				}
			}
		case *protocol.InputRequestResponsePart:
			if p.Response == nil {
				what = "waiting for an answer"
			}
		}
	}
	return fmt.Sprintf("%s · %.1fs", what, elapsed.Seconds())
}
