package host

import (
	"context"
	"time"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// sessionHost is the host as its sessions see it (session.Host): a type
// of its own, so that what sessions ask of the host stays off Host's
// exported methods.
type sessionHost Host

// sessionEnv is what the host's sessions share (session.Env).
func (h *Host) sessionEnv() *session.Env {
	_, memory := h.store.(memoryStore)
	return &session.Env{
		Host:         (*sessionHost)(h),
		Ctx:          h.ctx,
		Log:          h.log,
		Now:          h.now,
		Clock:        h.opts.Clock,
		Journaled:    h.opts.Journal != nil,
		KeepsRecords: !memory,
		Clustered:    h.cluster != nil,
		TurnWindow:   h.opts.TurnWindow,
		InputTimeout: h.opts.InputTimeout,
		Events:       h.opts.Events,
		Bus:          h.bus,
		Trees:        h.trees,
		Repos:        session.NewRepos(),
		Sink:         h.outboxes(),
	}
}

func (sh *sessionHost) h() *Host { return (*Host)(sh) }

// Journal

func (sh *sessionHost) AppendDurably(s string, entries [][]byte) ([]uint64, error) {
	return sh.h().appendDurably(s, entries)
}

func (sh *sessionHost) ReadTurnsAt(ctx context.Context, s string, at uint64) ([]protocol.Turn, *string, error) {
	return sh.h().readTurnsAt(ctx, s, at)
}

func (sh *sessionHost) WriteRestartPoint(s *session.Session, snaps []session.RestartSnap, then func(map[*session.ChatEntry]uint64)) {
	sh.h().writeRestartPoint(s, snaps, then)
}

func (sh *sessionHost) WriteResidency(s, what string) { sh.h().writeResidency(s, what) }
func (sh *sessionHost) JournalFailing() bool          { return sh.health.trouble.Load() != nil }
func (sh *sessionHost) JournalRefusal() string        { return sh.h().journalRefusal() }

func (sh *sessionHost) WaitBegins() {
	sh.metrics.journalWaits.Add(1)
	sh.health.waiting.Add(1)
}

func (sh *sessionHost) WaitEnds() { sh.health.waiting.Add(-1) }

// Records

func (sh *sessionHost) WriteRecord(id string, data []byte) error { return sh.writer.writeNow(id, data) }
func (sh *sessionHost) QueueRecord(id string, data []byte, told func(error)) {
	sh.writer.queue(id, data, told)
}
func (sh *sessionHost) FlushRecord(id string)        { sh.writer.flush(id) }
func (sh *sessionHost) RemoveRecord(id string) error { return sh.h().removeRecord(id) }

// Catalogue

func (sh *sessionHost) NoteOwn(keys []catalogue.Key) { sh.ext.NoteOwn(keys) }

func (sh *sessionHost) ForgetOwn(keys []catalogue.Key) {
	sh.ext.ForgetOwn(keys)
}

func (sh *sessionHost) Shown(k catalogue.Key) bool { return sh.ext.Shown(k) }

func (sh *sessionHost) Relist(s *session.Session) { sh.order.Update(s) }

// Git

func (sh *sessionHost) Push(s *session.Session, repo *checkpoints.Repo) { sh.pushes.ask(s, repo) }
func (sh *sessionHost) PushRemoval(s *session.Session, repo *checkpoints.Repo) {
	sh.pushes.askRemoval(s, repo)
}
func (sh *sessionHost) FetchMissing(ctx context.Context, s *session.Session, repo *checkpoints.Repo, last int) {
	sh.pushes.fetchMissing(ctx, s, repo, last)
}

// Notices

func (sh *sessionHost) Poke()                 { sh.h().poke() }
func (sh *sessionHost) AddActive(delta int64) { sh.h().addActive(delta) }
func (sh *sessionHost) BackendStarted(provider string, err error) {
	sh.h().backendStarted(provider, err)
}
func (sh *sessionHost) CountTurnEnd(a protocol.Action) { sh.metrics.turnEnded(a) }
func (sh *sessionHost) FirstOutput(s *session.Session, took time.Duration) {
	sh.metrics.firstOutput(s.Provider(), took)
}
func (sh *sessionHost) TurnEnded(s *session.Session, state protocol.TurnState, took time.Duration) {
	sh.metrics.turnTook(s.Provider(), state, took)
	sh.h().automationTurnEnded(s, state)
}
func (sh *sessionHost) Unloaded() { sh.metrics.unloaded.Add(1) } // its heap is garbage now (memory.go)
func (sh *sessionHost) LetGo(id string) {
	if sh.cluster != nil {
		sh.cluster.LetGo(id)
	}
}

// Policy

func (sh *sessionHost) WorkRefusal(c *conn.Conn, s *session.Session) string {
	return sh.h().workRefusal(c, s)
}

func (sh *sessionHost) OwnerOf(by grants.Principal) grants.Principal {
	return sh.h().directory().Owner(by)
}

func (sh *sessionHost) MayRead(c *conn.Conn, t grants.Target) bool {
	return sh.h().check(c, grants.SessionState, t) == nil
}

func (sh *sessionHost) KeepOut(channels []string, t grants.Target) {
	h := sh.h()
	for _, ch := range channels {
		for _, sub := range h.bus.DropWhere(ch, func(sub fanout.Subscriber) bool {
			c, ok := sub.(*conn.Conn)
			return ok && !sh.MayRead(c, t)
		}) {
			c := sub.(*conn.Conn)
			c.Forget(ch)
			c.Log().Info("dropped a subscription to a session no longer shared with its client", "channel", ch)
		}
	}
}
