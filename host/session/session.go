package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

func init() {
	// A session's lock is its own: only its methods take it, and the
	// outbox's hand-on, which lets it go and takes it again to take what
	// was queued meanwhile.
	lockcheck.Own("session",
		"github.com/ahpd/ahpd/host/session.(*Session).",
		"github.com/ahpd/ahpd/host/outbox.Release",
		"github.com/ahpd/ahpd/host/outbox.handOnAll")
}

// Session is one session: its state, its chats, the record the store
// keeps of it, its residency, and its queues of git work and checkpoint
// captures. s.mu is the session's one lock: it guards the session state,
// every chat's state (package chats relies on it through chats.Owner), the
// record and those queues. A change made under it queues what it means for
// the rest of the host in s.out (actions to journal and publish, record
// writes, events), and s.unlock hands that on holding no lock, in the
// order the changes happened (outbox.go).
type Session struct {
	h        *Env   // what it shares of its host
	uri      string // the URI the client created it under; every client is answered under it
	id       string
	provider string
	backend  plugins.Backend

	// dir is the primary working directory as a path: the folder, or the
	// worktree made on the first send. Agents starting read it holding no
	// session lock, so it is an atomic value, not state under mu.
	dir atomic.Pointer[string]

	git      gitQueue     // its git work, one job at a time (gitwork.go; guarded by mu)
	captures captureQueue // its checkpoints queued, not yet recorded (captures.go; guarded by mu)

	mu  lockcheck.Mutex
	out *outbox.Outbox // what its changes ask of the rest of the host (outbox.go)
	// snapDue says the session's state was made outside its reducer
	// (built from its record): its journal gets a snapshot before its
	// next action (snapshots.go).
	snapDue     bool
	restarts    restartLog // its restart points (restart.go)
	state       *protocol.SessionState
	summary     protocol.SessionSummary
	summaryGen  uint64                  // counts the summaries set (setSummaryLocked)
	row         atomic.Pointer[ListRow] // its newest listing row (listing.go)
	chats       map[string]*ChatEntry   // by chat URI
	order       []string                // chat URIs, in the order they were made
	rec         Record
	provisional bool   // made, its first turn not yet at the backend
	creatorID   string // the client that made a provisional session
	creator     grants.Principal
	announced   bool // root/sessionAdded has been sent
	busy        map[*chats.Chat]bool
	disposed    bool
	running     bool // a chat runs a turn: counted in root's activeSessions
	stopping    bool // the host is shutting down: no turn starts
	mirrorHeld  bool // a batch of a chat's actions is applied: mirror it after the last (EmitBatch)

	// The store (persist.go): stored says a record of the session is in
	// it; storeFailing that a write of the record failed, which the
	// session's _meta tells, and none has succeeded since.
	stored, storeFailing bool
	// saveGen numbers the encodings of the record: a write's result is
	// taken for the newest only.
	saveGen uint64
	// recordRev is the cluster revision of the record another host wrote
	// that the session was made from (0: none, or not known): a change
	// the cluster's watch brings no newer than it is passed over
	// (host/shared/records.go).
	recordRev uint64

	// Residency (residency.go). A client using the session pins it, so it
	// never falls asleep under a client; falling is closed when a session
	// that was falling asleep has, and pins wait for it.
	pins       int
	falling    chan struct{}
	used       time.Time // last started, subscribed to, or given a turn
	lastAction time.Time // when an action last moved the session
	asleep     bool      // agents closed and turns dropped
	sleeps     uint64    // times it fell asleep: what a sleep's later work checks it is still in
	awake      atomic.Bool
}

