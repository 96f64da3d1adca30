package pluginstest

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// Event is one call an agent made on a Turn.
type Event struct {
	// Kind names the method: "text", "reasoning", "title", "background",
	// "usage", "toolStart", "toolRunning", "confirm", "decided",
	// "toolDone", "ask".
	Kind string
	// Text is the argument of Text, Reasoning and Title, and the tool
	// call's id for ToolStart, ToolRunning, Confirm and ToolDone.
	Text string
	// At is when the call was made.
	At time.Time
	// Work and Done are the arguments of Background.
	Work plugins.BackgroundWork
	Done bool
	// Call is the call of ToolStart, Confirm and Decided; for
	// ToolRunning, its id, invocation and input.
	Call plugins.ToolCall
	// Decision is the decision of Decided.
	Decision plugins.Decision
	// Result is the result of ToolDone.
	Result protocol.ToolCallResult
	// Usage is the argument of Usage.
	Usage protocol.UsageInfo
	// Req is the request of Ask.
	Req protocol.ChatInputRequest
}

// Turn is a plugins.Turn that records what the agent reports. Confirm and
// Ask take their answers from Confirms and Answers, which the test fills
// ahead or feeds while the turn waits; with nothing to take they wait for
// ctx. Its methods are safe for concurrent use.
type Turn struct {
	// Confirms holds the answers Confirm gives, in order.
	Confirms chan bool
	// Answers holds the answers Ask gives, in order.
	Answers chan plugins.Answer
	// Steering holds the steering messages Steer hands out, in order;
	// SteerWith puts one there and signals Steered.
	Steering chan protocol.Message

	steered chan struct{}

	id string
	// asked is sent, without blocking, the event of each Confirm and Ask
	// before it waits.
	asked chan Event
	// changed is signalled, without blocking, after every event.
	changed chan struct{}
	// texted is closed at the first Text.
	texted     chan struct{}
	textedOnce sync.Once

	mu     sync.Mutex
	events []Event
}

var _ plugins.Turn = (*Turn)(nil)

// NewTurn returns a Turn whose ID is id. An empty id lets a backend that
// numbers turns itself do so.
func NewTurn(id string) *Turn {
	return &Turn{
		Confirms: make(chan bool, 8),
		Answers:  make(chan plugins.Answer, 8),
		Steering: make(chan protocol.Message, 8),
		steered:  make(chan struct{}, 1),
		id:       id,
		asked:    make(chan Event, 8),
		changed:  make(chan struct{}, 1),
		texted:   make(chan struct{}),
	}
}

// ID returns the id the turn was made with.
func (t *Turn) ID() string { return t.id }

