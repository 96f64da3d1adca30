package catalogue

import (
	"bytes"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The Claude Code CLI writes one transcript per session at
// <projects>/<cwd with every non-alphanumeric byte as '-'>/<session>.jsonl,
// one JSON object per line. The folder name cannot be turned back into
// the cwd, so the cwd comes from the lines, which carry it:
//
//	{"parentUuid":…,"isSidechain":false,"cwd":"/src/app","sessionId":"…",
//	 "version":"2.1.197","gitBranch":"main","type":"user",
//	 "message":{"role":"user","content":"fix the build"},"uuid":"…",
//	 "timestamp":"2026-01-02T03:04:05.678Z"}
//
// Titles come on lines of their own ({"type":"ai-title","aiTitle":…},
// {"type":"custom-title","customTitle":…}, {"type":"summary",
// "summary":…}) and the latest one is the session's title. A title
// written only in the middle of a large transcript, outside both windows,
// is not seen until one is written near an end or appended while the
// catalogue watches; the Claude Agent SDK's session list reads the same
// windows and has the same blind spot.

// claudeTranscript reports whether name is a session transcript: a
// subagent's transcript (agent-<id>.jsonl) is part of another session.
func claudeTranscript(name string) (id string, ok bool) {
	id, ok = strings.CutSuffix(name, ".jsonl")
	if !ok || id == "" || strings.HasPrefix(id, "agent-") || strings.HasPrefix(id, ".") {
		return "", false
	}
	return id, true
}

// lenient is a string member that tolerates any JSON value: a member of
// an unexpected type reads as "" rather than making the line garbage.
type lenient string

func (s *lenient) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() != '"' {
		return d.SkipValue()
	}
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	*s = lenient(tok.String())
	return nil
}

// flag is a boolean member read as lenient reads strings.
type flag bool

func (b *flag) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	*b = d.PeekKind() == 't'
	return d.SkipValue()
}

// claudeEnvelope is the part of a line a row needs; the message body is
// not in it, so decoding skips it.
type claudeEnvelope struct {
	Type             lenient `json:"type"`
	Timestamp        lenient `json:"timestamp"`
	Cwd              lenient `json:"cwd"`
	GitBranch        lenient `json:"gitBranch"`
	IsSidechain      flag    `json:"isSidechain"`
	IsMeta           flag    `json:"isMeta"`
	IsCompactSummary flag    `json:"isCompactSummary"`
	Title            lenient `json:"title"`
	AITitle          lenient `json:"aiTitle"`
	CustomTitle      lenient `json:"customTitle"`
	Summary          lenient `json:"summary"`
}

// claudePromptLine is a line read with its message's content, for when
// the first prompt is still unknown.
type claudePromptLine struct {
	claudeEnvelope `json:",inline"`
	Message        struct {
		Content promptContent `json:"content"`
	} `json:"message"`
}

// promptContent is a user message's content as a prompt: its text, or
// that it is no prompt (a tool result, only system reminders).
type promptContent struct {
	text       string
	toolResult bool
}

func (c *promptContent) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	switch d.PeekKind() {
	case '"':
		tok, err := d.ReadToken()
		c.text = tok.String()
		return err
	case '[':
	default:
		return d.SkipValue()
	}
	var blocks []struct {
		Type lenient `json:"type"`
		Text lenient `json:"text"`
	}
	if err := json.UnmarshalDecode(d, &blocks, decodeOpts); err != nil {
		return err
	}
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			c.toolResult = true
		case "text":
			if !isReminder(string(b.Text)) {
				parts = append(parts, string(b.Text))
			}
		}
	}
	c.text = strings.Join(parts, "\n")
	return nil
}