// ChatEntry is one chat of a session and what the host keeps beside it.
type ChatEntry struct {
	chat *chats.Chat
	rec  *ChatRecord

	// snapDue, as the session's, for the chat's state (guarded by s.mu).
	snapDue bool
	// turnsGen counts the actions that changed its finished turns
	// (turntrack.go; guarded by s.mu).
	turnsGen uint64

	// Loading the chat's turns (guarded by s.mu): loaded once they have
	// been read from the backend, loading while a read is under way.
	loaded  bool
	loading chan struct{}

	edits map[string]edit // by file URI: what its tools wrote (guarded by s.mu)

	// sent is when the running turn's message went to the agent, until
	// the agent's first output (zero: none awaited; guarded by s.mu).
	sent time.Time

	// views are the subscribers given a view of the chat's last turns,
	// with the index of the oldest they hold (view.go; guarded by s.mu).
	views map[*conn.Conn]int

	// start is what the chat's agent starts with next. The agent starts
	// holding no session lock, so it reads an immutable value set whole.
	start atomic.Pointer[startSpec]
}

// startSpec is what a chat's agent starts with.
type startSpec struct {
	config       protocol.Object
	resume       bool
	conversation string
}

func (s *Session) chatLocked(uri string) *ChatEntry { return s.chats[uri] }

// newChat makes the chat of a record. Called with s.mu held or before the
// session is shared.
func (s *Session) newChat(rec *ChatRecord, state *protocol.ChatState) *ChatEntry {
	e := &ChatEntry{rec: rec, snapDue: true}
	e.setStart(s.configValuesLocked(), rec.Started, rec.Conversation)
	e.chat = chats.New(chats.Options{
		URI:   rec.URI,
		State: state,
		Owner: s,
		Now:   s.h.Now,
		Clock: s.h.Clock,
		// Called with s.mu held, as each wait for a person begins.
		InputTimeout: s.inputTimeoutLocked,
		AutoReply:    s.h.AutoReply,
		// Start runs holding no session lock: it reads what it needs
		// from the entry's and the session's atomic values.
		Start: func(ctx context.Context) (plugins.Agent, error) {
			if s.backend == nil {
				return nil, fmt.Errorf("provider %q is not available on this host", s.provider)
			}
			opts := e.startOptions(s.WorkDir())
			opts.Config = s.agentConfig(opts.Config)
			return s.backend.Start(ctx, opts)
		},
		Prepare: s.prepare,
	})
	s.chats[rec.URI] = e
	s.order = append(s.order, rec.URI)
	return e
}

// WorkDir returns the directory the session's agents work in.
func (s *Session) WorkDir() string {
	if d := s.dir.Load(); d != nil {
		return *d
	}
	return ""
}

func (s *Session) setWorkDir(dir string) { s.dir.Store(&dir) }

// setStart records what the chat's agent starts with next.
func (e *ChatEntry) setStart(config protocol.Object, resume bool, conversation string) {
	e.start.Store(&startSpec{config: config, resume: resume, conversation: conversation})
}

func (e *ChatEntry) startOptions(dir string) plugins.StartOptions {
	sp := e.start.Load()
	return plugins.StartOptions{
		Conversation: plugins.Conversation{ID: sp.conversation, Dir: dir},
		Resume:       sp.resume,
		Config:       sp.config,
	}
}

// agentConfig is what an agent is handed of the session's config values:
// them, with the host's rules and MCP servers (plugins.WithHostRules,
// WithMCPServers), which replace any of a client's making under those
// keys.
func (s *Session) agentConfig(values protocol.Object) protocol.Object {
	return plugins.WithMCPServers(plugins.WithHostRules(values, s.h.HostRules()), s.h.MCPServers())
}

// HostRulesChanged hands the host's new rules to the chats' agents that
// run. The caller holds no session lock.
func (s *Session) HostRulesChanged() {
	s.mu.Lock()
	entries := make([]*ChatEntry, 0, len(s.chats))
	for _, e := range s.chats {
		entries = append(entries, e)
	}
	s.unlock()
	s.configureChats(entries)
}

func (s *Session) configValuesLocked() protocol.Object {
	if s.state.Config == nil {
		return nil
	}
	return s.state.Config.Values
}

// agentOutput reports whether a chat action is the agent's output in a
// turn (text, reasoning, a tool call, a question), or its end: what the
// time to first output is timed to.
func agentOutput(a protocol.Action) bool {
	switch a.(type) {
	case *protocol.ChatDeltaAction, *protocol.ChatReasoningAction, *protocol.ChatResponsePartAction,
		*protocol.ChatToolCallStartAction, *protocol.ChatInputRequestedAction,
		*protocol.ChatTurnCompleteAction, *protocol.ChatTurnCancelledAction, *protocol.ChatErrorAction:
		return true
	}
	return false
}

