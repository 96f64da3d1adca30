package session

import (
	"github.com/ahpd/ahpd/worktree"
)

// Tree is the worktree the session's record holds, or nil: a sweep keeps
// the trees records hold.
func (s *Session) Tree() *worktree.Tree {
	s.mu.Lock()
	defer s.unlock()
	return s.rec.Tree
}

// SweepDir is the repository a crash may have left a tree of the session's
// in: its tree's, or its folder when it is to make one; "" for neither.
func (s *Session) SweepDir() string {
	s.mu.Lock()
	defer s.unlock()
	switch {
	case s.rec.Tree != nil:
		return s.rec.Tree.Repo
	case StringValue(s.rec.Config[KeyIsolation]) == IsolationTree:
		return s.rec.Dir()
	}
	return ""
}
