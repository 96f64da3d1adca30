package claude

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// levelTrace logs every line the CLI prints, below debug.
const levelTrace = slog.LevelDebug - 4

// turnRun is one turn on its way through the CLI: it reads the CLI's
// lines until the turn's result and reports them to the host's Turn.
//
// Text and reasoning come from the stream events the CLI passes through
// (--include-partial-messages), delta by delta; the CLI then prints each
// finished content block again as an "assistant" line, which adds only
// what the stream did not carry (a reply the CLI fetched without
// streaming). Tool calls start with their block and take their input
// from the assistant line; a permission prompt confirms them, and the
// tool result in the following "user" line completes them.
type turnRun struct {
	a   *Agent
	p   *process
	t   plugins.Turn
	log *slog.Logger

	// The message the model is replying with, and which of its content
	// blocks (by index) the stream events delivered.
	msgID    string
	streamed map[int]bool
	seen     int // its blocks the assistant lines delivered
	model    string
	// apiError is the CLI's report of a failed model call, which the
	// result then refers to.
	apiError string

	// promptCtx ends with the turn: permission prompts still open then
	// are abandoned.
	promptCtx context.Context
	confirms  sync.WaitGroup

	mu      sync.Mutex // guards tools and prompts, shared with the prompts
	tools   map[string]*toolState
	prompts map[string]*openPrompt // by control request id
}

// toolState is what the turn knows of a tool call.
type toolState struct {
	name    string
	input   jsontext.Value
	started bool // ToolStart reported
	running bool // ToolRunning reported, or confirmed
	asked   bool // put to the user
	denied  bool // the user refused: the host has ended it
	done    bool // ToolDone reported
	// before is the file an edit tool's call writes as it was before
	// the call ran (edits.go), nil until read.
	before *plugins.FileVersion
}

func newTurnRun(a *Agent, p *process, t plugins.Turn) *turnRun {
	return &turnRun{
		a:        a,
		p:        p,
		t:        t,
		log:      a.log,
		streamed: map[int]bool{},
		tools:    map[string]*toolState{},
		prompts:  map[string]*openPrompt{},
	}
}

// run sends the prompt and follows the turn to its result. When ctx ends,
// or the agent closes, the CLI is asked to interrupt the turn, which it
// ends with a result of its own; one that does not come in time is
// killed.
func (r *turnRun) run(ctx context.Context, in userInput) error {
	promptCtx, cancelPrompts := context.WithCancel(ctx)
	stop := context.AfterFunc(r.a.closing, cancelPrompts)
	r.promptCtx = promptCtx
	defer func() {
		stop()
		cancelPrompts()
		r.confirms.Wait()
	}()

	if err := r.p.send(in); err != nil {
		// The CLI is gone or going; how it ended says more than the
		// broken pipe.
		r.p.WaitExit(drainWait)
		return plugins.Interrupted(r.p.exitError())
	}

	cancelled := ctx.Done()
	closing := r.a.closing.Done()
	exited := r.p.Exited()
	interrupted := false
	var deadline, drain <-chan time.Time
	interrupt := func() {
		cancelled, closing, interrupted = nil, nil, true
		if err := r.p.send(controlRequestLine{
			Type:      "control_request",
			RequestID: "ahpd-interrupt-" + newUUID(),
			Request:   controlRequest{Subtype: "interrupt"},
		}); err != nil {
			r.log.Debug("cannot interrupt the CLI", "err", err)
		}
		deadline = time.After(interruptWait)
	}
	ended := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errClosed
	}

	for {
		select {
		case line, ok := <-r.p.lines:
			if !ok {
				// Its output ended: the CLI exited, or closed stdout and
				// will not be heard from again.
				r.p.WaitExit(drainWait)
				if interrupted {
					return ended()
				}
				// It died mid-turn: the turn can go on in a new one.
				return plugins.Interrupted(r.p.exitError())
			}
			if done, err := r.handle(line); done {
				if interrupted {
					return ended()
				}
				return err
			}
		case <-cancelled:
			interrupt()
		case <-closing:
			interrupt()
		case <-deadline:
			r.log.Warn("the CLI did not end an interrupted turn in time; killing it", "pid", r.p.PID())
			r.p.kill()
			return ended()
		case <-exited:
			// What the CLI printed before it exited is still to be read;
			// a process it left behind must not hold the rest back.
			exited = nil
			drain = time.After(drainWait)
		case <-drain:
			drain = nil
			r.p.endOutput()
		}
	}
}

