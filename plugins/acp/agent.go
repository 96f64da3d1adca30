package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// errClosed is the error of a turn asked of a closed agent.
var errClosed = errors.New("acp: agent is closed")

// Agent is one conversation with an ACP agent: one process, one session.
type Agent struct {
	in          *instance
	log         *slog.Logger
	session     sdk.SessionId
	canResume   bool
	cancelGrace time.Duration

	// life ends at Close; work the agent does outside a turn (config
	// changes) runs under it.
	life     context.Context
	stopLife context.CancelFunc

	mu        sync.Mutex
	closed    bool
	prompting bool
	options   sessionOptions
	wg        sync.WaitGroup // goroutines of turns and config changes; Add only under mu while !closed

	// Config values waiting to be sent, and whether configLoop runs.
	pendingConfig protocol.Object
	configuring   bool

	// dir is the folder the session's permissions are bound to; the
	// client holds them (client.policy).
	dir string
}

var (
	_ plugins.Agent        = (*Agent)(nil)
	_ plugins.Reconfigurer = (*Agent)(nil)
	_ plugins.Resumable    = (*Agent)(nil)
	_ plugins.Killer       = (*Agent)(nil)
	_ plugins.Mortal       = (*Agent)(nil)
)

// newAgent opens the session of opts on a launched instance.
func newAgent(ctx context.Context, b *Backend, in *instance, opts plugins.StartOptions) (*Agent, error) {
	caps := in.caps()
	life, stop := context.WithCancel(context.Background())
	a := &Agent{
		in:          in,
		log:         b.log,
		canResume:   caps.LoadSession || caps.SessionCapabilities.Resume != nil,
		cancelGrace: b.cancelGrace,
		life:        life,
		stopLife:    stop,
		dir:         opts.Conversation.Dir,
	}
	in.client.policy.Store(plugins.PolicyOf(opts.Config, a.dir))
	if err := a.open(ctx, opts); err != nil {
		stop()
		return nil, err
	}
	a.log = a.log.With("session", a.session)
	b.learn(a.options)
	a.applyConfig(ctx, opts.Config)
	return a, nil
}

// open loads, resumes or creates the session. A conversation the agent
// cannot bring back starts anew under a new id, which the host records.
func (a *Agent) open(ctx context.Context, opts plugins.StartOptions) error {
	conv := opts.Conversation
	caps := a.in.caps()
	servers := mcpServers(opts.Config, caps)
	if opts.Resume {
		id := sdk.SessionId(conv.ID)
		var err error
		switch {
		case caps.LoadSession:
			// The agent replays the conversation; the host has it
			// already, so the replay goes nowhere.
			var resp sdk.LoadSessionResponse
			a.in.client.setSink(discard{})
			resp, err = a.in.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: conv.Dir, McpServers: servers})
			a.in.client.setSink(nil)
			if err == nil {
				a.session = id
				a.options = sessionOptions{models: resp.Models, modes: resp.Modes, config: resp.ConfigOptions}
				return nil
			}
		case caps.SessionCapabilities.Resume != nil:
			var resp sdk.ResumeSessionResponse
			resp, err = a.in.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: id, Cwd: conv.Dir, McpServers: servers})
			if err == nil {
				a.session = id
				a.options = sessionOptions{models: resp.Models, modes: resp.Modes, config: resp.ConfigOptions}
				return nil
			}
		default:
			err = errors.New("the agent can neither load nor resume sessions")
		}
		if a.in.broken() || ctx.Err() != nil {
			return a.in.failure(ctx, "resuming the session", err)
		}
		a.log.Warn("cannot resume the conversation; starting a new one", "conversation", conv.ID, "err", err)
	}
	resp, err := a.in.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: conv.Dir, McpServers: servers})
	if err != nil {
		return a.in.failure(ctx, "creating a session", err)
	}
	if resp.SessionId == "" {
		return fmt.Errorf("acp: %s: the agent created a session without an id", a.in.name)
	}
	a.session = resp.SessionId
	a.options = sessionOptions{models: resp.Models, modes: resp.Modes, config: resp.ConfigOptions}
	return nil
}

// ID returns the agent's session id, which is the conversation's id.
func (a *Agent) ID() string { return string(a.session) }

// CanResume reports whether the agent can bring the conversation back in
// a new process, by loading or resuming its session (plugins.Resumable).
func (a *Agent) CanResume() bool { return a.canResume }

