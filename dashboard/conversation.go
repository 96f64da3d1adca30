package dashboard

import (
	"bytes"
	"encoding/json"
	"html/template"
	"slices"
	"strings"

	"github.com/ahpd/ahpd/protocol"
)

// convView is a chat's conversation as the session page draws it.
type convView struct {
	Turns []turnView
	// Forms, when set, lets the person answer what the running turn
	// waits on from the page (answers.go).
	Forms *formsView
}

// turnView is one turn: the person's message and what the agent did.
type turnView struct {
	ID, Anchor  string
	Input       string
	State       string // running, complete, cancelled, error
	StateClass  string
	Parts       []partView
	StartedAt   string
	Queued      bool // a message waiting behind the running turn
	HasResponse bool
}

// partView is one part of a turn's response.
type partView struct {
	Kind     string // text, reasoning, tool, question, error, note
	HTML     template.HTML
	Text     string
	Tool     *toolView
	Question *questionView
}

// toolView is a tool call with its input and result.
type toolView struct {
	ID, Anchor string
	Name       string
	Status     string
	Invocation string
	Input      string
	Result     string
	Failed     bool
	// Pending: the running turn waits for it to be approved, with the
	// options the agent offered beyond approve and deny.
	Pending bool
	Options []optionView
	// Edits are the files its result says it edited (review.go).
	Edits []editView
}

// questionView is what the agent asked a person, and their answer.
type questionView struct {
	ID       string // the input request's
	Text     string
	Response string
	Answers  string
	Open     bool // the running turn waits for the answer
	Fields   []fieldView
}

// fieldView is one question of an input request, as a form field.
type fieldView struct {
	Name, Other string // the form names of its value and of free text
	HTMLID      string
	Kind        string // text, number, integer, boolean, single-select, multi-select
	Label       string
	Required    bool
	Options     []optionView
	Freeform    bool
}

// optionView is an option a question or a tool call offers.
type optionView struct {
	ID, Label, Kind string
	HTMLID          string
}

// maxShown bounds a tool input, result or answer shown on the page.
const maxShown = 64 << 10

// conversationOf draws a chat's turns, the running one and what waits
// behind it. A nil chat has none.
func conversationOf(cs *protocol.ChatState) convView {
	var v convView
	if cs == nil {
		return v
	}
	for i := range cs.Turns {
		t := &cs.Turns[i]
		tv := turnView{ID: t.ID, Anchor: turnAnchor(t.ID), Input: t.Message.Text, State: string(t.State), Parts: partsOf(t.ResponseParts, false)}
		if t.StartedAt != nil {
			tv.StartedAt = *t.StartedAt
		}
		v.Turns = append(v.Turns, tv.finish())
	}
	if at := cs.ActiveTurn; at != nil {
		tv := turnView{ID: at.ID, Anchor: turnAnchor(at.ID), Input: at.Message.Text, State: "running", Parts: partsOf(at.ResponseParts, true), StartedAt: at.StartedAt}
		v.Turns = append(v.Turns, tv.finish())
	}
	if sm := cs.SteeringMessage; sm != nil {
		v.Turns = append(v.Turns, turnView{ID: sm.ID, Input: sm.Message.Text, State: "steering", Queued: true}.finish())
	}
	for _, q := range cs.QueuedMessages {
		v.Turns = append(v.Turns, turnView{ID: q.ID, Input: q.Message.Text, State: "queued", Queued: true}.finish())
	}
	return v
}

func (t turnView) finish() turnView {
	t.StateClass = "t-" + strings.ReplaceAll(t.State, " ", "-")
	t.HasResponse = len(t.Parts) > 0
	return t
}

// turnAnchor is the id of a turn's place in the page.
func turnAnchor(id string) string { return "turn-" + anchorSafe(id) }

