package acp_test

import (
	"context"
	"strings"
	"sync"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// event is one call an agent made on a recordingTurn.
type event struct {
	kind   string // the method: "text", "reasoning", "toolStart", ...
	text   string // Text, Reasoning, Title; the id of ToolRunning and ToolDone
	call   plugins.ToolCall
	result protocol.ToolCallResult
	usage  protocol.UsageInfo
}

// recordingTurn is a plugins.Turn that records what the agent reports.
// Confirm takes its answers from a channel the test fills ahead or feeds
// while the turn waits; with nothing to take it waits for ctx.
type recordingTurn struct {
	id       string
	confirms chan bool

	mu     sync.Mutex
	events []event
	// asked is signalled, without blocking, when Confirm waits.
	asked chan struct{}
	// changed is signalled, without blocking, after every event.
	changed chan struct{}
}

func newTurn() *recordingTurn {
	return &recordingTurn{
		confirms: make(chan bool, 8),
		asked:    make(chan struct{}, 8),
		changed:  make(chan struct{}, 1),
	}
}

func (t *recordingTurn) ID() string { return t.id }

func (t *recordingTurn) add(e event) {
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *recordingTurn) Text(s string)      { t.add(event{kind: "text", text: s}) }
func (t *recordingTurn) Reasoning(s string) { t.add(event{kind: "reasoning", text: s}) }
func (t *recordingTurn) Title(s string)     { t.add(event{kind: "title", text: s}) }
func (t *recordingTurn) Busy(b bool)        { t.add(event{kind: "busy"}) }
func (t *recordingTurn) Usage(u protocol.UsageInfo) {
	t.add(event{kind: "usage", usage: u})
}

func (t *recordingTurn) ToolStart(call plugins.ToolCall) {
	t.add(event{kind: "toolStart", text: call.ID, call: call})
}

func (t *recordingTurn) ToolRunning(id string, invocation protocol.StringOrMarkdown, input string) {
	t.add(event{kind: "toolRunning", text: id, call: plugins.ToolCall{ID: id, Invocation: invocation, Input: input}})
}

func (t *recordingTurn) ToolDone(id string, result protocol.ToolCallResult) {
	t.add(event{kind: "toolDone", text: id, result: result})
}

func (t *recordingTurn) Confirm(ctx context.Context, call plugins.ToolCall) (bool, error) {
	t.add(event{kind: "confirm", text: call.ID, call: call})
	select {
	case t.asked <- struct{}{}:
	default:
	}
	select {
	case ok := <-t.confirms:
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (t *recordingTurn) Ask(ctx context.Context, req protocol.ChatInputRequest) (plugins.Answer, error) {
	t.add(event{kind: "ask"})
	<-ctx.Done()
	return plugins.Answer{}, ctx.Err()
}

// all returns a copy of the events so far.
func (t *recordingTurn) all() []event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]event(nil), t.events...)
}

// of returns the events of one kind.
func (t *recordingTurn) of(kind string) []event {
	var out []event
	for _, e := range t.all() {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// about returns the events about one tool call, in order, by kind.
func (t *recordingTurn) about(id string) []string {
	var out []string
	for _, e := range t.all() {
		if strings.HasPrefix(e.kind, "tool") || e.kind == "confirm" {
			if e.text == id {
				out = append(out, e.kind)
			}
		}
	}
	return out
}

// text returns all Text concatenated.
func (t *recordingTurn) text() string {
	var b strings.Builder
	for _, e := range t.of("text") {
		b.WriteString(e.text)
	}
	return b.String()
}

// waitText waits until the text contains s or ctx ends.
func (t *recordingTurn) waitText(ctx context.Context, s string) bool {
	for {
		if strings.Contains(t.text(), s) {
			return true
		}
		select {
		case <-t.changed:
		case <-ctx.Done():
			return false
		}
	}
}

var _ plugins.Turn = (*recordingTurn)(nil)