func (t *Turn) add(e Event) {
	e.At = time.Now()
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Text records s and, the first time, closes Texted.
func (t *Turn) Text(s string) {
	t.add(Event{Kind: "text", Text: s})
	t.textedOnce.Do(func() { close(t.texted) })
}

// Reasoning records s.
func (t *Turn) Reasoning(s string) { t.add(Event{Kind: "reasoning", Text: s}) }

// Title records s.
func (t *Turn) Title(s string) { t.add(Event{Kind: "title", Text: s}) }

// Background records w and done.
func (t *Turn) Background(w plugins.BackgroundWork, done bool) {
	t.add(Event{Kind: "background", Work: w, Done: done})
}

// SteerWith leaves a steering message for the agent, as a client does.
func (t *Turn) SteerWith(m protocol.Message) {
	t.Steering <- m
	select {
	case t.steered <- struct{}{}:
	default:
	}
}

// Steered receives after SteerWith.
func (t *Turn) Steered() <-chan struct{} { return t.steered }

// Steer hands out the next message of Steering and records it.
func (t *Turn) Steer() (protocol.Message, bool) {
	select {
	case m := <-t.Steering:
		t.add(Event{Kind: "steer", Text: m.Text})
		return m, true
	default:
		return protocol.Message{}, false
	}
}

// Usage records u.
func (t *Turn) Usage(u protocol.UsageInfo) { t.add(Event{Kind: "usage", Usage: u}) }

// ToolStart records call.
func (t *Turn) ToolStart(call plugins.ToolCall) {
	t.add(Event{Kind: "toolStart", Text: call.ID, Call: call})
}

// ToolRunning records the call id runs.
func (t *Turn) ToolRunning(id string, invocation protocol.StringOrMarkdown, input string) {
	t.add(Event{Kind: "toolRunning", Text: id, Call: plugins.ToolCall{ID: id, Invocation: invocation, Input: input}})
}

// ToolDone records the result of the call id.
func (t *Turn) ToolDone(id string, result protocol.ToolCallResult) {
	t.add(Event{Kind: "toolDone", Text: id, Result: result})
}

// Confirm records call, reports it on Asked and answers from Confirms.
func (t *Turn) Confirm(ctx context.Context, call plugins.ToolCall) (bool, error) {
	e := Event{Kind: "confirm", Text: call.ID, Call: call}
	t.add(e)
	t.signalAsked(e)
	select {
	case ok := <-t.Confirms:
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Decided records call and the policy's decision.
func (t *Turn) Decided(call plugins.ToolCall, d plugins.Decision) {
	t.add(Event{Kind: "decided", Text: call.ID, Call: call, Decision: d})
}

// Ask records req, reports it on Asked and answers from Answers.
func (t *Turn) Ask(ctx context.Context, req protocol.ChatInputRequest) (plugins.Answer, error) {
	e := Event{Kind: "ask", Req: req}
	t.add(e)
	t.signalAsked(e)
	select {
	case a := <-t.Answers:
		return a, nil
	case <-ctx.Done():
		return plugins.Answer{}, ctx.Err()
	}
}

func (t *Turn) signalAsked(e Event) {
	select {
	case t.asked <- e:
	default:
	}
}

// Asked receives the event of each Confirm and Ask as it starts to wait
// for its answer. It holds the last few unreceived; more are dropped.
func (t *Turn) Asked() <-chan Event { return t.asked }

// Changed is signalled after every event. It holds one signal: a receiver
// that misses some still sees that something changed.
func (t *Turn) Changed() <-chan struct{} { return t.changed }

// Texted is closed at the first Text.
func (t *Turn) Texted() <-chan struct{} { return t.texted }

// Events returns a copy of the events so far.
func (t *Turn) Events() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Event(nil), t.events...)
}

// Of returns the events of one kind.
func (t *Turn) Of(kind string) []Event {
	var out []Event
	for _, e := range t.Events() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Kinds returns the kinds of the events, in order.
func (t *Turn) Kinds() []string {
	var out []string
	for _, e := range t.Events() {
		out = append(out, e.Kind)
	}
	return out
}

// Outline returns the kinds of the events, in order, runs of text and
// reasoning deltas counted once.
func (t *Turn) Outline() []string {
	var out []string
	for _, e := range t.Events() {
		if len(out) > 0 && out[len(out)-1] == e.Kind && (e.Kind == "text" || e.Kind == "reasoning") {
			continue
		}
		out = append(out, e.Kind)
	}
	return out
}

// About returns the kinds of the events about one tool call, in order.
func (t *Turn) About(id string) []string {
	var out []string
	for _, e := range t.Events() {
		if (strings.HasPrefix(e.Kind, "tool") || e.Kind == "confirm" || e.Kind == "decided") && e.Text == id {
			out = append(out, e.Kind)
		}
	}
	return out
}

// Response returns all Text concatenated.
func (t *Turn) Response() string {
	var b strings.Builder
	for _, e := range t.Of("text") {
		b.WriteString(e.Text)
	}
	return b.String()
}

// Wait waits until cond holds, checking after each event and every few
// milliseconds, and reports whether it did before ctx ended.
func (t *Turn) Wait(ctx context.Context, cond func() bool) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-t.changed:
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// WaitText waits until the response contains s and reports whether it
// did before ctx ended.
func (t *Turn) WaitText(ctx context.Context, s string) bool {
	return t.Wait(ctx, func() bool { return strings.Contains(t.Response(), s) })
}
