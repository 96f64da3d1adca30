package acp

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/plugins/agentproc"
)

// stderrTail is how much of an agent's stderr an error quotes.
const stderrTail = 2 << 10

// process is a running agent, in a process group of its own so that the
// helpers it starts (a node runtime, language servers) end with it. Its
// stdout is read by the ACP connection; closing our end is what stops
// it, whoever else holds the other end.
//
// The process is not tied to a context: it outlives the request that
// started it and ends only by stop or kill, or by exiting.
type process struct {
	*agentproc.Process
	input *inputWriter // stdin as the ACP connection writes it
}

// startProcess starts cfg's command in dir.
func startProcess(cfg Config, dir string, log *slog.Logger) (*process, error) {
	if cfg.Command == "" {
		return nil, fmt.Errorf("acp: agent %q has no command", cfg.Name)
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = dir
	if cfg.Dir != "" {
		cmd.Dir = cfg.Dir
	}
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(cfg.Env)) {
		cmd.Env = append(cmd.Env, k+"="+cfg.Env[k])
	}
	p, err := agentproc.Start(cmd, agentproc.Options{
		TailSize:   2 * stderrTail,
		Log:        log,
		LogMessage: "agent stderr",
	})
	if err != nil {
		return nil, fmt.Errorf("acp: start %s: %w", cfg.Name, err)
	}
	return &process{Process: p, input: &inputWriter{f: p.Stdin()}}, nil
}

// kill kills the agent and everything it started, and makes sure the
// connection sees its end even if something outside the group holds the
// agent's stdout.
func (p *process) kill() {
	p.Kill()
	p.CloseStdout()
}

// stop ends the agent: stdin is closed, which tells an ACP agent to
// exit; after grace the group is killed, and every reader stops.
func (p *process) stop(grace time.Duration) {
	p.CloseStdin()
	p.WaitExit(grace)
	p.Kill()
	p.CloseStdout()
	p.CloseStderr()
	<-p.StderrDone()
}

// abandon ends an agent nobody reads any more, its connection gone:
// stdout is closed, which fails a write the agent is blocked in, and
// stdin, which asks it to exit; after grace the group is killed. Its
// stderr is read on to the end, for the error that says how it ended.
func (p *process) abandon(grace time.Duration) {
	p.CloseStdout()
	p.CloseStdin()
	p.WaitExit(grace)
}

// exitError describes how the agent ended, with the tail of its stderr,
// once it has (waiting up to a second for that). It is nil while the
// agent still runs.
func (p *process) exitError() error {
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	select {
	case <-p.Exited():
	case <-timer.C:
		return nil
	}
	status := "exited"
	if err := p.WaitErr(); err != nil {
		status = err.Error()
	}
	// What the agent wrote last may still be in the pipe.
	drain := time.NewTimer(500 * time.Millisecond)
	defer drain.Stop()
	select {
	case <-p.StderrDone():
	case <-drain.C:
	}
	if tail := p.lastStderr(); tail != "" {
		return fmt.Errorf("%s; stderr:\n%s", status, tail)
	}
	return errors.New(status)
}

// lastStderr returns the end of what the agent wrote on stderr, trimmed.
func (p *process) lastStderr() string {
	return strings.TrimSpace(string(p.Tail().Last(stderrTail)))
}

// inputWriter is the agent's stdin. It remembers a failed write: the
// agent stopped reading, which it does when it exits.
type inputWriter struct {
	f      *os.File
	failed atomic.Bool
}

func (w *inputWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	if err != nil {
		w.failed.Store(true)
	}
	return n, err
}
