package claude

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// errClosed is the error of a turn asked of, or cut short by, a closed
// agent.
var errClosed = errors.New("claude: agent is closed")

// Agent is one conversation in a running CLI. The CLI is started with the
// agent and started again, resuming the conversation, before a turn that
// finds it gone or running with config that has since changed; a turn
// that picks another model switches it (model.go).
type Agent struct {
	b          *Backend
	command    string
	conv       plugins.Conversation
	realDir    string // conv.Dir with links resolved: what the CLI sees
	id         string // the CLI's session id
	transcript string
	log        *slog.Logger

	// closing is done once Close is called; a running turn then
	// interrupts the CLI and ends.
	closing context.Context
	close   context.CancelFunc
	// running counts the Prompt in progress; Add only under mu while
	// !closed.
	running sync.WaitGroup

	mu     sync.Mutex
	config protocol.Object
	// picked is the model the client picked for the turn running or last
	// run (message.model), over the config's; "" runs the config's
	// (wantedModel).
	picked     string
	closed     bool
	prompting  bool
	proc       *process
	hasSession bool

	// usedIDs holds the message ids the conversation has used; a prompt
	// sent under one of them again would be dropped by the CLI as a
	// duplicate. It is nil until the first turn reads the transcript,
	// and touched by one Prompt at a time.
	usedIDs map[string]bool
	// lastTurn is the host's id of the turn the last prompt was for: a
	// prompt for it again is the turn steered (touched by one Prompt at a
	// time).
	lastTurn string
}

var (
	_ plugins.Agent        = (*Agent)(nil)
	_ plugins.Resumable    = (*Agent)(nil)
	_ plugins.Reconfigurer = (*Agent)(nil)
	_ plugins.Killer       = (*Agent)(nil)
)

func newAgent(b *Backend, command string, conv plugins.Conversation, id, transcript string, config protocol.Object) *Agent {
	ctx, cancel := context.WithCancel(context.Background())
	realDir := conv.Dir
	if d, err := filepath.EvalSymlinks(conv.Dir); err == nil {
		realDir = d
	}
	return &Agent{
		b:          b,
		command:    command,
		conv:       conv,
		realDir:    realDir,
		id:         id,
		transcript: transcript,
		log:        b.log.With("session", id),
		closing:    ctx,
		close:      cancel,
		config:     maps.Clone(config),
	}
}

// ID returns the CLI's session id, which is the conversation id when that
// is a UUID and one derived from it otherwise.
func (a *Agent) ID() string { return a.id }

// CanResume reports whether the CLI has the conversation yet, which it
// does once its transcript exists: before the first turn there is
// nothing to resume, and letting the agent go would lose nothing but
// also gain nothing.
func (a *Agent) CanResume() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.hasSession && fileExists(a.transcript) {
		a.hasSession = true
	}
	return a.hasSession
}

// markSession records that the CLI has the conversation.
func (a *Agent) markSession() {
	a.mu.Lock()
	a.hasSession = true
	a.mu.Unlock()
}

// SetConfig takes changed config values. The CLI reads its flags only
// when it starts, so a change that alters them restarts it, resuming the
// conversation, before the next turn.
func (a *Agent) SetConfig(values protocol.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.config = maps.Clone(values)
}

// policy returns the session's permissions as the agent's config gives
// them now: the CLI's permission prompts are answered by them first.
func (a *Agent) policy() *plugins.Policy {
	a.mu.Lock()
	config := a.config
	a.mu.Unlock()
	return plugins.PolicyOf(config, a.conv.Dir)
}

// start starts the CLI, on the model the next turn wants. The caller has
// the agent to itself: it is Start, or the Prompt in progress.
func (a *Agent) start() error {
	a.mu.Lock()
	config := a.cliArgs()
	model := a.wantedModel()
	a.mu.Unlock()
	args := slices.Clone(config)
	if model != "" {
		args = append(args, "--model", model)
	}
	args = append(args,
		"-p",
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--include-partial-messages",
		"--permission-prompt-tool", "stdio",
	)
	// The transcript is the CLI's own record that it has the session: a
	// second --session-id for it would be refused, and --resume without
	// it finds nothing.
	if fileExists(a.transcript) {
		args = append(args, "--resume", a.id)
	} else {
		args = append(args, "--session-id", a.id)
	}
	p, err := startProcess(a.command, args, config, a.conv.Dir, a.b.environ(a.realDir), a.log)
	if err != nil {
		return err
	}
	p.model = model
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		p.kill()
		return errClosed
	}
	a.proc = p
	a.mu.Unlock()
	a.log.Debug("started the CLI", "pid", p.PID(), "args", redactMCP(args))
	return nil
}

