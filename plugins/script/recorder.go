package script

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// recorder passes everything an agent reports on to the host's Turn and
// keeps the response parts the turn builds, so that the finished turn can
// be written to the transcript as the host saw it.
type recorder struct {
	plugins.Turn // Title and Busy pass through: they are not part of a turn

	mu    sync.Mutex
	parts []protocol.ResponsePart
	tools map[string]*toolEntry
	usage *protocol.UsageInfo
	// texts holds the text of the last part while it streams: a part's
	// Content is set from it when another part follows or the turn ends,
	// so text streamed in pieces is not copied at every piece.
	texts map[int]*strings.Builder
}

// toolEntry is a tool call of the turn and where its part is.
type toolEntry struct {
	part      int
	call      plugins.ToolCall
	confirmed protocol.ToolCallConfirmationReason
	ended     bool
}

func newRecorder(t plugins.Turn) *recorder {
	return &recorder{Turn: t, tools: map[string]*toolEntry{}, texts: map[int]*strings.Builder{}}
}

// Text appends Markdown, continuing the last part when it is Markdown.
func (r *recorder) Text(s string) {
	r.Turn.Text(s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.streaming(); b != nil {
		if _, ok := r.last().(*protocol.MarkdownResponsePart); ok {
			b.WriteString(s)
			return
		}
	}
	r.add(&protocol.MarkdownResponsePart{ID: r.partID()}, s)
}

// Reasoning appends reasoning, continuing the last part when it is
// reasoning.
func (r *recorder) Reasoning(s string) {
	r.Turn.Reasoning(s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.streaming(); b != nil {
		if _, ok := r.last().(*protocol.ReasoningResponsePart); ok {
			b.WriteString(s)
			return
		}
	}
	r.add(&protocol.ReasoningResponsePart{ID: r.partID()}, s)
}

// streaming returns the text of the last part while it streams, or nil.
func (r *recorder) streaming() *strings.Builder {
	if len(r.parts) == 0 {
		return nil
	}
	return r.texts[len(r.parts)-1]
}

// add appends a text part that streams, starting with s.
func (r *recorder) add(p protocol.ResponsePart, s string) {
	r.settle()
	r.parts = append(r.parts, p)
	b := &strings.Builder{}
	b.WriteString(s)
	r.texts[len(r.parts)-1] = b
}

// settle writes the streamed text of the parts into them.
func (r *recorder) settle() {
	for i, b := range r.texts {
		switch p := r.parts[i].(type) {
		case *protocol.MarkdownResponsePart:
			p.Content = b.String()
		case *protocol.ReasoningResponsePart:
			p.Content = b.String()
		}
		delete(r.texts, i)
	}
}

func (r *recorder) ToolStart(call plugins.ToolCall) {
	r.Turn.ToolStart(call)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start(call)
}

func (r *recorder) ToolRunning(id string, invocation protocol.StringOrMarkdown, input string) {
	r.Turn.ToolRunning(id, invocation, input)
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.tools[id]
	if e == nil || e.ended {
		return
	}
	e.call.Invocation, e.call.Input = invocation, input
	e.confirmed = protocol.ToolCallConfirmationReasonNotNeeded
	r.set(e, e.running())
}

func (r *recorder) Confirm(ctx context.Context, call plugins.ToolCall) (bool, error) {
	r.mu.Lock()
	e := r.tools[call.ID]
	if e == nil {
		e = r.start(call)
	}
	e.call = call
	r.set(e, e.pending())
	r.mu.Unlock()

	ok, err := r.Turn.Confirm(ctx, call)

	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		// Left pending: the turn ends with it and finish skips it.
	case ok:
		e.confirmed = protocol.ToolCallConfirmationReasonUserAction
		r.set(e, e.running())
	default:
		e.ended = true
		r.set(e, e.cancelled(protocol.ToolCallCancellationReasonDenied))
	}
	return ok, err
}

// Decided records a call the session's permissions decided: running,
// confirmed by a setting, or denied with the reason, as the host shows it.
func (r *recorder) Decided(call plugins.ToolCall, d plugins.Decision) {
	r.Turn.Decided(call, d)
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.tools[call.ID]
	if e == nil {
		e = r.start(call)
	}
	e.call = call
	switch d.Verdict {
	case plugins.Allow:
		e.confirmed = protocol.ToolCallConfirmationReasonSetting
		r.set(e, e.running())
	case plugins.Deny:
		e.ended = true
		c := e.cancelled(protocol.ToolCallCancellationReasonDenied).(*protocol.ToolCallCancelledState)
		c.ReasonMessage = new(protocol.Plain(d.Reason()))
		r.set(e, c)
	}
}

func (r *recorder) ToolDone(id string, result protocol.ToolCallResult) {
	r.Turn.ToolDone(id, result)
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.tools[id]
	if e == nil || e.ended {
		return
	}
	e.ended = true
	r.set(e, e.completed(result))
}

func (r *recorder) Ask(ctx context.Context, req protocol.ChatInputRequest) (plugins.Answer, error) {
	part := &protocol.InputRequestResponsePart{Request: req}
	r.mu.Lock()
	r.settle()
	r.parts = append(r.parts, part)
	r.mu.Unlock()

	answer, err := r.Turn.Ask(ctx, req)

	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		// A finished turn holds no open question.
		part.Response = new(protocol.ChatInputResponseKindCancel)
		return answer, err
	}
	part.Request.Answers = answer.Answers.Clone()
	part.Response = new(answer.Response)
	return answer, nil
}

