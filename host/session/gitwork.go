package session

// A session's git work (making its worktree, recording its checkpoints,
// removing both) runs one job at a time, in the order asked, on a
// goroutine of its own: two jobs never race for the session's refs, and
// none of them holds the session's lock while git runs. The queue is
// guarded by s.mu.

// gitQueue is a session's git jobs not yet run.
type gitQueue struct {
	jobs    []func()
	running bool // a goroutine is running the queue
}

// inGit runs fn as the session's next git job and returns when it has.
func (s *Session) inGit(fn func()) {
	done := make(chan struct{})
	s.mu.Lock()
	s.git.jobs = append(s.git.jobs, func() {
		defer close(done)
		fn()
	})
	start := !s.git.running
	s.git.running = true
	s.unlock()
	if start {
		go s.runGit()
	}
	<-done
}

// runGit runs the queued jobs until there are none.
func (s *Session) runGit() {
	for {
		s.mu.Lock()
		if len(s.git.jobs) == 0 {
			s.git.running = false
			s.git.jobs = nil
			s.unlock()
			return
		}
		job := s.git.jobs[0]
		s.git.jobs = s.git.jobs[1:]
		s.unlock()
		job()
	}
}
