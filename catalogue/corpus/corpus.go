// Package corpus writes Claude Code transcripts for tests and benchmarks:
// lines shaped as the CLI writes them (user, assistant, attachment,
// queue-operation, ai-title, summary, last-prompt), multi-block replies
// that share a message id, tool calls and their results, system
// reminders, interrupts, and large lines to make a file as big as asked.
//
// Only tests and benchmarks import it.
package corpus

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
)

// Version is written into every line's "version", as the CLI does.
const Version = "2.1.197"

// Session describes one transcript.
type Session struct {
	ID     string
	Cwd    string
	Branch string
	// Start is the first line's time; each later line is a second on.
	Start time.Time
	// Prompts are the person's prompts, one turn each; at least one.
	Prompts []string
	// Reminder puts system-reminder text blocks before the first prompt,
	// which is then written as a list of blocks.
	Reminder bool
	// Meta writes an isMeta user line (a command caveat) first.
	Meta bool
	// Summary writes a summary line at the top, as older CLIs did.
	Summary string
	// AITitle writes an ai-title line after the first turn; TailTitle
	// writes one (this text) among the last lines.
	AITitle   string
	TailTitle string
	// Titles are more title lines, each of its kind and at its place.
	Titles []TitleLine
	// Tools gives every turn a tool call and its result.
	Tools bool
	// FirstTurn makes the first turn about this many bytes (its tool's
	// output grows), as a first turn that read files is: the CLI's
	// ai-title line after it then lies this far into the file.
	FirstTurn int
	// Interrupt ends the last turn with an interrupt line.
	Interrupt bool
	// PadTo makes the file about this many bytes by adding large
	// assistant text lines after the first turn.
	PadTo int64
	// HugeLast makes the last line an assistant text of this many bytes.
	HugeLast int
}

// Kinds of title line, as the CLI names them in "type".
const (
	AITitle     = "ai-title"     // {"aiTitle": …}, generated after the first turn
	CustomTitle = "custom-title" // {"customTitle": …}, when a person renames it
	SummaryLine = "summary"      // {"summary": …}, at the top, by older CLIs
)

// Place says where in a transcript a title line is written.
type Place int

// The places a title line can take.
const (
	AtStart        Place = iota + 1 // the first line
	AfterFirstTurn                  // after the first exchange, where the CLI titles
	Middle                          // halfway through the file's bytes
	NearEnd                         // before the last-prompt line
	AtEnd                           // the last line
)

func (p Place) String() string {
	switch p {
	case AtStart:
		return "at start"
	case AfterFirstTurn:
		return "after first turn"
	case Middle:
		return "in the middle"
	case NearEnd:
		return "near the end"
	case AtEnd:
		return "at the end"
	}
	return "nowhere"
}

// TitleLine is one title line of a transcript.
type TitleLine struct {
	Kind string // AITitle, CustomTitle or SummaryLine
	Text string
	At   Place
}

// ProjectDir is the folder name the CLI files a cwd's transcripts under:
// every byte that is not an ASCII letter or digit becomes '-'.
func ProjectDir(cwd string) string {
	b := []byte(cwd)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// Path is where the CLI writes s under projects.
func Path(projects string, s *Session) string {
	return filepath.Join(projects, ProjectDir(s.Cwd), s.ID+".jsonl")
}

// Create writes s to its path under projects, making the folder.
func Create(projects string, s *Session) (string, error) {
	path, _, err := create(projects, s)
	return path, err
}

// create is Create, and returns the time of the last line it wrote.
func create(projects string, s *Session) (path string, last time.Time, err error) {
	path = Path(projects, s)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", last, err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", last, err
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	w := &writer{w: bw, s: s}
	if err := w.all(); err != nil {
		f.Close()
		return "", last, err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return "", last, err
	}
	return path, w.last, f.Close()
}

// envelope is a message line, its members in the CLI's order: cwd and
// the branch come before the message, uuid and timestamp after it.
type envelope struct {
	ParentUUID    *string `json:"parentUuid"`
	IsSidechain   bool    `json:"isSidechain"`
	UserType      string  `json:"userType"`
	Cwd           string  `json:"cwd"`
	SessionID     string  `json:"sessionId"`
	Version       string  `json:"version"`
	GitBranch     string  `json:"gitBranch"`
	Type          string  `json:"type"`
	Message       any     `json:"message"`
	IsMeta        bool    `json:"isMeta,omitzero"`
	RequestID     string  `json:"requestId,omitzero"`
	UUID          string  `json:"uuid"`
	Timestamp     string  `json:"timestamp"`
	ToolUseResult any     `json:"toolUseResult,omitzero"`
}

type userMsg struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type assistantMsg struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"`
	Role       string  `json:"role"`
	Model      string  `json:"model"`
	Content    []any   `json:"content"`
	StopReason *string `json:"stop_reason"`
	Usage      usage   `json:"usage"`
}

