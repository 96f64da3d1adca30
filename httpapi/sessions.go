package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// decode reads a JSON request body into v. An empty body leaves v as it
// is; a body that is not one JSON value, names a member twice, or has a
// member v does not, is refused naming it.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "application/json" {
			return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Message: "send the body as application/json"}
		}
	}
	if err := checkJSON(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := clientField(te.Field)
			return badRequest(field, "%s: expected %s", protocol.Quote(te.Field), te.Type)
		}
		if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
			return badRequest(clientField(m[1]), "%s is not a member of this request", protocol.Quote(m[1]))
		}
		return badRequest("", "the body is not valid JSON: %s", clip(err.Error()))
	}
	return nil
}

// checkJSON refuses what encoding/json takes without a word: a member
// named twice in one object, whose last value would win unseen by
// whoever read the first (a proxy, a log, a reviewer); data after the
// value, which may be a second request; text that is not UTF-8.
func checkJSON(data []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if _, err := dec.ReadValue(); err != nil {
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
			name := pointerField(se.JSONPointer)
			return badRequest(clientField(name), "%s is given twice: give each member once", protocol.Quote(name))
		}
		return badRequest("", "the body is not valid JSON: %s", clip(err.Error()))
	}
	end := dec.InputOffset()
	if _, err := dec.ReadToken(); err != io.EOF {
		return badRequest("", "the body goes on after its JSON value (from byte %d): send one JSON value", end)
	}
	return nil
}

// pointerField names the member a JSON pointer points at as the API's
// fields do: /metadata/k is metadata.k, /triggers/0/id triggers[0].id.
func pointerField(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		switch {
		case tok != "" && strings.Trim(tok, "0123456789") == "" && b.Len() > 0:
			b.WriteString("[" + tok + "]")
		case b.Len() > 0:
			b.WriteString("." + tok)
		default:
			b.WriteString(tok)
		}
	}
	return b.String()
}

// clientField is a field named by what a client sent, as an error's
// field: one too long to be any of the API's is left out (the message
// quotes it, cut short), so a client's string is not handed back whole.
func clientField(name string) string {
	if len(name) > 128 {
		return ""
	}
	return name
}

// clip cuts an error's text short: a decoder's may quote what the
// client sent.
func clip(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

var unknownField = regexp.MustCompile(`unknown field "([^"]*)"`)

// validID is a session id a client may choose.
var validID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// sessionURI is the URI of the session the path's id names.
func sessionURI(r *http.Request) (string, error) {
	id := r.PathValue("id")
	uri := protocol.SessionScheme + ":/" + id
	if scheme, rest, ok := strings.Cut(id, ":"); ok {
		uri = scheme + ":/" + rest
	}
	if len(id) > 256 {
		return "", badRequest("id", "a session id of %d bytes: at most 256", len(id))
	}
	if _, err := protocol.ParseSessionURI(uri); err != nil {
		return "", badRequest("id", "%s is not a session id", protocol.Quote(id))
	}
	return uri, nil
}

// watchSession subscribes c to a session and its default chat, and
// returns the chat.
func watchSession(ctx context.Context, c *client.Client, uri string) (string, error) {
	st := c.State(uri)
	if st == nil {
		var err error
		if st, err = c.Subscribe(ctx, uri); err != nil {
			return "", err
		}
	}
	chat := protocol.DefaultChatURI(uri)
	if ss, ok := st.(*protocol.SessionState); ok && ss.DefaultChat != nil {
		chat = *ss.DefaultChat
	}
	if c.State(chat) == nil {
		if _, err := c.Subscribe(ctx, chat); err != nil {
			return "", err
		}
	}
	return chat, nil
}

// view reads a session as the API shows it.
func (a *API) view(ctx context.Context, c *client.Client, uri string) (sessionView, error) {
	return a.viewAs(ctx, c, uri, false)
}

// viewAs is view for a session known to be suspended, or not, before it
// was read (reading a session brings it into memory).
func (a *API) viewAs(ctx context.Context, c *client.Client, uri string, suspended bool) (sessionView, error) {
	chat, err := watchSession(ctx, c, uri)
	if err != nil {
		return sessionView{}, err
	}
	ss, _ := c.State(uri).(*protocol.SessionState)
	cs, _ := c.State(chat).(*protocol.ChatState)
	if ss == nil {
		return sessionView{}, notFound("no session %s", protocol.Quote(idOf(uri)))
	}
	return fullView(uri, ss, cs, suspended, c.LastSeq()), nil
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit", 100, 1, 500)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	archived := q.Get("archived") == "true"
	params := protocol.ListSessionsParams{Limit: &limit}
	if cur := q.Get("cursor"); cur != "" {
		if len(cur) > 1024 {
			a.fail(w, r, badRequest("cursor", "a cursor of %d bytes: use the nextCursor a listing gave", len(cur)))
			return
		}
		params.Cursor = &cur
	}
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	var res protocol.ListSessionsResult
	if err := c.Call(r.Context(), "listSessions", params, &res); err != nil {
		a.fail(w, r, err)
		return
	}
	out := struct {
		Sessions   []sessionView `json:"sessions"`
		NextCursor string        `json:"nextCursor,omitempty"`
	}{Sessions: []sessionView{}}
	for _, s := range res.Items {
		if archived || s.Status&protocol.StatusIsArchived == 0 {
			out.Sessions = append(out.Sessions, summaryView(s))
		}
	}
	if res.NextCursor != nil {
		out.NextCursor = *res.NextCursor
	}
	writeJSON(w, http.StatusOK, out)
}

// intParam reads a query parameter within [lo, hi].
func intParam(q url.Values, name string, def, lo, hi int64) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(name, "%s must be a whole number from %d to %d", name, lo, hi)
	}
	return n, nil
}

