package chats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// run is one turn on its way through the agent.
type run struct {
	turnID  string
	started time.Time
	cancel  context.CancelFunc
	stop    context.CancelCauseFunc // cancels it with a reason the turn ends with: an input timeout, or End
	done    chan struct{}
	after   <-chan struct{} // the run before, cancelled and still ending
	steered chan struct{}   // signalled when a steering message is left for the turn

	// Guarded by the owner's lock.
	textPart      string // the markdown part text goes into
	reasoningPart string // the reasoning part reasoning goes into
	parts         int
	tools         map[string]bool // tool calls started
}

// begin starts the runner of a turn the state already holds. Called with
// the owner's lock held.
func (c *Chat) begin(turnID string, msg protocol.Message) {
	c.launch(c.newRun(turnID, c.now()), msg, false)
}

// resume starts the runner of a turn chat/turnResume reopened: the agent
// continues it, and it keeps its start, so its duration when it ends is
// from when it first started. Called with the owner's lock held.
func (c *Chat) resume(at *protocol.ActiveTurn) {
	started, err := time.Parse(time.RFC3339Nano, at.StartedAt)
	if err != nil {
		started = c.now()
	}
	r := c.newRun(at.ID, started)
	r.parts = len(at.ResponseParts) // new parts follow the ones it has
	c.launch(r, at.Message, true)
}

func (c *Chat) newRun(turnID string, started time.Time) *run {
	return &run{turnID: turnID, started: started, done: make(chan struct{}), steered: make(chan struct{}, 1), tools: map[string]bool{}}
}

func (c *Chat) launch(r *run, msg protocol.Message, resume bool) {
	ctx, stop := context.WithCancelCause(context.Background())
	r.cancel, r.stop = func() { stop(nil) }, stop
	if prev := c.run; prev != nil {
		// Its turn has ended for the clients; the agent takes one prompt
		// at a time, so this one waits for it to let go.
		prev.cancel()
		r.after = prev.done
	}
	c.run = r
	go c.drive(ctx, r, msg, resume)
}

// cancel stops the running turn. Called with the owner's lock held.
func (c *Chat) cancel(turnID string) {
	if c.run != nil && c.run.turnID == turnID {
		c.run.cancel()
	}
}

// End ends the running turn, if any, as an error saying why (the host
// cannot go on with it: its journal's disk is full), and returns a
// channel closed once it has ended. Called with the owner's lock held.
func (c *Chat) End(why error) <-chan struct{} {
	if c.run == nil {
		return c.Done()
	}
	c.run.stop(why)
	return c.run.done
}

// Cancel stops the running turn, if any, and returns a channel closed once
// it has ended. Called with the owner's lock held.
func (c *Chat) Cancel() <-chan struct{} {
	if c.run == nil {
		return c.Done()
	}
	c.run.cancel()
	return c.run.done
}

// Done returns a channel closed once the running turn, if any, has ended,
// and the owner has been told (Owner.Ended may still be at work for the
// turn before). Called with the owner's lock held.
func (c *Chat) Done() <-chan struct{} {
	switch {
	case c.run != nil:
		return c.run.done
	case c.last != nil:
		return c.last.done
	}
	return closed
}

