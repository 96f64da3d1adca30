package host

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/grants"

	"github.com/ahpd/ahpd/protocol"
)

const (
	maxPage     = 500  // the most rows one listSessions answers with a limit
	defaultPage = 1000 // the rows it answers without one: the whole catalogue, as clients do not page
)

// createSession makes a provisional session under the URI the client chose.
func (h *Host) createSession(ctx context.Context, c *conn, req *jrpc2.Request) (any, error) {
	var p protocol.CreateSessionParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	su, err := protocol.ParseSessionURI(p.Channel)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: channel: %v", err)
	}
	if err := checkSessionID(su.ID); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: channel: %v", err)
	}
	provider := su.Provider()
	if p.Provider != nil {
		provider = *p.Provider
	}
	if provider == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: provider: name a provider (one of %s)", strings.Join(h.opts.Backends.Providers(), ", "))
	}
	backend, ok := h.opts.Backends.Get(provider)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeProviderNotFound, "no provider %s on this host (it has %s)", protocol.Quote(provider), strings.Join(h.opts.Backends.Providers(), ", "))
	}
	dirs := []string{h.opts.DefaultDirectory}
	if len(p.WorkingDirectories) > 0 {
		dirs = dirs[:0]
		for i, uri := range p.WorkingDirectories {
			dir, err := dirOf(uri)
			if err != nil {
				return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: workingDirectories[%d]: %v", i, err)
			}
			if !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
	}
	for _, dir := range dirs {
		if err := h.checkRoots("createSession", c.principal, dir); err != nil {
			return nil, err
		}
	}
	config, ignored := h.resolveConfig(backend, p.Config, c.principal, dirs[0])
	if len(ignored) > 0 {
		h.log.Info("config values left at their defaults", "session", p.Channel, "keys", ignored)
	}
	// Whose it is and what it is charged to are settled now, for good.
	dir := h.directory()
	owner := dir.Owner(c.principal)
	// A scope asked for is checked as asked, not replaced by the default.
	var requested string
	if v, ok := p.Config[keyScope]; ok {
		if err := jsonUnmarshal(v, &requested); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: config.scope: want \"team/project\"")
		}
	} else {
		_ = jsonUnmarshal(config.Values[keyScope], &requested)
	}
	scope, err := dir.Scope(c.principal, requested)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: config.scope: %v", err)
	}

	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, protocol.Errorf(protocol.CodeInternalError, "ahpd is shutting down")
	}
	if old := h.sessions[su.ID]; old != nil {
		h.mu.Unlock()
		return nil, protocol.Errorf(protocol.CodeSessionAlreadyExists, "session %s already exists (as %s)", p.Channel, old.uri)
	}
	s := h.newSession(c, su, provider, backend, dirs, config)
	s.rec.Owner = principalString(owner)
	s.rec.Scope = scopeString(scope)
	s.noteOwnLocked()
	h.sessions[su.ID] = s
	h.mu.Unlock()

	if p.ActiveClient != nil {
		s.mu.Lock()
		s.emitSessionLocked(&protocol.SessionActiveClientSetAction{ActiveClient: *p.ActiveClient}, nil)
		s.mu.Unlock()
	}
	h.log.Info("session created", "session", s.uri, "provider", provider, "dir", s.workDir())
	h.poke()
	return nil, nil
}

// disposeSession ends a session and deletes the backend's copy of it.
func (h *Host) disposeSession(ctx context.Context, c *conn, req *jrpc2.Request) (any, error) {
	var p protocol.DisposeSessionParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	if err := h.dispose(ctx, s); err != nil {
		h.log.Warn("session disposed with errors", "session", s.uri, "err", err)
	}
	h.log.Info("session disposed", "session", s.uri)
	return nil, nil
}

