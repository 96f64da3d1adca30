package plugins

import "time"

// A backend whose conversations are transcript files on this machine (one
// file per conversation, one JSON object per line, only ever appended to)
// lets ahpd list them, those the host never ran included, by being a
// TranscriptLister. The catalogue (package catalogue) does the rest: it
// watches the roots, reads a few kilobytes at each end of every
// transcript, never what lies between, and after an append only the new
// lines, and it keeps what it read in an index between starts. The
// backend says where its files are and what a line says; the catalogue
// knows no backend by name.

// TranscriptLister is a Backend that lists its conversations' transcripts.
type TranscriptLister interface {
	// TranscriptRoots returns the folders the backend's transcripts are
	// in. A folder that does not exist yet is looked for again at every
	// light rescan.
	TranscriptRoots() []TranscriptRoot
}

// TranscriptListers returns the registered backends that are
// TranscriptListers, in registration order.
func (r *Registry) TranscriptListers() []TranscriptLister {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []TranscriptLister
	for _, p := range r.order {
		if l, ok := r.backends[p].(TranscriptLister); ok {
			out = append(out, l)
		}
	}
	return out
}

// TranscriptRoot is one folder of transcripts and how to read them.
type TranscriptRoot struct {
	// Provider is the backend's provider; a transcript's row is the
	// session <provider>:/<id>.
	Provider string
	// Dir is the folder, an absolute path.
	Dir string
	// Nested says the transcripts lie in Dir's subfolders, one level
	// down (a folder per project, as the Claude Code CLI keeps them),
	// rather than in Dir itself. Hidden subfolders are passed over.
	Nested bool
	// Format reads the files.
	Format TranscriptFormat
}

// TranscriptFormat reads a backend's transcripts for the catalogue. Its
// methods are called from several goroutines at once, and Line and Skip
// for every line read, so they must be cheap and keep no state.
type TranscriptFormat interface {
	// Name reports whether a file of the root, by its name, is a
	// transcript, and the id of the conversation it records.
	Name(file string) (id string, ok bool)

	// Line reads one line. cut says the line was cut short (by a read
	// window, or by a writer still writing it): only what precedes the
	// cut is read, it is never garbage, and it decides no title.
	// wantPrompt says the first prompt is still unknown, so a line that
	// may hold one is worth decoding whole. ok is false for a line that
	// is garbage, which the catalogue counts.
	Line(line []byte, cut, wantPrompt bool) (l TranscriptLine, ok bool)

	// Skip reports whether a line at the tail can be stepped over
	// without Line, because it cannot say any of lacking: the facts the
	// tail still looks for (FactModified, FactBranch, and the title kinds
	// no newer line has decided). At the head it is asked with the head's
	// title kinds alone, once the head has every other fact it wants. It
	// is a byte test, much cheaper than decoding; false is always safe.
	Skip(line []byte, lacking Facts) bool

	// Wants says which facts the format's lines carry, so the catalogue
	// reads no more of a file than finds them.
	Wants() TranscriptWants
}

// TranscriptWants are the facts the catalogue looks for in a
// transcript's windows: it reads the tail window backward from the end
// until it has Tail, then the head window forward until it has Head (the
// first window's lines are always read).
type TranscriptWants struct {
	// Tail is looked for in the last 64 KB. A custom title found there
	// settles every title kind, since nothing outranks it.
	Tail Facts
	// Head is looked for in the first 64 KB. The head's custom and AI
	// titles are found only by reading the whole window (its newest one
	// decides), unless the tail found a custom title.
	Head Facts
	// WholeTail reads the whole tail window at once, for a format whose
	// rows need most of it; otherwise the tail reads its last 8 KB
	// first, and the rest only when those did not say enough.
	WholeTail bool
}

// Facts is a set of the facts a transcript's lines say about its
// conversation.
type Facts uint16

// The facts. The four title kinds follow FactCustomTitle in TitleKind
// order.
const (
	FactCreated  Facts = 1 << iota // when it started
	FactModified                   // when it was last active
	FactCwd                        // the folder it ran in
	FactBranch                     // its git branch
	FactPrompt                     // the first thing a person asked
	FactCustomTitle
	FactAITitle
	FactLastPrompt
	FactSummary

	// FactTitles are the title kinds.
	FactTitles = FactCustomTitle | FactAITitle | FactLastPrompt | FactSummary
)

// TitleKind is a kind of line that may title a session. A row is titled
// as the Claude Agent SDK's session list titles it: a custom title (a
// person renamed the session) before an AI title, the tail window's
// before the head window's; then the last prompt, then the summary, both
// from the tail; then the first prompt.
type TitleKind uint8

// The title kinds, in the order they rank.
const (
	CustomTitle TitleKind = iota
	AITitle
	LastPrompt
	SummaryTitle
	TitleKinds // how many there are
)

// Fact returns the fact of title kind k.
func (k TitleKind) Fact() Facts { return FactCustomTitle << k }

// TranscriptLine is what one line of a transcript says. Texts are as the
// line has them: the catalogue trims titles and collapses and cuts
// prompts.
type TranscriptLine struct {
	// First and Last are when the line's work began and ended: the same
	// instant for a line written as it happened, a turn's start and end
	// for a line written after it.
	First, Last time.Time
	Cwd         string
	Branch      string
	// Prompt is the prompt a person typed, when the line is one.
	Prompt string
	// Command is a slash command the line ran: the first prompt's
	// stand-in when a transcript has no prompt of its own.
	Command string
	// Title holds the line's title texts by kind, for the kinds in
	// Titled; a line of a kind with empty text still decides it.
	Title  [TitleKinds]string
	Titled Facts
	// Conversation marks a line of the conversation itself: a transcript
	// with none (a title alone, a queued operation) is no session yet.
	Conversation bool
}

// SetTitle records that the line decides title kind k, with text.
func (l *TranscriptLine) SetTitle(k TitleKind, text string) {
	l.Title[k] = text
	l.Titled |= k.Fact()
}