// pid returns the agent's process id (for tests).
func (a *Agent) pid() int { return a.in.proc.PID() }

// Prompt sends msg to the agent and reports the turn to t until the
// agent answers with its stop reason.
//
// A cancelled ctx is passed on as session/cancel; the agent then ends
// the turn itself, and one that does not within the grace period is
// killed. If the agent dies during the turn, the error quotes its stderr;
// the Agent is then of no more use, and the next Start launches a new
// process.
func (a *Agent) Prompt(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		return errClosed
	case a.prompting:
		a.mu.Unlock()
		return errors.New("acp: a turn is already running")
	}
	a.prompting = true
	a.wg.Add(1) // the prompt request's goroutine
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.prompting = false
		a.mu.Unlock()
	}()

	if !a.in.alive() {
		a.wg.Done()
		return a.interrupted(a.in.failure(ctx, "starting a turn", nil))
	}
	a.selectModel(ctx, msg.Model)

	// The turn's questions are not cancelled with ctx, but by cancelTurn
	// once the agent was told.
	run := newTurnRun(context.WithoutCancel(ctx), t, a.log)
	run.flush = a.in.client.box.flush
	run.policy = a.in.client.policy.Load
	a.in.client.setSink(run)
	defer func() {
		a.in.client.setSink(nil)
		run.end()
	}()

	req := sdk.PromptRequest{
		SessionId: a.session,
		Prompt:    []sdk.ContentBlock{sdk.TextBlock(msg.Text)},
	}
	if id := t.ID(); isUUID(id) {
		// Agents that keep message ids replay them with the session, so
		// Turns can give the turn back under its id.
		req.MessageId = &id
	}
	done := make(chan promptResult, 1)
	// The request is not made under ctx: cancelling is the agent's to
	// do, and the turn ends when it answers.
	go func() {
		defer a.wg.Done()
		resp, err := a.in.conn.Prompt(context.Background(), req)
		done <- promptResult{resp, err}
	}()

	// An agent that dies ends its connection (instance.watch), and the
	// request with it.
	var r promptResult
	select {
	case r = <-done:
	case <-ctx.Done():
		a.cancelTurn(run, done)
		return ctx.Err()
	}
	// What the agent said before it answered (or went) belongs to the
	// turn, before anything the answer adds.
	a.in.client.box.flush()
	if r.err != nil {
		if a.isClosed() {
			return errClosed
		}
		if !a.in.alive() {
			return a.interrupted(a.in.failure(ctx, "running the turn", r.err))
		}
		return a.in.failure(ctx, "running the turn", r.err)
	}
	if u := r.resp.Usage; u != nil {
		info := usageInfo(*u)
		// ACP's usage names no model: the turn ran on the session's
		// current one, which selectModel set.
		if m := a.currentModel(); m != "" {
			info.Model = &m
		}
		t.Usage(info)
	}
	switch r.resp.StopReason {
	case sdk.StopReasonCancelled:
		// Cancelled by the agent, or by someone else through it.
		return context.Canceled
	case sdk.StopReasonRefusal:
		run.update("agent_message_chunk", sdk.UpdateAgentMessageText("\n\n*The agent refused to continue.*"))
	case sdk.StopReasonEndTurn, sdk.StopReasonMaxTokens, sdk.StopReasonMaxTurnRequests:
	default:
		a.log.Debug("unknown stop reason", "stopReason", r.resp.StopReason)
	}
	return nil
}

// interrupted marks the error of a turn the agent's process died in: the
// host starts a new process and may continue the turn, when the agent can
// bring the conversation back.
func (a *Agent) interrupted(err error) error {
	if a.canResume {
		return plugins.Interrupted(err)
	}
	return err
}

// continueText is the prompt that asks an agent started again to go on
// with the turn its last process died in.
const continueText = "Your previous reply was cut short when your process stopped. Continue where you left off."

// Continue goes on with a turn the agent's process died in
// (plugins.Continuer): the agent, started again on its session, is asked
// to pick up where it stopped, and the rest of its reply is the turn's.
func (a *Agent) Continue(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	return a.Prompt(ctx, protocol.Message{Text: continueText, Origin: msg.Origin, Model: msg.Model}, continued{t})
}

// continued is a turn going on: its message is not the turn's first, so
// it is not sent under the turn's id.
type continued struct{ plugins.Turn }

func (continued) ID() string { return "" }

