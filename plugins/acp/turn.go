package acp

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// turnRun passes the session updates of one prompt on to its Turn and
// answers the agent's permission requests with the user's confirmations.
//
// The Turn calls updates make are made under mu, and none after end: once
// Prompt has returned, the Turn hears nothing more of the agent.
type turnRun struct {
	t   plugins.Turn
	log *slog.Logger

	// ctx ends when the turn does or is cancelled; pending
	// confirmations end with it.
	ctx    context.Context
	cancel context.CancelFunc

	// flush waits for the updates sent before now to reach the run.
	flush func()
	// policy returns the session's permissions now; nil asks.
	policy func() *plugins.Policy

	mu     sync.Mutex
	ended  bool
	tools  map[sdk.ToolCallId]*toolCall
	asking sync.WaitGroup // permission requests waiting on Confirm; Add only under mu while !ended
}

var (
	_ sink  = (*turnRun)(nil)
	_ asker = (*turnRun)(nil)
)

func newTurnRun(ctx context.Context, t plugins.Turn, log *slog.Logger) *turnRun {
	ctx, cancel := context.WithCancel(ctx)
	return &turnRun{t: t, log: log, ctx: ctx, cancel: cancel, tools: map[sdk.ToolCallId]*toolCall{}}
}

// end stops reporting to the Turn: confirmations still waiting are
// cancelled and waited for.
func (r *turnRun) end() {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.cancel()
	r.asking.Wait()
}

// toolPhase is how far the Turn has heard of a tool call.
type toolPhase int

const (
	toolNew      toolPhase = iota // not reported yet
	toolStarted                   // ToolStart
	toolAsking                    // Confirm waits for the user
	toolRunning                   // ToolRunning, or confirmed
	toolDenied                    // the user said no, or the question was cancelled: the host ends it
	toolFinished                  // ToolDone
)

// toolCall is what the agent said so far about one tool call. ACP sends
// a call's fields in pieces (tool_call, then tool_call_update with what
// changed), and a permission request may describe it before either.
type toolCall struct {
	id        string
	title     string
	kind      sdk.ToolKind
	input     string // rawInput as JSON
	content   []sdk.ToolCallContent
	locations []sdk.ToolCallLocation
	phase     toolPhase
}

// tool returns the call id names, adding it if it is new.
func (r *turnRun) tool(id sdk.ToolCallId) *toolCall {
	c := r.tools[id]
	if c == nil {
		c = &toolCall{id: string(id)}
		r.tools[id] = c
	}
	return c
}

// merge takes the fields an update sets; ACP leaves out what did not
// change.
func (c *toolCall) merge(title *string, kind *sdk.ToolKind, rawInput any, content []sdk.ToolCallContent, locations []sdk.ToolCallLocation) {
	if title != nil && *title != "" {
		c.title = *title
	}
	if kind != nil && *kind != "" {
		c.kind = *kind
	}
	if rawInput != nil {
		if b, err := json.Marshal(rawInput); err == nil {
			c.input = string(b)
		}
	}
	if content != nil {
		c.content = content
	}
	if locations != nil {
		c.locations = locations
	}
}

// paths are the files the call says it touches: its locations and the
// files its diffs change, for the session's permissions to match.
func (c *toolCall) paths() []string {
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, l := range c.locations {
		add(l.Path)
	}
	for _, cc := range c.content {
		if cc.Diff != nil {
			add(cc.Diff.Path)
		}
	}
	return out
}

// call describes the tool call to the Turn. ACP tools have no names, only
// a kind (read, edit, execute, ...) and a title for people.
func (c *toolCall) call() plugins.ToolCall {
	name := string(c.kind)
	if name == "" {
		name = string(sdk.ToolKindOther)
	}
	title := c.title
	if title == "" {
		title = c.id
	}
	return plugins.ToolCall{
		ID:          c.id,
		Name:        name,
		DisplayName: title,
		Invocation:  protocol.Markdown(title),
		Input:       c.input,
		Kind:        name, // ACP's kinds are the policy's
		Paths:       c.paths(),
	}
}

// result is the tool call's result as ACP ended it.
func (c *toolCall) result(success bool) protocol.ToolCallResult {
	res := protocol.ToolCallResult{Success: success, PastTenseMessage: protocol.Markdown(c.call().DisplayName)}
	var texts []string
	for _, cc := range c.content {
		if cc.Content == nil {
			continue
		}
		if text, ok := blockText(cc.Content.Content); ok {
			res.Content = append(res.Content, &protocol.ToolResultTextContent{Text: text})
			texts = append(texts, text)
		}
	}
	if !success {
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "the tool failed"
		}
		res.Error = &protocol.ToolError{Message: msg}
	}
	return res
}

