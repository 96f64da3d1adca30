package checkpoints

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Reading what changed, for a person to review: one file's unified diff
// between two trees, a page at a time, and the two trees a session's
// whole change lies between.
//
// The revisions are ones the caller got from refs (a checkpoint's
// commit, its parent, a merge base, a tree Own wrote) and are checked as
// everywhere else; a path follows "--" as a literal pathspec, so no
// glob or magic in a file's name widens it, and it must name a file
// inside the repository (CheckPath).

// Bounds of a patch page: a page holds at most MaxPageBytes bytes, cut
// at a line's end.
const (
	DefaultPageBytes = 64 << 10
	MaxPageBytes     = 1 << 20
)

// Page asks for a part of a patch: the bytes from Offset, at most Bytes
// of them (DefaultPageBytes when 0) and at most Lines lines (no bound
// when 0), ending at a line's end unless one line is longer than the
// page.
type Page struct {
	Offset int64
	Bytes  int
	Lines  int
}

// Patch is a page of one file's change between two trees.
type Patch struct {
	File FileStat
	// Binary files have no text: Size is the newer side's size in bytes
	// (the older side's for a file deleted).
	Size int64
	// Text is the page of the unified diff (git's own, headers and all),
	// from Offset.
	Text   string
	Offset int64
	// Next is where the next page starts; 0 when Text is the last.
	Next int64
	// Total is the whole patch's size in bytes.
	Total int64
}

// CheckPath checks that p names a file inside a working tree, relative
// to its top and slash-separated: not empty, absolute or climbing out,
// without empty, "." or ".." components, NUL or newline.
func CheckPath(p string) error {
	switch {
	case p == "" || len(p) > 4096:
		return fmt.Errorf("checkpoints: invalid path %q", p)
	case strings.ContainsAny(p, "\x00\n") || strings.HasPrefix(p, "/") || filepath.IsAbs(p):
		return fmt.Errorf("checkpoints: invalid path %q", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("checkpoints: invalid path %q: not inside the repository", p)
		}
	}
	return nil
}

// RelPath returns the path, relative to the top of the working tree and
// slash-separated, of an absolute file name inside it, or an error when
// it lies outside.
func (r *Repo) RelPath(abs string) (string, error) {
	if !filepath.IsAbs(abs) {
		return "", fmt.Errorf("checkpoints: %q is not an absolute path", abs)
	}
	abs = filepath.Clean(abs)
	// The top is known with its links resolved; resolve the file's
	// folder too (the file itself may be gone).
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}
	rel, err := filepath.Rel(r.root, abs)
	if err != nil {
		return "", fmt.Errorf("checkpoints: %s is outside the repository at %s", abs, r.root)
	}
	rel = filepath.ToSlash(rel)
	if err := CheckPath(rel); err != nil {
		return "", fmt.Errorf("checkpoints: %s is outside the repository at %s", abs, r.root)
	}
	return rel, nil
}

// literal makes a path a pathspec that matches that path only.
func literal(p string) string { return ":(literal)" + p }

