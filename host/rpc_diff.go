package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// ahpd/sessionDiff answers what a session changed, for a person to
// review: the files one turn's checkpoint changed (its commit against its
// parent, where the turn started: as ahpd/sessionCheckpoints counts it),
// or the session's whole change (a worktree session's branch against
// where it was cut, as of its newest checkpoint; a folder session's own
// turns' changes combined, checkpoints/own.go), and with a path, a page
// of that one file's unified diff. Every revision comes from the
// session's refs or its record, never from the params; a path must be a
// file the change lists.

// maxDiffFiles bounds the files one answer lists.
const maxDiffFiles = 1000

type diffParams struct {
	Channel string `json:"channel"`
	// Turn is the checkpoint whose turn to show; nil for the session's
	// whole change.
	Turn *int `json:"turn,omitempty"`
	// Path names one file: relative to the top of the repository, or an
	// absolute file name inside it (as a tool's file edit names it).
	Path   string `json:"path,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"` // bytes of the page
	Lines  int    `json:"lines,omitempty"` // lines of the page, at most
}

type diffFile struct {
	Path      string `json:"path"`
	OldPath   string `json:"oldPath,omitempty"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
}

type diffResult struct {
	// Kind is what the change is: "turn", "branch" (a worktree's) or
	// "own" (a folder session's turns combined); "none" when the session
	// has no checkpoints to show one from.
	Kind  string     `json:"kind"`
	Turn  *int       `json:"turn,omitempty"`
	From  string     `json:"from,omitempty"`
	To    string     `json:"to,omitempty"`
	Files []diffFile `json:"files"`
	More  bool       `json:"more,omitempty"`
	// With a path: that file's page.
	File   *diffFile `json:"file,omitempty"`
	Size   *int64    `json:"size,omitempty"` // a binary file's
	Patch  string    `json:"patch,omitempty"`
	Offset int64     `json:"offset,omitempty"`
	Next   int64     `json:"next,omitempty"`
	Total  int64     `json:"total,omitempty"`
}

func (h *Host) sessionDiff(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p diffParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil {
		return nil, invalidParams(req.Method(), err)
	}
	bad := func(field, why string) error {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: %s: %s", req.Method(), field, why)
	}
	switch {
	case p.Channel == "":
		return nil, bad("channel", "missing required member")
	case p.Turn != nil && *p.Turn < 0:
		return nil, bad("turn", "a checkpoint's turn, from 0")
	case len(p.Path) > 4096:
		return nil, bad("path", "at most 4096 bytes")
	case p.Offset < 0:
		return nil, bad("offset", "from 0")
	case p.Limit < 0 || p.Limit > checkpoints.MaxPageBytes:
		return nil, bad("limit", fmt.Sprintf("from 1 to %d bytes", checkpoints.MaxPageBytes))
	case p.Lines < 0:
		return nil, bad("lines", "from 1")
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	res := diffResult{Kind: "none", Turn: p.Turn, Files: []diffFile{}}
	repo, err := s.RepoFor(ctx)
	if errors.Is(err, checkpoints.ErrNotRepository) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the session's repository: %w", err)
	}
	path := p.Path
	if filepath.IsAbs(path) {
		if path, err = repo.RelPath(path); err != nil {
			return nil, bad("path", "not a file inside the session's repository")
		}
	} else if path != "" && checkpoints.CheckPath(path) != nil {
		return nil, bad("path", "not a file inside the session's repository")
	}
	h.pushes.fetchMissing(ctx, s, repo, s.LastCheckpoint())
	cps, err := repo.Checkpoints(ctx, s.ID())
	if err != nil {
		return nil, fmt.Errorf("listing the session's checkpoints: %w", err)
	}
	if len(cps) == 0 {
		if p.Turn != nil {
			return nil, protocol.Errorf(protocol.CodeNotFound, "session %s has no checkpoint of turn %d", s.URI(), *p.Turn)
		}
		return res, nil
	}
	switch {
	case p.Turn != nil:
		var cp *checkpoints.Checkpoint
		for i := range cps {
			if cps[i].Turn == *p.Turn {
				cp = &cps[i]
			}
		}
		if cp == nil {
			return nil, protocol.Errorf(protocol.CodeNotFound, "session %s has no checkpoint of turn %d", s.URI(), *p.Turn)
		}
		res.Kind, res.To = "turn", cp.Commit
		if res.From, err = repo.Parent(ctx, cp.Commit); err != nil {
			return nil, err
		}
		if res.From == "" {
			return res, nil // turn 0, the tree the session started from, changed nothing
		}
	case s.Tree() != nil:
		res.Kind, res.To = "branch", cps[len(cps)-1].Commit
		if res.From, err = repo.MergeBase(ctx, s.Tree().Base); err != nil {
			return nil, err
		}
	default:
		own, err := repo.OwnChanges(ctx, s.ID())
		if err != nil {
			return nil, err
		}
		res.Kind = "own"
		if res.From, res.To, err = repo.OwnTrees(ctx, own); err != nil {
			return nil, err
		}
	}
	stats, err := repo.DiffFiles(ctx, res.From, res.To)
	if err != nil {
		return nil, err
	}
	if path == "" {
		for _, f := range stats {
			if len(res.Files) == maxDiffFiles {
				res.More = true
				break
			}
			res.Files = append(res.Files, fileOf(f))
		}
		return res, nil
	}
	var file *checkpoints.FileStat
	for i, f := range stats {
		if f.Path == path || f.OldPath == path {
			file = &stats[i]
			break
		}
	}
	if file == nil {
		return nil, protocol.Errorf(protocol.CodeNotFound, "%s did not change %s", res.what(), protocol.Quote(path))
	}
	pt, err := repo.Patch(ctx, res.From, res.To, *file, checkpoints.Page{Offset: p.Offset, Bytes: p.Limit, Lines: p.Lines})
	if err != nil {
		return nil, err
	}
	f := fileOf(*file)
	res.File = &f
	if file.Binary {
		res.Size = &pt.Size
	}
	res.Patch, res.Offset, res.Next, res.Total = pt.Text, pt.Offset, pt.Next, pt.Total
	return res, nil
}

func fileOf(f checkpoints.FileStat) diffFile {
	return diffFile{Path: f.Path, OldPath: f.OldPath, Additions: f.Additions, Deletions: f.Deletions, Binary: f.Binary}
}

func (r diffResult) what() string {
	if r.Turn != nil {
		return fmt.Sprintf("turn %d", *r.Turn)
	}
	return "the session"
}