// Do runs fn with the session's lock held (chats.Owner). What the agent
// reports waits first for room in the session's outbox (awaitRoom).
func (s *Session) Do(fn func()) {
	s.lockWithRoom()
	defer s.unlock()
	fn()
}

// Emit applies and publishes a chat action the host itself produced
// (chats.Owner). Called with s.mu held.
func (s *Session) Emit(c *chats.Chat, a protocol.Action) bool {
	return s.emitChatLocked(c, a, nil)
}

// emitChatLocked applies a chat action, publishes it, and brings the
// session up to date with the chat: its catalogue entry, its input queue
// and its summary.
func (s *Session) emitChatLocked(c *chats.Chat, a protocol.Action, origin *protocol.ActionOrigin) bool {
	before := c.State()
	if s.disposed || (s.stopping && startsTurn(a)) || s.heldBackLocked(c, a, origin) || !c.Apply(a) {
		return false
	}
	s.lastAction = s.h.Now()
	e := s.chats[c.URI()]
	if s.h.Journaled {
		if s.snapDue {
			s.restartPointLocked(c.URI(), before)
		} else if e != nil && e.snapDue {
			e.snapDue = false
			s.snapshotLocked(e, before)
		}
	}
	if e != nil && !SameTurns(before, c.State()) {
		e.turnsChangedLocked() // after the snapshot of before was queued
	}
	s.out.Publish(c.URI(), a, origin)
	if e != nil && !e.sent.IsZero() && agentOutput(a) {
		s.h.FirstOutput(s, s.h.Now().Sub(e.sent))
		e.sent = time.Time{}
	}
	switch a := a.(type) {
	case *protocol.ChatDeltaAction, *protocol.ChatReasoningAction, *protocol.ChatUsageAction:
		// The hot path: nothing a delta does shows in the catalogue.
		return true
	case *protocol.ChatTurnStartedAction, *protocol.ChatTurnResumeAction:
		if e != nil {
			e.sent = s.h.Now()
		}
		s.markUsedLocked()
		s.updateActiveLocked()
	case *protocol.ChatToolCallCompleteAction:
		if e := s.chats[c.URI()]; e != nil {
			e.noteEditsLocked(a.Result)
		}
	case *protocol.ChatTurnCompleteAction, *protocol.ChatTurnCancelledAction, *protocol.ChatErrorAction:
		s.h.CountTurnEnd(a)
		s.updateActiveLocked()
		s.turnEndedLocked(a)
		s.turnEventLocked(c, a) // events.go
		if s.h.Journaled && s.restartDueLocked() {
			defer s.restartPointLocked("", nil) // once the session follows the chat
		}
	case *protocol.ChatTruncatedAction:
		s.updateActiveLocked()
	case *protocol.ChatPendingMessageSetAction, *protocol.ChatPendingMessageRemovedAction, *protocol.ChatDraftChangedAction:
		if e != nil {
			// A message waiting to be sent outlives a stop of the host,
			// also a clean one, after which the record is all a start reads.
			e.keepPendingLocked()
			defer s.persistLocked()
		}
	}
	if e != nil {
		e.keepMarks()
	}
	if !s.mirrorHeld {
		s.mirrorChatLocked(c)
	}
	return true
}

// keepPendingLocked writes the chat's pending messages and draft to its
// record. Called with s.mu held.
func (e *ChatEntry) keepPendingLocked() {
	cs := e.chat.State()
	e.rec.Steering, e.rec.Queued, e.rec.Draft = cs.SteeringMessage, cs.QueuedMessages, cs.Draft
}

