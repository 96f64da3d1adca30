package claude_test

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// event is one call an agent made on a recordingTurn.
type event struct {
	kind   string // the method: "text", "reasoning", "toolStart", ...
	text   string // Text, Reasoning; the id of ToolRunning and ToolDone
	at     time.Time
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
	asked chan plugins.ToolCall
	// texted is closed at the first Text.
	texted     chan struct{}
	textedOnce sync.Once
}

func newTurn(id string) *recordingTurn {
	return &recordingTurn{
		id:       id,
		confirms: make(chan bool, 8),
		asked:    make(chan plugins.ToolCall, 8),
		texted:   make(chan struct{}),
	}
}

func (t *recordingTurn) ID() string { return t.id }

func (t *recordingTurn) add(e event) {
	e.at = time.Now()
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
}

func (t *recordingTurn) Text(s string) {
	t.add(event{kind: "text", text: s})
	t.textedOnce.Do(func() { close(t.texted) })
}
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
	case t.asked <- call:
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

// kinds returns the kinds of the events, in order, runs of text and
// reasoning deltas counted once.
func (t *recordingTurn) kinds() []string {
	var out []string
	for _, e := range t.all() {
		if len(out) > 0 && out[len(out)-1] == e.kind && (e.kind == "text" || e.kind == "reasoning") {
			continue
		}
		out = append(out, e.kind)
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

var _ plugins.Turn = (*recordingTurn)(nil)
