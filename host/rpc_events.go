package host

import (
	"context"
	"slices"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/timeline"
)

// ahpd/sessionEvents pages through a session's timeline (docs/JOURNAL.md):
// newest first, or oldest first from after.

type eventsParams struct {
	Channel string          `json:"channel"`
	After   *int64          `json:"after,omitempty"`
	Before  *int64          `json:"before,omitempty"`
	Limit   int             `json:"limit,omitempty"`
	Kinds   []timeline.Kind `json:"kinds,omitempty"`
}

type eventsResult struct {
	Events []timeline.Event `json:"events"`
	// More says the page is full and more events lie past it.
	More bool `json:"more"`
}

const (
	defaultEvents = 100
	maxEvents     = 1000
)

func (h *Host) sessionEvents(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p eventsParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil {
		return nil, invalidParams(req.Method(), err)
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	if h.opts.Journal == nil {
		return nil, notImplemented("a timeline on a host that keeps no journal (--sessions memory)")
	}
	release, err := h.reads.begin(ctx, c.Principal(), req.Method())
	if err != nil {
		return nil, err
	}
	defer release()
	events, more, err := h.timeline(ctx, s.URI(), p)
	if err != nil {
		return nil, err
	}
	return eventsResult{Events: events, More: more}, nil
}

func (p *eventsParams) check() error {
	bad := func(field, why string) error {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for ahpd/sessionEvents: %s: %s", field, why)
	}
	switch {
	case p.Channel == "":
		return bad("channel", "missing required member")
	case p.Limit < 0 || p.Limit > maxEvents:
		return bad("limit", "from 1 to 1000")
	case p.After != nil && p.Before != nil && *p.Before <= *p.After:
		return bad("before", "must be greater than after")
	case len(p.Kinds) > len(timeline.Kinds):
		return bad("kinds", "more kinds than there are")
	}
	for _, k := range p.Kinds {
		if !slices.Contains(timeline.Kinds, k) {
			return bad("kinds", "unknown kind "+protocol.Quote(string(k)))
		}
	}
	if p.Limit == 0 {
		p.Limit = defaultEvents
	}
	return nil
}

// ahpd/replaySession answers a session's state (its own and its chats')
// as it was right after the action numbered atSeq (the newest without),
// rebuilt from its journal through the reducers.

type replayParams struct {
	Channel string `json:"channel"`
	AtSeq   *int64 `json:"atSeq,omitempty"`
}

type replayResult struct {
	AtSeq   int64                  `json:"atSeq"`
	Session *protocol.SessionState `json:"session"`
	Chats   []*protocol.ChatState  `json:"chats"`
}

func (h *Host) replaySession(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p replayParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil {
		return nil, invalidParams(req.Method(), err)
	}
	if p.Channel == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for ahpd/replaySession: channel: missing required member")
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	if h.opts.Journal == nil {
		return nil, notImplemented("replaying a session on a host that keeps no journal (--sessions memory)")
	}
	at := h.bus.Current()
	if p.AtSeq != nil {
		at = *p.AtSeq
	}
	release, err := h.reads.begin(ctx, c.Principal(), req.Method())
	if err != nil {
		return nil, err
	}
	defer release()
	ss, chats, ok, err := h.replayState(ctx, s.URI(), at)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, protocol.Errorf(protocol.CodeNotFound, "the journal holds no state of session %s as of %d: it began later, or what came before is no longer kept", s.URI(), at)
	}
	if chats == nil {
		chats = []*protocol.ChatState{}
	}
	return replayResult{AtSeq: at, Session: ss, Chats: chats}, nil
}
