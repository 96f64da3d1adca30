package claude

import (
	"bytes"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/internal/jsonl"
)

// The backend lists its conversations (plugins.TranscriptLister): the
// CLI writes one transcript per session at
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
// summary ({"type":"summary","summary":…}); plugins.TitleKind says which
// of them titles a row. A title line written only in the middle of a
// large transcript, outside both of the catalogue's windows, is not seen
// until one is written near an end or appended while the catalogue
// watches; the Claude Agent SDK's session list reads the same windows and
// has the same blind spot.
//
// This reads a line for the listing only; transcript.go reads a
// transcript's turns.

var _ plugins.TranscriptLister = (*Backend)(nil)

// TranscriptRoots returns the CLI's projects folder, where it writes the
// transcripts Turns reads: under $CLAUDE_CONFIG_DIR, else ~/.claude, as
// the CLI's environment says. None when there is no home to find it in.
func (b *Backend) TranscriptRoots() []plugins.TranscriptRoot {
	config, err := b.configDir()
	if err != nil {
		return nil
	}
	return []plugins.TranscriptRoot{TranscriptRoot(filepath.Join(config, "projects"))}
}

// TranscriptRoot returns the CLI's projects folder at projects as a root
// of transcripts: a folder per project, a transcript per session in it.
func TranscriptRoot(projects string) plugins.TranscriptRoot {
	return plugins.TranscriptRoot{Provider: Provider, Dir: projects, Nested: true, Format: listFormat{}}
}

// listFormat reads the CLI's transcripts for the catalogue.
type listFormat struct{}

// wants: the newest time, the branch and every title kind at the tail;
// the first time, the cwd, the first prompt and the head's titles at the
// head. The tail window is read whole at once: the title is settled
// before its start only by a custom title near the end, which few
// transcripts have; the rest need every line of the window, and one read
// of it costs the disk one request where a small read and then the rest
// cost two.
var wants = plugins.TranscriptWants{
	Tail:      plugins.FactModified | plugins.FactBranch | plugins.FactTitles,
	Head:      plugins.FactCreated | plugins.FactCwd | plugins.FactPrompt | plugins.FactCustomTitle | plugins.FactAITitle,
	WholeTail: true,
}

func (listFormat) Wants() plugins.TranscriptWants { return wants }

// Name reports whether name is a session transcript: a subagent's
// transcript (agent-<id>.jsonl) is part of another session.
func (listFormat) Name(name string) (id string, ok bool) {
	id, ok = strings.CutSuffix(name, ".jsonl")
	if !ok || id == "" || strings.HasPrefix(id, "agent-") || strings.HasPrefix(id, ".") {
		return "", false
	}
	return id, true
}