// ready returns the CLI to run a turn in, on the model the turn wants:
// (re)started when it is gone or runs with config flags that have
// changed, switched when it runs another model, and restarted on that
// model should the switch fail.
func (a *Agent) ready(ctx context.Context) (*process, error) {
	a.mu.Lock()
	p := a.proc
	fresh := p != nil && p.alive() && slices.Equal(p.args, a.cliArgs())
	model := a.wantedModel()
	a.mu.Unlock()
	if fresh && p.model == model {
		return p, nil
	}
	if fresh {
		err := a.setModel(ctx, p, model)
		if err == nil {
			a.log.Debug("switched the CLI's model", "pid", p.PID(), "model", model)
			p.model = model
			return p, nil
		}
		if ctx.Err() != nil || a.closing.Err() != nil {
			return nil, err
		}
		a.log.Warn("cannot switch the CLI's model; restarting it on the model", "model", model, "err", err)
	}
	if p != nil {
		if p.alive() {
			a.log.Debug("restarting the CLI with changed config", "pid", p.PID())
		} else {
			a.log.Debug("starting the CLI again; it exited", "pid", p.PID(), "err", p.WaitErr())
		}
		p.stop()
		a.mu.Lock()
		if a.proc == p {
			a.proc = nil
		}
		a.mu.Unlock()
	}
	if err := a.start(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc == nil {
		return nil, errClosed
	}
	return a.proc, nil
}

// Prompt runs one turn: msg goes to the CLI as a user message and what the
// CLI prints until the turn's result is reported to t.
func (a *Agent) Prompt(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		return errClosed
	case a.prompting:
		a.mu.Unlock()
		return errors.New("claude: a turn is already running")
	}
	a.prompting = true
	a.running.Add(1)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.prompting = false
		a.mu.Unlock()
		a.running.Done()
	}()

	if err := ctx.Err(); err != nil {
		return err
	}
	text := msg.Text
	turnID := t.ID()
	if c, ok := t.(*continued); ok {
		turnID = c.Turn.ID()
	}
	steering := turnID != "" && turnID == a.lastTurn
	if !steering {
		// A turn runs on the model its message picked; a steering message
		// goes to the CLI running the turn, whatever it names.
		a.pick(msg.Model)
	}
	p, err := a.ready(ctx)
	if err != nil {
		return err
	}
	if steering {
		// The turn has had its prompt: this is a steering message, which
		// the transcript reader folds into the turn.
		text = steerMarker + "\n\n" + text
	}
	a.lastTurn = turnID
	in := userInput{
		Type:    "user",
		UUID:    a.messageID(t.ID()),
		Message: userMessage{Role: "user", Content: text},
	}
	return newTurnRun(a, p, t).run(ctx, in)
}

// continueMarker starts the message that asks the CLI to go on with a turn
// its process died in (chat/turnResume). The transcript reader folds it,
// and what follows, into that turn.
const continueMarker = "[ahpd: your previous reply was cut short when your process stopped.]"

// steerMarker starts a message a client sent while a turn ran (a steering
// message), which the CLI gets once its reply ends. The transcript reader
// folds it, and what follows, into the turn.
const steerMarker = "[ahpd: the user adds, while you work on this turn:]"

// Continue goes on with a turn the CLI's process died in
// (plugins.Continuer): the CLI, started again on the conversation, is
// asked to pick up where it stopped, and the rest of its reply is the
// turn's. A CLI that died before it wrote the turn's prompt down never
// had it: then the prompt is sent again.
func (a *Agent) Continue(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	if !transcriptIDs(a.transcript)[t.ID()] {
		return a.Prompt(ctx, msg, t)
	}
	return a.Prompt(ctx, protocol.Message{Text: continueMarker + " Continue where you left off.", Origin: msg.Origin, Model: msg.Model}, &continued{t})
}

var _ plugins.Continuer = (*Agent)(nil)

// continued is a turn going on: it keeps its id, but its message is not
// the turn's first, so it is sent under an id of its own.
type continued struct{ plugins.Turn }

func (continued) ID() string { return "" }

// messageID returns the id to send a prompt under: the host's turn id,
// which the CLI then records and Turns reads back, unless the
// conversation has used it already.
func (a *Agent) messageID(turnID string) string {
	used := a.used()
	if turnID == "" || used[turnID] {
		turnID = newUUID()
	}
	used[turnID] = true
	return turnID
}

// used returns the ids prompts went out under in the conversation.
func (a *Agent) used() map[string]bool {
	if a.usedIDs == nil {
		a.usedIDs = transcriptIDs(a.transcript)
	}
	return a.usedIDs
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return formatUUID(u[:])
}

// Close ends the agent: a running turn is interrupted and ends, then the
// CLI's stdin is closed, which makes it exit, and it is killed with
// everything it started if it does not. Nothing the agent started runs
// once Close returns. Closing twice is harmless.
func (a *Agent) Close() error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.close()
	a.running.Wait()
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	if p != nil {
		// Still a.proc while it stops, for Kill to reach.
		p.stop()
	}
	a.mu.Lock()
	if a.proc == p {
		a.proc = nil
	}
	a.mu.Unlock()
	return nil
}

// Kill kills the CLI and everything it started, at once (plugins.Killer):
// a turn in progress ends, as cancelled if it was and as interrupted if
// not, and a Close under way returns without waiting for the CLI to
// exit. A later turn starts the CLI again.
func (a *Agent) Kill() {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	if p != nil {
		p.kill()
	}
}
