package catalogue

import (
	"strings"
	"time"

	"github.com/ahpd/ahpd/plugins"
)

// A row's title comes from one of four kinds of line, in the order the
// Claude Agent SDK's session list ranks them: a custom title (a person
// renamed the session), an AI title, the last prompt (the CLI's
// last-prompt line), a summary line; the first prompt comes after all
// of them. Like the SDK, a kind is looked for in the tail window first:
// the newest line of that kind there decides it, even when its text is
// empty; the custom and AI titles are then looked for in the head
// window, where the newest one decides; the last prompt and the summary
// come from the tail only. Lines appended while the catalogue watches
// are newer than anything in the tail, so they decide their kind at once.

// source is a kind of title line.
type source = plugins.TitleKind

const (
	srcCustom     = plugins.CustomTitle
	srcAI         = plugins.AITitle
	srcLastPrompt = plugins.LastPrompt
	srcSummary    = plugins.SummaryTitle
	nSources      = plugins.TitleKinds
)

// sources holds, for each kind of title line, the text of the line that
// decided it in one window.
type sources struct {
	text [nSources]string
	set  uint8 // bit k: a line of kind k was met
}

func (s *sources) has(k source) bool { return s.set&(1<<k) != 0 }

func (s *sources) put(k source, text string) {
	s.text[k] = text
	s.set |= 1 << k
}

// newer takes what a newer line says: it decides every kind it names.
func (s *sources) newer(f *sources) {
	for k := range nSources {
		if f.has(k) {
			s.put(k, f.text[k])
		}
	}
}

// older takes what an older line says: it decides only the kinds no
// newer line decided.
func (s *sources) older(f *sources) {
	for k := range nSources {
		if f.has(k) && !s.has(k) {
			s.put(k, f.text[k])
		}
	}
}

// facts is what one transcript line says about its conversation.
type facts struct {
	// first and last are when the line's work began and ended; the same
	// instant for a Claude line, a turn's start and end for a script one.
	first, last time.Time
	cwd         string
	branch      string
	prompt      string
	// command is a slash command the line ran, the first prompt's stand-in
	// when a transcript has no prompt of its own.
	command string
	titles  sources
	// conversation marks a line of the conversation itself: a transcript
	// with none (a title alone, a queued operation) is no session yet.
	conversation bool
}

// info is what a transcript's lines, read so far, say about it. It is
// filled from three directions: the head forward, the tail backward and
// appends forward, so each member is either a "first" one (kept from the
// earliest line that has it) or a "latest" one (from the last).
type info struct {
	created  time.Time // first
	cwd      string    // first: the folder the session was started in
	prompt   string    // first
	command  string    // first
	modified time.Time // latest
	branch   string    // latest
	// tail holds the title lines that decide each kind in the tail window
	// and after it; head those that decide the custom and AI titles in
	// the head window (see the top of this file).
	tail, head   sources
	conversation bool
}

// forward takes a line that comes after every line seen so far.
func (in *info) forward(f *facts) {
	if in.created.IsZero() {
		in.created = f.first
	}
	if in.cwd == "" {
		in.cwd = f.cwd
	}
	if in.prompt == "" {
		in.prompt = f.prompt
	}
	if in.command == "" {
		in.command = f.command
	}
	if !f.last.IsZero() {
		in.modified = f.last
	}
	if f.branch != "" {
		in.branch = f.branch
	}
	in.tail.newer(&f.titles)
	in.conversation = in.conversation || f.conversation
}

// headLine takes a line of the head window, in order.
func (in *info) headLine(f *facts) {
	in.forward(f)
	for _, k := range [...]source{srcCustom, srcAI} {
		if f.titles.has(k) {
			in.head.put(k, f.titles.text[k])
		}
	}
}

// backward takes a line that comes before every line seen so far.
func (in *info) backward(f *facts) {
	if !f.first.IsZero() {
		in.created = f.first
	}
	if f.cwd != "" {
		in.cwd = f.cwd
	}
	if f.prompt != "" {
		in.prompt = f.prompt
	}
	if f.command != "" {
		in.command = f.command
	}
	if in.modified.IsZero() {
		in.modified = f.last
	}
	if in.branch == "" {
		in.branch = f.branch
	}
	in.tail.older(&f.titles)
	in.conversation = in.conversation || f.conversation
}

// join combines what the head (h) and the tail (t) of one file said:
// first members from the head unless it had none, latest members from
// the tail unless it had none, the title lines of each window as they
// were.
func join(h, t info) info {
	out := h
	if out.created.IsZero() {
		out.created = t.created
	}
	if out.cwd == "" {
		out.cwd = t.cwd
	}
	if out.prompt == "" {
		out.prompt = t.prompt
	}
	if out.command == "" {
		out.command = t.command
	}
	// The head's latest time is only its own end: with none from the
	// tail, the file's modification time (see makeRow) is closer.
	out.modified = t.modified
	if t.branch != "" {
		out.branch = t.branch
	}
	out.tail = t.tail
	out.conversation = h.conversation || t.conversation
	return out
}

