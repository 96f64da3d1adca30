package session

import (
	"os"
	"path/filepath"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Repos knows which of a host's sessions work in which working tree, so
// that a folder session alone in its tree can skip the snapshot of the
// tree its turn starts from: nobody else of this host changes the files
// between its turns, so its start is the last turn's end (captures.go).
//
// A session is in it from its first send (or, stored, from the moment it
// is restored with checkpoints) until it is disposed of: one asleep
// still counts, since what it wrote before a restart may lie between
// another's checkpoints. A provisional session nobody sent a turn in
// does not: it changes nothing. The working tree is the folder holding
// .git above the session's directory, found without running git.
//
// Its lock is taken alone, never under a session's.
type Repos struct {
	mu    lockcheck.Mutex
	by    map[string]map[*Session]struct{} // by working tree
	where map[*Session]string
}

// NewRepos returns an empty registry.
func NewRepos() *Repos {
	return &Repos{mu: lockcheck.Mutex{Class: "repos"}, by: map[string]map[*Session]struct{}{}, where: map[*Session]string{}}
}

// join puts s in the working tree holding dir, out of any it was in; a
// dir in no git working tree takes it out.
func (r *Repos) join(s *Session, dir string) {
	if r == nil {
		return
	}
	root := treeRoot(dir)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.where[s]; ok {
		if old == root {
			return
		}
		r.dropLocked(s, old)
	}
	if root == "" {
		return
	}
	set := r.by[root]
	if set == nil {
		set = map[*Session]struct{}{}
		r.by[root] = set
	}
	set[s] = struct{}{}
	r.where[s] = root
}

// leave takes s out.
func (r *Repos) leave(s *Session) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.where[s]; ok {
		r.dropLocked(s, old)
	}
}

func (r *Repos) dropLocked(s *Session, root string) {
	delete(r.where, s)
	if set := r.by[root]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(r.by, root)
		}
	}
}

// alone reports whether s is the only session of the host in its working
// tree. Without a registry (nil) no session is.
func (r *Repos) alone(s *Session) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	root, ok := r.where[s]
	return ok && len(r.by[root]) == 1
}

// treeRoot returns the directory holding .git nearest above dir (dir
// itself, maybe), its symbolic links resolved: the top of the working
// tree git would find. "" when there is none.
func treeRoot(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	for d := filepath.Clean(dir); ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}
