package catalogue

import (
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The script backend writes <state>/transcripts/script/<conversation>.jsonl
// with one line per finished turn (see plugins/script/transcript.go):
//
//	{"seq":1,"turn":{"id":"turn-1","startedAt":"…","duration":12.5,
//	 "message":{"text":"say hello",…},"responseParts":[…],"state":"complete"}}
//
// The first line gives the session's start and first prompt, the last its
// latest activity (start plus duration, in milliseconds). The file does
// not record the folder the session ran in.

// scriptTranscript reports whether name is a script transcript.
func scriptTranscript(name string) (id string, ok bool) {
	id, ok = strings.CutSuffix(name, ".jsonl")
	if !ok || id == "" || strings.HasPrefix(id, ".") {
		return "", false
	}
	return id, true
}

// scriptRecord is the part of a record a row needs; the response parts
// are skipped.
type scriptRecord struct {
	Seq  int64 `json:"seq"`
	Turn struct {
		ID        lenient `json:"id"`
		StartedAt lenient `json:"startedAt"`
		Duration  float64 `json:"duration"`
		Message   struct {
			Text lenient `json:"text"`
		} `json:"message"`
	} `json:"turn"`
}

// scriptParser reads script transcript lines.
type scriptParser struct{}

func (scriptParser) pass([]byte, *info) bool { return false }
func (scriptParser) mayTitle([]byte) bool    { return false }
func (scriptParser) tailDone(t *info) bool   { return !t.modified.IsZero() }
func (scriptParser) tailFirst() int          { return firstWindow } // the last line is enough
func (scriptParser) headDone(h, _ *info) bool {
	return !h.created.IsZero() && h.prompt != ""
}
func (scriptParser) parse(line []byte, cut, _ bool) (facts, bool) {
	var rec scriptRecord
	if cut {
		rec = scriptPrefix(line)
	} else if json.Unmarshal(line, &rec, decodeOpts) != nil {
		return facts{}, false
	}
	if rec.Seq <= 0 || rec.Turn.ID == "" {
		return facts{}, cut
	}
	f := facts{conversation: true}
	if t, err := time.Parse(time.RFC3339Nano, string(rec.Turn.StartedAt)); err == nil {
		f.first = t
		f.last = t.Add(time.Duration(rec.Turn.Duration * float64(time.Millisecond)))
	}
	if p := strings.TrimSpace(string(rec.Turn.Message.Text)); p != "" {
		f.prompt = clip(p)
	}
	return f, true
}

// scriptPrefix reads what precedes the cut in a record cut short; a turn
// writes its id, start, duration and message before its response parts.
func scriptPrefix(line []byte) scriptRecord {
	var rec scriptRecord
	descend := func(p string) bool { return p == "turn" || p == "turn/message" }
	want := func(p string) bool {
		switch p {
		case "seq", "turn/id", "turn/startedAt", "turn/duration", "turn/message/text":
			return true
		}
		return false
	}
	walkPrefix(line, descend, want, func(p string, tok jsontext.Token) {
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
			s := lenient(tok.String())
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
