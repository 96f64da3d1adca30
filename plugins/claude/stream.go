package claude

import (
	"bytes"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The CLI speaks JSON Lines on stdin and stdout (--input-format and
// --output-format stream-json), and its transcript is JSON Lines of much
// the same shapes. The types here hold the members the backend reads;
// everything else is ignored. A line is decoded in two steps, its type
// first, so that a member one kind of line uses differently from another
// cannot make a line undecodable.

// lineHead is what every line has.
type lineHead struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
}

// messageLine is an "assistant" or "user" line, on stdout or in the
// transcript.
type messageLine struct {
	UUID string `json:"uuid"`
	// ParentToolUseID is set on the lines of a subagent, which run
	// inside a tool call of the main conversation.
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	Message         *apiMessage `json:"message"`
	// Error is set (stdout) on the message the CLI makes up to report a
	// failed model call; the transcript says IsAPIErrorMessage.
	Error             jsontext.Value `json:"error"`
	IsAPIErrorMessage bool           `json:"isApiErrorMessage"`
	// ToolUseResult (stdout) is the CLI's own account of what the tool
	// of the line's result did (edits.go).
	ToolUseResult jsontext.Value `json:"tool_use_result"`

	// Transcript only.
	Timestamp        string `json:"timestamp"`
	IsSidechain      bool   `json:"isSidechain"`
	IsMeta           bool   `json:"isMeta"`
	IsCompactSummary bool   `json:"isCompactSummary"`
}

// apiMessage is a Messages API message.
type apiMessage struct {
	ID      string    `json:"id"`
	Role    string    `json:"role"`
	Model   string    `json:"model"`
	Content content   `json:"content"`
	Usage   *apiUsage `json:"usage"`
}

// apiUsage is a Messages API usage record.
type apiUsage struct {
	InputTokens          int64 `json:"input_tokens"`
	OutputTokens         int64 `json:"output_tokens"`
	CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
}

// content is message content: the API allows a plain string, which
// decodes as one text block.
type content []contentBlock

// UnmarshalJSON decodes a string or a list of blocks.
func (c *content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = content{{Type: "text", Text: s, plain: true}}
		return nil
	}
	var blocks []contentBlock
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// contentBlock is a block of message content.
type contentBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Thinking string `json:"thinking"`
	// A tool use.
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input jsontext.Value `json:"input"`
	// A tool result.
	ToolUseID string  `json:"tool_use_id"`
	Content   content `json:"content"`
	IsError   bool    `json:"is_error"`

	// plain marks the one block of content that was a plain string: how
	// a prompt is written.
	plain bool
}

// text returns the text of a tool result's content.
func (c content) text() string {
	var b bytes.Buffer
	for _, blk := range c {
		if blk.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(blk.Text)
		}
	}
	return b.String()
}

// streamLine is a "stream_event" line: one server-sent event of the
// model's reply, passed through (--include-partial-messages).
type streamLine struct {
	ParentToolUseID *string `json:"parent_tool_use_id"`
	Event           struct {
		Type         string      `json:"type"`
		Index        int         `json:"index"`
		Message      *apiMessage `json:"message"`
		ContentBlock *struct {
			Type string `json:"type"`
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"content_block"`
		Delta *struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"delta"`
	} `json:"event"`
}

// resultLine ends a turn.
type resultLine struct {
	Subtype string    `json:"subtype"`
	IsError bool      `json:"is_error"`
	Result  string    `json:"result"`
	Errors  []string  `json:"errors"`
	Usage   *apiUsage `json:"usage"`
}

// toolProgressLine reports a tool still running.
type toolProgressLine struct {
	ToolUseID       string  `json:"tool_use_id"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
}

// controlRequestLine is a request the CLI makes of us, or we of it.
type controlRequestLine struct {
	Type      string         `json:"type"` // "control_request"
	RequestID string         `json:"request_id"`
	Request   controlRequest `json:"request"`
}

// controlRequest is the body of a control request. The CLI asks
// can_use_tool (a permission prompt); we ask interrupt and set_model.
type controlRequest struct {
	Subtype   string         `json:"subtype"`
	Model     string         `json:"model,omitzero"` // set_model's
	ToolName  string         `json:"tool_name,omitzero"`
	Input     jsontext.Value `json:"input,omitzero"`
	ToolUseID string         `json:"tool_use_id,omitzero"`
}

// controlCancelLine withdraws a control request the CLI made, such as a
// permission prompt it no longer needs answered.
type controlCancelLine struct {
	RequestID string `json:"request_id"`
}

// controlResponseLine answers a control request.
type controlResponseLine struct {
	Type     string          `json:"type"` // "control_response"
	Response controlResponse `json:"response"`
}

// controlResponse is the body of a control response: subtype "success"
// with a response, or "error" with an error message.
type controlResponse struct {
	Subtype   string `json:"subtype"`
	RequestID string `json:"request_id"`
	Response  any    `json:"response,omitzero"`
	Error     string `json:"error,omitzero"`
}

// userInput is a user line written to the CLI's stdin. The CLI records
// the prompt under UUID, which is how the host's turn id gets into the
// transcript.
type userInput struct {
	Type            string      `json:"type"` // "user"
	UUID            string      `json:"uuid,omitzero"`
	SessionID       string      `json:"session_id"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	Message         userMessage `json:"message"`
}

type userMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// permissionResult answers can_use_tool.
type permissionResult struct {
	Behavior     string         `json:"behavior"` // "allow" or "deny"
	UpdatedInput jsontext.Value `json:"updatedInput,omitzero"`
	Message      string         `json:"message,omitzero"`
	// Interrupt, with deny, stops the turn as well.
	Interrupt bool `json:"interrupt,omitzero"`
}

// decodeLine decodes the line into v.
func decodeLine(line []byte, v any) error { return json.Unmarshal(line, v) }