var closed = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// drive takes a turn through the agent and ends it.
func (c *Chat) drive(ctx context.Context, r *run, msg protocol.Message, resume bool) {
	defer close(r.done)
	defer r.cancel()
	if r.after != nil {
		<-r.after
	}
	var agent plugins.Agent
	err := c.ready(ctx)
	if err == nil {
		agent, err = c.agentFor(ctx)
		if err != nil {
			err = fmt.Errorf("starting the agent: %w", err)
		}
	}
	if err != nil {
		state := c.end(r, err, false, false)
		// The session learns of the failure before the chat takes another
		// turn, so a retry finds the start still owed.
		c.owner.StartFailed(c, err)
		c.settle(r, state)
		return
	}
	c.owner.Started(c)
	t := &turn{c: c, r: r}
	if c.takeNote() {
		c.owner.Do(t.restartNoteLocked)
	}
	cont, canContinue := agent.(plugins.Continuer)
	switch {
	case !resume:
		err = agent.Prompt(ctx, msg, t)
	case canContinue:
		err = cont.Continue(ctx, msg, t)
	default:
		err = errors.New("this agent cannot continue a turn")
	}
	// A steering message the agent did not take while it worked is its
	// next prompt, in the same turn.
	for err == nil {
		m, ok := t.Steer()
		if !ok {
			break
		}
		err = agent.Prompt(ctx, m, t)
	}
	interrupted := plugins.IsInterrupted(err)
	if died := dead(agent); interrupted || died {
		// Its process may be gone: the next turn, or the resume of this
		// one, starts the conversation's agent anew.
		c.dropAgent(agent)
		if died && err != nil && !interrupted && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w (the agent has stopped: the next message starts it again)", err)
		}
	}
	// A turn stopped for a reason (waiting too long on a person, End)
	// ends saying so, whatever the agent made of being stopped.
	if why := context.Cause(ctx); why != nil && !errors.Is(why, context.Canceled) {
		err, interrupted = why, false
	}
	c.settle(r, c.end(r, err, true, interrupted && canContinue))
}

// dropAgent closes the chat's agent, if it is still agent, and forgets it.
func (c *Chat) dropAgent(agent plugins.Agent) {
	c.agentMu.Lock()
	defer c.agentMu.Unlock()
	if c.agent != agent {
		return
	}
	_ = c.closeLocked() // it was interrupted or died: how it closes says nothing new
}

// takeNote reports whether the turn about to reach the agent is to start
// with RestartNote, once.
func (c *Chat) takeNote() bool {
	c.agentMu.Lock()
	defer c.agentMu.Unlock()
	due := c.noteDue
	c.noteDue = false
	return due
}

// ready runs the owner's preparation for a turn, if it has one.
func (c *Chat) ready(ctx context.Context) error {
	if c.prepare == nil {
		return nil
	}
	return c.prepare(ctx)
}

// agentFor returns the chat's agent, starting it on first use and after
// the one before died.
func (c *Chat) agentFor(ctx context.Context) (plugins.Agent, error) {
	c.agentMu.Lock()
	defer c.agentMu.Unlock()
	if c.agent != nil && dead(c.agent) {
		// It died between turns: it is of no more use.
		_ = c.closeLocked()
	}
	if c.agent != nil {
		return c.agent, nil
	}
	if c.stopped {
		return nil, ErrStopped
	}
	if c.start == nil {
		return nil, errors.New("the chat has no backend")
	}
	before := c.ConversationID()
	a, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	c.agent = a
	id := a.ID()
	// A conversation under another id is a new one: the backend could
	// not bring the old one back.
	if moved := before != "" && id != before; c.forgot || moved {
		c.noteDue = true
		if moved {
			c.onlyHere.Store(true)
		}
	}
	c.forgot = false
	c.convID.Store(&id)
	c.setLive(a)
	return a, nil
}