// createBody is POST /v1/sessions. Every member is optional.
type createBody struct {
	ID       *string            `json:"id"`
	Input    *string            `json:"input"`
	Title    *string            `json:"title"`
	Folder   *string            `json:"folder"`
	Provider *string            `json:"provider"`
	Mode     *string            `json:"mode"`
	Worktree bool               `json:"worktree"`
	Config   protocol.Object    `json:"config"`
	Metadata map[string]*string `json:"metadata"`
	// Permissions and InputTimeout are the session's config.permissions
	// and config.inputTimeout (docs/PERMISSIONS.md), given at the top
	// level as the members people look for; null is not given.
	Permissions  json.RawMessage `json:"permissions"`
	InputTimeout json.RawMessage `json:"inputTimeout"`
}

// configMembers are the config keys the request also takes at the top
// level, by their member: the host's refusal of one names the member.
var configMembers = map[string]string{"permissions": "permissions", "inputTimeout": "inputTimeout"}

// config is the session's config: b.Config with the top-level members in
// it; a key given in both places is refused.
func (b *createBody) config() (protocol.Object, error) {
	config := maps.Clone(b.Config) // nil for none
	for _, m := range []struct {
		key string
		v   json.RawMessage
	}{{"permissions", b.Permissions}, {"inputTimeout", b.InputTimeout}} {
		if len(m.v) == 0 || string(m.v) == "null" {
			continue
		}
		if _, ok := b.Config[m.key]; ok {
			return nil, badRequest(m.key, "%s is given twice: at the top level and in config; give it once", m.key)
		}
		if config == nil {
			config = protocol.Object{}
		}
		config[m.key] = jsontext.Value(m.v)
	}
	if b.Worktree {
		if config == nil {
			config = protocol.Object{}
		}
		config["isolation"] = []byte(`"worktree"`)
	}
	return config, nil
}

func (b *createBody) check() error {
	if b.ID != nil && !validID.MatchString(*b.ID) {
		return badRequest("id", "a session id is 1 to 64 letters, digits, '-' or '_'")
	}
	if b.Input != nil {
		if err := checkInput("input", *b.Input); err != nil {
			return err
		}
	}
	if b.Title != nil {
		if err := checkTitle(*b.Title); err != nil {
			return err
		}
	}
	if b.Folder != nil && (len(*b.Folder) > 4096 || !filepath.IsAbs(*b.Folder)) {
		return badRequest("folder", "folder must be an absolute path")
	}
	if b.Provider != nil && (*b.Provider == "" || len(*b.Provider) > 64) {
		return badRequest("provider", "provider names one of the host's agents (GET /v1/sessions shows them in use)")
	}
	if b.Mode != nil {
		return badRequest("mode", "ahpd's agents have no modes: say what they may do without asking in permissions (for example {\"permissions\": {\"mode\": \"acceptEdits\"}}; docs/PERMISSIONS.md)")
	}
	return checkMetadata(b.Metadata)
}

func checkInput(field, s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return badRequest(field, "%s is empty", field)
	case len(s) > maxInput:
		return badRequest(field, "%s has %d bytes: at most %d", field, len(s), maxInput)
	}
	return nil
}

func checkTitle(s string) error {
	if utf8.RuneCountInString(s) > maxTitle {
		return badRequest("title", "a title has at most %d characters", maxTitle)
	}
	return nil
}

func checkMetadata(m map[string]*string) error {
	if len(m) > maxMetaKeys {
		return badRequest("metadata", "at most %d metadata keys", maxMetaKeys)
	}
	for k, v := range m {
		if k == "" || utf8.RuneCountInString(k) > maxMetaKey {
			return badRequest("metadata", "the metadata key %s: a key has 1 to %d characters", protocol.Quote(k), maxMetaKey)
		}
		if v != nil && utf8.RuneCountInString(*v) > maxMetaValue {
			return badRequest("metadata."+k, "the value of %s has more than %d characters", protocol.Quote(k), maxMetaValue)
		}
	}
	return nil
}