// heldBackLocked reports whether the host holds back an action a chat
// takes of its own accord (origin nil) to start a turn from a pending
// message: while the journal fails, no work starts, and the message stays
// pending (its removal is refused too) until the journal is back
// (sendLeftQueued).
func (s *Session) heldBackLocked(c *chats.Chat, a protocol.Action, origin *protocol.ActionOrigin) bool {
	if origin != nil || !s.h.JournalFailing() {
		return false
	}
	switch a.(type) {
	case *protocol.ChatTurnStartedAction:
		return true
	case *protocol.ChatPendingMessageRemovedAction:
		return c.State().ActiveTurn == nil // taken to start a turn, not by a running one
	}
	return false
}

// startsTurn reports whether a chat action starts a turn running.
func startsTurn(a protocol.Action) bool {
	switch a.(type) {
	case *protocol.ChatTurnStartedAction, *protocol.ChatTurnResumeAction:
		return true
	}
	return false
}

// emitSessionLocked applies and publishes a session action.
func (s *Session) emitSessionLocked(a protocol.Action, origin *protocol.ActionOrigin) bool {
	if s.disposed {
		return false
	}
	next := protocol.ReduceSession(s.state, a)
	if next == s.state {
		return false
	}
	if s.snapDue && s.h.Journaled {
		s.restartPointLocked(s.uri, s.state)
	}
	s.state = next
	s.lastAction = s.h.Now()
	s.out.Publish(s.uri, a, origin)
	s.refreshSummaryLocked()
	switch a.(type) {
	case *protocol.SessionIsReadChangedAction, *protocol.SessionIsArchivedChangedAction:
		s.markChatFromSessionLocked()
	}
	return true
}

// mirrorChatLocked brings the session up to date with a chat that
// changed (protocol.MirrorChat): the chat's entry, the input requests it
// waits on, the default chat's marks; then the session's summary.
func (s *Session) mirrorChatLocked(c *chats.Chat) {
	defer s.inputEventsLocked(c, s.state.InputNeeded) // events.go: the requests new once mirrored
	cs := c.State()
	isDefault := s.state.DefaultChat != nil && *s.state.DefaultChat == cs.Resource
	for _, a := range protocol.MirrorChat(s.state, s.entryState(cs, isDefault), isDefault) { // titles.go
		s.emitSessionLocked(a, nil)
	}
	s.refreshSummaryLocked()
}

func sameString(a, b *string) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// Started is told a turn reached the backend (chats.Owner). A provisional
// session becomes real: it is announced, then ready.
func (s *Session) Started(c *chats.Chat) {
	s.h.BackendStarted(s.provider, nil)
	s.mu.Lock()
	if s.disposed {
		s.unlock()
		return
	}
	if e := s.chats[c.URI()]; e != nil && (!e.rec.Started || e.rec.Conversation != c.ConversationID()) {
		// From now on the backend has the conversation: resume it.
		e.rec.Started, e.rec.Conversation = true, c.ConversationID()
		e.setStart(s.configValuesLocked(), true, e.rec.Conversation)
		s.noteOwnLocked()
	}
	unstored := s.provisional && !s.stored
	s.unlock()
	// prepare stored the session before its turn set out, so this only
	// announces it; were it not stored, it is tried once more here, and
	// failing that stays provisional and unannounced (the write logged),
	// and the next turn tries again.
	if unstored {
		_ = s.StoreNow()
	}
	s.mu.Lock()
	defer s.unlock()
	if s.disposed {
		return
	}
	_ = s.commitLocked()
	if s.state.Lifecycle != protocol.SessionLifecycleReady {
		s.emitSessionLocked(&protocol.SessionReadyAction{}, nil)
	}
	s.persistLocked()
}

// StartFailed is told a turn could not reach the backend (chats.Owner).
// A session whose first turn failed is failed, announced, and kept with
// its start owed: the next message tries again. One that could not be
// stored is failed for its creator alone and not announced: nothing of it
// is kept, and the next message tries again.
func (s *Session) StartFailed(c *chats.Chat, err error) {
	s.h.BackendStarted(s.provider, err)
	s.mu.Lock()
	defer s.unlock()
	if s.disposed || !s.provisional {
		return
	}
	if !isStoreError(err) {
		s.emitSessionLocked(&protocol.SessionCreationFailedAction{Error: protocol.ErrorInfo{
			ErrorType: "backendStartFailed",
			Message:   err.Error(),
		}}, nil)
		unstored := !s.stored
		s.unlock()
		err = nil
		if unstored {
			err = s.StoreNow()
		}
		s.mu.Lock()
		if s.disposed || !s.provisional {
			return
		}
		if err == nil {
			err = s.commitLocked()
		}
	}
	if err != nil {
		s.emitSessionLocked(&protocol.SessionCreationFailedAction{Error: protocol.ErrorInfo{
			ErrorType: "storeFailed",
			Message:   err.Error(),
		}}, nil)
		return
	}
	s.persistLocked()
}