// isReminder reports text the CLI adds to a user message that nobody
// typed: system reminders, and the echoes of slash commands and of local
// shell commands.
func isReminder(text string) bool {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "<") {
		return false
	}
	for _, p := range [...]string{"<system-reminder>", "<command-", "<local-command-", "<bash-stdout>", "<bash-stderr>"} {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// interrupted is how the CLI records a turn the user stopped.
const interrupted = "[Request interrupted by user"

// asPrompt returns text as a person's prompt, or "" when it is not one.
func asPrompt(text string) string {
	t := strings.TrimSpace(text)
	if t == "" || strings.HasPrefix(t, interrupted) || isReminder(t) {
		return ""
	}
	return t
}

// claudeParser reads Claude Code transcript lines.
type claudeParser struct{}

// Byte patterns the tail tests before it decodes a line. They are member
// names, which no spacing changes; a line that matches by accident (a
// tool result quoting a transcript) only costs a decode.
var (
	patTimestamp = []byte(`"timestamp"`)
	patBranch    = []byte(`"gitBranch"`)
	patTitle     = []byte(`itle"`) // aiTitle, customTitle, title, ai-title, custom-title
	patSummary   = []byte(`"summary"`)
)

func (claudeParser) pass(line []byte, t *info) bool {
	if t.modified.IsZero() && bytes.Contains(line, patTimestamp) {
		return false
	}
	if t.branch == "" && bytes.Contains(line, patBranch) {
		return false
	}
	if t.title == "" && (bytes.Contains(line, patTitle) || bytes.Contains(line, patSummary)) {
		return false
	}
	return true
}

func (claudeParser) mayTitle(line []byte) bool {
	return bytes.Contains(line, patTitle) || bytes.Contains(line, patSummary)
}

func (claudeParser) tailDone(t *info) bool {
	return !t.modified.IsZero() && t.branch != "" && t.title != ""
}

func (claudeParser) parse(line []byte, cut, wantPrompt bool) (facts, bool) {
	var pl claudePromptLine
	switch {
	case cut:
		pl = claudePrefix(line)
	case wantPrompt && bytes.Contains(line, []byte(`"user"`)):
		if json.Unmarshal(line, &pl, decodeOpts) != nil {
			return facts{}, false
		}
	default:
		if json.Unmarshal(line, &pl.claudeEnvelope, decodeOpts) != nil {
			return facts{}, false
		}
	}
	return pl.facts(), true
}

// claudePrefix reads what precedes the cut in a line cut short. The CLI
// writes cwd, gitBranch and type before the message, so a line cut inside
// a huge message still names them.
func claudePrefix(line []byte) claudePromptLine {
	var pl claudePromptLine
	descend := func(p string) bool { return p == "message" }
	want := func(p string) bool {
		switch p {
		case "type", "timestamp", "cwd", "gitBranch", "isSidechain", "isMeta", "isCompactSummary",
			"title", "aiTitle", "customTitle", "summary", "message/content":
			return true
		}
		return false
	}
	walkPrefix(line, descend, want, func(p string, tok jsontext.Token) {
		s := lenient("")
		if tok.Kind() == '"' {
			s = lenient(tok.String())
		}
		e := &pl.claudeEnvelope
		switch p {
		case "type":
			e.Type = s
		case "timestamp":
			e.Timestamp = s
		case "cwd":
			e.Cwd = s
		case "gitBranch":
			e.GitBranch = s
		case "isSidechain":
			e.IsSidechain = tok.Kind() == 't'
		case "isMeta":
			e.IsMeta = tok.Kind() == 't'
		case "isCompactSummary":
			e.IsCompactSummary = tok.Kind() == 't'
		case "title":
			e.Title = s
		case "aiTitle":
			e.AITitle = s
		case "customTitle":
			e.CustomTitle = s
		case "summary":
			e.Summary = s
		case "message/content":
			pl.Message.Content.text = string(s)
		}
	})
	return pl
}

// facts turns a decoded line into what it says about the session.
func (pl *claudePromptLine) facts() facts {
	e := &pl.claudeEnvelope
	var f facts
	if e.Timestamp != "" {
		if t, err := time.Parse(time.RFC3339Nano, string(e.Timestamp)); err == nil {
			f.first, f.last = t, t
		}
	}
	f.cwd, f.branch = string(e.Cwd), string(e.GitBranch)
	switch e.Type {
	case "ai-title":
		f.title = firstOf(e.AITitle, e.Title, e.Summary)
	case "custom-title":
		f.title = firstOf(e.CustomTitle, e.Title)
	case "summary":
		f.title = firstOf(e.Summary, e.Title)
	case "user", "assistant":
		f.conversation = !bool(e.IsSidechain)
	}
	f.title = strings.TrimSpace(f.title)
	if e.Type == "user" && !bool(e.IsSidechain || e.IsMeta || e.IsCompactSummary) && !pl.Message.Content.toolResult {
		if p := asPrompt(pl.Message.Content.text); p != "" {
			f.prompt = clip(p)
		}
	}
	return f
}

func firstOf(ss ...lenient) string {
	for _, s := range ss {
		if s != "" {
			return string(s)
		}
	}
	return ""
}

// claudeProject reports whether dir, a child of the projects folder, is
// a project folder (hidden folders are not).
func claudeProject(dir string) bool {
	return !strings.HasPrefix(filepath.Base(dir), ".")
}