// metadataOf reads the metadata the host keeps in a session's _meta.
func metadataOf(meta protocol.Object) map[string]string {
	out := map[string]string{}
	if raw, ok := meta["ahpd.metadata"]; ok {
		_ = json.Unmarshal(raw, &out)
	}
	return out
}

func (a *API) createSession(w http.ResponseWriter, r *http.Request) {
	var b createBody
	if err := decode(r, &b); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := b.check(); err != nil {
		a.fail(w, r, err)
		return
	}
	config, err := b.config()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ctx := r.Context()
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	id := "cs_" + randomHex(8)
	if b.ID != nil {
		id = *b.ID
	}
	// No provider: the host's default agent, or a refusal saying why.
	// Kept as it is made: the caller's next listing shows it. The config
	// is taken as given or refused (ahpd.strictConfig): a misspelt key or
	// a rule that does not parse must not leave the session asking, or
	// allowing, what the caller did not mean.
	params := protocol.CreateSessionParams{Channel: protocol.SessionScheme + ":/" + id, Provider: b.Provider, Config: config,
		Meta: protocol.Object{"ahpd.keep": jsontext.Value("true"), "ahpd.strictConfig": jsontext.Value("true")}}
	if b.Folder != nil {
		params.WorkingDirectories = []string{(&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Clean(*b.Folder))}).String()}
	}
	if err := c.Call(ctx, "createSession", params, nil); err != nil {
		if b.Provider == nil && client.ErrorCode(err) == protocol.CodeProviderNotFound {
			err = noAgent(err)
		}
		a.fail(w, r, err)
		return
	}
	uri := params.Channel
	if err := a.update(ctx, c, uri, b.Title, nil, b.Metadata); err != nil {
		a.fail(w, r, err)
		return
	}
	if b.Input != nil {
		if _, err := a.send(ctx, c, uri, "turn_"+randomHex(8), *b.Input); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	v, err := a.view(ctx, c, uri)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+url.PathEscape(v.ID))
	writeJSON(w, http.StatusCreated, v)
}

// update sets what PATCH and POST set: the title, the archived mark and
// metadata, each when given.
func (a *API) update(ctx context.Context, c *client.Client, uri string, title *string, archived *bool, meta map[string]*string) error {
	if title == nil && archived == nil && meta == nil {
		return nil
	}
	if _, err := watchSession(ctx, c, uri); err != nil {
		return err
	}
	if title != nil {
		if err := c.DispatchWait(ctx, uri, &protocol.SessionTitleChangedAction{Title: *title}); err != nil {
			return err
		}
	}
	if archived != nil {
		if err := c.DispatchWait(ctx, uri, &protocol.SessionIsArchivedChangedAction{IsArchived: *archived}); err != nil {
			return err
		}
	}
	if meta != nil {
		if err := c.Call(ctx, "ahpd/setSessionMetadata", map[string]any{"channel": uri, "metadata": meta}, nil); err != nil {
			return err
		}
	}
	return nil
}

