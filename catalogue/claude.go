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
// Titles come on lines of their own ({"type":"custom-title",
// "customTitle":…}, {"type":"ai-title","aiTitle":…}), and so do the last
// prompt ({"type":"last-prompt","lastPrompt":…}) and, from older CLIs, a
// summary ({"type":"summary","summary":…}); info.go says which of them
// titles a row. A title line written only in the middle of a large
// transcript, outside both windows, is not seen until one is written
// near an end or appended while the catalogue watches; the Claude Agent
// SDK's session list reads the same windows and has the same blind spot.

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

// optString is a string member that records whether it was a string at
// all: a title line decides its kind only when its member is one, as the
// SDK reads it.
type optString struct {
	s  string
	ok bool
}

func (o *optString) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() != '"' {
		return d.SkipValue()
	}
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	*o = optString{tok.String(), true}
	return nil
}

// claudeEnvelope is the part of a line a row needs; the message body is
// not in it, so decoding skips it.
type claudeEnvelope struct {
	Type             lenient   `json:"type"`
	Timestamp        lenient   `json:"timestamp"`
	Cwd              lenient   `json:"cwd"`
	GitBranch        lenient   `json:"gitBranch"`
	IsSidechain      flag      `json:"isSidechain"`
	IsMeta           flag      `json:"isMeta"`
	IsCompactSummary flag      `json:"isCompactSummary"`
	AITitle          optString `json:"aiTitle"`
	CustomTitle      optString `json:"customTitle"`
	Summary          optString `json:"summary"`
	LastPrompt       optString `json:"lastPrompt"`
}

// claudePromptLine is a line read with its message's content, for when
// the first prompt is still unknown.
type claudePromptLine struct {
	claudeEnvelope `json:",inline"`
	Message        struct {
		Content promptContent `json:"content"`
	} `json:"message"`
}

// promptContent is a user message's content: its texts, or that it is
// no prompt (it carries a tool result).
type promptContent struct {
	texts      []string
	toolResult bool
}

func (c *promptContent) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	switch d.PeekKind() {
	case '"':
		tok, err := d.ReadToken()
		c.texts = []string{tok.String()}
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
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			c.toolResult = true
		case "text":
			c.texts = append(c.texts, string(b.Text))
		}
	}
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

// tagged reports text that opens with a tag (<system-reminder>,
// <command-name>, <ide_opened_file>, ...): the SDK's session list takes
// no such text for a first prompt, whatever the tag.
func tagged(text string) bool {
	t := strings.TrimLeft(text, " \t\n\r\v\f")
	if len(t) < 3 || t[0] != '<' || t[1] < 'a' || t[1] > 'z' {
		return false
	}
	for i := 2; i < len(t); i++ {
		switch c := t[i]; {
		case c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
		case c == '>' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			return true
		default:
			return false
		}
	}
	return false
}

// firstPrompt picks a user message's prompt as the SDK's session list
// does: the first text that is not a tag or an interrupt; a shell
// command typed with "!" as such; a slash command's name only as a
// stand-in (command), should the transcript hold no prompt at all.
func firstPrompt(texts []string) (prompt, command string) {
	for _, text := range texts {
		t := strings.TrimSpace(text)
		if t == "" {
			continue
		}
		if name, ok := between(t, "<command-name>", "</command-name>"); ok {
			if command == "" {
				command = clip(name)
			}
			continue
		}
		if in, ok := between(t, "<bash-input>", "</bash-input>"); ok {
			return clip("! " + strings.TrimSpace(in)), command
		}
		if tagged(t) || strings.HasPrefix(t, interrupted) {
			continue
		}
		return clip(t), command
	}
	return "", command
}

// between returns what lies between the first open and the close after
// it.
func between(s, open, close string) (string, bool) {
	_, rest, ok := strings.Cut(s, open)
	if !ok {
		return "", false
	}
	in, _, ok := strings.Cut(rest, close)
	return in, ok
}

// claudeParser reads Claude Code transcript lines.
type claudeParser struct{}

// Before a line is decoded, a cheap test says whether it may hold what
// is still wanted: members names the member names and type values it
// holds, found by visiting each '"' once. The bulk of a large transcript
// is message text, where quotes are rare (escaped), so this costs little
// more than a memchr over the line, where testing each name in turn would
// cost a substring search per name. A line that matches by accident (a
// tool result quoting a transcript) only costs a decode.
const (
	mTimestamp uint8 = 1 << iota
	mBranch
	mCustom
	mAI
	mLastPrompt
	mSummary
)

// sourceBits are the members that may decide each title source.
var sourceBits = [nSources]uint8{srcCustom: mCustom, srcAI: mAI, srcLastPrompt: mLastPrompt, srcSummary: mSummary}