// end ends the turn with the action its outcome calls for. A turn the
// client cancelled has ended already, and its ending action changes
// nothing. With release the chat takes a next turn from the moment a
// client sees this one end: a client that answers the end with a new
// message must not be told a turn is still running.
func (c *Chat) end(r *run, err error, release, resumable bool) protocol.TurnState {
	duration := c.now().Sub(r.started).Milliseconds()
	state := protocol.TurnStateComplete
	var end protocol.Action
	switch {
	case err == nil:
		end = &protocol.ChatTurnCompleteAction{TurnID: r.turnID, Duration: duration}
	case errors.Is(err, context.Canceled):
		state = protocol.TurnStateCancelled
		end = &protocol.ChatTurnCancelledAction{TurnID: r.turnID, Duration: duration}
	default:
		state = protocol.TurnStateError
		part := protocol.ErrorResponsePart{Error: protocol.ErrorInfo{ErrorType: "agentError", Message: err.Error()}}
		var timeout *plugins.InputTimeoutError
		var typed interface{ ErrorType() string }
		switch {
		case errors.As(err, &timeout):
			part.Error.ErrorType = ErrorInputTimeout
		case errors.As(err, &typed):
			part.Error.ErrorType = typed.ErrorType() // the host's reason (End), not the agent's
		}
		if resumable {
			part.Error.ErrorType = "agentInterrupted"
			part.Resumable = new(true)
		}
		end = &protocol.ChatErrorAction{TurnID: r.turnID, Duration: duration, Part: part}
	}
	c.owner.Do(func() {
		// A steering message was meant for the turn that ended, unless the
		// host stopping ended it (Hold): then it waits for the next.
		if c.owner.Emit(c, end) && state != protocol.TurnStateComplete && !c.held {
			c.dropSteeringLocked()
		}
		if release {
			c.releaseLocked(r)
		}
	})
	return state
}

// releaseLocked lets the chat take its next turn: the run is over and what
// waited on it is woken. Called with the owner's lock held.
func (c *Chat) releaseLocked(r *run) {
	if c.run != r {
		return
	}
	c.run, c.last = nil, r
	for id, p := range c.confirm {
		close(p.ch)
		delete(c.confirm, id)
	}
	for id, ch := range c.answers {
		close(ch)
		delete(c.answers, id)
	}
}

// settle tells the owner the turn is over, then starts a queued message.
func (c *Chat) settle(r *run, state protocol.TurnState) {
	c.owner.Do(func() { c.releaseLocked(r) })
	c.owner.Ended(c, r.turnID, state)
	c.owner.Do(func() {
		// A steering message that came as the turn completed was meant
		// for it: it goes first.
		c.consumeSteering()
		c.consumeQueued()
	})
}

// turn is what the agent reports a turn's progress to.
type turn struct {
	c *Chat
	r *run
}

var _ plugins.Turn = (*turn)(nil)

// emit applies an action of this turn, taking the owner's lock.
func (t *turn) emit(a protocol.Action) {
	t.c.owner.Do(func() { t.c.owner.Emit(t.c, a) })
}

// lastPart returns the id of the active turn's last part, when it is a
// part text can be appended to.
func (t *turn) lastPart() string {
	at := t.c.state.ActiveTurn
	if at == nil || at.ID != t.r.turnID || len(at.ResponseParts) == 0 {
		return ""
	}
	switch p := at.ResponseParts[len(at.ResponseParts)-1].(type) {
	case *protocol.MarkdownResponsePart:
		return p.ID
	case *protocol.ReasoningResponsePart:
		return p.ID
	}
	return ""
}

func (t *turn) ID() string { return t.r.turnID }

// restartNoteLocked starts the response with RestartNote when the chat
// has earlier turns the agent no longer knows. It is a part of its own:
// what the agent says next starts another. Called with the owner's lock
// held.
func (t *turn) restartNoteLocked() {
	if len(t.c.state.Turns) == 0 {
		return
	}
	t.c.owner.Emit(t.c, &protocol.ChatResponsePartAction{TurnID: t.r.turnID,
		Part: &protocol.MarkdownResponsePart{ID: t.newPartID("note"), Content: RestartNote}})
}

func (t *turn) newPartID(kind string) string {
	t.r.parts++
	return t.r.turnID + "." + kind + "-" + strconv.Itoa(t.r.parts)
}

// Text goes into the markdown part at the end of the response, or a new
// one when something else came last. A client must see a part before any
// delta to it, so a new part carries its first text itself.
func (t *turn) Text(s string) {
	if s == "" {
		return
	}
	t.c.owner.Do(func() {
		if id := t.r.textPart; id != "" && t.lastPart() == id {
			t.c.owner.Emit(t.c, &protocol.ChatDeltaAction{TurnID: t.r.turnID, PartID: id, Content: s})
			return
		}
		id := t.newPartID("text")
		if t.c.owner.Emit(t.c, &protocol.ChatResponsePartAction{TurnID: t.r.turnID,
			Part: &protocol.MarkdownResponsePart{ID: id, Content: s}}) {
			t.r.textPart = id
		}
	})
}