// anchorSafe keeps an id's letters, digits, '-' and '_', for an HTML id.
func anchorSafe(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r < 128 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// partsOf draws a turn's parts; running says the turn runs, so that what
// it asks is open.
func partsOf(parts []protocol.ResponsePart, running bool) []partView {
	var out []partView
	for _, p := range parts {
		switch p := p.(type) {
		case *protocol.MarkdownResponsePart:
			// Streamed text comes as many parts in a row: one block.
			if n := len(out); n > 0 && out[n-1].Kind == "text" {
				out[n-1].Text += p.Content
				continue
			}
			out = append(out, partView{Kind: "text", Text: p.Content})
		case *protocol.ReasoningResponsePart:
			out = append(out, partView{Kind: "reasoning", Text: p.Content})
		case *protocol.ToolCallResponsePart:
			tv := toolOf(p.ToolCall)
			tv.Pending = tv.Pending && running
			out = append(out, partView{Kind: "tool", Tool: tv})
		case *protocol.InputRequestResponsePart:
			q := questionOf(p)
			q.Open = q.Open && running
			out = append(out, partView{Kind: "question", Question: q})
		case *protocol.ErrorResponsePart:
			out = append(out, partView{Kind: "error", Text: p.Error.Message})
		case *protocol.SystemNotificationResponsePart:
			out = append(out, partView{Kind: "note", Text: p.Content.Text})
		}
	}
	for i := range out {
		if out[i].Kind == "text" {
			out[i].HTML = markdown(out[i].Text)
		}
	}
	return out
}

// toolWire is what every state of a tool call may carry, read from its
// wire form so that every state is drawn the same way.
type toolWire struct {
	ToolCallID        string            `json:"toolCallId"`
	ToolName          string            `json:"toolName"`
	DisplayName       string            `json:"displayName"`
	Status            string            `json:"status"`
	InvocationMessage json.RawMessage   `json:"invocationMessage"`
	ToolInput         json.RawMessage   `json:"toolInput"`
	Success           *bool             `json:"success"`
	PastTenseMessage  json.RawMessage   `json:"pastTenseMessage"`
	Content           []json.RawMessage `json:"content"`
	Error             *struct {
		Message string `json:"message"`
	} `json:"error"`
	Options []struct {
		ID    string `json:"id"`
		Label string `json:"label"`
		Kind  string `json:"kind"`
	} `json:"options"`
}

func toolOf(tc protocol.ToolCallState) *toolView {
	data, err := json.Marshal(tc)
	if err != nil {
		return &toolView{Name: "tool call", Status: "unreadable"}
	}
	var w toolWire
	_ = json.Unmarshal(data, &w)
	tv := &toolView{ID: w.ToolCallID, Anchor: "tool-" + anchorSafe(w.ToolCallID), Name: w.DisplayName, Status: w.Status,
		Invocation: textOf(w.InvocationMessage), Input: clip(textOf(w.ToolInput))}
	if tv.Name == "" {
		tv.Name = w.ToolName
	}
	var result []string
	if s := textOf(w.PastTenseMessage); s != "" {
		result = append(result, s)
	}
	for _, c := range w.Content {
		if s := textOf(c); s != "" {
			result = append(result, s)
		}
	}
	if w.Error != nil && w.Error.Message != "" {
		result = append(result, w.Error.Message)
		tv.Failed = true
	}
	if w.Success != nil && !*w.Success {
		tv.Failed = true
	}
	tv.Result = clip(strings.Join(result, "\n"))
	tv.Edits = editsOf(w.Content)
	if tv.Pending = w.Status == "pending-confirmation"; tv.Pending {
		for _, o := range w.Options {
			tv.Options = append(tv.Options, optionView{ID: o.ID, Label: o.Label, Kind: o.Kind})
		}
	}
	return tv
}

// textOf reads a value that is a string, or an object with its text in
// markdown, text or value, or else shows it as compact JSON.
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o map[string]json.RawMessage
	if json.Unmarshal(raw, &o) == nil {
		for _, k := range []string{"markdown", "text", "value", "inline"} {
			if v, ok := o[k]; ok {
				if json.Unmarshal(v, &s) == nil {
					return s
				}
			}
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

func clip(s string) string {
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n… (cut: " + formatBytes(len(s)) + " in all)"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func formatBytes(n int) string {
	switch {
	case n >= 1<<20:
		return strings.TrimRight(strings.TrimRight(formatFloat(float64(n)/(1<<20)), "0"), ".") + " MiB"
	case n >= 1<<10:
		return strings.TrimRight(strings.TrimRight(formatFloat(float64(n)/(1<<10)), "0"), ".") + " KiB"
	}
	return itoa(n) + " bytes"
}

func questionOf(p *protocol.InputRequestResponsePart) *questionView {
	q := &questionView{ID: p.Request.ID, Text: p.Request.Question(), Open: p.Response == nil}
	if p.Response != nil {
		q.Response = string(*p.Response)
	}
	if q.Open {
		q.Fields = fieldsOf(&p.Request)
	}
	var lines []string
	for id, a := range p.Request.Answers.All() {
		data, err := json.Marshal(a)
		if err == nil {
			lines = append(lines, id+": "+textOf(data))
		}
	}
	slices.Sort(lines)
	q.Answers = clip(strings.Join(lines, "\n"))
	return q
}
