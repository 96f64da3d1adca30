package acp

import (
	"fmt"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/protocol"
)

// replay collects the session updates an agent replays when it loads a
// session into the conversation's turns. A user message starts a turn;
// what the agent says and does after it is the turn's response.
type replay struct {
	mu        sync.Mutex
	collected []*replayTurn
}

var _ sink = (*replay)(nil)

// replayTurn is one turn being collected.
type replayTurn struct {
	messageID string // the id the agent recorded for the user message, if any
	message   strings.Builder
	parts     []protocol.ResponsePart
	tools     map[sdk.ToolCallId]*replayTool
}

// replayTool is a tool call of a replayed turn and where its part is.
type replayTool struct {
	toolCall
	part   int
	status sdk.ToolCallStatus
}

func newReplay() *replay { return &replay{} }

func (r *replay) update(kind string, u sdk.SessionUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind {
	case "user_message_chunk":
		chunk := u.UserMessageChunk
		id := ""
		if chunk.MessageId != nil {
			id = *chunk.MessageId
		}
		// Chunks continue the message until the agent answers or a
		// message with another id starts.
		t := r.current()
		if t == nil || len(t.parts) > 0 || (id != "" && t.messageID != "" && id != t.messageID) {
			t = r.newTurn()
		}
		if t.messageID == "" {
			t.messageID = id
		}
		if text, ok := blockText(chunk.Content); ok {
			t.message.WriteString(text)
		}
	case "agent_message_chunk":
		if text, ok := blockText(u.AgentMessageChunk.Content); ok {
			r.turn().appendMarkdown(text)
		}
	case "agent_thought_chunk":
		if text, ok := blockText(u.AgentThoughtChunk.Content); ok {
			r.turn().appendReasoning(text)
		}
	case "tool_call":
		tc := u.ToolCall
		c := r.turn().tool(tc.ToolCallId)
		c.merge(&tc.Title, &tc.Kind, tc.RawInput, tc.Content, tc.Locations)
		if tc.Status != "" {
			c.status = tc.Status
		}
	case "tool_call_update":
		tu := u.ToolCallUpdate
		c := r.turn().tool(tu.ToolCallId)
		c.merge(tu.Title, tu.Kind, tu.RawInput, tu.Content, tu.Locations)
		if tu.Status != nil {
			c.status = *tu.Status
		}
	}
}

func (r *replay) current() *replayTurn {
	if len(r.collected) == 0 {
		return nil
	}
	return r.collected[len(r.collected)-1]
}

func (r *replay) newTurn() *replayTurn {
	t := &replayTurn{tools: map[sdk.ToolCallId]*replayTool{}}
	r.collected = append(r.collected, t)
	return t
}

// turn returns the turn the agent's output belongs to; output before any
// user message makes a turn without one.
func (r *replay) turn() *replayTurn {
	if t := r.current(); t != nil {
		return t
	}
	return r.newTurn()
}

func (t *replayTurn) partID() string { return fmt.Sprintf("part-%d", len(t.parts)+1) }

func (t *replayTurn) appendMarkdown(s string) {
	if n := len(t.parts); n > 0 {
		if md, ok := t.parts[n-1].(*protocol.MarkdownResponsePart); ok {
			md.Content += s
			return
		}
	}
	t.parts = append(t.parts, &protocol.MarkdownResponsePart{ID: t.partID(), Content: s})
}

func (t *replayTurn) appendReasoning(s string) {
	if n := len(t.parts); n > 0 {
		if rp, ok := t.parts[n-1].(*protocol.ReasoningResponsePart); ok {
			rp.Content += s
			return
		}
	}
	t.parts = append(t.parts, &protocol.ReasoningResponsePart{ID: t.partID(), Content: s})
}

// tool returns the call id names, placing its part where it first
// appears.
func (t *replayTurn) tool(id sdk.ToolCallId) *replayTool {
	c := t.tools[id]
	if c == nil {
		c = &replayTool{toolCall: toolCall{id: string(id)}, part: len(t.parts)}
		t.tools[id] = c
		t.parts = append(t.parts, nil) // filled in by turns
	}
	return c
}

// turns returns the collected turns, oldest first. A turn's id is the
// message id the agent recorded, which is the host's turn id when ahpd
// sent it, or else the turn's place in the conversation.
func (r *replay) turns() []protocol.Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]protocol.Turn, 0, len(r.collected))
	for i, t := range r.collected {
		id := t.messageID
		if id == "" {
			id = fmt.Sprintf("turn-%d", i+1)
		}
		parts := make([]protocol.ResponsePart, len(t.parts))
		copy(parts, t.parts)
		for _, c := range t.tools {
			parts[c.part] = &protocol.ToolCallResponsePart{ToolCall: c.state()}
		}
		out = append(out, protocol.Turn{
			ID:            id,
			Message:       protocol.Message{Text: t.message.String(), Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
			ResponseParts: parts,
			State:         protocol.TurnStateComplete,
		})
	}
	return out
}

// state is the final state of a replayed tool call: one that did not
// finish was cut short with its turn.
func (c *replayTool) state() protocol.ToolCallState {
	call := c.call()
	var input *protocol.ToolInput
	if call.Input != "" {
		input = protocol.InlineInput(call.Input)
	}
	switch c.status {
	case sdk.ToolCallStatusCompleted, sdk.ToolCallStatusFailed:
		res := c.result(c.status == sdk.ToolCallStatusCompleted)
		return &protocol.ToolCallCompletedState{
			ToolCallID: call.ID, ToolName: call.Name, DisplayName: call.DisplayName,
			InvocationMessage: call.Invocation, ToolInput: input,
			Success: res.Success, PastTenseMessage: res.PastTenseMessage, Content: res.Content, Error: res.Error,
			Confirmed: protocol.ToolCallConfirmationReasonNotNeeded,
		}
	}
	return &protocol.ToolCallCancelledState{
		ToolCallID: call.ID, ToolName: call.Name, DisplayName: call.DisplayName,
		InvocationMessage: call.Invocation, ToolInput: input,
		Reason: protocol.ToolCallCancellationReasonSkipped,
	}
}