// title returns the session's title: a custom title, else an AI title,
// the tail window's before the head window's.
func (in *info) title() string {
	return firstOf(in.tail.text[srcCustom], in.head.text[srcCustom], in.tail.text[srcAI], in.head.text[srcAI])
}

// firstPrompt returns the first prompt, else the first slash command.
func (in *info) firstPrompt() string {
	return firstOf(in.prompt, in.command)
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// format is a root's plugins.TranscriptFormat, read as the scans need
// it.
type format struct {
	f     plugins.TranscriptFormat
	wants plugins.TranscriptWants
}

func newFormat(f plugins.TranscriptFormat) *format {
	return &format{f: f, wants: f.Wants()}
}

// parse reads one line (see plugins.TranscriptFormat.Line) into facts,
// the prompts collapsed and cut and the titles trimmed.
func (p *format) parse(line []byte, cut, wantPrompt bool) (facts, bool) {
	l, ok := p.f.Line(line, cut, wantPrompt)
	if !ok {
		return facts{}, false
	}
	f := facts{first: l.First, last: l.Last, cwd: l.Cwd, branch: l.Branch, conversation: l.Conversation}
	if l.Prompt != "" {
		f.prompt = clip(l.Prompt)
	}
	if l.Command != "" {
		f.command = clip(l.Command)
	}
	if l.Titled != 0 {
		for k := range nSources {
			if l.Titled&k.Fact() == 0 {
				continue
			}
			text := l.Title[k]
			if k == srcCustom || k == srcAI {
				text = strings.TrimSpace(text)
			} else {
				text = clip(text)
			}
			f.titles.put(k, text)
		}
	}
	return f, true
}

// tailLacks returns what the tail still looks for: the newest time and
// branch, and the title kinds no line decided.
func tailLacks(t *info) plugins.Facts {
	var f plugins.Facts
	if t.modified.IsZero() {
		f |= plugins.FactModified
	}
	if t.branch == "" {
		f |= plugins.FactBranch
	}
	for k := range nSources {
		if !t.tail.has(k) {
			f |= k.Fact()
		}
	}
	return f
}

// pass reports whether the tail can step over line without decoding it.
func (p *format) pass(line []byte, t *info) bool {
	return p.f.Skip(line, tailLacks(t))
}

// mayTitle reports whether a head line may carry a title the head window
// decides.
func (p *format) mayTitle(line []byte) bool {
	return !p.f.Skip(line, plugins.FactCustomTitle|plugins.FactAITitle)
}

// tailDone reports whether the tail has found all it looks for. A custom
// title settles the title, since nothing outranks it.
func (p *format) tailDone(t *info) bool {
	lacks := tailLacks(t)
	if t.tail.text[srcCustom] != "" {
		lacks &^= plugins.FactTitles
	}
	return lacks&p.wants.Tail == 0
}

// headLacks returns what the head still looks for, given what the tail
// (t) found. The head's custom and AI titles are lacking until its window
// ends (the newest one in it decides), unless the tail's custom title
// makes them moot.
func headLacks(h, t *info) plugins.Facts {
	var f plugins.Facts
	if h.created.IsZero() {
		f |= plugins.FactCreated
	}
	if h.cwd == "" {
		f |= plugins.FactCwd
	}
	if h.prompt == "" {
		f |= plugins.FactPrompt
	}
	if t.tail.text[srcCustom] == "" {
		f |= plugins.FactCustomTitle | plugins.FactAITitle
	}
	return f
}

// headDone reports whether the head (h) has found all it looks for,
// given what the tail (t) found.
func (p *format) headDone(h, t *info) bool {
	return headLacks(h, t)&p.wants.Head == 0
}

// headWhole reports whether the head must read its whole window, given
// what the tail (t) found: the newest title line in it decides, so the
// window is read in one read rather than a small one and then the rest
// (two requests to the disk for one).
func (p *format) headWhole(t *info) bool {
	return headLacks(&info{}, t)&p.wants.Head&plugins.FactTitles != 0
}

// headBasics reports whether the head has every fact it looks for but
// titles: the lines left to decode are those that may carry one.
func (p *format) headBasics(h, t *info) bool {
	return headLacks(h, t)&p.wants.Head&^plugins.FactTitles == 0
}

// tailFirst is how many bytes the tail reads first.
func (p *format) tailFirst() int {
	if p.wants.WholeTail {
		return tailMax + 1
	}
	return firstWindow
}
