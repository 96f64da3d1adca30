package claude

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// The CLI's transcript of a session is a JSON Lines file it appends to as
// the conversation goes. The lines that make turns are:
//
//   - "user" with the prompt as a plain string: a turn starts. Its uuid is
//     the id the prompt was sent under (the host's turn id).
//   - "assistant": one line per content block of the model's reply
//     (several lines share a message id), adding text, reasoning and tool
//     calls; isApiErrorMessage marks the CLI's report of a failed call.
//   - "user" with tool_result blocks: tool calls complete.
//   - "user" with the text "[Request interrupted by user]": the turn was
//     cancelled.
//   - "user" with a slash command and its output (<command-name>,
//     <local-command-stdout>): skipped; a model switch writes them.
//
// Others (queue-operation, attachment, last-prompt, mode, ...), lines of
// subagents (isSidechain) and the CLI's own notes (isMeta) are skipped, as
// are lines that do not decode, such as one cut short.

// localCommand reports the text of a user line the CLI writes for a
// slash command run outside a turn: the command, and what it printed
// (the caveat before them is isMeta).
func localCommand(text string) bool {
	t := strings.TrimLeft(text, " \t\r\n")
	return strings.HasPrefix(t, "<command-name>") || strings.HasPrefix(t, "<local-command-stdout>") || strings.HasPrefix(t, "<local-command-stderr>")
}

// interruptMarker starts the text the CLI records when a turn is
// interrupted.
const interruptMarker = "[Request interrupted by user"

// readTranscript returns the turns of the transcript at path, whose
// session ran in dir. A missing file is an error satisfying
// errors.Is(err, os.ErrNotExist).
func readTranscript(ctx context.Context, path, dir string) ([]protocol.Turn, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("claude: open transcript: %w", err)
	}
	defer f.Close()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	b := &turnBuilder{dir: dir, turns: []protocol.Turn{}}
	if err := eachLine(ctx, f, b.line); err != nil {
		return nil, fmt.Errorf("claude: read transcript %s: %w", path, err)
	}
	b.finish()
	return b.turns, nil
}

// transcriptIDs returns the uuids of the transcript's lines; an unreadable
// transcript has none.
func transcriptIDs(path string) map[string]bool {
	ids := map[string]bool{}
	f, err := os.Open(path)
	if err != nil {
		return ids
	}
	defer f.Close()
	eachLine(context.Background(), f, func(line []byte) {
		var l struct {
			UUID string `json:"uuid"`
		}
		if decodeLine(line, &l) == nil && l.UUID != "" {
			ids[l.UUID] = true
		}
	})
	return ids
}