// Ended is told a turn ended (chats.Owner).
// Its checkpoint was queued as its end was applied (captures.go).
func (s *Session) Ended(c *chats.Chat, turnID string, state protocol.TurnState) {
	s.mu.Lock()
	took := time.Duration(-1)
	if !s.disposed {
		if e := s.chats[c.URI()]; e != nil {
			took = e.keepTiming(turnID)
		}
		s.countEditsLocked(c)
		s.persistLocked()
	}
	s.unlock()
	s.h.Poke()
	s.h.TurnEnded(s, state, took)
}

// SetTitle sets the title the agent gave the session (chats.Owner).
func (s *Session) SetTitle(title string) {
	s.mu.Lock()
	defer s.unlock()
	if title = titleOf(title); title != "" {
		s.setTitleLocked(title, titleFromAgent)
	}
}

// Busy records background work of a chat's agent (chats.Owner).
func (s *Session) Busy(c *chats.Chat, busy bool) {
	s.mu.Lock()
	defer s.unlock()
	if busy {
		s.busy[c] = true
	} else {
		delete(s.busy, c)
		s.out.Later(s.h.Poke) // its background work may be what kept it awake
	}
}

// announceLocked tells every client the session exists.
func (s *Session) announceLocked() {
	if s.announced || s.rec.External {
		return // an external session is listed by the catalogue's rules
	}
	s.announced = true
	sum, readers := s.summary, s.readersLocked()
	s.out.Later(func() {
		s.h.Bus.Notify(protocol.RootURI, "root/sessionAdded", &protocol.SessionAddedParams{Channel: protocol.RootURI, Summary: sum}, readers)
	})
}

// VisibleTo reports whether c may see the session: a provisional one is
// its creator's alone, on whichever connection the creating client is.
func (s *Session) VisibleTo(c *conn.Conn) bool {
	s.mu.Lock()
	defer s.unlock()
	return s.visibleToLocked(c)
}

func (s *Session) visibleToLocked(c *conn.Conn) bool {
	return !s.provisional || (s.creatorID == c.Client() && s.creator == c.Principal())
}

// Hold readies the session for the host's shutdown: no turn starts in it
// from now on, neither a client's nor a queued message.
func (s *Session) Hold() {
	s.mu.Lock()
	defer s.unlock()
	s.stopping = true
	for _, e := range s.chats {
		e.chat.Hold()
	}
}

// Shutdown stops the session's chats for the host's Close, all at once:
// a running turn gets until ctx ends to finish on its own and is then
// cancelled, every agent is let go, and whatever still runs when kill ends
// is killed. Every change was stored as it happened; there is nothing
// left to write.
func (s *Session) Shutdown(ctx, kill context.Context) error {
	s.mu.Lock()
	list := make([]*chats.Chat, 0, len(s.chats))
	for _, e := range s.chats {
		list = append(list, e.chat)
	}
	s.unlock()
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, c := range list {
		wg.Go(func() { errs[i] = s.stopChat(ctx, kill, c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopChat ends one chat's turn and agent for shutdown.
func (s *Session) stopChat(ctx, kill context.Context, c *chats.Chat) error {
	s.mu.Lock()
	done := c.Done()
	s.unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.mu.Lock()
	done = c.Cancel()
	s.unlock()
	select {
	case <-done:
	case <-kill.Done():
		// The agent ignores the cancel: the turn ends with its process.
		c.Kill()
		<-done
	}
	if err := c.Stop(kill); err != nil {
		return fmt.Errorf("stopping the agent of %s: %w", c.URI(), err)
	}
	return nil
}