var _ plugins.Continuer = (*Agent)(nil)

// promptResult is the agent's answer to a prompt.
type promptResult struct {
	resp sdk.PromptResponse
	err  error
}

// cancelTurn asks the agent to stop the turn and waits for its answer to
// the prompt, killing it if the answer does not come within the grace
// period.
//
// ACP wants session/cancel sent before the cancelled answers to the
// permission requests still open, so the turn's questions are cancelled
// only once it is written: the agent then knows why it got them. It is
// also written before the next prompt can be, which it would cancel.
func (a *Agent) cancelTurn(run *turnRun, done <-chan promptResult) {
	sent := make(chan struct{})
	a.mu.Lock()
	if a.closed {
		close(sent)
	} else {
		a.wg.Add(1)
		// Sent on its own: writing to an agent that reads nothing
		// blocks, and must not hold up the kill.
		go func() {
			defer a.wg.Done()
			defer close(sent)
			if err := a.in.conn.Cancel(context.Background(), sdk.CancelNotification{SessionId: a.session}); err != nil {
				a.log.Debug("session/cancel not sent", "err", err)
			}
		}()
	}
	a.mu.Unlock()

	timer := time.NewTimer(a.cancelGrace)
	defer timer.Stop()
	expired := false
	select {
	case <-sent:
	case <-timer.C:
		expired = true
	}
	run.cancel()
	if !expired {
		select {
		case r := <-done:
			if r.err != nil {
				a.log.Debug("cancelled turn ended with an error", "err", r.err)
			}
			return
		case <-timer.C:
		}
	}
	a.log.Warn("the agent did not end the cancelled turn in time; killing it", "grace", a.cancelGrace)
	a.in.proc.kill()
	<-done
}

// Close ends the agent's process and everything it started, and waits
// for every goroutine of the agent to end. The session stays with the
// agent, to be loaded or resumed by a later Start. Closing twice is
// harmless.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	a.stopLife()
	a.in.close()
	a.wg.Wait()
	return nil
}

// Dead is closed once the agent can take no more turns
// (plugins.Mortal): its connection ended, because its process exited or
// was killed, or because it broke the connection, which stops the
// process. The chat then starts a new agent for the conversation.
func (a *Agent) Dead() <-chan struct{} { return a.in.conn.Done() }

// Kill kills the agent's process and everything it started, at once
// (plugins.Killer): a turn in progress ends, cancelled if it was, and a
// Close under way returns without waiting out its grace. The Agent is of
// no more use after; the next Start launches a new process.
func (a *Agent) Kill() {
	a.in.proc.kill()
}

func (a *Agent) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// selectModel switches the session to the model the message asks for,
// when the agent offers it. A model the agent cannot switch to is
// logged, and the turn runs with the current one.
func (a *Agent) selectModel(ctx context.Context, m *protocol.ModelSelection) {
	if m == nil || m.ID == "" {
		return
	}
	a.mu.Lock()
	models := a.options.models
	a.mu.Unlock()
	if models == nil || string(models.CurrentModelId) == m.ID {
		return
	}
	if !offersModel(models, m.ID) {
		a.log.Debug("model not offered by the agent", "model", m.ID)
		return
	}
	_, err := a.in.conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{
		SessionId: a.session,
		ModelId:   sdk.UnstableModelId(m.ID),
	})
	if err != nil {
		a.log.Warn("cannot switch model", "model", m.ID, "err", err)
		return
	}
	changed := *models
	changed.CurrentModelId = sdk.ModelId(m.ID)
	a.mu.Lock()
	a.options.models = &changed
	a.mu.Unlock()
}

// currentModel returns the model the session runs, or "" for an agent
// that reported no models.
func (a *Agent) currentModel() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.options.models == nil {
		return ""
	}
	return string(a.options.models.CurrentModelId)
}

// usageInfo converts ACP's token counts.
func usageInfo(u sdk.Usage) protocol.UsageInfo {
	info := protocol.UsageInfo{
		InputTokens:  new(int64(u.InputTokens)),
		OutputTokens: new(int64(u.OutputTokens)),
	}
	if u.CachedReadTokens != nil {
		info.CacheReadTokens = new(int64(*u.CachedReadTokens))
	}
	return info
}

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// isUUID reports whether s is a UUID, the only form ACP message ids take.
func isUUID(s string) bool { return uuidPattern.MatchString(s) }
