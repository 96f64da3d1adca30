package claude

import (
	"context"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
)

// The CLI asks before it uses a tool its permission mode and rules do not
// allow: with --permission-prompt-tool stdio the question is a
// control_request of subtype can_use_tool on stdout, naming the tool, its
// input and the tool_use id, and the answer a control_response on stdin:
//
//	{"type":"control_response","response":{"subtype":"success","request_id":"…",
//	  "response":{"behavior":"allow","updatedInput":{…}}}}
//
// or, refused, {"behavior":"deny","message":"…"}. The CLI withdraws a
// question it no longer needs answered (its turn was interrupted) with a
// control_cancel_request naming the request.

// openPrompt is a permission question the user has not answered yet.
type openPrompt struct {
	cancel    context.CancelFunc
	withdrawn bool // the CLI withdrew it: no answer is owed
}

// controlRequest answers a control request of the CLI's.
func (r *turnRun) controlRequest(line []byte) {
	var req controlRequestLine
	if err := decodeLine(line, &req); err != nil || req.RequestID == "" {
		r.log.Debug("skipping a control request that does not decode", "line", truncate(line))
		return
	}
	switch req.Request.Subtype {
	case "can_use_tool":
		r.askPermission(req.RequestID, req.Request)
	case "initialize":
		// Nothing to tell it: no hooks, no MCP servers of ours.
		r.respond(req.RequestID, map[string]any{})
	default:
		r.log.Debug("refusing a control request", "subtype", req.Request.Subtype)
		r.send(controlResponseLine{Type: "control_response", Response: controlResponse{
			Subtype:   "error",
			RequestID: req.RequestID,
			Error:     "ahpd does not support control requests of subtype " + req.Request.Subtype,
		}})
	}
}

// askPermission has the session's permissions decide a tool call or, when
// they leave it open, puts it to the user and answers the CLI once the
// user has. The question waits in a goroutine of its own: the CLI goes on
// printing (and may ask about several calls at once) while the user
// thinks.
func (r *turnRun) askPermission(requestID string, req controlRequest) {
	id := req.ToolUseID
	if id == "" {
		id = requestID
	}
	input := req.Input
	if !isSet(input) {
		input = jsontext.Value(`{}`)
	}
	ctx, cancel := context.WithCancel(r.promptCtx)
	prompt := &openPrompt{cancel: cancel}

	r.mu.Lock()
	ts := r.tools[id]
	if ts == nil {
		ts = &toolState{name: req.ToolName}
		r.tools[id] = ts
	}
	ts.input = input
	// Confirm starts a call that was not started yet.
	ts.started, ts.asked = true, true
	call := toolCall(id, ts.name, ts.input, r.a.realDir)
	// The session's permissions answer first; a person is asked only
	// what they leave open.
	d := r.a.policy().Decide(call)
	if d.Verdict != plugins.Ask {
		// Marked before the answer goes, as a person's denial is.
		ts.denied = d.Verdict == plugins.Deny
		r.mu.Unlock()
		cancel()
		r.t.Decided(call, d)
		if d.Verdict == plugins.Allow {
			r.readBefore(ts, input)
			r.respond(requestID, permissionResult{Behavior: "allow", UpdatedInput: input})
		} else {
			r.respond(requestID, permissionResult{Behavior: "deny", Message: d.Reason()})
		}
		return
	}
	r.prompts[requestID] = prompt
	r.mu.Unlock()

	r.confirms.Add(1)
	go func() {
		defer r.confirms.Done()
		defer cancel()
		ok, err := r.t.Confirm(ctx, call)

		r.mu.Lock()
		delete(r.prompts, requestID)
		withdrawn := prompt.withdrawn
		if err == nil && !ok {
			// Marked before the answer goes: the CLI's result for the
			// call follows it, and must not complete what the host has
			// ended.
			ts.denied = true
		}
		r.mu.Unlock()
		switch {
		case withdrawn:
		case err != nil:
			// The turn is ending without an answer; the deny stops the
			// CLI's turn too, as the interrupt on its way does.
			r.respond(requestID, permissionResult{Behavior: "deny", Message: cancelMessage, Interrupt: true})
		case ok:
			r.readBefore(ts, input)
			r.respond(requestID, permissionResult{Behavior: "allow", UpdatedInput: input})
		default:
			r.respond(requestID, permissionResult{Behavior: "deny", Message: denyMessage})
		}
	}()
}

// readBefore reads the file a call allowed to run is about to write, as
// the answer that lets the CLI write it is about to go (edits.go).
func (r *turnRun) readBefore(ts *toolState, input jsontext.Value) {
	r.mu.Lock()
	name := ts.name
	r.mu.Unlock()
	before := readBefore(name, input, r.a.realDir)
	if before == nil {
		return
	}
	r.mu.Lock()
	ts.before = before
	r.mu.Unlock()
}

// controlCancel withdraws a permission question.
func (r *turnRun) controlCancel(line []byte) {
	var c controlCancelLine
	if err := decodeLine(line, &c); err != nil {
		return
	}
	r.mu.Lock()
	prompt := r.prompts[c.RequestID]
	if prompt != nil {
		prompt.withdrawn = true
	}
	r.mu.Unlock()
	if prompt != nil {
		prompt.cancel()
	}
}

// respond answers the control request id with success and response.
func (r *turnRun) respond(id string, response any) {
	r.send(controlResponseLine{Type: "control_response", Response: controlResponse{
		Subtype:   "success",
		RequestID: id,
		Response:  response,
	}})
}

func (r *turnRun) send(v any) {
	if err := r.p.send(v); err != nil {
		// The CLI is gone; the turn learns of it from its output.
		r.log.Debug("cannot answer the CLI", "err", err)
	}
}
