package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// populate links the git-ignored folders of src that match folders into
// tree, then copies the git-ignored files of src that match files into it,
// skipping anything under a folder it linked. Links come first so a linked
// folder is not also copied. Everything is best effort: a problem is logged
// and the rest goes on.
//
// Only ignored paths are eligible. A tracked path is already in the tree (or
// deliberately not, on another branch), and a link to a tracked folder would
// let the session edit the source checkout's tracked files from its tree.
//
// Nothing is written outside tree and nothing is read outside src: both are
// opened as an os.Root, which refuses to follow a symlink out of its folder.
func populate(ctx context.Context, log *slog.Logger, src, tree string, folders, files []string) (linked []string) {
	if len(folders) == 0 && len(files) == 0 {
		return nil
	}
	srcRoot, err := os.OpenRoot(src)
	if err != nil {
		log.Warn("worktree: cannot open the source checkout", "dir", src, "err", err)
		return nil
	}
	defer srcRoot.Close()
	treeRoot, err := os.OpenRoot(tree)
	if err != nil {
		log.Warn("worktree: cannot open the new tree", "dir", tree, "err", err)
		return nil
	}
	defer treeRoot.Close()

	if ps := compilePatterns(log, KeySymlinkFolders, folders); ps != nil {
		linked = linkFolders(ctx, log, ps, src, srcRoot, treeRoot)
		ps.reportUnmatched(log)
	}
	if ps := compilePatterns(log, KeyIncludeFiles, files); ps != nil {
		copyFiles(ctx, log, ps, src, srcRoot, treeRoot, linked)
		ps.reportUnmatched(log)
	}
	return linked
}

// ignoredPaths lists the git-ignored, untracked paths of the checkout at
// dir, '/'-separated and relative to it. With dirs, a folder that is ignored
// as a whole is one entry ending in '/' instead of all its files.
func ignoredPaths(ctx context.Context, dir string, dirs bool) ([]string, error) {
	args := []string{"ls-files", "-z", "--others", "--ignored", "--exclude-standard"}
	if dirs {
		args = append(args, "--directory")
	}
	out, err := runGit(ctx, dir, args...)
	if err != nil {
		return nil, err
	}
	return lines(out, 0), nil
}

func linkFolders(ctx context.Context, log *slog.Logger, ps *patternSet, src string, srcRoot, treeRoot *os.Root) []string {
	entries, err := ignoredPaths(ctx, src, true)
	if err != nil {
		log.Warn("worktree: cannot list ignored folders; none linked", "patterns", ps.raw, "err", err)
		return nil
	}
	var linked []string
	for _, e := range entries {
		if ctx.Err() != nil {
			return linked
		}
		rel, isDir := strings.CutSuffix(e, "/")
		if !isDir || underAny(rel, linked) {
			continue
		}
		i := ps.match(rel, true)
		if i < 0 {
			continue
		}
		if err := link(srcRoot, treeRoot, src, rel); err != nil {
			log.Warn("worktree: folder not linked", "path", rel, "pattern", ps.raw[i], "err", err)
			continue
		}
		linked = append(linked, rel)
	}
	if len(linked) > 0 {
		log.Info("worktree: linked folders", "tree", treeRoot.Name(), "paths", linked)
	}
	return linked
}

