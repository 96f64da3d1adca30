package host

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Pushing sessions' checkpoints to a remote (Options.PushCheckpoints), so
// that another host working in a clone of the repository can wake the
// session with them (docs/CLUSTER.md).
//
// A recorded checkpoint asks for its session's push; nothing waits for
// it. Pushes run on a few workers of their own, never on a session's git
// queue, so neither a turn nor a capture waits on the network. A session
// is pushed by one worker at a time, and asks made while it is queued or
// being pushed become one more push after: each push sends the refs as
// they are when it starts, so only the newest state is ever sent. A push
// that fails is logged (once for a run of failures of one session) and
// counted (ahpd_checkpoint_push_errors_total); it never touches the turn.
//
// At Close the pushes asked for get pushDrainWindow to end, then are
// cancelled (git gets SIGTERM, then is killed) and waited for.

const (
	// pushWorkers bounds the pushes running at once, over all sessions.
	pushWorkers = 2
	// pushTimeout bounds one push or fetch.
	pushTimeout = 2 * time.Minute
	// pushDrainWindow is how long Close lets the pushes asked for finish.
	pushDrainWindow = 5 * time.Second
)

// errNoRemote says the session's repository has no remote of the name
// given: the push was skipped, not failed.
var errNoRemote = errors.New("the repository has no such remote")

// pusher sends sessions' checkpoints to one remote.
type pusher struct {
	remote string
	log    *slog.Logger
	failed func()                          // counts a failed push
	told   func(session string, err error) // tests hear each push's end; may be nil
	ctx    context.Context                 // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the workers

	mu      lockcheck.Mutex
	queue   []string              // session URIs
	state   map[string]*pushState // by session URI: a failing one is kept between pushes
	workers int                   // workers running
	idle    chan struct{}         // closed when the last worker ends; nil while none runs
	closed  bool
	missing map[string]bool // working trees found without the remote (logged once)
}

// pushState is one session's place in the pusher, guarded by its mu.
type pushState struct {
	sess    *session.Session  // the session, as last asked for
	repo    *checkpoints.Repo // the repository to push from, the newest asked with
	queued  bool              // in the queue
	running bool              // a worker is pushing it
	again   bool              // asked for while running: push once more after
	removal bool              // the session was disposed of: remove its refs there
	failing bool              // the last push failed (and was logged)
}

