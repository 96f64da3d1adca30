package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/agentproc"
)

const (
	// defaultOutputLimit bounds the output a terminal keeps when the
	// agent sets no limit.
	defaultOutputLimit = 1 << 20
	// terminalWaitDelay is how long a terminal's output is still read
	// after its command exits, when something it started in the
	// background holds the output open.
	terminalWaitDelay = time.Second
)

// terminals are the commands the agent runs through terminal/create.
// Each runs in a process group of its own, which kill, release and
// closeAll kill whole.
type terminals struct {
	log *slog.Logger

	mu     sync.Mutex
	closed bool
	next   int
	byID   map[string]*terminal
	wg     sync.WaitGroup // the terminals' Wait goroutines; Add only under mu while !closed
}

// terminal is one command and its output.
type terminal struct {
	cmd    *exec.Cmd
	out    *agentproc.Tail
	done   chan struct{}          // closed once the command was reaped
	status sdk.TerminalExitStatus // how it ended; read after done is closed
}

func newTerminals(log *slog.Logger) *terminals {
	return &terminals{log: log, byID: map[string]*terminal{}}
}

// CreateTerminal serves terminal/create: the command runs without a
// shell, as ACP gives it, in cwd beneath the working directory.
func (c *client) CreateTerminal(ctx context.Context, req sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	if err := c.denied(plugins.ToolCall{Name: plugins.KindExecute, Kind: plugins.KindExecute}); err != nil {
		return sdk.CreateTerminalResponse{}, err
	}
	dir := c.dirs[1]
	if req.Cwd != nil && *req.Cwd != "" {
		rel, err := c.resolve(*req.Cwd)
		if err != nil {
			return sdk.CreateTerminalResponse{}, err
		}
		dir = filepath.Join(dir, rel)
	}
	limit := defaultOutputLimit
	if req.OutputByteLimit != nil {
		limit = max(*req.OutputByteLimit, 0)
	}
	env := os.Environ()
	for _, v := range req.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	cmd := exec.Command(req.Command, req.Args...)
	cmd.Dir, cmd.Env = dir, env
	id, err := c.terms.start(cmd, limit)
	if err != nil {
		return sdk.CreateTerminalResponse{}, sdk.NewInternalError(map[string]any{"command": req.Command, "error": err.Error()})
	}
	c.log.Debug("terminal started", "terminal", id, "command", req.Command, "args", req.Args, "dir", dir)
	return sdk.CreateTerminalResponse{TerminalId: id}, nil
}

// TerminalOutput serves terminal/output.
func (c *client) TerminalOutput(ctx context.Context, req sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	t, err := c.terms.get(req.TerminalId)
	if err != nil {
		return sdk.TerminalOutputResponse{}, err
	}
	out, truncated := t.out.Output()
	resp := sdk.TerminalOutputResponse{Output: string(out), Truncated: truncated}
	select {
	case <-t.done:
		resp.ExitStatus = new(t.status)
	default:
	}
	return resp, nil
}

// WaitForTerminalExit serves terminal/wait_for_exit.
func (c *client) WaitForTerminalExit(ctx context.Context, req sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	t, err := c.terms.get(req.TerminalId)
	if err != nil {
		return sdk.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
		return sdk.WaitForTerminalExitResponse{ExitCode: t.status.ExitCode, Signal: t.status.Signal}, nil
	case <-ctx.Done():
		return sdk.WaitForTerminalExitResponse{}, ctx.Err()
	}
}

// KillTerminal serves terminal/kill: the command ends, its output stays
// until the terminal is released.
func (c *client) KillTerminal(ctx context.Context, req sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	t, err := c.terms.get(req.TerminalId)
	if err != nil {
		return sdk.KillTerminalResponse{}, err
	}
	t.kill()
	return sdk.KillTerminalResponse{}, nil
}

// ReleaseTerminal serves terminal/release: the command ends if it still
// runs, and the terminal is forgotten.
func (c *client) ReleaseTerminal(ctx context.Context, req sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	t, err := c.terms.remove(req.TerminalId)
	if err != nil {
		return sdk.ReleaseTerminalResponse{}, err
	}
	t.kill()
	return sdk.ReleaseTerminalResponse{}, nil
}

// start runs cmd as a new terminal and returns its id.
func (ts *terminals) start(cmd *exec.Cmd, limit int) (string, error) {
	t := &terminal{cmd: cmd, out: agentproc.NewTail(limit), done: make(chan struct{})}
	// One writer for both streams: exec then gives the command a single
	// pipe, and the output keeps the order it was written in.
	cmd.Stdout, cmd.Stderr = t.out, t.out
	cmd.WaitDelay = terminalWaitDelay
	agentproc.SetProcessGroup(cmd)

	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return "", errors.New("the agent is closing")
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	ts.next++
	id := fmt.Sprintf("term-%d", ts.next)
	ts.byID[id] = t
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		cmd.Wait()
		t.status = exitStatus(cmd.ProcessState)
		close(t.done)
	}()
	return id, nil
}

func (ts *terminals) get(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok {
		return nil, sdk.NewInvalidParams(map[string]any{"terminalId": id, "error": "no such terminal"})
	}
	return t, nil
}

func (ts *terminals) remove(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok {
		return nil, sdk.NewInvalidParams(map[string]any{"terminalId": id, "error": "no such terminal"})
	}
	delete(ts.byID, id)
	return t, nil
}

// closeAll kills every terminal and waits until their commands are
// reaped. No terminal starts after it.
func (ts *terminals) closeAll() {
	ts.mu.Lock()
	ts.closed = true
	all := ts.byID
	ts.byID = map[string]*terminal{}
	ts.mu.Unlock()
	for _, t := range all {
		agentproc.KillGroup(t.cmd.Process)
	}
	ts.wg.Wait()
}

// kill kills the command's process group, also after the command itself
// exited (what it left running goes too), and waits until it is reaped.
func (t *terminal) kill() {
	agentproc.KillGroup(t.cmd.Process)
	<-t.done
}

// exitStatus says how a command ended.
func exitStatus(state *os.ProcessState) sdk.TerminalExitStatus {
	if state == nil {
		return sdk.TerminalExitStatus{}
	}
	if sig, ok := agentproc.ExitSignal(state); ok {
		return sdk.TerminalExitStatus{Signal: &sig}
	}
	return sdk.TerminalExitStatus{ExitCode: new(state.ExitCode())}
}
