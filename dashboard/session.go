package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/timeline"
)

// sessionQuery is what the session page shows, read from its query.
type sessionQuery struct {
	URI   string
	Chat  string // "" for the default chat
	At    int64  // the seq to show the state at; -1 for now
	Kinds []string
}

func readSessionQuery(q url.Values) (sessionQuery, error) {
	sq := sessionQuery{URI: q.Get("uri"), Chat: q.Get("chat"), At: -1}
	if sq.URI == "" || len(sq.URI) > maxURI {
		return sq, &pageError{Status: http.StatusBadRequest, Message: "Name a session: /ui/session?uri=SESSION-URI."}
	}
	if _, err := protocol.ParseSessionURI(sq.URI); err != nil {
		return sq, &pageError{Status: http.StatusBadRequest, Message: "That is not a session's URI."}
	}
	if len(sq.Chat) > maxURI {
		return sq, &pageError{Status: http.StatusBadRequest, Message: "That chat URI is too long."}
	}
	if s := q.Get("at"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return sq, &pageError{Status: http.StatusBadRequest, Message: "at is an event's sequence number, a whole number from 0."}
		}
		sq.At = n
	}
	for _, k := range q["kind"] {
		if !isKind(k) {
			return sq, &pageError{Status: http.StatusBadRequest, Message: "kind is one of the timeline's kinds: " + strings.Join(kindNames(), ", ") + "."}
		}
		if !contains(sq.Kinds, k) {
			sq.Kinds = append(sq.Kinds, k)
		}
	}
	return sq, nil
}

func isKind(k string) bool { return contains(kindNames(), k) }

func kindNames() []string {
	out := make([]string, len(timeline.Kinds))
	for i, k := range timeline.Kinds {
		out[i] = string(k)
	}
	return out
}

// values is the query of sq, less what is left out.
func (sq sessionQuery) values(withAt bool) url.Values {
	v := url.Values{}
	if sq.Chat != "" {
		v.Set("chat", sq.Chat)
	}
	if withAt && sq.At >= 0 {
		v.Set("at", strconv.FormatInt(sq.At, 10))
	}
	for _, k := range sq.Kinds {
		v.Add("kind", k)
	}
	return v
}

// sessionBody is the session page's data.
type sessionBody struct {
	URI, ID      string
	Title        string
	Provider     string
	Owner        string
	Sharing      string // who else may use it: the grants' sharing
	Status       string
	StatusClass  string
	Folder       string
	Branch       string
	HasChanges   bool
	Files        int64
	Added        int64
	Removed      int64
	Chats        []chatTab
	Chat         string
	Conversation convView
	Timeline     timelineView
	At           int64
	AtReplayed   int64
	AtLabel      string // what the event replayed at was (scrub.go)
	Live         bool
	LiveSrc      string
	ResetLink    string
	Actions      actionsView
	Note         string
	Checkpoints  checkpointsView
	// Compose, when set, is the composer and the new-chat form
	// (compose.go).
	Compose *composeView
}

// checkpointsView is the session's checkpoints, newest first, each with
// what its turn changed (ahpd/sessionCheckpoints).
type checkpointsView struct {
	List      []checkpointView
	More      bool
	Note      string
	ReviewAll string // the session's whole change, to review
	// Then: a replay's, those the session had at its event (scrub.go).
	Then      bool
	ThenCount int
}

type checkpointView struct {
	Turn                        int
	Commit                      string
	Files, Additions, Deletions int
	Link                        string // its review
}

// checkpointsShown is how many checkpoints the page asks for.
const checkpointsShown = 20

// checkpoints reads the session's newest checkpoints.
func checkpoints(ctx context.Context, c *client.Client, uri string) checkpointsView {
	return checkpointsN(ctx, c, uri, checkpointsShown)
}

