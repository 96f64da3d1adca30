// Package chats runs one conversation of a session: it holds the chat's
// state, decides what a client's chat action means (start a turn, cancel
// it, answer a tool call or a question), and drives the backend's agent
// through a turn, turning what the agent reports into chat actions.
//
// A chat's state has no lock of its own. Its owner (the host's session)
// holds one lock for the session and every chat in it; the methods
// documented as "called with the owner's lock held" rely on it, and
// everything the turn runner does to the state runs inside Owner.Do,
// which takes it, and changes the state through Owner.Emit.
// The chat's own lock, agentMu, covers only its agent's start and close,
// and is never held with the owner's.
package chats

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Owner is the session a chat belongs to. It holds the lock that guards
// the chat.
type Owner interface {
	// Do runs fn with the owner's lock held.
	Do(fn func())

	// Emit applies a chat action to c (through Chat.Apply) and publishes
	// it. Called with the owner's lock held. It reports whether the state
	// changed.
	Emit(c *Chat, a protocol.Action) bool

	// Started is told when a turn has reached the backend: the agent took
	// the prompt. A provisional session becomes a real one here.
	Started(c *Chat)

	// StartFailed is told when a turn could not reach the backend.
	StartFailed(c *Chat, err error)

	// Ended is told when a turn has ended, after its ending action.
	Ended(c *Chat, turnID string, state protocol.TurnState)

	// SetTitle sets the session's title.
	SetTitle(title string)

	// Busy reports background work of the chat's agent.
	Busy(c *Chat, busy bool)
}

// Options describe a chat.
type Options struct {
	URI   string
	State *protocol.ChatState
	Owner Owner
	// Start starts or resumes the chat's conversation with its backend.
	Start func(ctx context.Context) (plugins.Agent, error)
	// Prepare, if set, runs before each turn reaches the agent, holding no
	// lock: the session readies the place the agent works in (a worktree
	// made on the first send, the checkpoint the session starts from). An
	// error fails the turn as a start failure does.
	Prepare func(ctx context.Context) error
	// Now is the clock; nil means Clock's Now.
	Now func() time.Time
	// Clock times a turn's waits for a person (InputTimeout); nil is the
	// wall clock.
	Clock clock.Clock
	// InputTimeout, if set, says how long a turn may wait for a person (a
	// tool call to confirm, a question to answer): a wait that long stops
	// the turn, which ends in chat/error with errorType "inputTimeout".
	// 0 is no limit. Called with the owner's lock held, as each wait
	// begins.
	InputTimeout func() time.Duration
}

// Chat is one conversation.
type Chat struct {
	uri     string
	owner   Owner
	start   func(ctx context.Context) (plugins.Agent, error)
	prepare func(ctx context.Context) error
	now     func() time.Time
	clock   clock.Clock
	timeout func() time.Duration

	// Guarded by the owner's lock.
	state      *protocol.ChatState
	run        *run                           // the running turn
	last       *run                           // the turn that ran last, while its ending is told
	confirm    map[string]chan bool           // tool call id -> the runner waiting on it
	answers    map[string]chan plugins.Answer // input request id -> the runner waiting on it
	background map[string]bool                // the background work listed, by id
	busy       bool
	held       bool // no turn starts of the chat's own accord (Hold)

	// agentMu serializes starting, configuring and closing the agent. It
	// is never held with the owner's lock, nor the owner's lock with it:
	// an agent can take seconds to start, and the session must not wait.
	agentMu lockcheck.Mutex
	agent   plugins.Agent // guarded by agentMu
	stopped bool          // Stop was called: no agent starts again (guarded by agentMu)
	// forgot says the agent let go last took the conversation with it:
	// it could not resume it. noteDue says the agent running started
	// without the conversation, and the next turn tells the user
	// (RestartNote). Both guarded by agentMu.
	forgot, noteDue bool
	// onlyHere says the chat's earlier turns are kept by no backend: an
	// agent of the chat took its conversation with it. The chat then
	// keeps them when it falls asleep (ForgetTurns), as nothing could
	// read them back. Read under the owner's lock, so not under agentMu.
	onlyHere atomic.Bool

	// live mirrors agent, from its start until its Close has returned,
	// for what must not wait on agentMu: Kill, which reaches an agent a
	// Close is waiting for, and the readers below.
	live   atomic.Pointer[liveAgent]
	convID atomic.Pointer[string] // the agent's conversation id, once it has started
}