func members(line []byte) uint8 {
	var m uint8
	for i := 0; ; {
		j := bytes.IndexByte(line[i:], '"')
		if j < 0 {
			return m
		}
		i += j + 1
		rest := line[i:]
		if len(rest) < 8 {
			continue
		}
		var name string
		var bit uint8
		switch rest[0] {
		case 't':
			name, bit = `timestamp"`, mTimestamp
		case 'g':
			name, bit = `gitBranch"`, mBranch
		case 'c':
			name, bit = `custom-title"`, mCustom
		case 'a':
			name, bit = `ai-title"`, mAI
		case 'l':
			name, bit = `lastPrompt"`, mLastPrompt
		case 's':
			name, bit = `summary"`, mSummary
		default:
			continue
		}
		if len(rest) >= len(name) && string(rest[:len(name)]) == name {
			m |= bit
			i += len(name) // past the closing quote
		}
	}
}

func (claudeParser) pass(line []byte, t *info) bool {
	want := uint8(0)
	if t.modified.IsZero() {
		want |= mTimestamp
	}
	if t.branch == "" {
		want |= mBranch
	}
	for k, bit := range sourceBits {
		if !t.tail.has(source(k)) {
			want |= bit
		}
	}
	return want == 0 || members(line)&want == 0
}

func (claudeParser) mayTitle(line []byte) bool {
	return members(line)&(mCustom|mAI) != 0
}

// tailDone: the newest time and branch are known, and the title is
// settled: by a custom title, which nothing outranks, or by every kind
// being decided in the tail.
func (claudeParser) tailDone(t *info) bool {
	return !t.modified.IsZero() && t.branch != "" && (t.tail.text[srcCustom] != "" || t.tail.all())
}

// tailFirst: the whole window at once. The title is settled before its
// start only by a custom title near the end, which few transcripts have;
// the rest need every line of the window, and one read of it costs the
// disk one request where a small read and then the rest cost two.
func (claudeParser) tailFirst() int { return tailMax + 1 }

// headDone: the first lines' facts are known, and the tail's custom
// title makes the head's titles moot. Otherwise the head is read to the
// end of its window: a custom or AI title anywhere in it may be the one.
func (claudeParser) headDone(h, t *info) bool {
	return !h.created.IsZero() && h.cwd != "" && h.prompt != "" && t.tail.text[srcCustom] != ""
}

func (claudeParser) parse(line []byte, cut, wantPrompt bool) (facts, bool) {
	var pl claudePromptLine
	switch {
	case cut:
		pl = claudePrefix(line)
	case wantPrompt && bytes.Contains(line, []byte(`"user"`)):
		if json.Unmarshal(line, &pl, decodeOpts) != nil {
			return glued(line)
		}
	default:
		if json.Unmarshal(line, &pl.claudeEnvelope, decodeOpts) != nil {
			return glued(line)
		}
	}
	return pl.facts(), true
}

// glued reads a title line glued to the end of a line that does not
// decode, as when a writer died mid-line and the next one appended on
// the same line: the SDK reads it, so the catalogue does too. The title
// must open an object that does not follow a ':', ',' or '[', so that it
// is a line of its own and not a value quoted inside another.
func glued(line []byte) (facts, bool) {
	for _, typ := range [...]string{`{"type":"custom-title"`, `{"type":"ai-title"`} {
		i := bytes.LastIndex(line, []byte(typ))
		if i <= 0 || bytes.IndexByte([]byte(":,["), line[i-1]) >= 0 {
			continue
		}
		var e claudeEnvelope
		if json.Unmarshal(line[i:], &e, decodeOpts) == nil {
			pl := claudePromptLine{claudeEnvelope: claudeEnvelope{Type: e.Type, AITitle: e.AITitle, CustomTitle: e.CustomTitle}}
			return pl.facts(), true
		}
	}
	return facts{}, false
}

// claudePrefix reads what precedes the cut in a line cut short. The CLI
// writes cwd, gitBranch and type before the message, so a line cut inside
// a huge message still names them. A cut line names no title.
func claudePrefix(line []byte) claudePromptLine {
	var pl claudePromptLine
	descend := func(p string) bool { return p == "message" }
	want := func(p string) bool {
		switch p {
		case "type", "timestamp", "cwd", "gitBranch", "isSidechain", "isMeta", "isCompactSummary", "message/content":
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
		case "message/content":
			if s != "" {
				pl.Message.Content.texts = []string{string(s)}
			}
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
	case "custom-title":
		if e.CustomTitle.ok {
			f.titles.put(srcCustom, strings.TrimSpace(e.CustomTitle.s))
		}
	case "ai-title":
		if e.AITitle.ok {
			f.titles.put(srcAI, strings.TrimSpace(e.AITitle.s))
		}
	case "user", "assistant":
		f.conversation = !bool(e.IsSidechain)
	}
	// Whatever the line's type, as the SDK reads them.
	if e.LastPrompt.ok {
		f.titles.put(srcLastPrompt, clip(e.LastPrompt.s))
	}
	if e.Summary.ok {
		f.titles.put(srcSummary, clip(e.Summary.s))
	}
	if e.Type == "user" && !bool(e.IsSidechain || e.IsMeta || e.IsCompactSummary) && !pl.Message.Content.toolResult {
		f.prompt, f.command = firstPrompt(pl.Message.Content.texts)
	}
	return f
}

// claudeProject reports whether dir, a child of the projects folder, is
// a project folder (hidden folders are not).
func claudeProject(dir string) bool {
	return !strings.HasPrefix(filepath.Base(dir), ".")
}
