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
	own := s.ownKeysLocked() // before another can reach s
	h.sessions[su.ID] = s
	h.mu.Unlock()
	h.noteOwn(own)
	h.order.add(s, s.summary.ModifiedAt)

	if p.ActiveClient != nil {
		s.mu.Lock()
		s.emitSessionLocked(&protocol.SessionActiveClientSetAction{ActiveClient: *p.ActiveClient}, nil)
		s.unlock()
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
	// Both halves are in listing order already (the registry's in
	// h.order, the view sorted when made): the page is their merge from
	// the cursor on, and the rows past it are never looked at.
	own := ownRows{h: h, ext: ext, after: after, mine: mine, me: me, batch: min(limit+1, 512)}
	ei := 0
	if after != nil {
		var found bool
		ei, found = slices.BinarySearchFunc(ext.keys, *after, func(r rowKey, k pageKey) int { return r.compare(k) })
		if found {
			ei++
		}
	}
	nextExt := func() {
		// An external session a client opened is listed from the session.
		for ei < len(ext.keys) && h.order.holds(ext.keys[ei].Resource) {
			ei++
		}
	}
	nextExt()
	// Rows are large: growing the slice row by row would copy a page's
	// worth several times over.
	rows := make([]protocol.SessionSummary, 0, min(limit, h.order.len()+len(ext.keys)))
	var last pageKey
	more := false
	ok, sum := own.next()
	for ok || ei < len(ext.keys) {
		if len(rows) == limit {
			more = true
			break
		}
		if ok && (ei == len(ext.keys) || own.key.compare(ext.keys[ei].pageKey) < 0) {
			rows, last = append(rows, sum), own.key
			ok, sum = own.next()
			continue
		}
		rows, last = append(rows, externalSummary(ext.keys[ei].row)), ext.keys[ei].pageKey
		ei++
		nextExt()
	}
	if p.Limit == nil && more {
		h.log.Warn("the catalogue is larger than one listing; clients that do not page see the newest", "listed", defaultPage)
	}
	res := &protocol.ListSessionsResult{Items: rows}
	if more {
		res.NextCursor = new(h.keys.seal(last))
	}
	return res, nil
}

// ownRows walks the sessions the host holds in listing order, from a
// cursor on, yielding those a listing shows. It copies a batch of the order
// at a time, so the order's lock is never held while a session's is.
type ownRows struct {
	h     *Host
	ext   *externalView
	after *pageKey // where the walk resumes
	mine  bool     // the owner filter
	me    string   // who asks
	batch int

	keys []rowKey
	i    int
	done bool
	key  pageKey // the key of the row last returned
}

// next returns the next listed session's row; false when there are no
// more.
func (w *ownRows) next() (bool, protocol.SessionSummary) {
	for {
		if w.i == len(w.keys) {
			if w.done {
				return false, protocol.SessionSummary{}
			}
			w.keys, w.i = w.h.order.next(w.keys[:0], w.after, w.batch), 0
			w.done = len(w.keys) < w.batch
			if len(w.keys) == 0 {
				return false, protocol.SessionSummary{}
			}
			w.after = new(w.keys[len(w.keys)-1].pageKey)
		}
		k := w.keys[w.i]
		w.i++
		s := k.s
		s.mu.Lock()
		// A session nobody sent a turn in is listed to nobody: VS Code
		// makes one for every empty chat it shows.
		listed := !s.disposed && !s.provisional && (!w.mine || (w.me != "" && s.rec.Owner == w.me))
		if s.rec.External {
			listed = listed && w.ext.byURI[s.uri]
		}
		var sum protocol.SessionSummary
		if listed {
			sum = s.summary
		}
		s.unlock()
		if listed {
			w.key = k.pageKey
			return true, sum
		}
	}
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
