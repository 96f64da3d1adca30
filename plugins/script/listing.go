package script

import (
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/internal/jsonl"
)

// The backend lists its conversations (plugins.TranscriptLister) from its
// transcript folder, <dir>/<conversation>.jsonl, one line per finished
// turn (transcript.go):
//
//	{"seq":1,"turn":{"id":"turn-1","startedAt":"…","duration":12.5,
//	 "message":{"text":"say hello",…},"responseParts":[…],"state":"complete"}}
//
// The first line gives the session's start and first prompt, the last its
// latest activity (start plus duration, in milliseconds). The file does
// not record the folder the session ran in, nor any title.

var _ plugins.TranscriptLister = (*Backend)(nil)

// TranscriptRoots returns the backend's transcript folder.
func (b *Backend) TranscriptRoots() []plugins.TranscriptRoot {
	return []plugins.TranscriptRoot{TranscriptRoot(b.dir)}
}

// TranscriptRoot returns dir, a script backend's transcript folder, as a
// root of transcripts.
func TranscriptRoot(dir string) plugins.TranscriptRoot {
	return plugins.TranscriptRoot{Provider: Provider, Dir: dir, Format: listFormat{}}
}

// listFormat reads script transcripts for the catalogue.
type listFormat struct{}

// wants: the last line gives the latest activity, so the tail reads its
// first window only; the first line gives the start and the prompt.
var wants = plugins.TranscriptWants{
	Tail: plugins.FactModified,
	Head: plugins.FactCreated | plugins.FactPrompt,
}

func (listFormat) Wants() plugins.TranscriptWants { return wants }

// Name reports whether name is a transcript.
func (listFormat) Name(name string) (id string, ok bool) {
	id, ok = strings.CutSuffix(name, ".jsonl")
	if !ok || id == "" || strings.HasPrefix(id, ".") {
		return "", false
	}
	return id, true
}

// Skip: every line is a turn, and says when it ran.
func (listFormat) Skip([]byte, plugins.Facts) bool { return false }

// listRecord is the part of a record a row needs; the response parts
// are skipped.
type listRecord struct {
	Seq  int64 `json:"seq"`
	Turn struct {
		ID        jsonl.Lenient `json:"id"`
		StartedAt jsonl.Lenient `json:"startedAt"`
		Duration  float64       `json:"duration"`
		Message   struct {
			Text jsonl.Lenient `json:"text"`
		} `json:"message"`
	} `json:"turn"`
}

func (listFormat) Line(line []byte, cut, _ bool) (plugins.TranscriptLine, bool) {
	var rec listRecord
	if cut {
		rec = recordPrefix(line)
	} else if json.Unmarshal(line, &rec, jsonl.DecodeOpts) != nil {
		return plugins.TranscriptLine{}, false
	}
	if rec.Seq <= 0 || rec.Turn.ID == "" {
		return plugins.TranscriptLine{}, cut
	}
	l := plugins.TranscriptLine{Conversation: true}
	if t, err := time.Parse(time.RFC3339Nano, string(rec.Turn.StartedAt)); err == nil {
		l.First = t
		l.Last = t.Add(time.Duration(rec.Turn.Duration * float64(time.Millisecond)))
	}
	l.Prompt = strings.TrimSpace(string(rec.Turn.Message.Text))
	return l, true
}

// recordPrefix reads what precedes the cut in a record cut short; a turn
// writes its id, start, duration and message before its response parts.
func recordPrefix(line []byte) listRecord {
	var rec listRecord
	descend := func(p string) bool { return p == "turn" || p == "turn/message" }
	want := func(p string) bool {
		switch p {
		case "seq", "turn/id", "turn/startedAt", "turn/duration", "turn/message/text":
			return true
		}
		return false
	}
	jsonl.WalkPrefix(line, descend, want, func(p string, tok jsontext.Token) {
		switch p {
		case "seq":
			if tok.Kind() == '0' {
				rec.Seq, _ = tok.Int()
			}
		case "turn/duration":
			if tok.Kind() == '0' {
				rec.Turn.Duration, _ = tok.Float()
			}
		case "turn/id", "turn/startedAt", "turn/message/text":
			if tok.Kind() != '"' {
				return
			}
			s := jsonl.Lenient(tok.String())
			switch p {
			case "turn/id":
				rec.Turn.ID = s
			case "turn/startedAt":
				rec.Turn.StartedAt = s
			default:
				rec.Turn.Message.Text = s
			}
		}
	})
	return rec
}
