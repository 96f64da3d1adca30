package host

import (
	"context"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/listing"
	"github.com/ahpd/ahpd/host/session"

	"github.com/ahpd/ahpd/protocol"
)

const (
	maxPage     = 500  // the most rows one listSessions answers with a limit
	defaultPage = 1000 // the rows it answers without one: the whole catalogue, as clients do not page
)

// createSession makes a provisional session under the URI the client chose.
func (h *Host) createSession(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.CreateSessionParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	spec, err := h.readCreate(c, &p)
	if err != nil {
		return nil, err
	}
	if why := h.journalRefusal(); why != "" {
		return nil, protocol.Errorf(protocol.CodeInternalError, "createSession: %s", why)
	}
	s, again, err := h.addSession(c, spec)
	if err != nil {
		return nil, err
	}
	if again {
		// The client could not know the first got through (requests.go).
		c.Log().Debug("a client sent createSession again: answered as the first", "session", s.URI())
		h.metrics.repeats.Add(1)
		return nil, nil
	}
	if keepNow(p.Meta) {
		if err := h.keep(ctx, s); err != nil {
			return nil, err
		}
	}
	s.AnnounceCreated(p.ActiveClient)
	h.log.Info("session created", "session", s.URI(), "provider", spec.provider, "dir", s.WorkDir())
	h.poke()
	return nil, nil
}

// disposeSession ends a session and deletes the backend's copy of it.
func (h *Host) disposeSession(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.DisposeSessionParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	if err := h.dispose(ctx, s); err != nil {
		h.log.Warn("session disposed with errors", "session", s.URI(), "err", err)
	}
	h.log.Info("session disposed", "session", s.URI())
	return nil, nil
}

// listSessions answers a page of the catalogue, most recently modified
// first.
func (h *Host) listSessions(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
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
	by, err := sorting(p.Meta)
	if err != nil {
		return nil, err
	}
	var after *listing.Key
	if p.Cursor != nil {
		k, err := h.cursors.Open(*p.Cursor)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for listSessions: cursor: %v", err)
		}
		if k.Order != by.Name() {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for listSessions: cursor: of a listing in another order: ask for that order, or start again without one")
		}
		after = &k
	}
	mine, err := ownerFilter(p.Meta)
	if err != nil {
		return nil, err
	}
	search, err := searchFilter(p.Meta)
	if err != nil {
		return nil, err
	}
	page := h.listPage(listing.Query{Me: session.PrincipalString(c.Principal()), Mine: mine,
		All: h.directory().SeesEverySession(c.Principal()), After: after, Limit: limit, Match: listing.Search(search), By: by})
	if p.Limit == nil && page.More {
		h.log.Warn("the catalogue is larger than one listing; clients that do not page see the newest", "listed", defaultPage)
	}
	res := &listResult{page: page}
	if page.More {
		res.next = new(h.cursors.Seal(page.Last))
	}
	return res.encode()
}

func scopeString(s grants.Scope) string {
	if s.IsZero() {
		return ""
	}
	return s.String()
}

// keepMeta is the createSession _meta key that has a session kept and
// listed as it is made, before any turn: what a client that asked for the
// session on purpose (the HTTP API, the command line) reads its write by.
// Without it a session is its creator client's until its first turn
// reaches the agent, as VS Code makes one for every empty chat it shows.
const keepMeta = "ahpd.keep"

// keepNow reports whether createSession's _meta asks for the session to
// be kept at once.
func keepNow(meta protocol.Object) bool {
	return string(meta[keepMeta]) == "true"
}

// keep stores a session just made and announces it. A session that cannot
// be stored is not kept at all.
func (h *Host) keep(ctx context.Context, s *session.Session) error {
	err := s.StoreNow()
	if err == nil {
		err = s.Commit()
	}
	if err != nil {
		if derr := h.dispose(ctx, s); derr != nil {
			h.log.Warn("could not dispose of a session that could not be kept", "session", s.URI(), "err", derr)
		}
		return session.StoreFailed(err)
	}
	return nil
}
