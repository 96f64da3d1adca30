package catalogue

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// A person who opens an external Claude session gets its turns, read
// from the transcript. A turn starts at a line with a person's prompt;
// the assistant lines after it (one per content block, several sharing a
// message id) add its Markdown, reasoning and tool calls; the user lines
// that carry tool results complete those calls; an interrupt line marks
// it cancelled.

// ErrUnknownCursor is returned for a cursor that names no turn of the
// transcript.
var ErrUnknownCursor = errors.New("catalogue: unknown turn cursor")

// maxTurnLine bounds one transcript line read for turns; a longer one is
// skipped rather than held.
const maxTurnLine = 128 << 20

// TurnPage is a page of a transcript's turns.
type TurnPage struct {
	// Turns are oldest first.
	Turns []protocol.Turn
	// Before is the cursor of the page before this one, "" when these
	// are the transcript's first turns.
	Before string
	// Skipped counts lines that did not decode.
	Skipped int
}

// ClaudeTurns reads the turns of the Claude transcript at path: the last
// limit turns before the cursor before ("" for the newest turns; a
// TurnPage.Before for older ones), every turn when limit is not
// positive. The file is streamed: no more than limit turns are held, and
// the reading stops at the cursor.
func ClaudeTurns(ctx context.Context, path string, limit int, before string) (TurnPage, error) {
	f, err := os.Open(path)
	if err != nil {
		return TurnPage{}, err
	}
	defer f.Close()
	b := turnBuilder{limit: limit, before: before}
	r := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	for n := 0; !b.stopped; n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return TurnPage{}, err
			}
		}
		var err error
		line, err = readLine(r, line[:0])
		if len(line) > 0 {
			b.line(line)
		} else if errors.Is(err, errLongLine) {
			b.skipped++
		}
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, errLongLine) {
			return TurnPage{}, fmt.Errorf("catalogue: read %s: %w", path, err)
		}
	}
	if before != "" && !b.stopped {
		return TurnPage{}, ErrUnknownCursor
	}
	b.finish()
	page := TurnPage{Turns: b.ring, Skipped: b.skipped}
	if b.older && len(page.Turns) > 0 {
		page.Before = page.Turns[0].ID
	}
	if page.Turns == nil {
		page.Turns = []protocol.Turn{}
	}
	return page, nil
}

var errLongLine = errors.New("line too long")

// readLine appends the next line of r to buf, without its newline; a line
// over maxTurnLine is consumed and dropped.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	long := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !long {
			if len(buf)+len(chunk) > maxTurnLine {
				long, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if long {
			if err == nil {
				err = errLongLine
			}
			return buf[:0], err
		}
		return bytes.TrimSpace(buf), err
	}
}

