package script

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// errClosed is the error of a turn asked of, or cut short by, a closed
// agent.
var errClosed = errors.New("script: agent is closed")

// Agent runs one conversation's scripts. Its only work outside a turn is
// the timers "background" steps start, which Close stops. Close also
// waits for a running command and what it started to be stopped.
type Agent struct {
	conv       plugins.Conversation
	transcript string

	// closing is done once Close is called; it cancels a running turn
	// and stops the background timers.
	closing context.Context
	close   context.CancelFunc

	mu        sync.Mutex
	config    protocol.Object
	closed    bool
	prompting bool
	end       transcriptEnd  // where the transcript ends; touched by one Prompt at a time
	timers    sync.WaitGroup // background timers; Add only under mu while !closed
	commands  sync.WaitGroup // running commands; Add only under mu while !closed

}

var _ plugins.Agent = (*Agent)(nil)

func newAgent(conv plugins.Conversation, transcript string, config protocol.Object, end transcriptEnd) *Agent {
	ctx, cancel := context.WithCancel(context.Background())
	return &Agent{
		conv:       conv,
		transcript: transcript,
		closing:    ctx,
		close:      cancel,
		config:     maps.Clone(config),
		end:        end,
	}
}

// ID returns the conversation's id.
func (a *Agent) ID() string { return a.conv.ID }

// CanResume reports that a script conversation survives its agent
// (plugins.Resumable): the transcript is the conversation.
func (a *Agent) CanResume() bool { return true }

var _ plugins.Resumable = (*Agent)(nil)

// SetConfig replaces the session config the agent reads
// (plugins.Reconfigurer); changed permissions apply from the next write
// or run step on.
func (a *Agent) SetConfig(config protocol.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.config = maps.Clone(config)
}

// policy returns the session's permissions as the agent has them now: a
// step asks it before it writes or runs anything.
func (a *Agent) policy() *plugins.Policy {
	a.mu.Lock()
	config := a.config
	a.mu.Unlock()
	return plugins.PolicyOf(config, a.conv.Dir)
}

// Prompt runs msg.Text as a script, one step a line, and records the
// finished turn in the transcript whatever way it ended.
func (a *Agent) Prompt(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	return a.turn(ctx, msg, t, nil)
}

// Continue runs the rest of a turn a crash step interrupted, from the
// step after it (plugins.Continuer): the turn's script comes from msg, and
// where it stopped, with what it had done, from the transcript.
func (a *Agent) Continue(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	last, err := lastRecord(ctx, a.transcript)
	if err != nil {
		return fmt.Errorf("script: reading where the turn stopped: %w", err)
	}
	if last == nil || last.Turn.ID != t.ID() || last.Resume == nil {
		return fmt.Errorf("script: turn %s did not stop where it can go on", t.ID())
	}
	return a.turn(ctx, msg, t, last)
}

var _ plugins.Continuer = (*Agent)(nil)

// turn runs a turn's script and records it: a new turn, or, with from,
// the rest of the one from recorded.
func (a *Agent) turn(ctx context.Context, msg protocol.Message, t plugins.Turn, from *record) error {
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		return errClosed
	case a.prompting:
		a.mu.Unlock()
		return errors.New("script: a turn is already running")
	}
	a.prompting = true
	var seq int64
	if from != nil {
		seq = from.Seq
	} else {
		a.end.seq++
		seq = a.end.seq
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.prompting = false
		a.mu.Unlock()
	}()

	// Close cancels the running turn too, so that a command it runs does
	// not outlive the agent.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(a.closing, func() { cancel(errClosed) })
	defer stop()

	started := time.Now()
	rec := newRecorder(t)
	r := &run{agent: a, turn: rec, seq: seq}
	startLine := 0
	if from != nil {
		started, _ = time.Parse(time.RFC3339Nano, deref(from.Turn.StartedAt))
		rec.parts = from.Turn.ResponseParts
		r.calls, startLine = from.Resume.Calls, from.Resume.Line
	}
	stopped, err := r.script(runCtx, msg.Text, startLine)

	state := protocol.TurnStateComplete
	var turnErr *protocol.ErrorResponsePart
	var resume *resumePoint
	var timeout *plugins.InputTimeoutError
	switch {
	case errors.As(context.Cause(runCtx), &timeout):
		// The host stopped the turn for waiting on a person too long: it
		// ends in that error, as clients saw it.
		state, err = protocol.TurnStateError, timeout
		turnErr = &protocol.ErrorResponsePart{Error: protocol.ErrorInfo{ErrorType: "inputTimeout", Message: timeout.Error()}}
	case err != nil && runCtx.Err() != nil:
		state = protocol.TurnStateCancelled
		// The caller's own cancellation is reported as its ctx.Err();
		// one Close caused is reported as such.
		if ctx.Err() != nil {
			err = ctx.Err()
		} else {
			err = context.Cause(runCtx)
		}
	case err != nil:
		state = protocol.TurnStateError
		turnErr = &protocol.ErrorResponsePart{Error: protocol.ErrorInfo{ErrorType: "runtime", Message: err.Error()}}
		if plugins.IsInterrupted(err) {
			turnErr.Error.ErrorType = "agentInterrupted"
			turnErr.Resumable = new(true)
			resume = &resumePoint{Line: stopped + 1, Calls: r.calls}
		}
	}
	id := t.ID()
	if id == "" {
		id = fmt.Sprintf("turn-%d", seq)
	}
	turn := rec.finish(id, started, msg, state, turnErr)

	a.mu.Lock()
	newlineFirst := a.end.unterminated
	a.mu.Unlock()
	if werr := appendRecord(a.transcript, record{Seq: seq, Turn: turn, Resume: resume}, newlineFirst); werr != nil {
		return errors.Join(err, werr)
	}
	a.mu.Lock()
	a.end.unterminated = false
	a.mu.Unlock()
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Close stops the agent: a running turn is cancelled, and background
// timers end, reporting the agent no longer busy, and a running command's
// process group is stopped before Close returns.
// Closing twice is harmless.
func (a *Agent) Close() error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.close()
	a.timers.Wait()
	a.commands.Wait()
	return nil
}

// commandStarts counts a command in, unless the agent is closed: Close
// waits for the commands it counted, so that none outlives it.
func (a *Agent) commandStarts() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.commands.Add(1)
	return true
}

// commandEnded counts out a command commandStarts counted in.
func (a *Agent) commandEnded() { a.commands.Done() }

// background runs a timer of d in the background, reported to t as
// background work until it ends or the agent closes. Timers may overlap.
func (a *Agent) background(d time.Duration, id string, t plugins.Turn) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return errClosed
	}
	a.timers.Add(1)
	a.mu.Unlock()

	label := "background " + d.String()
	w := plugins.BackgroundWork{ID: id, Label: label, Command: label}
	t.Background(w, false)
	go func() {
		defer a.timers.Done()
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-a.closing.Done():
		}
		t.Background(w, true)
	}()
	return nil
}