// update reports one session update to the Turn.
func (r *turnRun) update(kind string, u sdk.SessionUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	switch kind {
	case "agent_message_chunk":
		if text, ok := blockText(u.AgentMessageChunk.Content); ok {
			r.t.Text(text)
		}
	case "agent_thought_chunk":
		if text, ok := blockText(u.AgentThoughtChunk.Content); ok {
			r.t.Reasoning(text)
		}
	case "tool_call":
		tc := u.ToolCall
		c := r.tool(tc.ToolCallId)
		c.merge(&tc.Title, &tc.Kind, tc.RawInput, tc.Content, tc.Locations)
		r.start(c)
		r.status(c, tc.Status)
	case "tool_call_update":
		tu := u.ToolCallUpdate
		c := r.tool(tu.ToolCallId)
		c.merge(tu.Title, tu.Kind, tu.RawInput, tu.Content, tu.Locations)
		r.start(c)
		if tu.Status != nil {
			r.status(c, *tu.Status)
		}
	case "session_info_update":
		if title := u.SessionInfoUpdate.Title; title != nil && *title != "" {
			r.t.Title(*title)
		}
	case "user_message_chunk":
		// The agent repeating the prompt: the Turn has it already.
	default:
		// plan, available_commands_update, current_mode_update,
		// config_option_update, usage_update, and kinds newer than
		// the SDK: nothing in a turn shows them yet.
		r.log.Debug("session update ignored", "kind", kind)
	}
}

// start reports a call the Turn has not heard of.
func (r *turnRun) start(c *toolCall) {
	if c.phase == toolNew {
		r.t.ToolStart(c.call())
		c.phase = toolStarted
	}
}

// status reports a call's new status.
func (r *turnRun) status(c *toolCall, s sdk.ToolCallStatus) {
	switch s {
	case sdk.ToolCallStatusInProgress:
		// A call the user confirmed runs already; one being asked about
		// runs only if the user says yes.
		if c.phase == toolStarted {
			call := c.call()
			r.t.ToolRunning(c.id, call.Invocation, call.Input)
			c.phase = toolRunning
		}
	case sdk.ToolCallStatusCompleted, sdk.ToolCallStatusFailed:
		if c.phase == toolDenied || c.phase == toolFinished {
			return
		}
		r.t.ToolDone(c.id, c.result(s == sdk.ToolCallStatusCompleted))
		c.phase = toolFinished
	}
}

// permission has the session's permissions, or else the user, decide the
// call the request is about, and answers with the agent's option that
// says what they decided. The call
// is started if the Turn has not heard of it, which happens when the
// request overtakes the tool_call update before it, or names a call the
// agent never announced.
func (r *turnRun) permission(ctx context.Context, req sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
	cancelled := sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}
	if r.flush != nil {
		r.flush() // what the agent said of the call before it asked
	}
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return cancelled
	}
	tu := req.ToolCall
	c := r.tool(tu.ToolCallId)
	c.merge(tu.Title, tu.Kind, tu.RawInput, tu.Content, tu.Locations)
	c.phase = toolAsking
	call := c.call()
	r.asking.Add(1)
	r.mu.Unlock()
	defer r.asking.Done()

	// The question ends with the request (the agent withdrew it or went
	// away) or with the turn.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	ok, err := r.decide(ctx, call, req.Options)

	r.mu.Lock()
	if c.phase == toolAsking {
		switch {
		case err == nil && ok:
			c.phase = toolRunning
		default:
			c.phase = toolDenied
		}
	}
	r.mu.Unlock()
	if err != nil {
		return cancelled
	}

	id, found := pickOption(req.Options, ok)
	if !found {
		r.log.Warn("the agent offered no option for the user's answer; cancelled", "toolCallId", call.ID, "allowed", ok)
		return cancelled
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(id)}
}

// decide answers a permission request by the session's permissions,
// asking the user what they leave open. Approving an agent's "always"
// option would let it run later calls the permissions may not allow
// (a path outside the folder, a rule changed since), so a call whose
// request offers no allow-once option is the user's to approve.
func (r *turnRun) decide(ctx context.Context, call plugins.ToolCall, opts []sdk.PermissionOption) (bool, error) {
	var pol *plugins.Policy
	if r.policy != nil {
		pol = r.policy()
	}
	d := pol.Decide(call)
	if d.Verdict == plugins.Allow && !slices.ContainsFunc(opts, func(o sdk.PermissionOption) bool {
		return o.Kind == sdk.PermissionOptionKindAllowOnce
	}) {
		d = plugins.Decision{Verdict: plugins.Ask}
	}
	if d.Verdict == plugins.Ask {
		return r.t.Confirm(ctx, call)
	}
	r.t.Decided(call, d)
	return d.Verdict == plugins.Allow, nil
}

// pickOption returns the option that allows (or rejects) this once, or
// else always.
func pickOption(opts []sdk.PermissionOption, allow bool) (sdk.PermissionOptionId, bool) {
	kinds := []sdk.PermissionOptionKind{sdk.PermissionOptionKindRejectOnce, sdk.PermissionOptionKindRejectAlways}
	if allow {
		kinds = []sdk.PermissionOptionKind{sdk.PermissionOptionKindAllowOnce, sdk.PermissionOptionKindAllowAlways}
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionId, true
			}
		}
	}
	return "", false
}
