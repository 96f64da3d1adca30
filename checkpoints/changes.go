package checkpoints

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Stats counts the changes between two trees.
type Stats struct {
	Files     int // files added, deleted, modified or renamed
	Additions int // lines added
	Deletions int // lines deleted
}

// FileStat is one file's part of a diff.
type FileStat struct {
	Path      string // path in the newer tree, slash-separated
	OldPath   string // path in the older tree when the file was renamed, else ""
	Additions int
	Deletions int
	Binary    bool // git counts no lines for binary files
}

// Sum adds up per-file changes.
func Sum(files []FileStat) Stats {
	s := Stats{Files: len(files)}
	for _, f := range files {
		s.Additions += f.Additions
		s.Deletions += f.Deletions
	}
	return s
}

// Diff counts the changes from one tree-ish (a commit, a tree, a ref) to
// another.
func (r *Repo) Diff(ctx context.Context, from, to string) (Stats, error) {
	files, err := r.DiffFiles(ctx, from, to)
	if err != nil {
		return Stats{}, err
	}
	return Sum(files), nil
}

// DiffFiles lists, file by file, the changes from one tree-ish to another.
// Renames are detected as `git diff` does by default, so a moved file is
// one change rather than a deletion and an addition.
func (r *Repo) DiffFiles(ctx context.Context, from, to string) ([]FileStat, error) {
	for _, rev := range []string{from, to} {
		if err := checkRev(rev); err != nil {
			return nil, fmt.Errorf("checkpoints: diff: %w", err)
		}
	}
	// diff-tree rather than diff: as plumbing it ignores the user's
	// porcelain settings (diff.renames, external diff drivers, textconv),
	// so the same two trees always give the same counts. The "--" keeps
	// the revisions from being taken for paths.
	out, err := r.git(ctx, "diff-tree", "-r", "-z", "--numstat", "-M", from, to, "--")
	if err != nil {
		return nil, fmt.Errorf("checkpoints: diff %s %s: %w", from, to, err)
	}
	files, err := parseNumstat(out)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: diff %s %s: %w", from, to, err)
	}
	return files, nil
}

// parseNumstat parses `--numstat -z` output. Each record is
// "<added>\t<deleted>\t<path>\0", or for a rename
// "<added>\t<deleted>\t\0<old path>\0<new path>\0". Binary files show "-"
// for both counts.
func parseNumstat(out []byte) ([]FileStat, error) {
	var files []FileStat
	next := func() ([]byte, bool) {
		i := bytes.IndexByte(out, 0)
		if i < 0 {
			return nil, false
		}
		field := out[:i]
		out = out[i+1:]
		return field, true
	}
	for len(out) > 0 {
		rec, ok := next()
		if !ok {
			return nil, fmt.Errorf("unterminated numstat record %q", out)
		}
		add, rest, ok1 := bytes.Cut(rec, []byte{'\t'})
		del, path, ok2 := bytes.Cut(rest, []byte{'\t'})
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("malformed numstat record %q", rec)
		}
		var f FileStat
		if string(add) == "-" && string(del) == "-" {
			f.Binary = true
		} else {
			var err1, err2 error
			f.Additions, err1 = strconv.Atoi(string(add))
			f.Deletions, err2 = strconv.Atoi(string(del))
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("malformed numstat record %q: %w", rec, err)
			}
		}
		if len(path) == 0 {
			oldPath, ok1 := next()
			newPath, ok2 := next()
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("truncated numstat rename record %q", rec)
			}
			f.OldPath, f.Path = string(oldPath), string(newPath)
		} else {
			f.Path = string(path)
		}
		files = append(files, f)
	}
	return files, nil
}

// SessionChanges counts what a session's own turns changed: each turn's
// diff against the tree it started from, combined file by file (see Own),
// so neither a commit the user makes meanwhile nor what other sessions
// working in the same folder change between its turns reaches the count.
// With fewer than two checkpoints the count is zero.
func (r *Repo) SessionChanges(ctx context.Context, sessionID string) (Stats, error) {
	o, err := r.OwnChanges(ctx, sessionID)
	if err != nil {
		return Stats{}, err
	}
	return r.Count(ctx, o)
}

// BranchChanges counts everything a session's worktree holds since its
// branch was cut from base (a branch name or commit), committed or not: the
// difference between the merge base of base and HEAD and a snapshot of the
// worktree as it is on disk. No ref is written and the worktree's index is
// not touched.
//
// worktreeDir is a directory inside the worktree, which must belong to the
// same repository as r; "" means r's own working tree.
func (r *Repo) BranchChanges(ctx context.Context, worktreeDir, base string) (Stats, error) {
	if err := checkRev(base); err != nil {
		return Stats{}, fmt.Errorf("checkpoints: branch changes: %w", err)
	}
	wt := r
	if worktreeDir != "" {
		var err error
		if wt, err = Open(ctx, worktreeDir); err != nil {
			return Stats{}, err
		}
		wt.excludes, wt.yielding = r.excludes, r.yielding
		if wt.commonDir != r.commonDir {
			return Stats{}, fmt.Errorf("checkpoints: branch changes: %s is not a worktree of the repository at %s", worktreeDir, r.root)
		}
	}

	// The merge base takes a process of its own; find it while the
	// snapshot is being written.
	type result struct {
		commit string
		err    error
	}
	basec := make(chan result, 1)
	go func() {
		c, err := wt.mergeBase(ctx, base)
		basec <- result{c, err}
	}()
	tree, err := wt.Snapshot(ctx)
	mb := <-basec
	if err != nil {
		return Stats{}, err
	}
	if mb.err != nil {
		return Stats{}, mb.err
	}
	return wt.Diff(ctx, mb.commit, tree)
}

// BranchChangesTo is BranchChanges of r's own working tree as tree, a
// Snapshot of it, shows it: for a caller that has just written one.
func (r *Repo) BranchChangesTo(ctx context.Context, tree, base string) (Stats, error) {
	for _, rev := range []string{tree, base} {
		if err := checkRev(rev); err != nil {
			return Stats{}, fmt.Errorf("checkpoints: branch changes: %w", err)
		}
	}
	mb, err := r.mergeBase(ctx, base)
	if err != nil {
		return Stats{}, err
	}
	return r.Diff(ctx, mb, tree)
}

// mergeBase returns the merge base of base and r's HEAD: where r's branch
// was cut from base.
func (r *Repo) mergeBase(ctx context.Context, base string) (string, error) {
	c, err := r.gitLine(ctx, "merge-base", base, "HEAD")
	if err != nil {
		return "", fmt.Errorf("checkpoints: branch changes: merge base of %s and HEAD in %s: %w", base, r.root, err)
	}
	if !isObjectID(c) {
		return "", fmt.Errorf("checkpoints: branch changes: no merge base of %s and HEAD in %s", base, r.root)
	}
	return c, nil
}