// handle acts on one line of the CLI's output and reports whether it
// ended the turn, and how.
func (r *turnRun) handle(line []byte) (done bool, err error) {
	var head lineHead
	if err := decodeLine(line, &head); err != nil {
		r.log.Debug("skipping a line that is not JSON", "line", truncate(line), "err", err)
		return false, nil
	}
	if r.log.Enabled(context.Background(), levelTrace) {
		r.log.Log(context.Background(), levelTrace, "line from the CLI", "line", truncate(line))
	}
	switch head.Type {
	case "stream_event":
		r.streamEvent(line)
	case "assistant":
		r.assistant(line)
	case "user":
		r.user(line)
	case "tool_progress":
		r.toolProgress(line)
	case "control_request":
		r.controlRequest(line)
	case "control_cancel_request":
		r.controlCancel(line)
	case "result":
		return true, r.result(line)
	case "system":
		if head.Subtype == "init" {
			// The CLI has taken the prompt into the session.
			r.a.markSession()
		}
	case "control_response":
		// The CLI's answer to an interrupt: the result follows.
	default:
		r.log.Debug("ignoring a line", "type", head.Type, "subtype", head.Subtype)
	}
	return false, nil
}

// beginMessage starts following a new message of the model's.
func (r *turnRun) beginMessage(id string) {
	r.msgID, r.seen = id, 0
	clear(r.streamed)
}

func (r *turnRun) streamEvent(line []byte) {
	var s streamLine
	if err := decodeLine(line, &s); err != nil || s.ParentToolUseID != nil {
		// A subagent's reply is not the turn's.
		return
	}
	ev := &s.Event
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			r.beginMessage(ev.Message.ID)
			if ev.Message.Model != "" {
				r.model = ev.Message.Model
			}
		}
	case "content_block_start":
		switch cb := ev.ContentBlock; {
		case cb == nil:
		case cb.Type == "text" || cb.Type == "thinking":
			r.streamed[ev.Index] = true
		case cb.Type == "tool_use":
			r.startTool(cb.ID, cb.Name, nil)
		}
	case "content_block_delta":
		if d := ev.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				r.streamed[ev.Index] = true
				if d.Text != "" {
					r.t.Text(d.Text)
				}
			case "thinking_delta":
				r.streamed[ev.Index] = true
				if d.Thinking != "" {
					r.t.Reasoning(d.Thinking)
				}
			}
		}
	}
}

func (r *turnRun) assistant(line []byte) {
	var m messageLine
	if err := decodeLine(line, &m); err != nil || m.ParentToolUseID != nil || m.Message == nil {
		return
	}
	msg := m.Message
	if isSet(m.Error) {
		// The CLI's own message about a failed model call; the result
		// reports it as the turn's error.
		r.apiError = msg.Content.text()
		return
	}
	if msg.ID != r.msgID {
		r.beginMessage(msg.ID)
	}
	if msg.Model != "" {
		r.model = msg.Model
	}
	for _, blk := range msg.Content {
		index := r.seen
		r.seen++
		switch blk.Type {
		case "text":
			if !r.streamed[index] && blk.Text != "" {
				r.t.Text(blk.Text)
			}
		case "thinking":
			if !r.streamed[index] && blk.Thinking != "" {
				r.t.Reasoning(blk.Thinking)
			}
		case "tool_use":
			r.startTool(blk.ID, blk.Name, blk.Input)
		}
	}
}

// startTool reports a tool call the first time it is seen, and keeps its
// input once known.
func (r *turnRun) startTool(id, name string, input jsontext.Value) {
	if id == "" {
		return
	}
	// Read now for a call the CLI will run unasked; a call it asks about
	// is read again as it is allowed (askPermission).
	before := readBefore(name, input, r.a.realDir)
	r.mu.Lock()
	ts := r.tools[id]
	if ts == nil {
		ts = &toolState{name: name}
		r.tools[id] = ts
	}
	if len(input) > 0 {
		ts.input = input
	}
	if before != nil && ts.before == nil && !ts.asked {
		ts.before = before
	}
	report := !ts.started
	ts.started = true
	call := toolCall(id, ts.name, ts.input, r.a.realDir)
	r.mu.Unlock()
	if report {
		r.t.ToolStart(call)
	}
}