// Patch returns a page of the unified diff of one file from one tree-ish
// to another: f, as DiffFiles listed it for the same two (its OldPath
// names a renamed file's older side). A binary file has no text, only
// its size.
//
// git writes the whole patch to a scratch file, of which only the page
// is read; diff-tree is plumbing, so the user's diff drivers, textconv
// and colours play no part.
func (r *Repo) Patch(ctx context.Context, from, to string, f FileStat, pg Page) (Patch, error) {
	for _, rev := range []string{from, to} {
		if err := checkRev(rev); err != nil {
			return Patch{}, fmt.Errorf("checkpoints: patch: %w", err)
		}
	}
	paths := []string{f.Path}
	if f.OldPath != "" {
		paths = append(paths, f.OldPath)
	}
	for _, p := range paths {
		if err := CheckPath(p); err != nil {
			return Patch{}, fmt.Errorf("checkpoints: patch: %w", err)
		}
	}
	switch {
	case pg.Offset < 0:
		return Patch{}, errors.New("checkpoints: patch: negative offset")
	case pg.Bytes == 0:
		pg.Bytes = DefaultPageBytes
	case pg.Bytes < 0 || pg.Bytes > MaxPageBytes:
		return Patch{}, fmt.Errorf("checkpoints: patch: a page is 1 to %d bytes", MaxPageBytes)
	}
	out := Patch{File: f, Offset: pg.Offset}
	specs := []string{"--"}
	for _, p := range paths {
		specs = append(specs, literal(p))
	}
	if f.Binary {
		size, err := r.blobSize(ctx, from, to, specs)
		if err != nil {
			return Patch{}, err
		}
		out.Size = size
		return out, nil
	}
	args := []string{"diff-tree", "-r", "-p", "--no-color", "--no-ext-diff", "--no-textconv"}
	if f.OldPath != "" {
		args = append(args, "-M")
	} else {
		args = append(args, "--no-renames")
	}
	args = append(append(args, from, to), specs...)
	file, err := gitCmd{dir: r.root, yield: r.yielding, args: args}.runFile(ctx)
	if err != nil {
		return Patch{}, fmt.Errorf("checkpoints: patch of %s: %w", f.Path, err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return Patch{}, fmt.Errorf("checkpoints: patch of %s: %w", f.Path, err)
	}
	out.Total = fi.Size()
	if pg.Offset >= out.Total {
		return out, nil
	}
	buf := make([]byte, min(int64(pg.Bytes), out.Total-pg.Offset))
	n, err := file.ReadAt(buf, pg.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return Patch{}, fmt.Errorf("checkpoints: patch of %s: %w", f.Path, err)
	}
	buf = cutPage(buf[:n], pg.Lines, pg.Offset+int64(n) < out.Total)
	out.Text = string(buf)
	if end := pg.Offset + int64(len(buf)); end < out.Total {
		out.Next = end
	}
	return out, nil
}

// cutPage ends a page at its last line's end within the bounds: after
// lines lines (when lines > 0) and, when more follows (cut), at the
// last newline, unless the page holds none (one long line), which is
// then cut where a character ends.
func cutPage(b []byte, lines int, cut bool) []byte {
	if lines > 0 {
		seen := 0
		for i, c := range b {
			if c == '\n' {
				if seen++; seen == lines {
					return b[:i+1]
				}
			}
		}
	}
	if !cut {
		return b
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[:i+1]
	}
	for i := len(b); i > len(b)-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(b[i-1]) {
			if utf8.FullRune(b[i-1:]) {
				return b
			}
			return b[:i-1]
		}
	}
	return b
}

// blobSize is the size of the newer side of a file's change, or its
// older's when it was deleted.
func (r *Repo) blobSize(ctx context.Context, from, to string, specs []string) (int64, error) {
	args := append([]string{"diff-tree", "-r", "-z", "--raw", "-M", from, to}, specs...)
	out, err := r.git(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("checkpoints: patch: %w", err)
	}
	rec, _, _ := bytes.Cut(out, []byte{0})
	if len(rec) == 0 || rec[0] != ':' {
		return 0, fmt.Errorf("checkpoints: patch: no change to %s", specs[1:])
	}
	fields := strings.Fields(string(rec[1:]))
	if len(fields) != 5 || !isObjectID(fields[2]) || !isObjectID(fields[3]) {
		return 0, fmt.Errorf("checkpoints: patch: malformed raw record %q", rec)
	}
	blob := fields[3]
	if strings.Trim(fields[1], "0") == "" {
		blob = fields[2] // deleted
	}
	size, err := r.gitLine(ctx, "cat-file", "-s", blob)
	if err != nil {
		return 0, fmt.Errorf("checkpoints: patch: %w", err)
	}
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("checkpoints: patch: size of %s: %q", blob, size)
	}
	return n, nil
}

// Parent returns a commit's first parent, "" for a commit with none.
func (r *Repo) Parent(ctx context.Context, commit string) (string, error) {
	if !isObjectID(commit) {
		return "", fmt.Errorf("checkpoints: parent: %q is not a commit id", commit)
	}
	out, err := r.gitLine(ctx, "rev-list", "--parents", "-n", "1", commit, "--")
	if err != nil {
		return "", fmt.Errorf("checkpoints: parent of %s: %w", commit, err)
	}
	f := strings.Fields(out)
	if len(f) < 2 {
		return "", nil
	}
	return f[1], nil
}

// MergeBase returns where r's branch (its HEAD) was cut from base, a
// branch name or commit: what a worktree session's Branch Changes count
// from.
func (r *Repo) MergeBase(ctx context.Context, base string) (string, error) {
	if err := checkRev(base); err != nil {
		return "", fmt.Errorf("checkpoints: merge base: %w", err)
	}
	return r.mergeBase(ctx, base)
}

// OwnTrees writes the two trees a session's own changes lie between (see
// own.go): the files its turns changed as the first turn to change each
// found it, and as the last left it. Their diff is the session's change,
// file by file; both are empty trees of no files when o holds none.
func (r *Repo) OwnTrees(ctx context.Context, o *Own) (before, after string, err error) {
	if before, err = r.writeTree(ctx, o.entries(func(f *ownFile) Entry { return f.before })); err != nil {
		return "", "", err
	}
	if after, err = r.writeTree(ctx, o.entries(func(f *ownFile) Entry { return f.after })); err != nil {
		return "", "", err
	}
	return before, after, nil
}