// liveAgent holds the chat's running agent.
type liveAgent struct{ a plugins.Agent }

// RestartNote is the Markdown part a turn starts with when the chat's
// agent was started anew without the conversation its earlier turns had:
// the agent before could not resume it, and died or was let go when a
// client suspended the session.
const RestartNote = "_The agent was restarted and does not remember the earlier turns of this chat: tell it again what it needs to know._"

// ErrStopped is the error of a turn that would start the agent of a chat
// that was stopped.
var ErrStopped = errors.New("the chat is stopped: ahpd is shutting down")

// New returns a chat with the given state.
func New(opts Options) *Chat {
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	now := opts.Now
	if now == nil {
		now = clk.Now
	}
	return &Chat{
		agentMu:    lockcheck.Mutex{Class: "agent"},
		uri:        opts.URI,
		owner:      opts.Owner,
		start:      opts.Start,
		prepare:    opts.Prepare,
		now:        now,
		clock:      clk,
		timeout:    opts.InputTimeout,
		state:      opts.State,
		confirm:    map[string]chan bool{},
		answers:    map[string]chan plugins.Answer{},
		background: map[string]bool{},
	}
}

// URI returns the chat's channel URI.
func (c *Chat) URI() string { return c.uri }

// State returns the chat's state. Called with the owner's lock held; the
// state returned is never modified, so it may be read after unlocking.
func (c *Chat) State() *protocol.ChatState { return c.state }

// ForgetTurns drops the finished turns the state holds, as a chat falling
// asleep does: they are the heap a sleeping session must not keep, and
// the owner puts them back when the chat is loaded again (RestoreTurns).
// It and RestoreTurns are the changes not made by an action: nobody
// watches a chat as it falls asleep, so there is nobody to tell. Called
// with the owner's lock held, with no turn running.
//
// A chat whose agent took the conversation with it (it could not resume
// it, and died or was let go) keeps its turns: no backend has them.
func (c *Chat) ForgetTurns() {
	if c.onlyHere.Load() {
		return
	}
	next := *c.state
	next.Turns, next.TurnsNextCursor = []protocol.Turn{}, nil
	c.state = &next
}

// RestoreTurns gives a chat whose turns were forgotten (ForgetTurns) the
// finished turns it held, as they were: like ForgetTurns, a change no
// action makes, for nobody watches a chat whose turns are forgotten.
// Called with the owner's lock held.
func (c *Chat) RestoreTurns(turns []protocol.Turn, cursor *string) {
	next := *c.state
	next.Turns, next.TurnsNextCursor = turns, cursor
	c.state = &next
}

// Apply applies an action to the state and reports whether it changed.
// Called with the owner's lock held.
func (c *Chat) Apply(a protocol.Action) bool {
	next := protocol.ReduceChat(c.state, a)
	if next == c.state {
		return false
	}
	c.state = next
	return true
}

// Idle reports whether the chat has nothing in hand: no turn running or
// waiting on somebody, no queued message, no background work of its
// agent. Called with the owner's lock held.
func (c *Chat) Idle() bool {
	s := c.state
	// A steering message counts only with a turn to steer: one left from
	// before a restart waits for the next turn and keeps nobody awake.
	return c.run == nil && s.ActiveTurn == nil && !c.busy && len(s.QueuedMessages) == 0
}

// Waiting reports whether the chat's turn waits on somebody: a tool call to
// confirm or a question to answer. Called with the owner's lock held.
func (c *Chat) Waiting() bool {
	return c.state.Status.Activity() == protocol.StatusInputNeeded
}

