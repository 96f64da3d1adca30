package session

import (
	"github.com/ahpd/ahpd/worktree"
)

// PushTarget reports, read together, whether the session is disposed of
// (its refs are going, not pushed) and its worktree, whose branch goes too.
func (s *Session) PushTarget() (disposed bool, wt *worktree.Tree) {
	s.mu.Lock()
	defer s.unlock()
	return s.disposed, s.rec.Tree
}
