package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// ahpd/sessionCheckpoints answers a session's checkpoints, newest first,
// each with what its turn changed: the diff from its commit's parent,
// which is where the turn started (checkpoints/own.go: in a shared
// folder, a snapshot taken as the turn began, so another session's edits
// between two turns are in neither), else the checkpoint before it.
// A session working in a folder that is no git repository has none.

// maxCheckpoints bounds the checkpoints one answer holds: each costs a
// git diff.
const (
	defaultCheckpoints = 50
	maxCheckpoints     = 200
)

type checkpointsParams struct {
	Channel string `json:"channel"`
	Limit   int    `json:"limit,omitempty"`
}

type checkpointEntry struct {
	Turn      int    `json:"turn"`
	Commit    string `json:"commit"`
	Files     int    `json:"files"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
}

type checkpointsResult struct {
	Checkpoints []checkpointEntry `json:"checkpoints"`
	// More says older checkpoints were left out (limit).
	More bool `json:"more,omitempty"`
}

func (h *Host) sessionCheckpoints(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p checkpointsParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil {
		return nil, invalidParams(req.Method(), err)
	}
	switch {
	case p.Channel == "":
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: channel: missing required member", req.Method())
	case p.Limit < 0 || p.Limit > maxCheckpoints:
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: limit: must be from 1 to %d", req.Method(), maxCheckpoints)
	case p.Limit == 0:
		p.Limit = defaultCheckpoints
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	res := checkpointsResult{Checkpoints: []checkpointEntry{}}
	repo, err := s.RepoFor(ctx)
	if errors.Is(err, checkpoints.ErrNotRepository) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the session's repository: %w", err)
	}
	last := s.LastCheckpoint()
	// On a host that has not run the session, its checkpoints may be on
	// the --push-checkpoints remote alone.
	h.pushes.fetchMissing(ctx, s, repo, last)
	cps, err := repo.Checkpoints(ctx, s.ID())
	if err != nil {
		return nil, fmt.Errorf("listing the session's checkpoints: %w", err)
	}
	for i := len(cps) - 1; i >= 0 && len(res.Checkpoints) < p.Limit; i-- {
		e := checkpointEntry{Turn: cps[i].Turn, Commit: cps[i].Commit}
		if i > 0 {
			st, err := repo.Diff(ctx, cps[i].Commit+"^", cps[i].Commit)
			if err != nil {
				return nil, fmt.Errorf("the changes of turn %d: %w", cps[i].Turn, err)
			}
			e.Files, e.Additions, e.Deletions = st.Files, st.Additions, st.Deletions
		}
		res.Checkpoints = append(res.Checkpoints, e)
	}
	res.More = len(res.Checkpoints) < len(cps)
	return res, nil
}