func (r *recorder) Usage(u protocol.UsageInfo) {
	r.Turn.Usage(u)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.usage = &u
}

// finish returns the finished turn. Tool calls still open are cancelled
// as skipped, as the host's reducer does when a turn ends.
func (r *recorder) finish(id string, started time.Time, msg protocol.Message, state protocol.TurnState, turnErr *protocol.ErrorResponsePart) protocol.Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settle()
	for _, e := range r.tools {
		if !e.ended {
			e.ended = true
			r.set(e, e.cancelled(protocol.ToolCallCancellationReasonSkipped))
		}
	}
	ms := time.Since(started).Milliseconds()
	parts := make([]protocol.ResponsePart, len(r.parts), len(r.parts)+1)
	copy(parts, r.parts)
	if turnErr != nil {
		parts = append(parts, turnErr)
	}
	return protocol.Turn{
		ID:            id,
		StartedAt:     new(protocol.FormatTime(started)),
		Duration:      new(ms),
		Message:       msg,
		ResponseParts: parts,
		Usage:         r.usage,
		State:         state,
	}
}

func (r *recorder) last() protocol.ResponsePart {
	if len(r.parts) == 0 {
		return nil
	}
	return r.parts[len(r.parts)-1]
}

// partID names a Markdown or reasoning part; ids need only be unique
// within the turn.
func (r *recorder) partID() string { return fmt.Sprintf("part-%d", len(r.parts)+1) }

// start adds a tool call's part, streaming until it runs or asks.
func (r *recorder) start(call plugins.ToolCall) *toolEntry {
	r.settle()
	e := &toolEntry{part: len(r.parts), call: call}
	r.tools[call.ID] = e
	r.parts = append(r.parts, &protocol.ToolCallResponsePart{ToolCall: &protocol.ToolCallStreamingState{
		ToolCallID:        call.ID,
		ToolName:          call.Name,
		DisplayName:       call.DisplayName,
		InvocationMessage: new(call.Invocation),
	}})
	return e
}

func (r *recorder) set(e *toolEntry, state protocol.ToolCallState) {
	r.parts[e.part] = &protocol.ToolCallResponsePart{ToolCall: state}
}

func (e *toolEntry) input() *protocol.ToolInput {
	if e.call.Input == "" {
		return nil
	}
	return protocol.InlineInput(e.call.Input)
}

func (e *toolEntry) pending() protocol.ToolCallState {
	return &protocol.ToolCallPendingConfirmationState{
		ToolCallID: e.call.ID, ToolName: e.call.Name, DisplayName: e.call.DisplayName,
		InvocationMessage: e.call.Invocation, ToolInput: e.input(),
	}
}

func (e *toolEntry) running() protocol.ToolCallState {
	return &protocol.ToolCallRunningState{
		ToolCallID: e.call.ID, ToolName: e.call.Name, DisplayName: e.call.DisplayName,
		InvocationMessage: e.call.Invocation, ToolInput: e.input(), Confirmed: e.confirmed,
	}
}

func (e *toolEntry) completed(res protocol.ToolCallResult) protocol.ToolCallState {
	confirmed := e.confirmed
	if confirmed == "" {
		confirmed = protocol.ToolCallConfirmationReasonNotNeeded
	}
	return &protocol.ToolCallCompletedState{
		ToolCallID: e.call.ID, ToolName: e.call.Name, DisplayName: e.call.DisplayName,
		InvocationMessage: e.call.Invocation, ToolInput: e.input(), Confirmed: confirmed,
		Success: res.Success, PastTenseMessage: res.PastTenseMessage, Content: res.Content,
		StructuredContent: res.StructuredContent, Error: res.Error,
	}
}

func (e *toolEntry) cancelled(reason protocol.ToolCallCancellationReason) protocol.ToolCallState {
	return &protocol.ToolCallCancelledState{
		ToolCallID: e.call.ID, ToolName: e.call.Name, DisplayName: e.call.DisplayName,
		InvocationMessage: e.call.Invocation, ToolInput: e.input(), Reason: reason,
	}
}