// claudeTurnLine is a transcript line as turns read it.
type claudeTurnLine struct {
	claudeEnvelope    `json:",inline"`
	UUID              lenient `json:"uuid"`
	IsAPIErrorMessage flag    `json:"isApiErrorMessage"`
	Message           struct {
		ID      lenient     `json:"id"`
		Model   lenient     `json:"model"`
		Content turnContent `json:"content"`
		Usage   *struct {
			InputTokens     *int64 `json:"input_tokens"`
			OutputTokens    *int64 `json:"output_tokens"`
			CacheReadTokens *int64 `json:"cache_read_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
}

// turnContent is a message's content: a string is one text block.
type turnContent []turnBlock

type turnBlock struct {
	Type      lenient        `json:"type"`
	Text      lenient        `json:"text"`
	Thinking  lenient        `json:"thinking"`
	ID        lenient        `json:"id"`
	Name      lenient        `json:"name"`
	Input     jsontext.Value `json:"input"`
	ToolUseID lenient        `json:"tool_use_id"`
	Content   jsontext.Value `json:"content"`
	IsError   flag           `json:"is_error"`
}

func (c *turnContent) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	switch d.PeekKind() {
	case '"':
		tok, err := d.ReadToken()
		*c = turnContent{{Type: "text", Text: lenient(tok.String())}}
		return err
	case '[':
		return json.UnmarshalDecode(d, (*[]turnBlock)(c), decodeOpts)
	}
	return d.SkipValue()
}

// turnBuilder makes turns from lines, keeping the last limit finished
// ones.
type turnBuilder struct {
	limit   int
	before  string
	ring    []protocol.Turn // finished turns, oldest first
	older   bool            // turns older than ring[0] were dropped
	stopped bool            // the cursor's turn was reached
	skipped int
	n       int // turns started, for ids of lines without a uuid

	cur           *protocol.Turn
	started, last time.Time
	tools         map[string]int // tool_use id -> index of its part in cur
	partN         int
}

func (b *turnBuilder) line(line []byte) {
	var l claudeTurnLine
	if err := json.Unmarshal(line, &l, decodeOpts); err != nil {
		b.skipped++
		return
	}
	if l.IsSidechain {
		return // a subagent's own conversation
	}
	at, _ := time.Parse(time.RFC3339Nano, string(l.Timestamp))
	switch l.Type {
	case "user":
		b.user(&l, at)
	case "assistant":
		b.assistant(&l, at)
	}
}

func (b *turnBuilder) user(l *claudeTurnLine, at time.Time) {
	var texts []string
	results := false
	for i := range l.Message.Content {
		blk := &l.Message.Content[i]
		switch blk.Type {
		case "tool_result":
			results = true
			b.toolResult(blk)
		case "text":
			if !isReminder(string(blk.Text)) {
				texts = append(texts, string(blk.Text))
			}
		}
	}
	if results || bool(l.IsMeta || l.IsCompactSummary) {
		b.touch(at)
		return
	}
	text := strings.TrimSpace(strings.Join(texts, "\n"))
	if strings.HasPrefix(text, interrupted) {
		if b.cur != nil {
			b.cur.State = protocol.TurnStateCancelled
		}
		b.touch(at)
		return
	}
	if asPrompt(text) == "" {
		b.touch(at)
		return
	}
	b.n++
	id := string(l.UUID)
	if id == "" {
		id = fmt.Sprintf("turn-%d", b.n)
	}
	if b.before != "" && id == b.before {
		b.stopped = true
		return
	}
	b.finish()
	b.cur = &protocol.Turn{
		ID:            id,
		Message:       protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
		ResponseParts: []protocol.ResponsePart{},
		State:         protocol.TurnStateComplete,
	}
	if !at.IsZero() {
		b.cur.StartedAt = new(protocol.FormatTime(at))
	}
	b.started, b.last = at, at
	b.tools = map[string]int{}
	b.partN = 0
}

func (b *turnBuilder) assistant(l *claudeTurnLine, at time.Time) {
	if b.cur == nil {
		return // a reply to no prompt we could read
	}
	b.touch(at)
	t := b.cur
	for i := range l.Message.Content {
		blk := &l.Message.Content[i]
		switch blk.Type {
		case "text":
			if blk.Text == "" {
				continue
			}
			t.ResponseParts = append(t.ResponseParts, &protocol.MarkdownResponsePart{ID: b.partID(), Content: string(blk.Text)})
		case "thinking":
			if blk.Thinking == "" {
				continue // redacted: nothing to show
			}
			t.ResponseParts = append(t.ResponseParts, &protocol.ReasoningResponsePart{ID: b.partID(), Content: string(blk.Thinking)})
		case "tool_use":
			id, name := string(blk.ID), string(blk.Name)
			if id == "" {
				continue
			}
			b.tools[id] = len(t.ResponseParts)
			t.ResponseParts = append(t.ResponseParts, &protocol.ToolCallResponsePart{ToolCall: &protocol.ToolCallRunningState{
				ToolCallID:        id,
				ToolName:          name,
				DisplayName:       name,
				InvocationMessage: protocol.Plain(name),
				ToolInput:         toolInput(blk.Input),
				Confirmed:         protocol.ToolCallConfirmationReasonNotNeeded,
			}})
		}
	}
	if u := l.Message.Usage; u != nil {
		t.Usage = &protocol.UsageInfo{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens}
		if l.Message.Model != "" {
			t.Usage.Model = new(string(l.Message.Model))
		}
	}
	if l.IsAPIErrorMessage {
		msg := ""
		for _, blk := range l.Message.Content {
			msg += string(blk.Text)
		}
		t.State = protocol.TurnStateError
		t.ResponseParts = append(t.ResponseParts, &protocol.ErrorResponsePart{Error: protocol.ErrorInfo{ErrorType: "api", Message: msg}})
	}
}

// toolResult completes the tool call a result answers.
func (b *turnBuilder) toolResult(blk *turnBlock) {
	if b.cur == nil {
		return
	}
	i, ok := b.tools[string(blk.ToolUseID)]
	if !ok {
		return
	}
	part := b.cur.ResponseParts[i].(*protocol.ToolCallResponsePart)
	run, ok := part.ToolCall.(*protocol.ToolCallRunningState)
	if !ok {
		return
	}
	done := &protocol.ToolCallCompletedState{
		ToolCallID: run.ToolCallID, ToolName: run.ToolName, DisplayName: run.DisplayName,
		InvocationMessage: run.InvocationMessage, ToolInput: run.ToolInput, Confirmed: run.Confirmed,
		Success:          !bool(blk.IsError),
		PastTenseMessage: protocol.Plain(run.ToolName),
	}
	if text := resultText(blk.Content); text != "" {
		done.Content = []protocol.ToolResultContent{&protocol.ToolResultTextContent{Text: text}}
	}
	if blk.IsError {
		done.Error = &protocol.ToolError{Message: resultText(blk.Content)}
	}
	b.cur.ResponseParts[i] = &protocol.ToolCallResponsePart{ToolCall: done}
}

// toolInput is a tool call's input as the inline JSON text the protocol
// carries.
func toolInput(v jsontext.Value) *protocol.ToolInput {
	if len(v) == 0 {
		return nil
	}
	return protocol.InlineInput(string(v))
}

// resultText is a tool result's content as text: a string, or the text
// blocks of a list.
func resultText(v jsontext.Value) string {
	var s string
	if json.Unmarshal(v, &s, decodeOpts) == nil {
		return s
	}
	var blocks []struct {
		Type lenient `json:"type"`
		Text lenient `json:"text"`
	}
	if json.Unmarshal(v, &blocks, decodeOpts) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, string(b.Text))
		}
	}
	return strings.Join(parts, "\n")
}

func (b *turnBuilder) touch(at time.Time) {
	if b.cur != nil && at.After(b.last) {
		b.last = at
	}
}

func (b *turnBuilder) partID() string {
	b.partN++
	return fmt.Sprintf("part-%d", b.partN)
}

// finish ends the current turn: a tool call no result came for is
// cancelled as skipped, as the host's reducer ends one.
func (b *turnBuilder) finish() {
	t := b.cur
	if t == nil {
		return
	}
	b.cur = nil
	for _, i := range b.tools {
		part := t.ResponseParts[i].(*protocol.ToolCallResponsePart)
		if run, ok := part.ToolCall.(*protocol.ToolCallRunningState); ok {
			t.ResponseParts[i] = &protocol.ToolCallResponsePart{ToolCall: &protocol.ToolCallCancelledState{
				ToolCallID: run.ToolCallID, ToolName: run.ToolName, DisplayName: run.DisplayName,
				InvocationMessage: run.InvocationMessage, ToolInput: run.ToolInput,
				Reason: protocol.ToolCallCancellationReasonSkipped,
			}}
		}
	}
	if !b.started.IsZero() && b.last.After(b.started) {
		t.Duration = new(b.last.Sub(b.started).Milliseconds())
	}
	if b.limit > 0 && len(b.ring) == b.limit {
		// Drop the oldest; copying keeps the slice from growing.
		copy(b.ring, b.ring[1:])
		b.ring = b.ring[:len(b.ring)-1]
		b.older = true
	}
	b.ring = append(b.ring, *t)
}