// link makes rel in the tree a symlink to the folder rel of the source
// checkout, by absolute path so it does not matter where the tree is.
func link(srcRoot, treeRoot *os.Root, src, rel string) error {
	name, err := localPath(rel)
	if err != nil {
		return err
	}
	// git listed it as a folder; it must still be one, and a real one: a
	// symlink would send the tree's writes wherever it points.
	if fi, err := srcRoot.Lstat(name); err != nil {
		return err
	} else if !fi.IsDir() {
		return errors.New("not a folder in the source checkout")
	}
	if _, err := treeRoot.Lstat(name); err == nil {
		return errors.New("already present in the tree")
	}
	if dir := filepath.Dir(name); dir != "." {
		if err := treeRoot.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return treeRoot.Symlink(filepath.Join(src, name), name)
}

func copyFiles(ctx context.Context, log *slog.Logger, ps *patternSet, src string, srcRoot, treeRoot *os.Root, linked []string) {
	entries, err := ignoredPaths(ctx, src, false)
	if err != nil {
		log.Warn("worktree: cannot list ignored files; none copied", "patterns", ps.raw, "err", err)
		return
	}
	copied := 0
	for _, rel := range entries {
		if ctx.Err() != nil {
			return
		}
		if underAny(rel, linked) {
			continue
		}
		i := ps.match(rel, false)
		if i < 0 {
			continue
		}
		if err := copyFile(srcRoot, treeRoot, rel); err != nil {
			log.Warn("worktree: file not copied", "path", rel, "pattern", ps.raw[i], "err", err)
			continue
		}
		copied++
	}
	if copied > 0 {
		log.Info("worktree: copied files", "tree", treeRoot.Name(), "count", copied)
	}
}

// copyFile copies the file rel of the source checkout into the tree with its
// permission bits. A symlink in the source is followed only while it stays
// inside the checkout; the file it reaches is copied. An existing path in
// the tree is never overwritten.
func copyFile(srcRoot, treeRoot *os.Root, rel string) error {
	name, err := localPath(rel)
	if err != nil {
		return err
	}
	fi, err := srcRoot.Stat(name)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if _, err := treeRoot.Lstat(name); err == nil {
		return errors.New("already present in the tree")
	}
	in, err := srcRoot.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	if dir := filepath.Dir(name); dir != "." {
		if err := treeRoot.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	perm := fi.Mode().Perm()
	out, err := treeRoot.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		_ = treeRoot.Remove(name)
		return err
	}
	if err := out.Close(); err != nil {
		_ = treeRoot.Remove(name)
		return err
	}
	// OpenFile's mode went through the umask; the copy gets the source's.
	return treeRoot.Chmod(name, perm)
}

// localPath turns a '/'-separated path from git into a local one, refusing
// anything that is not plainly below the folder it is relative to.
func localPath(rel string) (string, error) {
	name := filepath.FromSlash(rel)
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("path %q is not inside the checkout", rel)
	}
	return name, nil
}

func underAny(rel string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool {
		return rel == d || strings.HasPrefix(rel, d+"/")
	})
}

// patternSet is one option's list of .gitignore patterns, matched as a
// .gitignore file is: the last pattern that matches a path decides, and a
// "!pattern" takes a path back out.
type patternSet struct {
	key  string // the config key the patterns came from, for the log
	raw  []string
	pats []gitignore.Pattern // nil where raw is unusable
	hits []int
}

// compilePatterns parses raw, logging and leaving out the unusable entries.
// It returns nil when none is usable.
func compilePatterns(log *slog.Logger, key string, raw []string) *patternSet {
	ps := &patternSet{key: key, raw: raw, pats: make([]gitignore.Pattern, len(raw)), hits: make([]int, len(raw))}
	usable := false
	for i, p := range raw {
		if err := checkPattern(p); err != nil {
			log.Warn("worktree: pattern skipped", "key", key, "pattern", p, "err", err)
			continue
		}
		ps.pats[i] = gitignore.ParsePattern(p, nil)
		usable = true
	}
	if !usable {
		return nil
	}
	return ps
}

// checkPattern refuses what a .gitignore would not mean as a pattern, and
// what could only aim outside the checkout. go-git's matcher treats a
// malformed glob as matching nothing; saying so is kinder.
func checkPattern(p string) error {
	body := strings.TrimPrefix(p, "!")
	switch {
	case strings.TrimSpace(body) == "":
		return errors.New("empty pattern")
	case strings.HasPrefix(p, "#"):
		return errors.New("a comment, not a pattern")
	case strings.ContainsRune(p, 0):
		return errors.New("NUL in pattern")
	}
	for _, part := range strings.Split(strings.Trim(body, "/"), "/") {
		if part == ".." || part == "." {
			return fmt.Errorf("%q is not allowed in a pattern; patterns are relative to the checkout", part)
		}
		if _, err := filepath.Match(part, ""); err != nil {
			return fmt.Errorf("malformed glob %q: %w", part, err)
		}
	}
	return nil
}

// match returns the index of the pattern that selects rel, or -1 when no
// pattern does (or the last one that matches is a "!" pattern).
func (ps *patternSet) match(rel string, isDir bool) int {
	path := strings.Split(rel, "/")
	for i := len(ps.pats) - 1; i >= 0; i-- {
		if ps.pats[i] == nil {
			continue
		}
		switch ps.pats[i].Match(path, isDir) {
		case gitignore.Exclude:
			ps.hits[i]++
			return i
		case gitignore.Include:
			return -1
		}
	}
	return -1
}

func (ps *patternSet) reportUnmatched(log *slog.Logger) {
	for i, p := range ps.raw {
		if ps.pats[i] != nil && ps.hits[i] == 0 && !strings.HasPrefix(p, "!") {
			log.Info("worktree: pattern matched no ignored path", "key", ps.key, "pattern", p)
		}
	}
}
