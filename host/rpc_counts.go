package host

import (
	"context"
	"fmt"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// ahpd/sessionEventCounts answers how many entries each of some sessions'
// journals holds (their actions, and the snapshots and sleeps among
// them), in one ask of the journal: a listing shows them per row. A
// session the caller may not read, or does not know, is left out, as a
// listing leaves it out.

// maxCountChannels bounds the sessions one ask names.
const maxCountChannels = 1000

type countsParams struct {
	Channels []string `json:"channels"`
}

type countsResult struct {
	Counts map[string]uint64 `json:"counts"`
}

func (h *Host) sessionEventCounts(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p countsParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil {
		return nil, invalidParams(req.Method(), err)
	}
	if len(p.Channels) > maxCountChannels {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: channels: %d sessions, at most %d", req.Method(), len(p.Channels), maxCountChannels)
	}
	res := countsResult{Counts: map[string]uint64{}}
	var readable []string
	for _, uri := range p.Channels {
		if len(uri) > protocol.MaxURIBytes() {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: channels: a URI of %d bytes: at most %d are allowed", req.Method(), len(uri), protocol.MaxURIBytes())
		}
		s := h.held(uri)
		if s == nil || s.URI() != uri || !s.VisibleTo(c) || h.check(c, grants.SessionState, h.targetOf(c, uri)) != nil {
			continue
		}
		readable = append(readable, uri)
	}
	if h.opts.Journal == nil || len(readable) == 0 {
		return res, nil
	}
	counts, err := h.opts.Journal.Counts(ctx, readable)
	if err != nil {
		return nil, fmt.Errorf("counting the sessions' journal entries: %w", err)
	}
	for uri, n := range counts {
		res.Counts[uri] = n
	}
	return res, nil
}