type usage struct {
	InputTokens     int64 `json:"input_tokens"`
	CacheCreation   int64 `json:"cache_creation_input_tokens"`
	CacheReadTokens int64 `json:"cache_read_input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
}

// writer writes one session's lines, chaining parentUuid.
type writer struct {
	w      io.Writer
	s      *Session
	n      int // lines written, for uuids and times
	parent *string
	msgs   int
	err    error
	size   int64
	fill   string    // the text that replaces placeholder, when set
	middle bool      // the Middle titles are written
	last   time.Time // the newest line's time
}

func (w *writer) put(v any) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	b = append(b, '\n')
	if w.fill != "" {
		// Write the filler in place of its placeholder: encoding a
		// megabyte of text that needs no escaping only to copy it is
		// most of the cost of a large corpus.
		if i := bytes.Index(b, []byte(placeholder)); i >= 0 {
			w.write(b[:i])
			w.write([]byte(w.fill))
			b = b[i+len(placeholder):]
		}
	}
	w.write(b)
}

func (w *writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.w.Write(b)
	w.size += int64(n)
	w.err = err
}

// placeholder stands for the filler in a line being encoded.
const placeholder = "@@corpus-filler@@"

// bigReply writes a reply whose text is n bytes of filler.
func (w *writer) bigReply(n int) {
	w.fill = Filler(n)
	w.reply(text(placeholder))
	w.fill = ""
}

func (w *writer) at() string {
	w.last = w.s.Start.Add(time.Duration(w.n) * time.Second).UTC()
	return w.last.Format("2006-01-02T15:04:05.000Z")
}

// uuid makes a stable, distinct uuid-shaped id for line n of a session.
func (w *writer) uuid() string {
	w.n++
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", hash(w.s.ID), w.n)
}

func hash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

func (w *writer) message(typ string, msg any, meta bool, result any) string {
	at := w.at()
	id := w.uuid()
	e := envelope{
		ParentUUID: w.parent, UserType: "external", Cwd: w.s.Cwd, SessionID: w.s.ID,
		Version: Version, GitBranch: w.s.Branch, Type: typ, Message: msg, IsMeta: meta,
		UUID: id, Timestamp: at, ToolUseResult: result,
	}
	if typ == "assistant" {
		e.RequestID = "req_" + id[:8]
	}
	w.put(e)
	w.parent = &id
	return id
}

func (w *writer) user(content any) string {
	return w.message("user", userMsg{"user", content}, false, nil)
}

// reply writes one assistant line per block, sharing a message id.
func (w *writer) reply(blocks ...any) {
	w.msgs++
	mid := fmt.Sprintf("msg_%08x%06d", hash(w.s.ID), w.msgs)
	for i, b := range blocks {
		var stop *string
		if i == len(blocks)-1 {
			stop = new("end_turn")
		}
		w.message("assistant", assistantMsg{
			ID: mid, Type: "message", Role: "assistant", Model: "claude-sonnet-4-5",
			Content: []any{b}, StopReason: stop,
			Usage: usage{InputTokens: 1200, CacheReadTokens: 9000, OutputTokens: 300},
		}, false, nil)
	}
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func (w *writer) turn(i int, prompt string) {
	s := w.s
	w.put(map[string]any{"type": "queue-operation", "operation": "enqueue", "timestamp": w.at(), "sessionId": s.ID, "content": prompt})
	w.put(map[string]any{"type": "queue-operation", "operation": "dequeue", "timestamp": w.at(), "sessionId": s.ID})
	if i == 0 && s.Reminder {
		w.user([]any{
			text("<system-reminder>\nAs you answer the user's questions, you can use the following context: CLAUDE.md says be brief.\n</system-reminder>"),
			text(prompt),
		})
	} else {
		w.user(prompt)
	}
	if i == 0 {
		w.put(map[string]any{
			"parentUuid": w.parent, "isSidechain": false, "cwd": s.Cwd, "sessionId": s.ID, "version": Version,
			"gitBranch": s.Branch, "type": "attachment", "attachment": map[string]any{"type": "todo", "content": []any{}},
			"uuid": w.uuid(), "timestamp": w.at(),
		})
	}
	blocks := []any{
		map[string]any{"type": "thinking", "thinking": "Let me look at the code first.", "signature": "sig"},
		text("I'll look into it."),
	}
	if s.Tools {
		tid := fmt.Sprintf("toolu_%08x%04d", hash(s.ID), i)
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": tid, "name": "Bash", "input": map[string]any{"command": "ls -la", "description": "List files"}})
		w.reply(blocks...)
		out := "total 0\nmain.go\n"
		if i == 0 && s.FirstTurn > 0 {
			// The output is written twice (content and toolUseResult).
			out += Filler(max(0, s.FirstTurn-int(w.size)-1500) / 2)
		}
		w.message("user", userMsg{"user", []any{map[string]any{"tool_use_id": tid, "type": "tool_result", "content": out, "is_error": false}}},
			false, map[string]any{"stdout": out, "stderr": "", "interrupted": false})
		w.reply(text(fmt.Sprintf("Done with step %d.", i+1)))
	} else {
		w.reply(blocks...)
	}
}

// titles writes the title lines placed at.
func (w *writer) titles(at Place) {
	for _, t := range w.s.Titles {
		if t.At != at {
			continue
		}
		switch t.Kind {
		case AITitle:
			w.put(map[string]any{"type": AITitle, "aiTitle": t.Text, "sessionId": w.s.ID})
		case CustomTitle:
			w.put(map[string]any{"type": CustomTitle, "customTitle": t.Text, "sessionId": w.s.ID})
		case SummaryLine:
			w.put(map[string]any{"type": SummaryLine, "summary": t.Text, "leafUuid": "00000000-0000-4000-8000-000000000000"})
		default:
			if w.err == nil {
				w.err = fmt.Errorf("corpus: unknown title kind %q", t.Kind)
			}
		}
	}
}

// Write writes s's lines to w.
func Write(out io.Writer, s *Session) error {
	w := &writer{w: out, s: s}
	return w.all()
}

// all writes the session's lines.
func (w *writer) all() error {
	s := w.s
	w.titles(AtStart)
	if s.Summary != "" {
		w.put(map[string]any{"type": "summary", "summary": s.Summary, "leafUuid": "00000000-0000-4000-8000-000000000000"})
	}
	if s.Meta {
		w.message("user", userMsg{"user", "Caveat: The messages below were generated by the user while running local commands."}, true, nil)
	}
	for i, p := range s.Prompts {
		w.turn(i, p)
		if i == 0 {
			if s.AITitle != "" {
				w.put(map[string]any{"type": "ai-title", "aiTitle": s.AITitle, "sessionId": s.ID})
			}
			w.titles(AfterFirstTurn)
			w.pad()
		}
		// Unpadded, the middle is the middle turn's end.
		if !w.middle && i >= (len(s.Prompts)-1)/2 {
			w.middle = true
			w.titles(Middle)
		}
	}
	if s.Interrupt {
		w.user([]any{text("[Request interrupted by user]")})
	}
	w.titles(NearEnd)
	if s.HugeLast > 0 {
		w.bigReply(s.HugeLast)
	} else {
		w.put(map[string]any{"type": "last-prompt", "lastPrompt": s.Prompts[len(s.Prompts)-1], "sessionId": s.ID})
		if s.TailTitle != "" {
			w.put(map[string]any{"type": "ai-title", "aiTitle": s.TailTitle, "sessionId": s.ID})
		}
	}
	w.titles(AtEnd)
	return w.err
}

// padLine is the size of the lines pad writes: big enough that a large
// file is quick to write, small enough to be a plausible reply.
const padLine = 1 << 20

// pad adds large replies until the file is about PadTo bytes, leaving
// room for the lines still to come.
func (w *writer) pad() {
	const reserve = 16 << 10
	for w.err == nil && w.size+reserve < w.s.PadTo {
		if !w.middle && w.size >= w.s.PadTo/2 {
			w.middle = true
			w.titles(Middle)
		}
		n := min(int64(padLine), w.s.PadTo/2-w.size, w.s.PadTo-reserve-w.size)
		if n <= 0 {
			n = min(int64(padLine), w.s.PadTo-reserve-w.size)
		}
		w.bigReply(int(max(n-600, 16)))
	}
}

// filler is shared prose, long enough for any line pad writes.
var filler = strings.Repeat("The quick brown fox jumps over the lazy dog; func main() { return } ", 1<<16)

// Filler returns n bytes of prose that needs no JSON escaping.
func Filler(n int) string {
	if n <= len(filler) {
		return filler[:n]
	}
	return strings.Repeat(filler, n/len(filler)+1)[:n]
}