// Validate says why a client's action cannot be taken, or "" when it can.
// Called with the owner's lock held, before Apply.
func (c *Chat) Validate(a protocol.Action, clientID string) string {
	s := c.state
	switch a := a.(type) {
	case *protocol.ChatTurnStartedAction:
		if a.TurnID == "" {
			return "a turn needs an id"
		}
		// A turn cancelled a moment ago may still be winding down in the
		// agent: the new one waits for it (see begin), it is not refused.
		if s.ActiveTurn != nil {
			return "a turn is already running in this chat; queue the message instead"
		}
		for _, t := range s.Turns {
			if t.ID == a.TurnID {
				return fmt.Sprintf("turn %s already exists", protocol.Quote(a.TurnID))
			}
		}
	case *protocol.ChatTurnCancelledAction:
		if s.ActiveTurn == nil || s.ActiveTurn.ID != a.TurnID {
			return "no active turn to cancel"
		}
	case *protocol.ChatTurnResumeAction:
		if s.ActiveTurn != nil {
			return "a turn is already running in this chat"
		}
		if !protocol.Resumable(s, a.TurnID) {
			return fmt.Sprintf("turn %s is not the chat's latest turn stopped at an error it can be resumed from", protocol.Quote(a.TurnID))
		}
	case *protocol.ChatToolCallConfirmedAction:
		// The schema's two variants: an approval says how, a denial why.
		if a.Approved && a.Confirmed == nil {
			return "an approval needs confirmed"
		}
		if !a.Approved && a.Reason == nil {
			return "a denial needs a reason"
		}
	case *protocol.ChatToolCallCompleteAction, *protocol.ChatToolCallContentChangedAction:
		// Only a tool the client itself runs is the client's to complete.
		return "the tool call is not run by this client"
	case *protocol.ChatTruncatedAction:
		if a.TurnID != nil && !hasTurn(s, *a.TurnID) {
			return fmt.Sprintf("no turn %s to truncate after", protocol.Quote(*a.TurnID))
		}
	}
	return ""
}

func hasTurn(s *protocol.ChatState, id string) bool {
	for _, t := range s.Turns {
		if t.ID == id {
			return true
		}
	}
	return false
}

// RejectUnchanged reports whether a client action that changed nothing is
// refused (a tool call not waiting, a request nobody asked) rather than
// accepted as a no-op.
func RejectUnchanged(a protocol.Action) string {
	switch a.(type) {
	case *protocol.ChatToolCallConfirmedAction:
		return "the tool call is not waiting for confirmation"
	case *protocol.ChatToolCallResultConfirmedAction:
		return "the tool call's result is not waiting for confirmation"
	case *protocol.ChatInputAnswerChangedAction, *protocol.ChatInputCompletedAction:
		return "no open input request with that id"
	case *protocol.ChatPendingMessageRemovedAction:
		return "no pending message with that id and kind"
	}
	return ""
}

// React does what an applied client action asks of the runner. Called with
// the owner's lock held, after Apply.
func (c *Chat) React(a protocol.Action) {
	switch a := a.(type) {
	case *protocol.ChatTurnStartedAction:
		c.begin(a.TurnID, a.Message)
	case *protocol.ChatTurnResumeAction:
		if at := c.state.ActiveTurn; at != nil && at.ID == a.TurnID {
			c.resume(at)
		}
	case *protocol.ChatTurnCancelledAction:
		c.cancel(a.TurnID)
		c.dropSteeringLocked()
	case *protocol.ChatTruncatedAction:
		if c.run != nil && c.state.ActiveTurn == nil {
			c.cancel(c.run.turnID)
		}
	case *protocol.ChatToolCallConfirmedAction:
		if ch, ok := c.confirm[a.ToolCallID]; ok {
			delete(c.confirm, a.ToolCallID)
			ch <- a.Approved
		}
	case *protocol.ChatInputCompletedAction:
		if ch, ok := c.answers[a.RequestID]; ok {
			delete(c.answers, a.RequestID)
			ch <- c.answerOf(a)
		}
	case *protocol.ChatPendingMessageSetAction:
		if a.Kind == protocol.PendingMessageKindQueued {
			c.consumeQueued()
		} else {
			c.steer()
		}
	}
}