// newPusher returns a pusher to remote, or nil when remote is "".
func newPusher(remote string, log *slog.Logger, failed func(), told func(string, error)) *pusher {
	if remote == "" {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &pusher{
		remote: remote, log: log.With("remote", checkpoints.Redacted(remote)), failed: failed, told: told,
		ctx: ctx, cancel: cancel, mu: lockcheck.Mutex{Class: "pusher"},
		state: map[string]*pushState{}, missing: map[string]bool{},
	}
}

// ask has s's checkpoints pushed from repo, soon. It never waits.
func (p *pusher) ask(s *session.Session, repo *checkpoints.Repo) { p.enqueue(s, repo, false) }

// askRemoval has the refs of s, disposed of and its checkpoints deleted
// from repo, removed from the remote too, soon. It never waits.
func (p *pusher) askRemoval(s *session.Session, repo *checkpoints.Repo) { p.enqueue(s, repo, true) }

func (p *pusher) enqueue(s *session.Session, repo *checkpoints.Repo, removal bool) {
	if p == nil || repo == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	st := p.state[s.URI()]
	if st == nil {
		st = &pushState{}
		p.state[s.URI()] = st
	}
	st.sess, st.repo = s, repo
	st.removal = st.removal || removal
	switch {
	case st.running:
		st.again = true
	case !st.queued:
		st.queued = true
		p.queue = append(p.queue, s.URI())
		p.startWorkerLocked()
	}
}

// startWorkerLocked starts a worker, if fewer than pushWorkers run.
func (p *pusher) startWorkerLocked() {
	if p.workers >= pushWorkers {
		return
	}
	if p.workers == 0 {
		p.idle = make(chan struct{})
	}
	p.workers++
	p.wg.Add(1)
	go p.work()
}

// work pushes queued sessions until none is left.
func (p *pusher) work() {
	defer p.wg.Done()
	p.mu.Lock()
	for len(p.queue) > 0 && !p.closed {
		uri := p.queue[0]
		p.queue = p.queue[1:]
		st := p.state[uri]
		st.queued, st.running = false, true
		s, repo, removal := st.sess, st.repo, st.removal
		st.removal = false
		p.mu.Unlock()

		err := p.push(s, repo, removal)

		p.mu.Lock()
		st.running = false
		p.noteLocked(s, st, err)
		if st.again && !p.closed {
			st.again, st.queued = false, true
			p.queue = append(p.queue, uri)
		} else if st.failing {
			st.sess, st.repo = nil, nil // only the failing is remembered
		} else {
			delete(p.state, uri)
		}
		if p.told != nil {
			p.mu.Unlock()
			p.told(s.URI(), err)
			p.mu.Lock()
		}
	}
	p.workers--
	if p.workers == 0 {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
}

// noteLocked logs and counts a push's outcome: a failure once for a run of
// them, and the end of the run.
func (p *pusher) noteLocked(s *session.Session, st *pushState, err error) {
	switch {
	case err == nil || errors.Is(err, errNoRemote):
		if st.failing {
			p.log.Info("pushing the session's checkpoints works again", "session", s.URI())
		}
		st.failing = false
	case p.ctx.Err() != nil:
		// Cut off by the shutdown: neither logged nor counted.
	default:
		p.failed()
		if !st.failing {
			p.log.Warn("could not push the session's checkpoints; the next turn tries again", "session", s.URI(), "err", err)
		} else {
			p.log.Debug("could not push the session's checkpoints", "session", s.URI(), "err", err)
		}
		st.failing = true
	}
}

// push sends s's checkpoint refs, and its worktree's branch if it has
// one, to the remote; or, for a removal, takes its checkpoint refs away
// there (not its branch: that may hold work of a person's).
func (p *pusher) push(s *session.Session, repo *checkpoints.Repo, removal bool) error {
	disposed, wt := s.PushTarget()
	if disposed && !removal {
		return nil // its refs are going; the removal follows
	}
	ctx, cancel := context.WithTimeout(p.ctx, pushTimeout)
	defer cancel()
	repo = repo.Yielding()
	if err := p.haveRemote(ctx, repo); err != nil {
		return err
	}
	if removal {
		return repo.PushRemoval(ctx, p.remote, s.ID())
	}
	branch := ""
	if wt != nil {
		branch = wt.Branch // the session works in its tree: repo is that tree
	}
	return repo.Push(ctx, p.remote, s.ID(), branch)
}

// haveRemote checks, when the remote is a name, that repo has it; a
// working tree without it is logged once, and its pushes skipped.
func (p *pusher) haveRemote(ctx context.Context, repo *checkpoints.Repo) error {
	if !checkpoints.IsRemoteName(p.remote) {
		return nil // a URL or a path: git push says if it is no repository
	}
	ok, err := repo.HasRemote(ctx, p.remote)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	root := repo.Root()
	switch {
	case ok:
		delete(p.missing, root)
		return nil
	case !p.missing[root]:
		p.missing[root] = true
		p.log.Warn("the repository has no remote of that name: its sessions' checkpoints are not pushed", "repository", root)
	}
	return errNoRemote
}

// drain waits until no push is queued or running, or window has passed.
func (p *pusher) drain(window time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	if idle == nil {
		return
	}
	if !closedWithin(idle, window) {
		p.log.Warn("pushes of checkpoints did not finish in time; stopping them", "window", window)
	}
}

// close drops the pushes queued, cancels those running, and waits for
// them; no push is taken after.
func (p *pusher) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.queue = nil
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// fetchMissing copies the session's checkpoint refs from the remote when
// the newest one its record counts on (turn/<last>) is not in repo: the
// session ran on another host, which pushed them. It runs before the
// first checkpoint this host records for the session reads the ones
// before it, on the session's git queue, where nothing waits on it. A
// fetch that fails is logged; the record goes on without them.
func (p *pusher) fetchMissing(ctx context.Context, s *session.Session, repo *checkpoints.Repo, last int) {
	if p == nil || last < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	have, err := repo.HasCheckpoint(ctx, s.ID(), last)
	if err != nil || have {
		return
	}
	if err := p.haveRemote(ctx, repo); err != nil {
		return
	}
	if err := repo.Fetch(ctx, p.remote, s.ID()); err != nil {
		p.log.Warn("could not fetch the session's checkpoints; its counts start again from here", "session", s.URI(), "err", err)
		return
	}
	p.log.Info("fetched the session's checkpoints", "session", s.URI(), "turn", last)
}