// send starts a turn, or queues it behind the one running. It returns
// whether it was queued.
func (a *API) send(ctx context.Context, c *client.Client, uri, turnID, input string) (bool, error) {
	chat, err := watchSession(ctx, c, uri)
	if err != nil {
		return false, err
	}
	msg := protocol.Message{Text: input, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
	if cs, _ := c.State(chat).(*protocol.ChatState); cs != nil && cs.ActiveTurn != nil {
		return true, c.DispatchWait(ctx, chat, &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindQueued, ID: turnID, Message: msg})
	}
	return false, c.DispatchWait(ctx, chat, &protocol.ChatTurnStartedAction{TurnID: turnID, StartedAt: client.Now(), Message: msg})
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	uri, err := sessionURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	minSeq, err := intParam(r.URL.Query(), "minSeq", 0, 0, 1<<62)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ctx := r.Context()
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	// Asked before reading it, which wakes it: the probe wakes nothing.
	// It answers an unknown session with -32002.
	var res struct {
		Status string `json:"status"`
	}
	if err := c.Call(ctx, "ahpd/sessionStatus", map[string]string{"channel": uri}, &res); err != nil {
		if client.ErrorCode(err) == protocol.CodeProviderNotFound {
			err = notFound("no session %s", protocol.Quote(idOf(uri)))
		}
		a.fail(w, r, err)
		return
	}
	if _, err := watchSession(ctx, c, uri); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.waitSeq(ctx, c, minSeq); err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := a.viewAs(ctx, c, uri, res.Status == "inactive")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// waitSeq waits, at most MinSeqWait, until c has seen the host's
// serverSeq reach seq: the session's state then holds every change up to
// it.
func (a *API) waitSeq(ctx context.Context, c *client.Client, seq int64) error {
	if c.LastSeq() >= seq {
		return nil
	}
	timer := time.NewTimer(a.opts.MinSeqWait)
	defer timer.Stop()
	for {
		changed := c.Changed()
		if c.LastSeq() >= seq {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return &apiError{Status: http.StatusGatewayTimeout, Code: "timeout", Field: "minSeq",
				Message: fmt.Sprintf("the session did not reach sequence %d within %s: it is at %d", seq, a.opts.MinSeqWait, c.LastSeq())}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// patchBody is PATCH /v1/sessions/{id}.
type patchBody struct {
	Title    *string            `json:"title"`
	Archived *bool              `json:"archived"`
	Metadata map[string]*string `json:"metadata"`
}

func (a *API) patchSession(w http.ResponseWriter, r *http.Request) {
	uri, err := sessionURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var b patchBody
	if err := decode(r, &b); err != nil {
		a.fail(w, r, err)
		return
	}
	if b.Title != nil {
		err = checkTitle(*b.Title)
	}
	if err == nil {
		err = checkMetadata(b.Metadata)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ctx := r.Context()
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	if _, err := watchSession(ctx, c, uri); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.update(ctx, c, uri, b.Title, b.Archived, b.Metadata); err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := a.view(ctx, c, uri)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *API) deleteSession(w http.ResponseWriter, r *http.Request) {
	uri, err := sessionURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	// The host answers an unknown session's disposal as not its owner's
	// to dispose of; looking first tells the two apart.
	if _, err := c.Subscribe(r.Context(), uri); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := c.Call(r.Context(), "disposeSession", protocol.DisposeSessionParams{Channel: uri}, nil); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// turnBody is POST /v1/sessions/{id}/turns.
type turnBody struct {
	Input string  `json:"input"`
	ID    *string `json:"id"`
}

func (a *API) sendTurn(w http.ResponseWriter, r *http.Request) {
	uri, err := sessionURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var b turnBody
	if err := decode(r, &b); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := checkInput("input", b.Input); err != nil {
		a.fail(w, r, err)
		return
	}
	turnID := "turn_" + randomHex(8)
	if b.ID != nil {
		if !validID.MatchString(*b.ID) {
			a.fail(w, r, badRequest("id", "a turn id is 1 to 64 letters, digits, '-' or '_'"))
			return
		}
		turnID = *b.ID
	}
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	queued, err := a.send(r.Context(), c, uri, turnID, b.Input)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"turnId": turnID, "queued": queued, "lastSeq": c.LastSeq()})
}

func (a *API) cancelTurn(w http.ResponseWriter, r *http.Request) {
	uri, err := sessionURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ctx := r.Context()
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	chat, err := watchSession(ctx, c, uri)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	cs, _ := c.State(chat).(*protocol.ChatState)
	if cs == nil || cs.ActiveTurn == nil {
		a.fail(w, r, &apiError{Status: http.StatusConflict, Code: "no_turn", Message: "the session runs no turn: nothing to cancel"})
		return
	}
	id := cs.ActiveTurn.ID
	started, _ := time.Parse(time.RFC3339Nano, cs.ActiveTurn.StartedAt)
	if err := c.DispatchWait(ctx, chat, &protocol.ChatTurnCancelledAction{TurnID: id, Duration: max(0, time.Since(started).Milliseconds())}); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"turnId": id, "lastSeq": c.LastSeq()})
}

// suspendBody is POST /v1/sessions/{id}/suspend.
type suspendBody struct {
	IfIdle bool `json:"ifIdle"`
}

func (a *API) suspend(w http.ResponseWriter, r *http.Request) {
	var b suspendBody
	if err := decode(r, &b); err != nil {
		a.fail(w, r, err)
		return
	}
	a.residency(w, r, "ahpd/suspendSession", b.IfIdle)
}

func (a *API) resume(w http.ResponseWriter, r *http.Request) {
	a.residency(w, r, "ahpd/resumeSession", false)
}

// residency runs one of the host's sleep commands and answers the
// session's residency: suspended or active.
func (a *API) residency(w http.ResponseWriter, r *http.Request, method string, ifIdle bool) {
	uri, err := sessionURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	var res struct {
		Status string `json:"status"`
	}
	params := map[string]any{"channel": uri}
	if ifIdle {
		params["ifIdle"] = true
	}
	if err := c.Call(r.Context(), method, params, &res); err != nil {
		a.fail(w, r, err)
		return
	}
	status := "active"
	if res.Status == "inactive" {
		status = "suspended"
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": idOf(uri), "residency": status})
}