// steer hands a steering message to the running turn's agent or, with no
// turn running, starts one with it as a queued message would be started.
// Called with the owner's lock held.
func (c *Chat) steer() {
	if r, at := c.run, c.state.ActiveTurn; r != nil && at != nil && at.ID == r.turnID {
		select {
		case r.steered <- struct{}{}:
		default: // already told
		}
		return
	}
	c.consumeSteering()
}

// consumeSteering starts the steering message as a turn when the chat is
// idle. Called with the owner's lock held.
func (c *Chat) consumeSteering() {
	s := c.state
	if c.held || s.ActiveTurn != nil || c.run != nil || s.SteeringMessage == nil {
		return
	}
	next := *s.SteeringMessage
	c.owner.Emit(c, &protocol.ChatPendingMessageRemovedAction{Kind: protocol.PendingMessageKindSteering, ID: next.ID})
	c.startPending(next, nil)
}

// dropSteeringLocked forgets the steering message of a turn that was
// cancelled or failed: it was meant for that turn, and starting it as
// another would go on with what the user stopped. Called with the owner's
// lock held.
func (c *Chat) dropSteeringLocked() {
	if m := c.state.SteeringMessage; m != nil && c.state.ActiveTurn == nil {
		c.owner.Emit(c, &protocol.ChatPendingMessageRemovedAction{Kind: protocol.PendingMessageKindSteering, ID: m.ID})
	}
}

// answerOf collects the final answers of a completed input request: the
// drafts the reducer kept and the ones the completion carried.
func (c *Chat) answerOf(a *protocol.ChatInputCompletedAction) plugins.Answer {
	ans := plugins.Answer{Response: a.Response, Answers: a.Answers.Clone()}
	if t := c.state.ActiveTurn; t != nil {
		for _, p := range t.ResponseParts {
			if ir, ok := p.(*protocol.InputRequestResponsePart); ok && ir.Request.ID == a.RequestID {
				ans.Answers = ir.Request.Answers.Clone()
			}
		}
	}
	return ans
}

// TakeQueued starts the first queued message when the chat is idle, as a
// chat does once a turn ends: a host that starts again with messages left
// queued sends them. Called with the owner's lock held.
func (c *Chat) TakeQueued() { c.consumeQueued() }

// consumeQueued starts the first queued message when the chat is idle.
// Called with the owner's lock held.
func (c *Chat) consumeQueued() {
	s := c.state
	if c.held || s.ActiveTurn != nil || c.run != nil || len(s.QueuedMessages) == 0 {
		return
	}
	next := s.QueuedMessages[0]
	c.owner.Emit(c, &protocol.ChatPendingMessageRemovedAction{Kind: protocol.PendingMessageKindQueued, ID: next.ID})
	c.startPending(next, new(next.ID))
}

// startPending starts a turn with a pending message the chat has just
// let go of. Called with the owner's lock held.
func (c *Chat) startPending(next protocol.PendingMessage, queuedID *string) {
	turnID := "turn-" + next.ID
	for hasTurn(c.state, turnID) {
		turnID += "'"
	}
	started := &protocol.ChatTurnStartedAction{
		TurnID:          turnID,
		StartedAt:       protocol.FormatTime(c.now()),
		Message:         next.Message,
		QueuedMessageID: queuedID,
	}
	if c.owner.Emit(c, started) {
		c.begin(turnID, next.Message)
	}
}

// Close lets the chat's agent go and waits for a running turn to end.
// The caller must not hold the owner's lock.
func (c *Chat) Close() error {
	c.agentMu.Lock()
	defer c.agentMu.Unlock()
	return c.closeLocked()
}