// listSessions answers a page of the catalogue, most recently modified
// first.
func (h *Host) listSessions(ctx context.Context, c *conn, req *jrpc2.Request) (any, error) {
	var p protocol.ListSessionsParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	limit := defaultPage
	if p.Limit != nil {
		if *p.Limit < 1 {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for listSessions: limit: must be at least 1")
		}
		limit = int(min(*p.Limit, maxPage))
	}
	var after *pageKey
	if p.Cursor != nil {
		k, err := h.keys.open(*p.Cursor)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for listSessions: cursor: %v", err)
		}
		after = &k
	}
	mine, err := ownerFilter(p.Meta)
	if err != nil {
		return nil, err
	}
	me := principalString(c.principal)
	// External rows the mode shows; external sessions a client opened are
	// listed by the same rules, from the session. Nobody owns them, so the
	// owner filter keeps none.
	ext := &externalView{}
	if !mine {
		ext = h.externalRows()
	}
	// Sort small keys, not whole rows: a catalogue of 10,000 sessions
	// would otherwise move megabytes on every listing.
	keys := make([]rowKey, 0, 64+len(ext.keys))
	var opened map[string]bool // external sessions listed from the session
	for _, s := range h.sessionList() {
		s.mu.Lock()
		// A session nobody sent a turn in is listed to nobody: VS Code
		// makes one for every empty chat it shows.
		listed := !s.disposed && !s.provisional && (!mine || (me != "" && s.rec.Owner == me))
		if s.rec.External {
			listed = listed && ext.byURI[s.uri]
			if opened == nil {
				opened = map[string]bool{}
			}
			opened[s.uri] = true
		}
		if listed {
			keys = append(keys, rowKey{pageKey: pageKey{s.summary.ModifiedAt, s.uri}, s: s})
		}
		s.mu.Unlock()
	}
	for _, k := range ext.keys {
		if !opened[k.Resource] {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b rowKey) int { return a.compare(b.pageKey) })
	if p.Limit == nil && len(keys) > defaultPage {
		h.log.Warn("the catalogue is larger than one listing; clients that do not page see the newest", "sessions", len(keys), "listed", defaultPage)
	}
	start := 0
	if after != nil {
		var found bool
		start, found = slices.BinarySearchFunc(keys, *after, func(r rowKey, k pageKey) int { return r.compare(k) })
		if found {
			start++
		}
	}
	end := min(start+limit, len(keys))
	rows := make([]protocol.SessionSummary, 0, end-start)
	for _, k := range keys[start:end] {
		if k.row != nil {
			rows = append(rows, externalSummary(k.row))
			continue
		}
		k.s.mu.Lock()
		rows = append(rows, k.s.summary)
		k.s.mu.Unlock()
	}
	res := &protocol.ListSessionsResult{Items: rows}
	if end < len(keys) {
		res.NextCursor = new(h.keys.seal(keys[end-1].pageKey))
	}
	return res, nil
}

// rowKey is a catalogue row's place in the listing order.
type rowKey struct {
	pageKey
	s   *session       // a session the host holds, or
	row *catalogue.Row // an external row of the catalogue
}

// compare orders rows most recently modified first, then by URI, so pages
// are stable.
func (k pageKey) compare(o pageKey) int {
	if c := strings.Compare(o.ModifiedAt, k.ModifiedAt); c != 0 {
		return c
	}
	return strings.Compare(k.Resource, o.Resource)
}

// pageKey is where a page ended: the last row served.
type pageKey struct {
	ModifiedAt string `json:"m"`
	Resource   string `json:"r"`
}

// cursorKey signs cursors, so a cursor this host did not issue is refused
// rather than guessed at.
type cursorKey []byte

func newCursorKey() cursorKey {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func (k cursorKey) seal(p pageKey) string {
	data, _ := json.Marshal(p)
	mac := hmac.New(sha256.New, k)
	mac.Write(data)
	return base64.RawURLEncoding.EncodeToString(append(mac.Sum(nil)[:16], data...))
}

func (k cursorKey) open(cursor string) (pageKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) < 17 {
		return pageKey{}, errForeignCursor
	}
	mac := hmac.New(sha256.New, k)
	mac.Write(raw[16:])
	if !hmac.Equal(raw[:16], mac.Sum(nil)[:16]) {
		return pageKey{}, errForeignCursor
	}
	var p pageKey
	if err := json.Unmarshal(raw[16:], &p); err != nil {
		return pageKey{}, errForeignCursor
	}
	return p, nil
}

var errForeignCursor = errors.New("not a cursor this host issued: start again without one")

func principalString(p grants.Principal) string {
	if p.IsZero() {
		return ""
	}
	return p.String()
}

func scopeString(s grants.Scope) string {
	if s.IsZero() {
		return ""
	}
	return s.String()
}
