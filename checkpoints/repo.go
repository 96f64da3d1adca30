package checkpoints

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotRepository is returned, wrapped, by Open when a directory is not
// inside the working tree of a git repository.
var ErrNotRepository = errors.New("not a git repository")

// Repo is the working tree of a git repository: the main one or a linked
// worktree. Its methods may be called concurrently.
type Repo struct {
	root      string // the working tree's top-level directory
	commonDir string // the git directory shared by all of the repository's worktrees
	index     string // this working tree's index file (it may not exist yet)
	excludes  []string
	yielding  bool // run git at a lower CPU priority (Yielding)
}

// Yielding returns r with its git processes run at a lower CPU priority
// than the daemon's (nice 10, where the system has it): work that nobody
// waits for, such as recording a checkpoint whose tree is written down
// already, then takes the CPU only when the work somebody waits for
// leaves it.
func (r *Repo) Yielding() *Repo {
	out := *r
	out.yielding = true
	return &out
}

// Excluding returns r with paths (relative to the top of its working tree)
// left out of every snapshot, capture and count: the links a worktree was
// given to folders of another checkout are not the session's work, though
// git sees them as new files when the ignore pattern names a directory.
// Paths that are empty, absolute or climb out of the tree are dropped.
func (r *Repo) Excluding(paths []string) *Repo {
	out := *r
	out.excludes = nil
	for _, p := range paths {
		p = filepath.ToSlash(filepath.Clean(p))
		if p == "." || p == "" || filepath.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			continue
		}
		out.excludes = append(out.excludes, p)
	}
	return &out
}

// Open returns the working tree that contains dir, which may be any
// directory inside it. Checkpoints always cover the whole working tree, not
// just dir. When dir is not inside a working tree (a plain folder, a bare
// repository, the .git directory itself) the error wraps ErrNotRepository.
func Open(ctx context.Context, dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: open %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("checkpoints: open: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("checkpoints: open %s: not a directory", dir)
	}
	// One process answers all three questions. Relative answers are
	// relative to the directory git ran in. LC_ALL=C keeps the message we
	// recognize below in English.
	out, err := gitCmd{
		dir:  abs,
		env:  []string{"LC_ALL=C"},
		args: []string{"rev-parse", "--show-toplevel", "--git-common-dir", "--git-path", "index"},
	}.run(ctx)
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && ctx.Err() == nil && notRepository(ge.Stderr) {
			return nil, fmt.Errorf("checkpoints: %s: %w", dir, ErrNotRepository)
		}
		return nil, fmt.Errorf("checkpoints: open %s: %w", dir, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 3 || lines[0] == "" {
		return nil, fmt.Errorf("checkpoints: open %s: unexpected output from git rev-parse: %q", dir, out)
	}
	resolve := func(p string) string {
		p = filepath.FromSlash(p)
		if !filepath.IsAbs(p) {
			p = filepath.Join(abs, p)
		}
		// git reports the top level with symlinks resolved; do the same
		// for the rest so paths of one repository compare equal.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real
		}
		return filepath.Clean(p)
	}
	return &Repo{
		root:      filepath.Clean(filepath.FromSlash(lines[0])),
		commonDir: resolve(lines[1]),
		index:     resolve(lines[2]),
	}, nil
}

// notRepository reports whether git's stderr says the directory is not in a
// working tree, as opposed to some other failure (an unsafe owner, a broken
// configuration) whose message the caller should see.
func notRepository(stderr string) bool {
	return strings.Contains(stderr, "not a git repository") ||
		strings.Contains(stderr, "must be run in a work tree")
}

// Root returns the top-level directory of the working tree.
func (r *Repo) Root() string { return r.root }

// Snapshot writes the working tree as it is on disk (tracked files and
// untracked files that are not ignored, with deletions) into the object
// database and returns the id of its tree. Nothing else changes: no index,
// ref or file of the user's is written.
func (r *Repo) Snapshot(ctx context.Context) (string, error) {
	snap, err := r.Stage(ctx)
	if err != nil {
		return "", err
	}
	defer snap.Close()
	return snap.Tree(ctx)
}

// Staged is the working tree as Stage found it, held in an index of its
// own: its files are in the object database, the tree that lists them
// not yet. It is all a caller that must let the files move on next needs
// (one git process); the tree, and the counts against an older tree,
// can follow later from the index, which nothing else changes.
//
// A Staged is not safe for concurrent use; Close removes its index.
type Staged struct {
	r     *Repo
	tmp   string // the folder holding its index
	index string
	tree  string // once written
}