// claudeEnvelope is the part of a line a row needs; the message body is
// not in it, so decoding skips it.
type claudeEnvelope struct {
	Type             jsonl.Lenient   `json:"type"`
	Timestamp        jsonl.Lenient   `json:"timestamp"`
	Cwd              jsonl.Lenient   `json:"cwd"`
	GitBranch        jsonl.Lenient   `json:"gitBranch"`
	IsSidechain      jsonl.Flag      `json:"isSidechain"`
	IsMeta           jsonl.Flag      `json:"isMeta"`
	IsCompactSummary jsonl.Flag      `json:"isCompactSummary"`
	AITitle          jsonl.OptString `json:"aiTitle"`
	CustomTitle      jsonl.OptString `json:"customTitle"`
	Summary          jsonl.OptString `json:"summary"`
	LastPrompt       jsonl.OptString `json:"lastPrompt"`
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
		Type jsonl.Lenient `json:"type"`
		Text jsonl.Lenient `json:"text"`
	}
	if err := json.UnmarshalDecode(d, &blocks, jsonl.DecodeOpts); err != nil {
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
// stand-in (command), should the transcript hold no prompt at all. The
// catalogue collapses and cuts what it returns.
func firstPrompt(texts []string) (prompt, command string) {
	for _, text := range texts {
		t := strings.TrimSpace(text)
		if t == "" {
			continue
		}
		if name, ok := between(t, "<command-name>", "</command-name>"); ok {
			if command == "" && !blank(name) {
				command = name
			}
			continue
		}
		if in, ok := between(t, "<bash-input>", "</bash-input>"); ok {
			return "! " + strings.TrimSpace(in), command
		}
		if tagged(t) || strings.HasPrefix(t, interruptMarker) {
			continue
		}
		return t, command
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

// blank reports text with nothing in it but the white space the
// catalogue collapses away: no command name.
func blank(s string) bool { return strings.TrimLeft(s, " \t\n\r\v\f\u0085\u00a0") == "" }

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

// memberBits returns the members that may say the facts in f.
func memberBits(f plugins.Facts) uint8 {
	var m uint8
	if f&plugins.FactModified != 0 {
		m |= mTimestamp
	}
	if f&plugins.FactBranch != 0 {
		m |= mBranch
	}
	if f&plugins.FactCustomTitle != 0 {
		m |= mCustom
	}
	if f&plugins.FactAITitle != 0 {
		m |= mAI
	}
	if f&plugins.FactLastPrompt != 0 {
		m |= mLastPrompt
	}
	if f&plugins.FactSummary != 0 {
		m |= mSummary
	}
	return m
}

func (listFormat) Skip(line []byte, lacking plugins.Facts) bool {
	want := memberBits(lacking)
	return want == 0 || members(line)&want == 0
}

func (listFormat) Line(line []byte, cut, wantPrompt bool) (plugins.TranscriptLine, bool) {
	var pl claudePromptLine
	switch {
	case cut:
		pl = claudePrefix(line)
	case wantPrompt && bytes.Contains(line, []byte(`"user"`)):
		if json.Unmarshal(line, &pl, jsonl.DecodeOpts) != nil {
			return glued(line)
		}
	default:
		if json.Unmarshal(line, &pl.claudeEnvelope, jsonl.DecodeOpts) != nil {
			return glued(line)
		}
	}
	return pl.line(), true
}

// glued reads a title line glued to the end of a line that does not
// decode, as when a writer died mid-line and the next one appended on
// the same line: the SDK reads it, so the catalogue does too. The title
// must open an object that does not follow a ':', ',' or '[', so that it
// is a line of its own and not a value quoted inside another.
func glued(line []byte) (plugins.TranscriptLine, bool) {
	for _, typ := range [...]string{`{"type":"custom-title"`, `{"type":"ai-title"`} {
		i := bytes.LastIndex(line, []byte(typ))
		if i <= 0 || bytes.IndexByte([]byte(":,["), line[i-1]) >= 0 {
			continue
		}
		var e claudeEnvelope
		if json.Unmarshal(line[i:], &e, jsonl.DecodeOpts) == nil {
			pl := claudePromptLine{claudeEnvelope: claudeEnvelope{Type: e.Type, AITitle: e.AITitle, CustomTitle: e.CustomTitle}}
			return pl.line(), true
		}
	}
	return plugins.TranscriptLine{}, false
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
	jsonl.WalkPrefix(line, descend, want, func(p string, tok jsontext.Token) {
		s := jsonl.Lenient("")
		if tok.Kind() == '"' {
			s = jsonl.Lenient(tok.String())
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

// line turns a decoded line into what it says about the session.
func (pl *claudePromptLine) line() plugins.TranscriptLine {
	e := &pl.claudeEnvelope
	var l plugins.TranscriptLine
	if e.Timestamp != "" {
		if t, err := time.Parse(time.RFC3339Nano, string(e.Timestamp)); err == nil {
			l.First, l.Last = t, t
		}
	}
	l.Cwd, l.Branch = string(e.Cwd), string(e.GitBranch)
	switch e.Type {
	case "custom-title":
		if e.CustomTitle.OK {
			l.SetTitle(plugins.CustomTitle, e.CustomTitle.S)
		}
	case "ai-title":
		if e.AITitle.OK {
			l.SetTitle(plugins.AITitle, e.AITitle.S)
		}
	case "user", "assistant":
		l.Conversation = !bool(e.IsSidechain)
	}
	// Whatever the line's type, as the SDK reads them.
	if e.LastPrompt.OK {
		l.SetTitle(plugins.LastPrompt, e.LastPrompt.S)
	}
	if e.Summary.OK {
		l.SetTitle(plugins.SummaryTitle, e.Summary.S)
	}
	if e.Type == "user" && !bool(e.IsSidechain || e.IsMeta || e.IsCompactSummary) && !pl.Message.Content.toolResult {
		l.Prompt, l.Command = firstPrompt(pl.Message.Content.texts)
	}
	return l
}