// Reasoning goes into a reasoning part of its own, never into text.
func (t *turn) Reasoning(s string) {
	if s == "" {
		return
	}
	t.c.owner.Do(func() {
		if id := t.r.reasoningPart; id != "" && t.lastPart() == id {
			t.c.owner.Emit(t.c, &protocol.ChatReasoningAction{TurnID: t.r.turnID, PartID: id, Content: s})
			return
		}
		id := t.newPartID("reasoning")
		if t.c.owner.Emit(t.c, &protocol.ChatResponsePartAction{TurnID: t.r.turnID,
			Part: &protocol.ReasoningResponsePart{ID: id, Content: s}}) {
			t.r.reasoningPart = id
		}
	})
}

// startLocked opens a tool call once. Called with the owner's lock held.
func (t *turn) startLocked(call plugins.ToolCall) {
	if t.r.tools[call.ID] {
		return
	}
	t.r.tools[call.ID] = true
	name := call.DisplayName
	if name == "" {
		name = call.Name
	}
	t.c.owner.Emit(t.c, &protocol.ChatToolCallStartAction{
		TurnID: t.r.turnID, ToolCallID: call.ID, ToolName: call.Name, DisplayName: name,
	})
}

func (t *turn) ToolStart(call plugins.ToolCall) {
	t.c.owner.Do(func() { t.startLocked(call) })
}

func (t *turn) ToolRunning(id string, invocation protocol.StringOrMarkdown, input string) {
	t.emit(&protocol.ChatToolCallReadyAction{
		TurnID:            t.r.turnID,
		ToolCallID:        id,
		InvocationMessage: invocation,
		ToolInput:         protocol.InlineInput(input),
		Confirmed:         new(protocol.ToolCallConfirmationReasonNotNeeded),
	})
}

// Confirm puts the call in pending-confirmation, with the options a
// person has (confirmOptions), and waits for the client's
// chat/toolCallConfirmed, which React hands over, or for the session's
// inputTimeout. An answer that allowed the call in this session returns
// once the session's agents have the rule it added, so the agent's next
// call like it is decided by it.
func (t *turn) Confirm(ctx context.Context, call plugins.ToolCall) (bool, error) {
	rule := t.sessionRule(call)
	p := &pendingConfirm{ch: make(chan confirmAnswer, 1), rule: rule}
	var w inputWait
	t.c.owner.Do(func() {
		t.startLocked(call)
		t.c.confirm[call.ID] = p
		w = t.c.waitLocked()
		ready := &protocol.ChatToolCallReadyAction{
			TurnID:            t.r.turnID,
			ToolCallID:        call.ID,
			InvocationMessage: call.Invocation,
			ToolInput:         protocol.InlineInput(call.Input),
			Options:           confirmOptions(rule),
		}
		t.c.owner.Emit(t.c, ready)
	})
	defer w.release()
	select {
	case ans, open := <-p.ch:
		if !open {
			return false, context.Canceled
		}
		if ans.configure != nil {
			// Run holding no lock; a turn that ends meanwhile does not
			// wait for it.
			done := make(chan struct{})
			go func() {
				defer close(done)
				ans.configure()
			}()
			select {
			case <-done:
			case <-ctx.Done():
			}
		}
		return ans.ok, nil
	case <-ctx.Done():
		t.c.owner.Do(func() { delete(t.c.confirm, call.ID) })
		return false, ctx.Err()
	case <-w.due:
		t.c.owner.Do(func() { delete(t.c.confirm, call.ID) })
		return false, t.expire(w, "a tool call's confirmation")
	}
}