// Stage writes the working tree's files as Snapshot does, into a scratch
// index seeded from the user's, and leaves the tree to Staged.Tree.
func (r *Repo) Stage(ctx context.Context) (*Staged, error) {
	tmp, err := os.MkdirTemp("", "ahpd-checkpoint-")
	if err != nil {
		return nil, fmt.Errorf("checkpoints: snapshot: %w", err)
	}
	st := &Staged{r: r, tmp: tmp, index: filepath.Join(tmp, "index")}
	if err := seedIndex(r.index, st.index); err != nil {
		st.Close()
		return nil, fmt.Errorf("checkpoints: snapshot: %w", err)
	}
	add := gitCmd{dir: r.root, env: st.env(), yield: r.yielding, args: []string{
		// A split index would make git write a new shared index file
		// into the repository's git directory; keep ours whole instead.
		"-c", "core.splitIndex=false",
		"-c", "advice.addEmbeddedRepo=false",
		"add", "-A", "--", ".",
	}}
	for _, p := range r.excludes {
		add.args = append(add.args, ":(exclude,literal)"+p)
	}
	if _, err := add.run(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("checkpoints: snapshot %s: %w", r.root, err)
	}
	return st, nil
}

// Yielding returns st with its git run at a lower CPU priority, as
// Repo.Yielding; they share the index.
func (st *Staged) Yielding() *Staged {
	out := *st
	out.r = st.r.Yielding()
	return &out
}

func (st *Staged) env() []string { return []string{"GIT_INDEX_FILE=" + st.index} }

// Tree writes the staged tree and returns its id; once written, it is
// answered again without git.
func (st *Staged) Tree(ctx context.Context) (string, error) {
	if st.tree != "" {
		return st.tree, nil
	}
	r := st.r
	out, err := gitCmd{dir: r.root, env: st.env(), yield: r.yielding, args: []string{"write-tree"}}.run(ctx)
	if err != nil {
		return "", fmt.Errorf("checkpoints: snapshot %s: %w", r.root, err)
	}
	tree := strings.TrimSpace(string(out))
	if !isObjectID(tree) {
		return "", fmt.Errorf("checkpoints: snapshot %s: unexpected output from git write-tree: %q", r.root, out)
	}
	st.tree = tree
	return tree, nil
}

// Written returns the staged tree's id once Tree has written it, else "";
// it runs no git.
func (st *Staged) Written() string { return st.tree }

// Diff counts the changes from a tree-ish to the staged tree, as Repo.Diff
// does between two trees, without writing the staged one first.
func (st *Staged) Diff(ctx context.Context, from string) (Stats, error) {
	if err := checkRev(from); err != nil {
		return Stats{}, fmt.Errorf("checkpoints: diff: %w", err)
	}
	r := st.r
	// diff-index --cached compares the tree with the index alone, never
	// the files; plumbing, as diff-tree is, so the user's settings do
	// not change the counts.
	out, err := gitCmd{dir: r.root, env: st.env(), yield: r.yielding,
		args: []string{"diff-index", "--cached", "-r", "-z", "--numstat", "-M", from, "--"}}.run(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("checkpoints: diff %s: %w", from, err)
	}
	files, err := parseNumstat(out)
	if err != nil {
		return Stats{}, fmt.Errorf("checkpoints: diff %s: %w", from, err)
	}
	return Sum(files), nil
}

// Close removes the staged index. The objects stay.
func (st *Staged) Close() {
	if st.tmp != "" {
		os.RemoveAll(st.tmp)
		st.tmp = ""
	}
}

// seedIndex copies the user's index to dst so git add only re-hashes files
// whose stat data changed since the user's last git command. A missing
// index (a repository with nothing added yet) leaves dst absent, which git
// treats as empty.
//
// The copy keeps the original's modification time. git compares file
// mtimes against the index file's own mtime to find "racily clean" entries,
// files changed so soon after the index was written that their stat data
// cannot be trusted; a fresher mtime on the copy would make git trust them
// and miss the change.
func seedIndex(src, dst string) (err error) {
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy index: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy index: %w", err)
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

// isObjectID reports whether s looks like a full SHA-1 or SHA-256 object id.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkRev rejects revisions that git could take for an option or that
// could not be a revision at all. Callers pass branch names, ref names and
// object ids.
func checkRev(rev string) error {
	switch {
	case rev == "":
		return errors.New("checkpoints: empty revision")
	case rev[0] == '-':
		return fmt.Errorf("checkpoints: invalid revision %q", rev)
	case strings.ContainsAny(rev, "\x00\n"):
		return fmt.Errorf("checkpoints: invalid revision %q", rev)
	}
	return nil
}