// eachLine calls fn with every non-empty line r reads. Lines longer than
// maxLine are skipped.
func eachLine(ctx context.Context, r io.Reader, fn func(line []byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	tooLong := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk, err := br.ReadSlice('\n')
		switch {
		case tooLong:
		case len(line)+len(chunk) > maxLine:
			tooLong, line = true, nil
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if trimmed := bytes.TrimSpace(line); !tooLong && len(trimmed) > 0 {
			fn(trimmed)
		}
		line, tooLong = line[:0], false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// turnBuilder rebuilds turns line by line.
type turnBuilder struct {
	dir   string
	turns []protocol.Turn
	cur   *turnRecord
}

// turnRecord is the turn being rebuilt.
type turnRecord struct {
	id          string
	prompt      string
	started     time.Time
	last        time.Time
	parts       []protocol.ResponsePart
	tools       map[string]*recordedTool
	usage       map[string]apiUsage // the last usage of each model call, by message id
	model       string
	interrupted bool
	errMsg      string
}

// recordedTool is a tool call of the turn and where its part is.
type recordedTool struct {
	id       string
	part     int
	name     string
	input    jsontext.Value
	ended    bool
	rejected bool // not run for the user's sake; how depends on how the turn ends
}

func (b *turnBuilder) line(line []byte) {
	var head lineHead
	if decodeLine(line, &head) != nil {
		return
	}
	switch head.Type {
	case "user":
		b.user(line)
	case "assistant":
		b.assistant(line)
	}
}

func (b *turnBuilder) user(line []byte) {
	var m messageLine
	if decodeLine(line, &m) != nil || m.Message == nil || m.IsSidechain || m.IsMeta || m.IsCompactSummary {
		return
	}
	var texts []string
	results := false
	for _, blk := range m.Message.Content {
		switch blk.Type {
		case "tool_result":
			results = true
			b.toolResult(blk)
		case "text":
			texts = append(texts, blk.Text)
		}
	}
	text := strings.Join(texts, "\n")
	switch {
	case strings.HasPrefix(text, interruptMarker):
		if b.cur != nil {
			b.cur.interrupted = true
			b.touch(m.Timestamp)
		}
	case (strings.HasPrefix(text, continueMarker) || strings.HasPrefix(text, steerMarker)) && b.cur != nil:
		// The turn went on after its process died, or was steered: what
		// follows is its.
		b.touch(m.Timestamp)
	case results:
		b.touch(m.Timestamp)
	case localCommand(text):
		// A slash command's record (the backend's model switch is /model),
		// which is no prompt.
	case len(texts) > 0:
		b.finish()
		b.cur = &turnRecord{id: m.UUID, prompt: text, tools: map[string]*recordedTool{}, usage: map[string]apiUsage{}}
		if t, err := time.Parse(time.RFC3339Nano, m.Timestamp); err == nil {
			b.cur.started, b.cur.last = t, t
		}
	}
}

func (b *turnBuilder) assistant(line []byte) {
	var m messageLine
	if decodeLine(line, &m) != nil || m.Message == nil || m.IsSidechain || b.cur == nil {
		return
	}
	cur, msg := b.cur, m.Message
	b.touch(m.Timestamp)
	if m.IsAPIErrorMessage || isSet(m.Error) {
		cur.errMsg = msg.Content.text()
		return
	}
	if msg.Usage != nil && msg.ID != "" {
		cur.usage[msg.ID] = *msg.Usage
	}
	if msg.Model != "" {
		cur.model = msg.Model
	}
	for _, blk := range msg.Content {
		switch blk.Type {
		case "text":
			if blk.Text == "" {
				continue
			}
			// Text continues the Markdown before it, as it did live.
			if md, ok := cur.lastPart().(*protocol.MarkdownResponsePart); ok {
				md.Content += blk.Text
				continue
			}
			cur.parts = append(cur.parts, &protocol.MarkdownResponsePart{ID: cur.partID("text"), Content: blk.Text})
		case "thinking":
			if blk.Thinking == "" {
				continue
			}
			if rp, ok := cur.lastPart().(*protocol.ReasoningResponsePart); ok {
				rp.Content += blk.Thinking
				continue
			}
			cur.parts = append(cur.parts, &protocol.ReasoningResponsePart{ID: cur.partID("reasoning"), Content: blk.Thinking})
		case "tool_use":
			if blk.ID == "" || cur.tools[blk.ID] != nil {
				continue
			}
			rt := &recordedTool{id: blk.ID, part: len(cur.parts), name: blk.Name, input: blk.Input}
			cur.tools[blk.ID] = rt
			// A call without a result ends as skipped (see finish).
			cur.parts = append(cur.parts, &protocol.ToolCallResponsePart{ToolCall: b.cancelled(blk.ID, rt, protocol.ToolCallCancellationReasonSkipped)})
		}
	}
}

// toolResult completes a tool call of the current turn.
func (b *turnBuilder) toolResult(res contentBlock) {
	if b.cur == nil {
		return
	}
	rt := b.cur.tools[res.ToolUseID]
	if rt == nil || rt.ended {
		return
	}
	rt.ended = true
	var state protocol.ToolCallState
	switch {
	case rejected(res):
		// Left as it was; finish decides.
		rt.rejected = true
		return
	case denied(res):
		state = b.cancelled(res.ToolUseID, rt, protocol.ToolCallCancellationReasonDenied)
	default:
		call := toolCall(res.ToolUseID, rt.name, rt.input, b.dir)
		r := toolResult(rt.name, rt.input, b.dir, res)
		state = &protocol.ToolCallCompletedState{
			ToolCallID:        call.ID,
			ToolName:          call.Name,
			DisplayName:       call.DisplayName,
			InvocationMessage: call.Invocation,
			ToolInput:         inlineInput(call.Input),
			Success:           r.Success,
			PastTenseMessage:  r.PastTenseMessage,
			Content:           r.Content,
			Error:             r.Error,
			// The transcript does not say whether the user was asked.
			Confirmed: protocol.ToolCallConfirmationReasonNotNeeded,
		}
	}
	b.cur.parts[rt.part] = &protocol.ToolCallResponsePart{ToolCall: state}
}

func (b *turnBuilder) cancelled(id string, rt *recordedTool, reason protocol.ToolCallCancellationReason) protocol.ToolCallState {
	call := toolCall(id, rt.name, rt.input, b.dir)
	return &protocol.ToolCallCancelledState{
		ToolCallID:        call.ID,
		ToolName:          call.Name,
		DisplayName:       call.DisplayName,
		InvocationMessage: call.Invocation,
		ToolInput:         inlineInput(call.Input),
		Reason:            reason,
	}
}

func inlineInput(s string) *protocol.ToolInput {
	if s == "" {
		return nil
	}
	return protocol.InlineInput(s)
}

// touch notes the time of a line of the current turn.
func (b *turnBuilder) touch(timestamp string) {
	if b.cur == nil {
		return
	}
	if t, err := time.Parse(time.RFC3339Nano, timestamp); err == nil && t.After(b.cur.last) {
		b.cur.last = t
	}
}

// finish ends the current turn, if any.
func (b *turnBuilder) finish() {
	cur := b.cur
	if cur == nil {
		return
	}
	b.cur = nil
	for _, rt := range cur.tools {
		// A call the CLI did not run while the turn was interrupted was
		// skipped with it; otherwise the user refused it in the CLI.
		if rt.rejected && !cur.interrupted {
			cur.parts[rt.part] = &protocol.ToolCallResponsePart{ToolCall: b.cancelled(rt.id, rt, protocol.ToolCallCancellationReasonDenied)}
		}
	}
	turn := protocol.Turn{
		ID:            cur.id,
		Message:       protocol.Message{Text: cur.prompt, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
		ResponseParts: cur.parts,
		State:         protocol.TurnStateComplete,
	}
	if turn.ResponseParts == nil {
		turn.ResponseParts = []protocol.ResponsePart{}
	}
	if !cur.started.IsZero() {
		turn.StartedAt = new(protocol.FormatTime(cur.started))
		turn.Duration = new(cur.last.Sub(cur.started).Milliseconds())
	}
	switch {
	case cur.interrupted:
		turn.State = protocol.TurnStateCancelled
	case cur.errMsg != "":
		turn.State = protocol.TurnStateError
		turn.ResponseParts = append(turn.ResponseParts, &protocol.ErrorResponsePart{
			Error: protocol.ErrorInfo{ErrorType: "agentError", Message: "claude: " + cur.errMsg}})
	}
	if len(cur.usage) > 0 {
		var in, out, cached int64
		for _, u := range cur.usage {
			in += u.InputTokens
			out += u.OutputTokens
			cached += u.CacheReadInputTokens
		}
		u := &protocol.UsageInfo{InputTokens: new(in), OutputTokens: new(out)}
		if cached > 0 {
			u.CacheReadTokens = new(cached)
		}
		if cur.model != "" {
			u.Model = new(cur.model)
		}
		turn.Usage = u
	}
	b.turns = append(b.turns, turn)
}

func (r *turnRecord) lastPart() protocol.ResponsePart {
	if len(r.parts) == 0 {
		return nil
	}
	return r.parts[len(r.parts)-1]
}

// partID names a part of the turn, unique within it.
func (r *turnRecord) partID(kind string) string {
	return r.id + "." + kind + "-" + strconv.Itoa(len(r.parts)+1)
}