// closeLocked closes the agent, if any, and forgets it. Called with
// agentMu held.
func (c *Chat) closeLocked() error {
	if c.agent == nil {
		return nil
	}
	if !canResume(c.agent) {
		c.forgot = true
		c.onlyHere.Store(true)
	}
	err := c.agent.Close()
	c.agent = nil
	c.setLive(nil)
	return err
}

// Hold keeps the chat from starting turns of its own accord: a queued
// message stays queued. The host holds its chats when it shuts down.
// Called with the owner's lock held.
func (c *Chat) Hold() { c.held = true }

// Stop lets the chat's agent go for good, as the host does when it shuts
// down: the agent is closed as Close does, and none starts again (a turn
// that would start one fails with ErrStopped). If ctx ends before the
// agent has closed, it is killed (plugins.Killer). A running turn should
// have ended first (see Cancel and Kill). The caller must not hold the
// owner's lock.
func (c *Chat) Stop(ctx context.Context) error {
	c.agentMu.Lock()
	defer c.agentMu.Unlock()
	c.stopped = true
	if c.agent == nil {
		return nil
	}
	killed := make(chan struct{})
	stopKill := context.AfterFunc(ctx, func() {
		defer close(killed)
		c.Kill()
	})
	err := c.closeLocked()
	if !stopKill() {
		<-killed // the kill began: it ends before Stop does
	}
	return err
}

// Kill kills the chat's agent at once, if it runs and its backend can
// (plugins.Killer): a turn in progress, and a Close under way, then end
// without waiting for the agent. It takes no lock, so it reaches an agent
// that a Close is waiting for.
func (c *Chat) Kill() {
	if l := c.live.Load(); l != nil {
		if k, ok := l.a.(plugins.Killer); ok {
			k.Kill()
		}
	}
}

func (c *Chat) setLive(a plugins.Agent) {
	if a == nil {
		c.live.Store(nil)
		return
	}
	c.live.Store(&liveAgent{a})
}

// Configure hands the session's config values, as latest reads them, to
// the chat's agent, if it runs and takes them. latest is read holding the
// agent's lock, so of two Configures the values the agent ends with are
// the newest, and an agent starting meanwhile is configured once it has.
// The caller must not hold the owner's lock.
func (c *Chat) Configure(latest func() protocol.Object) {
	c.agentMu.Lock()
	defer c.agentMu.Unlock()
	if r, ok := c.agent.(plugins.Reconfigurer); ok {
		r.SetConfig(latest())
	}
}

// ConversationID returns the id of the conversation the chat's agent runs,
// once it has started. It takes no lock.
func (c *Chat) ConversationID() string {
	if id := c.convID.Load(); id != nil {
		return *id
	}
	return ""
}

// CanLetGo reports whether the chat's agent may be closed without losing
// its conversation: there is none, it died (there is nothing left to
// lose), or it can be resumed. The host lets a session fall asleep of
// itself only then; a client suspending it lets the agent go all the
// same, and the chat's next turn then starts with RestartNote.
func (c *Chat) CanLetGo() bool {
	c.agentMu.Lock()
	defer c.agentMu.Unlock()
	return c.agent == nil || dead(c.agent) || canResume(c.agent)
}

// canResume reports whether a's conversation survives its Close.
func canResume(a plugins.Agent) bool {
	r, ok := a.(plugins.Resumable)
	return ok && r.CanResume()
}

// dead reports whether a ended of itself (plugins.Mortal).
func dead(a plugins.Agent) bool {
	m, ok := a.(plugins.Mortal)
	if !ok {
		return false
	}
	select {
	case <-m.Dead():
		return true
	default:
		return false
	}
}

// Warm starts the chat's agent now rather than at its next turn. The
// caller must not hold the owner's lock.
func (c *Chat) Warm(ctx context.Context) error {
	if _, err := c.agentFor(ctx); err != nil {
		return err
	}
	c.owner.Started(c)
	return nil
}

// HasAgent reports whether the chat's agent is running. It takes no lock.
func (c *Chat) HasAgent() bool { return c.live.Load() != nil }
