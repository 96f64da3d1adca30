package session

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
)

// Env is what the sessions of one host share: its settings, the parts a
// session uses directly (the bus, the worktree manager, the outboxes'
// sink), and the host itself, reached through the small interfaces it
// implements. It is set whole before the first session is made and never
// changed; every session points at it.
type Env struct {
	Host

	Ctx   context.Context // the host's lifetime: git work and checkpoints end with it
	Log   *slog.Logger
	Now   func() time.Time // the host's clock, as a time
	Clock clock.Clock      // the host's clock, for the waits a turn times

	Journaled    bool // the host keeps a journal of every action
	KeepsRecords bool // the host stores the sessions' records
	Clustered    bool // the host is one of a cluster's

	TurnWindow   int           // how many of a chat's turns are kept in memory
	InputTimeout time.Duration // the default wait for a person's answer; 0: none
	Events       events.Sink   // told of turns ending and waits beginning; nil: none

	Bus   *fanout.Bus
	Trees *worktree.Manager
	Repos *Repos      // which sessions work in which git working tree; nil: none is alone in one
	Sink  outbox.Sink // where the sessions' outboxes hand on
}

// Host is what a session asks of the host it lives in, grouped by the part
// of the host that answers.
type Host interface {
	Journal
	Records
	Catalogue
	Git
	Notices
	Policy
}

// Journal is the host's journal of actions, as a session writes to it and
// reads its turns back.
type Journal interface {
	// AppendDurably writes entries to the session's journal, returning
	// their sequence numbers once they are durable.
	AppendDurably(session string, entries [][]byte) ([]uint64, error)
	// ReadTurnsAt reads a chat's turns from the journal entry at at.
	ReadTurnsAt(ctx context.Context, session string, at uint64) ([]protocol.Turn, *string, error)
	// WriteRestartPoint writes a restart point of s from snaps, then
	// calls then with where each chat's snapshot went.
	WriteRestartPoint(s *Session, snaps []RestartSnap, then func(map[*ChatEntry]uint64))
	// WriteResidency notes in the journal that the session fell asleep
	// or woke ("sleep", "wake").
	WriteResidency(session, what string)
	// JournalFailing reports whether appends to the journal fail now.
	JournalFailing() bool
	// JournalRefusal is why no work may start while the journal fails,
	// or "".
	JournalRefusal() string
	// WaitBegins and WaitEnds count an agent or client waiting for its
	// session's outbox to have room.
	WaitBegins()
	WaitEnds()
}

// Records is the store of the sessions' records.
type Records interface {
	// WriteRecord writes a session's record now.
	WriteRecord(id string, data []byte) error
	// QueueRecord queues a write of a session's record; told hears how
	// it went.
	QueueRecord(id string, data []byte, told func(error))
	// FlushRecord waits for the writes queued of a session's record.
	FlushRecord(id string)
	// RemoveRecord takes a session's record away.
	RemoveRecord(id string) error
}

// Catalogue is the host's view of the sessions backends wrote on this
// machine: which are its own, which are shown as external.
type Catalogue interface {
	NoteOwn(keys []catalogue.Key)
	ForgetOwn(keys []catalogue.Key)
	// Shown reports whether the listing shows k as an external session.
	Shown(k catalogue.Key) bool
	// Relist files s's newest listing row (Session.Row) in the listing's
	// order, where its modification time puts it.
	Relist(s *Session)
}

// Git is the host's git work that outlives one session's: pushing and
// fetching checkpoints to and from a remote.
type Git interface {
	Push(s *Session, repo *checkpoints.Repo)
	PushRemoval(s *Session, repo *checkpoints.Repo)
	FetchMissing(ctx context.Context, s *Session, repo *checkpoints.Repo, last int)
}

// Notices are what a session tells the host of itself.
type Notices interface {
	// Poke tells the residency check that something changed.
	Poke()
	// AddActive moves root's count of sessions running a turn.
	AddActive(delta int64)
	// BackendStarted tells how an agent of a provider's backend started.
	BackendStarted(provider string, err error)
	// CountTurnEnd counts a chat's turn ending by the action that ends
	// it, as it is emitted.
	CountTurnEnd(a protocol.Action)
	// FirstOutput tells how long the agent took from a turn's message to
	// its first output in it (or the turn's end, when it said nothing).
	FirstOutput(s *Session, took time.Duration)
	// TurnEnded tells of a chat's turn ended and kept: its state and how
	// long it ran (negative when not known), for the metrics and
	// automations.
	TurnEnded(s *Session, state protocol.TurnState, took time.Duration)
	// Unloaded tells that a session fell asleep and let its heap go.
	Unloaded()
	// LetGo gives up the cluster's lease of a session, which may then
	// wake on any host.
	LetGo(id string)
}

// Policy is what the host decides about a session it does not own.
type Policy interface {
	// WorkRefusal is why c may not start work in s now, or "".
	WorkRefusal(c *conn.Conn, s *Session) string
	// OwnerOf is the owner a session adopted by a principal gets.
	OwnerOf(by grants.Principal) grants.Principal
	// MayRead reports whether c may read the session t.
	MayRead(c *conn.Conn, t grants.Target) bool
	// KeepOut drops the subscriptions to channels (a session's and its
	// chats') of everybody who may not read the session t.
	KeepOut(channels []string, t grants.Target)
	// HostRules are the approvals the host lays over every session's
	// permissions (root config), handed to agents with the session's
	// config values; nil for none. It takes no lock.
	HostRules() *plugins.HostRules
	// AutoReply reports whether questions are answered at once for a
	// person who is not there (root config's autoReplyEnabled). It
	// takes no lock.
	AutoReply() bool
	// MCPServers are the MCP servers every session's agents get (root
	// config's mcpServers, checked), handed to agents with the session's
	// config values; nil for none. It takes no lock.
	MCPServers() jsontext.Value
}