func (t *turn) ToolDone(id string, result protocol.ToolCallResult) {
	t.emit(&protocol.ChatToolCallCompleteAction{TurnID: t.r.turnID, ToolCallID: id, Result: result})
}

// Ask puts an input request in the turn and waits for the client's
// chat/inputCompleted, which React hands over, or for the session's
// inputTimeout.
func (t *turn) Ask(ctx context.Context, req protocol.ChatInputRequest) (plugins.Answer, error) {
	ch := make(chan plugins.Answer, 1)
	var w inputWait
	replied := false
	var reply plugins.Answer
	t.c.owner.Do(func() {
		if t.c.reply != nil && t.c.reply() {
			if reply, replied = autoReply(req); replied {
				t.c.owner.Emit(t.c, &protocol.ChatInputRequestedAction{Request: req})
				t.c.owner.Emit(t.c, &protocol.ChatInputCompletedAction{RequestID: req.ID, Response: reply.Response, Answers: reply.Answers})
				return
			}
		}
		t.c.answers[req.ID] = ch
		w = t.c.waitLocked()
		t.c.owner.Emit(t.c, &protocol.ChatInputRequestedAction{Request: req})
	})
	if replied {
		return reply, nil
	}
	defer w.release()
	select {
	case ans, open := <-ch:
		if !open {
			return plugins.Answer{}, context.Canceled
		}
		return ans, nil
	case <-ctx.Done():
		t.c.owner.Do(func() { delete(t.c.answers, req.ID) })
		return plugins.Answer{}, ctx.Err()
	case <-w.due:
		t.c.owner.Do(func() { delete(t.c.answers, req.ID) })
		return plugins.Answer{}, t.expire(w, "an answer")
	}
}

func (t *turn) Steered() <-chan struct{} { return t.r.steered }

func (t *turn) Steer() (protocol.Message, bool) {
	var m protocol.Message
	ok := false
	c := t.c
	c.owner.Do(func() {
		s := c.state
		if c.run != t.r || s.ActiveTurn == nil || s.ActiveTurn.ID != t.r.turnID || s.SteeringMessage == nil {
			return
		}
		m, ok = s.SteeringMessage.Message, true
		c.owner.Emit(c, &protocol.ChatPendingMessageRemovedAction{Kind: protocol.PendingMessageKindSteering, ID: s.SteeringMessage.ID})
		// What the agent answers it with starts a part of its own.
		t.r.textPart, t.r.reasoningPart = "", ""
	})
	return m, ok
}

func (t *turn) Usage(u protocol.UsageInfo) {
	t.emit(&protocol.ChatUsageAction{TurnID: t.r.turnID, Usage: u})
}

func (t *turn) Title(s string) { t.c.owner.SetTitle(s) }

// Background lists work the agent runs for the chat outside its turns in
// the chat's state, until it ends.
func (t *turn) Background(w plugins.BackgroundWork, done bool) {
	c := t.c
	var busy bool
	c.owner.Do(func() {
		_, listed := c.background[w.ID]
		switch {
		case done && listed:
			delete(c.background, w.ID)
			c.owner.Emit(c, &protocol.ChatBackgroundWorkRemovedAction{ID: w.ID})
		case !done:
			c.background[w.ID] = true
			c.owner.Emit(c, &protocol.ChatBackgroundWorkSetAction{Work: backgroundWork(w, c.now())})
		}
		c.busy = len(c.background) > 0
		busy = c.busy
	})
	c.owner.Busy(c, busy)
}

// backgroundWork is the protocol's entry of a backend's background work.
func backgroundWork(w plugins.BackgroundWork, now time.Time) protocol.BackgroundWork {
	label := w.Label
	if label == "" {
		label = w.Command
	}
	if w.Chat != "" {
		return &protocol.BackgroundSubagentWork{ID: w.ID, Label: label, StartedAt: protocol.FormatTime(now), Chat: w.Chat}
	}
	return &protocol.BackgroundShellWork{ID: w.ID, Label: label, StartedAt: protocol.FormatTime(now), Command: w.Command}
}