// checkpointsN reads the session's newest limit checkpoints.
func checkpointsN(ctx context.Context, c *client.Client, uri string, limit int) checkpointsView {
	var res struct {
		Checkpoints []struct {
			Turn                        int
			Commit                      string
			Files, Additions, Deletions int
		}
		More bool
	}
	if err := c.Call(ctx, "ahpd/sessionCheckpoints", map[string]any{"channel": uri, "limit": limit}, &res); err != nil {
		return checkpointsView{Note: "No checkpoints: " + pageErrorOf(err).Message}
	}
	cv := checkpointsView{More: res.More, ReviewAll: reviewLink(uri, -1, "", 0)}
	for _, cp := range res.Checkpoints {
		cv.List = append(cv.List, checkpointView{Turn: cp.Turn, Commit: cp.Commit[:min(len(cp.Commit), 12)],
			Files: cp.Files, Additions: cp.Additions, Deletions: cp.Deletions, Link: reviewLink(uri, cp.Turn, "", 0)})
	}
	return cv
}

type chatTab struct {
	Title, Link string
	Current     bool
}

func (d *Dashboard) sessionPage(w http.ResponseWriter, r *http.Request) {
	sq, err := readSessionQuery(r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	body, err := d.loadSession(r.Context(), c, viewerOf(r), sq)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	// Only the page shows them, not its live updates: each costs git.
	if sq.At >= 0 {
		// A replay shows those the session had then.
		body.Checkpoints = checkpointsThen(checkpointsN(r.Context(), c, sq.URI, 200), body.Timeline.ix, body.AtReplayed)
	} else {
		body.Checkpoints = checkpoints(r.Context(), c, sq.URI)
	}
	d.render(w, r, http.StatusOK, "session", d.pageFor(r, body.Title, "sessions", body))
}

// replayResult is ahpd/replaySession's answer.
type replayResult struct {
	AtSeq   int64                  `json:"atSeq"`
	Session *protocol.SessionState `json:"session"`
	Chats   []*protocol.ChatState  `json:"chats"`
}

// loadSession reads what the session page shows. A sleeping session, or
// one asked for at an earlier event, is read from its journal
// (ahpd/replaySession), which wakes nothing; an awake one is subscribed
// to, and its page follows it live.
func (d *Dashboard) loadSession(ctx context.Context, c *client.Client, v viewer, sq sessionQuery) (*sessionBody, error) {
	var probe probeResult
	if err := c.Call(ctx, "ahpd/sessionStatus", map[string]string{"channel": sq.URI}, &probe); err != nil {
		return nil, err
	}
	b := &sessionBody{URI: sq.URI, ID: sq.URI, Owner: probe.Owner, Sharing: probe.Sharing, At: sq.At}
	var ss *protocol.SessionState
	chats := map[string]*protocol.ChatState{}
	if sq.At >= 0 || probe.Status == "inactive" {
		params := map[string]any{"channel": sq.URI}
		if sq.At >= 0 {
			params["atSeq"] = sq.At
		}
		var res replayResult
		err := c.Call(ctx, "ahpd/replaySession", params, &res)
		switch {
		case err == nil && res.Session != nil:
			ss = res.Session
			for _, cs := range res.Chats {
				if cs != nil {
					chats[cs.Resource] = cs
				}
			}
			if sq.At >= 0 {
				b.AtReplayed = res.AtSeq
			}
		case sq.At >= 0:
			return nil, err
		default:
			b.Note = "Its journal cannot rebuild it (it has none, or it was found in an agent's own transcripts), so it was opened to be shown."
		}
	}
	if ss == nil {
		st, err := c.Subscribe(ctx, sq.URI)
		if err != nil {
			return nil, err
		}
		ss, _ = st.(*protocol.SessionState)
		if ss == nil {
			return nil, &pageError{Status: http.StatusNotFound, Message: "There is no such session."}
		}
		b.Live = true
	}
	chat := pickChat(ss, sq.Chat)
	if b.Live {
		if _, err := c.Subscribe(ctx, chat); err != nil {
			return nil, err
		}
		cs, _ := c.State(chat).(*protocol.ChatState)
		chats[chat] = cs
	}
	b.fill(ss, chat, sq)
	residency := probe.Status
	if b.Live {
		residency = "active"
	}
	status := ss.Status
	if b.Live {
		status = liveStatus(ss, chats[chat])
	}
	b.Status = statusOf(status, residency)
	b.StatusClass = strings.ReplaceAll(b.Status, " ", "-")
	b.Conversation = conversationOf(chats[chat])
	b.Conversation.linkEdits(sq.URI, chat)
	tl, err := d.timeline(ctx, c, sq, chatTitles(ss))
	if err != nil {
		b.Timeline.Note = "No timeline: " + pageErrorOf(err).Message
	} else {
		b.Timeline = tl
		b.AtLabel = tl.currentLabel()
	}
	b.Actions = d.actionsFor(v, b, ss, chats[chat], residency)
	b.Conversation.Forms = d.formsFor(v, b)
	b.Compose = d.composerFor(v, b)
	if b.Live {
		b.LiveSrc = "/ui/session/events?" + withURI(sq.values(false), sq.URI).Encode()
	}
	return b, nil
}

func withURI(v url.Values, uri string) url.Values {
	v.Set("uri", uri)
	return v
}

// pickChat is the chat asked for when the session has it, else its
// default chat.
func pickChat(ss *protocol.SessionState, want string) string {
	for _, ch := range ss.Chats {
		if want != "" && ch.Resource == want {
			return want
		}
	}
	if ss.DefaultChat != nil {
		return *ss.DefaultChat
	}
	if len(ss.Chats) > 0 {
		return ss.Chats[0].Resource
	}
	return want
}

// fill sets what the page says of the session itself.
func (b *sessionBody) fill(ss *protocol.SessionState, chat string, sq sessionQuery) {
	b.Title, b.Provider, b.Chat = ss.Title, ss.Provider, chat
	if b.Title == "" {
		b.Title = "(untitled)"
	}
	if len(ss.WorkingDirectories) > 0 {
		b.Folder = folderOf(ss.WorkingDirectories[0])
	}
	if ss.Config != nil {
		if raw, ok := ss.Config.Values["branch"]; ok {
			b.Branch = textOf(json.RawMessage(raw))
		}
	}
	for _, ch := range ss.Chats {
		title := ch.Title
		if title == "" {
			title = "chat"
		}
		if ss.DefaultChat != nil && ch.Resource == *ss.DefaultChat {
			if ch.Changes != nil {
				b.HasChanges = true
				b.Files, b.Added, b.Removed = deref(ch.Changes.Files), deref(ch.Changes.Additions), deref(ch.Changes.Deletions)
			}
		}
		q := sq.values(true)
		q.Set("chat", ch.Resource)
		b.Chats = append(b.Chats, chatTab{Title: title, Link: sessionLink(sq.URI, q), Current: ch.Resource == chat})
	}
	b.ResetLink = sessionLink(sq.URI, sq.values(false))
}

// timelineView is the timeline beside the conversation.
type timelineView struct {
	Events []eventView
	More   bool
	Kinds  []kindOption
	Note   string
	// The scrubber (scrub.go): the events oldest first, the one the page
	// shows the state after, and what its form keeps.
	Points      []scrubPoint
	At          int64
	URI, Chat   string
	KindsChosen []string
	ix          turnIndex
}

type eventView struct {
	Seq      int64
	Time     string
	Kind     string
	Text     string
	TurnLink string // its place in the conversation
	DiffLink string // a file edit's: its turn's diff
	AtLink   string // the session's state right after it
	Current  bool   // the event the page is replayed at
	Label    string // what it was, in words (scrub.go)
	event    timeline.Event
}

type kindOption struct {
	Name    string
	Checked bool
}

// timeline reads the newest events of the session's timeline, newest
// first.
func (d *Dashboard) timeline(ctx context.Context, c *client.Client, sq sessionQuery, titles map[string]string) (timelineView, error) {
	tv := timelineView{URI: sq.URI, Chat: sq.Chat, KindsChosen: sq.Kinds}
	for _, k := range kindNames() {
		tv.Kinds = append(tv.Kinds, kindOption{Name: k, Checked: contains(sq.Kinds, k)})
	}
	params := map[string]any{"channel": sq.URI, "limit": timelineSize}
	if len(sq.Kinds) > 0 {
		params["kinds"] = sq.Kinds
	}
	var res struct {
		Events []timeline.Event `json:"events"`
		More   bool             `json:"more"`
	}
	if err := c.Call(ctx, "ahpd/sessionEvents", params, &res); err != nil {
		return tv, err
	}
	tv.More = res.More
	for _, e := range res.Events {
		ev := eventView{Seq: e.Seq, Time: seqTime(e.Time), Kind: string(e.Kind), Text: e.Text, Current: sq.At == e.Seq, event: e}
		if len(ev.Text) > 300 {
			ev.Text = clip(ev.Text[:300]) + "…"
		}
		if e.TurnID != "" {
			ev.TurnLink = "#" + turnAnchor(e.TurnID)
		}
		q := sq.values(false)
		q.Set("at", strconv.FormatInt(e.Seq, 10))
		ev.AtLink = sessionLink(sq.URI, q)
		if e.TurnID != "" {
			ev.AtLink += ev.TurnLink
		}
		if e.Kind == timeline.Artifact && e.TurnID != "" {
			ev.DiffLink = editLink(sq.URI, e.Channel, e.TurnID, "")
		}
		tv.Events = append(tv.Events, ev)
	}
	tv.ix = readTurnIndex(ctx, c, sq.URI)
	tv.label(tv.ix, titles, sq.At)
	return tv, nil
}

// actionsView is the buttons that write, each shown only when the
// person's grants allow it and the session is in a state it applies to.
type actionsView struct {
	CSRF, URI, Chat                           string
	Wake, Suspend, Cancel, Archive, Unarchive bool
}

func (a actionsView) Any() bool { return a.Wake || a.Suspend || a.Cancel || a.Archive || a.Unarchive }

// actionsFor works out which writes to offer from the grants table: the
// operation each write needs, checked for the person against the
// session's owner as the host checks it. The host checks again when the
// button is pressed.
func (d *Dashboard) actionsFor(v viewer, b *sessionBody, ss *protocol.SessionState, cs *protocol.ChatState, residency string) actionsView {
	a := actionsView{URI: b.URI, Chat: b.Chat}
	if v.login != nil {
		a.CSRF = v.login.csrf
	}
	if b.At >= 0 {
		return a // a page in the past offers no writes
	}
	p := grants.Principal{}
	if v.login != nil {
		p = v.login.cred.Principal
	}
	may := func(op string) bool {
		need, ok := opOperation(op)
		return ok && d.may(p, need, b.Owner, b.Sharing)
	}
	a.Wake = residency == "inactive" && may("wake")
	a.Suspend = residency == "active" && (cs == nil || cs.ActiveTurn == nil) && may("suspend")
	a.Cancel = cs != nil && cs.ActiveTurn != nil && b.Live && may("cancel")
	archived := ss.Status&protocol.StatusIsArchived != 0
	a.Archive = !archived && may("archive")
	a.Unarchive = archived && may("unarchive")
	return a
}

// may says whether p's grants allow op on a session owner owns, shared
// so (as ahpd/sessionStatus says).
func (d *Dashboard) may(p grants.Principal, op grants.Operation, owner, sharing string) bool {
	if d.opts.Auth == nil {
		return true
	}
	o, _ := grants.Parse(owner)
	return d.opts.Auth.Directory().CheckSession(p, op, grants.Session(o, sharing)) == nil
}

// liveStatus is a followed session's status with what its chat says
// first: a client's copy of the session is told its activity only with
// the session's next change, its chat's at once.
func liveStatus(ss *protocol.SessionState, cs *protocol.ChatState) protocol.SessionStatus {
	if cs == nil {
		return ss.Status
	}
	deflt := ""
	if ss.DefaultChat != nil {
		deflt = *ss.DefaultChat
	}
	st, _ := protocol.SessionActivity(ss.Status, ss.Activity, deflt, []*protocol.ChatState{cs})
	if cs.Resource != deflt && st.Activity() == protocol.StatusIdle {
		return ss.Status
	}
	return st
}
