package webhooks

import (
	"encoding/json"
	"net/url"
	"unicode/utf8"

	"github.com/ahpd/ahpd/events"
)

// Body is what a delivery posts, as JSON (docs/WEBHOOKS.md gives it
// member by member). What a client or an agent wrote (titles, questions,
// error messages) is cut to a few KB, so a body is at most MaxBody bytes.
type Body struct {
	// ID is the event's: the same on every attempt, and for every
	// webhook the event goes to (the X-Ahpd-Delivery header).
	ID    string      `json:"id"`
	Event events.Kind `json:"event"`
	// Time is when it happened, RFC 3339 in UTC.
	Time    string       `json:"time"`
	Session *BodySession `json:"session,omitempty"`
	Chat    string       `json:"chat,omitempty"`
	Turn    *BodyTurn    `json:"turn,omitempty"`
	Request *BodyRequest `json:"request,omitempty"`
	Run     *BodyRun     `json:"run,omitempty"`
}

// BodySession names the session.
type BodySession struct {
	URI      string `json:"uri"`
	ID       string `json:"id,omitempty"`
	Title    string `json:"title,omitempty"`
	Owner    string `json:"owner,omitempty"`
	Provider string `json:"provider,omitempty"`
}

// BodyTurn is the turn that ended, or that waits.
type BodyTurn struct {
	ID string `json:"id"`
	// State is complete or error for a turn that ended; left out for one
	// that waits (needs_input).
	State      string     `json:"state,omitempty"`
	DurationMs *int64     `json:"durationMs,omitempty"`
	Error      *BodyError `json:"error,omitempty"`
}

// BodyError is why a turn failed.
type BodyError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Resumable bool   `json:"resumable,omitempty"`
}

// BodyRequest is what a needs_input turn waits on.
type BodyRequest struct {
	ID        string         `json:"id"`
	Kind      string         `json:"kind"` // question or approval
	Text      string         `json:"text"`
	Tool      string         `json:"tool,omitempty"`
	Questions []BodyQuestion `json:"questions,omitempty"`
	Options   []BodyOption   `json:"options,omitempty"`
	// AnswerPath is the HTTP API route that answers it, on the daemon's
	// address (docs/HTTP.md).
	AnswerPath string `json:"answerPath,omitempty"`
	// Truncated says questions or options were left out to keep the body
	// within MaxBody.
	Truncated bool `json:"truncated,omitempty"`
}

// BodyQuestion is one question of a request.
type BodyQuestion struct {
	ID       string       `json:"id"`
	Kind     string       `json:"kind"`
	Message  string       `json:"message"`
	Required bool         `json:"required,omitempty"`
	Options  []BodyOption `json:"options,omitempty"`
}

// BodyOption is a choice a question or an approval offers.
type BodyOption struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Kind  string `json:"kind,omitempty"`
}

// BodyRun is the automation run that ended.
type BodyRun struct {
	URI        string `json:"uri"`
	Automation string `json:"automation"`
	Outcome    string `json:"outcome"` // completed, failed or cancelled
	Error      string `json:"error,omitempty"`
}

// Bounds of what a body carries of what clients and agents wrote.
const (
	MaxBody      = 16 << 10 // a whole body, in bytes
	maxTitle     = 1024
	maxText      = 2048
	maxShort     = 512 // a question's message
	maxLabel     = 256 // an option's label, an id
	maxURIBytes  = 2048
	maxQuestions = 10
	maxOptions   = 10
)

// timeFormat is RFC 3339 in UTC, to the millisecond.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// bodyOf is the body of event ev under id, encoded, and the key its
// session's deliveries are ordered by.
func bodyOf(id string, ev events.Event) ([]byte, string) {
	b := Body{ID: id, Event: ev.Kind, Time: ev.Time.UTC().Format(timeFormat), Chat: cut(ev.Chat, maxURIBytes)}
	key := ev.Session.URI
	if ev.Session.URI != "" {
		s := ev.Session
		b.Session = &BodySession{URI: cut(s.URI, maxURIBytes), ID: cut(s.ID, maxLabel), Title: cut(s.Title, maxTitle), Owner: cut(s.Owner, maxLabel), Provider: cut(s.Provider, maxLabel)}
	}
	if t := ev.Turn; t != nil {
		b.Turn = &BodyTurn{ID: cut(t.ID, maxLabel), State: string(t.State)}
		if t.State != "" {
			ms := t.Duration.Milliseconds()
			b.Turn.DurationMs = &ms
		}
		if e := t.Error; e != nil {
			b.Turn.Error = &BodyError{Type: cut(e.Type, maxLabel), Message: cut(e.Message, maxText), Resumable: e.Resumable}
		}
	}
	if r := ev.Request; r != nil {
		b.Request = requestOf(r, ev.Session.ID)
	}
	if r := ev.Run; r != nil {
		b.Run = &BodyRun{URI: cut(r.URI, maxURIBytes), Automation: cut(r.Automation, maxURIBytes), Outcome: r.Outcome, Error: cut(r.Error, maxText)}
		if key == "" {
			key = r.URI // a run that made no session: ordered on its own
		}
	}
	data, _ := json.Marshal(b) // of strings, numbers and booleans only: it cannot fail
	if len(data) > MaxBody && b.Request != nil {
		b.Request.Questions, b.Request.Options, b.Request.Truncated = nil, nil, true
		data, _ = json.Marshal(b)
	}
	return data, key
}

func requestOf(r *events.Request, session string) *BodyRequest {
	out := &BodyRequest{ID: cut(r.ID, maxLabel), Kind: r.Kind, Text: cut(r.Text, maxText), Tool: cut(r.Tool, maxLabel)}
	for i, q := range r.Questions {
		if i == maxQuestions {
			out.Truncated = true
			break
		}
		bq := BodyQuestion{ID: cut(q.ID, maxLabel), Kind: q.Kind, Message: cut(q.Message, maxShort), Required: q.Required}
		bq.Options = optionsOf(q.Options, &out.Truncated)
		out.Questions = append(out.Questions, bq)
	}
	out.Options = optionsOf(r.Options, &out.Truncated)
	if session != "" && r.ID != "" {
		route := "questions"
		if r.Kind == events.RequestApproval {
			route = "tool-calls"
		}
		out.AnswerPath = "/v1/sessions/" + url.PathEscape(session) + "/" + route + "/" + url.PathEscape(r.ID)
		if len(out.AnswerPath) > maxURIBytes {
			out.AnswerPath = ""
		}
	}
	return out
}

func optionsOf(list []events.Option, truncated *bool) []BodyOption {
	var out []BodyOption
	for i, o := range list {
		if i == maxOptions {
			*truncated = true
			break
		}
		out = append(out, BodyOption{ID: cut(o.ID, maxLabel), Label: cut(o.Label, maxLabel), Kind: cut(o.Kind, maxLabel)})
	}
	return out
}

// cut bounds s to max bytes, cut at a character and ending in "…" when
// it was longer.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i-- // s[i] continues a character: cut before it
	}
	return s[:i] + "…"
}