// user completes tool calls with their results.
func (r *turnRun) user(line []byte) {
	var m messageLine
	if err := decodeLine(line, &m); err != nil || m.ParentToolUseID != nil || m.Message == nil {
		return
	}
	results := 0
	for _, blk := range m.Message.Content {
		if blk.Type == "tool_result" {
			results++
		}
	}
	for _, blk := range m.Message.Content {
		if blk.Type != "tool_result" {
			continue
		}
		// The line's tool_use_result is its one result's.
		var account jsontext.Value
		if results == 1 {
			account = m.ToolUseResult
		}
		r.toolDone(blk, account)
	}
}

// toolDone completes a call with its result, and the CLI's account of
// what the tool did when the line gives one.
func (r *turnRun) toolDone(res contentBlock, account jsontext.Value) {
	r.mu.Lock()
	ts := r.tools[res.ToolUseID]
	if ts == nil || ts.done || ts.denied {
		// Unknown, finished, or ended by the host when the user said no.
		r.mu.Unlock()
		return
	}
	ts.done = true
	wasRunning := ts.running || ts.asked
	ts.running = true
	call := toolCall(res.ToolUseID, ts.name, ts.input, r.a.realDir)
	result := toolResult(ts.name, ts.input, r.a.realDir, res)
	name, path, before, asked := ts.name, editPath(ts.name, ts.input, r.a.realDir), ts.before, ts.asked
	r.mu.Unlock()
	if v, ok := originalFile(account); ok && path != "" && (before == nil || !asked) {
		// Read as it was allowed, the file was read before the CLI wrote;
		// read as the call came, it may have been read after.
		before = &v
	}
	result = withFileEdit(result, name, path, before)
	if !wasRunning {
		// The CLI ran it without asking, and says so only now.
		r.t.ToolRunning(call.ID, call.Invocation, call.Input)
	}
	r.t.ToolDone(call.ID, result)
}

// toolProgress marks a tool call the CLI runs without asking as running.
func (r *turnRun) toolProgress(line []byte) {
	var tp toolProgressLine
	if err := decodeLine(line, &tp); err != nil || tp.ParentToolUseID != nil {
		return
	}
	r.mu.Lock()
	ts := r.tools[tp.ToolUseID]
	if ts == nil || ts.running || ts.asked || ts.done {
		r.mu.Unlock()
		return
	}
	ts.running = true
	call := toolCall(tp.ToolUseID, ts.name, ts.input, r.a.realDir)
	r.mu.Unlock()
	r.t.ToolRunning(call.ID, call.Invocation, call.Input)
}

// result reports the turn's usage and returns how it ended.
func (r *turnRun) result(line []byte) error {
	var res resultLine
	if err := decodeLine(line, &res); err != nil {
		return fmt.Errorf("claude: the turn's result does not decode: %w", err)
	}
	if u := res.Usage; u != nil && (u.InputTokens > 0 || u.OutputTokens > 0) {
		usage := protocol.UsageInfo{InputTokens: new(u.InputTokens), OutputTokens: new(u.OutputTokens)}
		if u.CacheReadInputTokens > 0 {
			usage.CacheReadTokens = new(u.CacheReadInputTokens)
		}
		if r.model != "" {
			usage.Model = new(r.model)
		}
		r.t.Usage(usage)
	}
	if res.Subtype == "success" && !res.IsError {
		return nil
	}
	msg := res.Result
	if msg == "" {
		msg = r.apiError
	}
	if msg == "" {
		msg = strings.Join(res.Errors, "; ")
	}
	if msg == "" {
		msg = "the turn ended with " + res.Subtype
	}
	return fmt.Errorf("claude: %s", msg)
}

// isSet reports whether a JSON member is present and not null.
func isSet(v jsontext.Value) bool { return len(v) > 0 && string(v) != "null" }

// truncate shortens a line for a log.
func truncate(line []byte) string {
	const n = 200
	if len(line) > n {
		return string(line[:n]) + "…"
	}
	return string(line)
}
