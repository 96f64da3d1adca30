// Package acp runs agents that speak the Agent Client Protocol (ACP) over
// stdio: Gemini CLI, Claude Code's ACP adapter, and any other program
// built on an ACP SDK. One configured agent is one Backend; every
// conversation runs its own agent process, started by Start and ended by
// the Agent's Close.
//
// ahpd plays the ACP client. It serves the agent's file system requests
// and terminals inside the conversation's working directory, and turns
// the agent's permission requests into tool confirmations the user
// answers. The agent keeps the conversation: a restarted host resumes it
// with session/load (or session/resume) and reads its turns back from
// the replay session/load sends.
//
// What ACP or its Go SDK leave out shows here: a prompt carries the
// message's text only, not its attachments; Delete does nothing, there
// being no way to delete a session; an agent's models and config options
// are known only once a session reported them; and the SDK refuses to
// write a file with empty content.
package acp

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// Config describes one ACP agent: how to run it and how to name it.
type Config struct {
	// Name is the provider the backend registers under ("gemini").
	Name string
	// DisplayName names the agent for people; Name if empty.
	DisplayName string
	// Description says what the agent is; a generic line if empty.
	Description string

	// Command is the agent's executable, looked up in PATH when it has no
	// slash, and Args its arguments.
	Command string
	Args    []string
	// Env holds variables added to ahpd's own environment.
	Env map[string]string
	// Dir is the directory the process starts in. Empty means the
	// conversation's working directory, which is always the session's
	// cwd whatever Dir says.
	Dir string

	// StartTimeout bounds starting the agent: spawning it, the ACP
	// handshake and opening the session. Zero means a minute, which
	// leaves room for agents that download themselves on first use.
	StartTimeout time.Duration
	// CancelGrace is how long a cancelled turn waits for the agent to
	// answer the prompt before its process is killed (and the next turn
	// starts a new one). Zero means a second.
	CancelGrace time.Duration
}

// Timeouts the Config does not set.
const (
	defaultStartTimeout = time.Minute
	// defaultTurnsTimeout bounds reading a conversation back: starting the
	// agent and its replay of the session.
	defaultTurnsTimeout = time.Minute
	// defaultCancelGrace is how long a cancelled turn waits for the agent
	// to answer the prompt before the process is killed. ACP asks an agent
	// to stop at once; one that does not within a second ignores the
	// cancel, and the next message must not wait on it.
	defaultCancelGrace = time.Second
	// closeGrace is how long Close waits for the agent to exit on its own
	// once its stdin is closed.
	closeGrace = 2 * time.Second
)

// Backend runs one configured ACP agent. It is safe for concurrent use.
//
// ACP has no way to ask an agent about its models and settings without a
// session, so the backend learns them from the sessions it starts: Info's
// models and ConfigProperties are those the latest session reported, and
// are empty until one started.
type Backend struct {
	cfg Config
	log *slog.Logger

	cancelGrace  time.Duration // changed by tests only
	turnsTimeout time.Duration

	mu      sync.Mutex
	learned sessionOptions

	forks atomic.Bool // the agent launched last can fork (fork.go)
}

var (
	_ plugins.Backend = (*Backend)(nil)
	_ plugins.Checker = (*Backend)(nil)
)

// New returns a backend running the agent cfg describes. A nil logger
// discards the logs. A Config without a Name fails to register, one
// without a Command fails to start.
func New(cfg Config, logger *slog.Logger) *Backend {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{
		cfg:          cfg,
		log:          logger.With("agent", cfg.Name),
		cancelGrace:  cmp.Or(cfg.CancelGrace, defaultCancelGrace),
		turnsTimeout: defaultTurnsTimeout,
	}
}

// Info describes the agent, with the models its latest session offered.
func (b *Backend) Info() protocol.AgentInfo {
	b.mu.Lock()
	models := b.learned.modelInfos(b.cfg.Name)
	b.mu.Unlock()
	return protocol.AgentInfo{
		Provider:     b.cfg.Name,
		DisplayName:  cmp.Or(b.cfg.DisplayName, b.cfg.Name),
		Description:  cmp.Or(b.cfg.Description, "An agent run over the Agent Client Protocol ("+filepath.Base(b.cfg.Command)+")."),
		Models:       models,
		Capabilities: b.chatCapabilities(),
	}
}

// ConfigProperties offers the settings the agent's latest session
// reported: its config options, or its modes when it has no options.
func (b *Backend) ConfigProperties() []plugins.Property {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.learned.properties()
}

// learn keeps what a session reported about its settings.
func (b *Backend) learn(o sessionOptions) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.learned = o
}

// Start launches the agent and opens the conversation's session: loaded
// or resumed when opts.Resume asks and the agent can, new otherwise. The
// agent runs until the Agent's Close; ctx bounds only the start.
func (b *Backend) Start(ctx context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	conv := opts.Conversation
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(b.cfg.StartTimeout, defaultStartTimeout))
	defer cancel()

	in, err := b.launch(ctx, conv.Dir)
	if err != nil {
		return nil, err
	}
	a, err := newAgent(ctx, b, in, opts)
	if err != nil {
		in.close()
		return nil, err
	}
	return a, nil
}

// Turns reads conv's finished turns back by loading its session in a
// fresh agent process and collecting what the agent replays. An agent
// that cannot load sessions keeps no record ahpd can read: ErrNotFound.
func (b *Backend) Turns(ctx context.Context, conv plugins.Conversation) ([]protocol.Turn, error) {
	ctx, cancel := context.WithTimeout(ctx, b.turnsTimeout)
	defer cancel()

	in, err := b.launch(ctx, conv.Dir)
	if err != nil {
		return nil, err
	}
	defer in.close()
	if !in.caps().LoadSession {
		return nil, fmt.Errorf("acp: %s cannot load sessions: %w", b.cfg.Name, plugins.ErrNotFound)
	}

	rp := newReplay()
	in.client.setSink(rp)
	_, err = in.conn.LoadSession(ctx, sdk.LoadSessionRequest{
		SessionId:  sdk.SessionId(conv.ID),
		Cwd:        conv.Dir,
		McpServers: []sdk.McpServer{},
	})
	in.client.setSink(nil)
	if err != nil {
		if ctx.Err() == nil && !in.broken() {
			// The agent answered, and did not load the session: it does
			// not know it.
			return nil, fmt.Errorf("acp: load session %q: %v: %w", conv.ID, err, plugins.ErrNotFound)
		}
		return nil, in.failure(ctx, "loading the session", err)
	}
	return rp.turns(), nil
}

// Delete does nothing: ACP has no method to delete a session, and
// session/close, the nearest the SDK offers, only frees an open session
// of a running agent. An agent's sessions stay in its own store.
func (b *Backend) Delete(ctx context.Context, conv plugins.Conversation) error {
	return nil
}

// checkWorkDir makes sure dir is an existing directory, so a bad session
// fails before an agent is spawned for it.
func checkWorkDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("acp: working directory %q is not an absolute path", dir)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("acp: working directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("acp: working directory %s is not a directory", dir)
	}
	return nil
}

// Check reports whether the agent's program can be found, so a host can
// list a missing agent as unavailable before anybody tries it.
func (b *Backend) Check(ctx context.Context) error {
	if b.cfg.Command == "" {
		return fmt.Errorf("acp: %s has no command", b.cfg.Name)
	}
	if _, err := exec.LookPath(b.cfg.Command); err != nil {
		return fmt.Errorf("acp: %s: %w", b.cfg.Name, err)
	}
	return nil
}
