package httpapi

import (
	"strings"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// sessionView is a session as the API shows it.
type sessionView struct {
	ID          string            `json:"id"`
	URI         string            `json:"uri"`
	Title       string            `json:"title"`
	Provider    string            `json:"provider"`
	Status      string            `json:"status"`
	Archived    bool              `json:"archived"`
	Folders     []string          `json:"folders"`
	CreatedAt   string            `json:"createdAt,omitempty"`
	ModifiedAt  string            `json:"modifiedAt,omitempty"`
	Metadata    map[string]string `json:"metadata"`
	ActiveTurn  *turnView         `json:"activeTurn"`
	QueuedTurns []turnView        `json:"queuedTurns"`
	Questions   []questionView    `json:"questions"`
	Turns       []turnView        `json:"turns,omitempty"`
	LastSeq     int64             `json:"lastSeq"`
}

// turnView is a turn: its message and, once it has one, its response.
type turnView struct {
	ID        string `json:"id"`
	Input     string `json:"input"`
	State     string `json:"state,omitempty"`
	Response  string `json:"response,omitempty"`
	Error     string `json:"error,omitempty"`
	StartedAt string `json:"startedAt,omitempty"`
}

// questionView is something the active turn waits on a person for: an
// input request (answered at questions/{id}), or a tool call to confirm
// (at tool-calls/{id}), with what answering it takes.
type questionView struct {
	ID        string              `json:"id"`
	TurnID    string              `json:"turnId"`
	Kind      string              `json:"kind"` // input, confirmation
	Text      string              `json:"text"`
	Questions []inputQuestionView `json:"questions,omitempty"` // input
	Tool      string              `json:"tool,omitempty"`      // confirmation
	Options   []optionView        `json:"options,omitempty"`   // confirmation: what it offers beyond approve and deny
}

// inputQuestionView is one question of an input request.
type inputQuestionView struct {
	ID       string       `json:"id"`
	Kind     string       `json:"kind"`
	Title    string       `json:"title,omitempty"`
	Message  string       `json:"message"`
	Required bool         `json:"required"`
	Options  []optionView `json:"options,omitempty"`
	Freeform bool         `json:"freeform,omitempty"` // a select question takes text that is no option
}

type optionView struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Kind  string `json:"kind,omitempty"` // a tool call's: approve, deny
}

// idOf is the API's id for a session URI: the id of an ahp-session URI,
// or "<scheme>:<id>" for a provider's own.
func idOf(uri string) string {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return uri
	}
	if su.Scheme == protocol.SessionScheme {
		return su.ID
	}
	return su.Scheme + ":" + su.ID
}

// statusWord names a session's activity.
func statusWord(s protocol.SessionStatus) string {
	switch s.Activity() {
	case protocol.StatusInputNeeded:
		return "waiting"
	case protocol.StatusInProgress:
		return "running"
	case protocol.StatusError:
		return "error"
	}
	return "idle"
}

func folders(dirs []protocol.URI) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, strings.TrimPrefix(d, "file://"))
	}
	return out
}

// summaryView is a listed session.
func summaryView(s protocol.SessionSummary) sessionView {
	return sessionView{
		ID: idOf(s.Resource), URI: s.Resource, Title: s.Title, Provider: s.Provider,
		Status: statusWord(s.Status), Archived: s.Status&protocol.StatusIsArchived != 0,
		Folders: folders(s.WorkingDirectories), CreatedAt: s.CreatedAt, ModifiedAt: s.ModifiedAt,
		Metadata: metadataOf(s.Meta), QueuedTurns: []turnView{}, Questions: []questionView{},
	}
}

// fullView is a session with its chat: the active turn, what is queued,
// what it asks, and its last turns.
func fullView(uri string, ss *protocol.SessionState, cs *protocol.ChatState, suspended bool, seq int64) sessionView {
	v := sessionView{
		ID: idOf(uri), URI: uri, Title: ss.Title, Provider: ss.Provider,
		Status: statusWord(ss.Status), Archived: ss.Status&protocol.StatusIsArchived != 0,
		Folders: folders(ss.WorkingDirectories), Metadata: metadataOf(ss.Meta),
		QueuedTurns: []turnView{}, Questions: []questionView{}, LastSeq: seq,
	}
	if suspended {
		v.Status = "suspended"
	}
	if cs == nil {
		return v
	}
	v.ModifiedAt = cs.ModifiedAt
	if at := cs.ActiveTurn; at != nil {
		tv := turnView{ID: at.ID, Input: at.Message.Text, State: "running", StartedAt: at.StartedAt, Response: responseText(at.ResponseParts)}
		v.ActiveTurn = &tv
		v.Questions = questions(cs)
		// The chat says it first: the session's status follows it.
		if !suspended {
			v.Status = "running"
			if len(v.Questions) > 0 {
				v.Status = "waiting"
			}
		}
	}
	if sm := cs.SteeringMessage; sm != nil {
		v.QueuedTurns = append(v.QueuedTurns, turnView{ID: sm.ID, Input: sm.Message.Text, State: "steering"})
	}
	for _, q := range cs.QueuedMessages {
		v.QueuedTurns = append(v.QueuedTurns, turnView{ID: q.ID, Input: q.Message.Text, State: "queued"})
	}
	turns := cs.Turns
	if len(turns) > maxTurnsShown {
		turns = turns[len(turns)-maxTurnsShown:]
	}
	for i := range turns {
		t := &turns[i]
		tv := turnView{ID: t.ID, Input: t.Message.Text, State: string(t.State), Response: responseText(t.ResponseParts)}
		if t.StartedAt != nil {
			tv.StartedAt = *t.StartedAt
		}
		if e := t.ErrorPart(); e != nil {
			tv.Error = e.Error.Message
		}
		v.Turns = append(v.Turns, tv)
	}
	return v
}

// responseText is the text a turn's response has written.
func responseText(parts []protocol.ResponsePart) string {
	var b strings.Builder
	for _, p := range parts {
		if m, ok := p.(*protocol.MarkdownResponsePart); ok {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

// questions are what a running turn waits on.
func questions(cs *protocol.ChatState) []questionView {
	out := []questionView{}
	for _, w := range client.WaitingIn(cs) {
		q := questionView{ID: w.ID, TurnID: w.TurnID, Kind: "input", Text: w.Text()}
		if w.Tool != nil {
			q.Kind, q.Tool, q.Text = "confirmation", w.Tool.DisplayName, w.Tool.InvocationMessage.Text
			for _, o := range w.Tool.Options {
				q.Options = append(q.Options, optionView{ID: o.ID, Label: o.Label, Kind: string(o.Kind)})
			}
		} else {
			for _, pq := range w.Request.Questions {
				iq := client.QuestionOf(pq)
				v := inputQuestionView{ID: iq.ID, Kind: iq.Kind, Title: iq.Title, Message: iq.Message, Required: iq.Required, Freeform: iq.Freeform}
				for _, o := range iq.Options {
					v.Options = append(v.Options, optionView{ID: o.ID, Label: o.Label})
				}
				q.Questions = append(q.Questions, v)
			}
		}
		out = append(out, q)
	}
	return out
}
