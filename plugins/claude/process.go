package claude

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/agentproc"
)

// How long the backend waits for the CLI.
const (
	// exitWait bounds the wait for the CLI to exit once its stdin is
	// closed, before it is killed.
	exitWait = 5 * time.Second
	// interruptWait bounds the wait for the result of an interrupted
	// turn, before the CLI is killed.
	interruptWait = 10 * time.Second
	// drainWait bounds the wait for the rest of the CLI's output once it
	// has exited, in case a process it left behind holds stdout open.
	drainWait = 2 * time.Second
)

const (
	// stderrTail is how much of the CLI's stderr an error quotes.
	stderrTail = 2 << 10
	// maxLine bounds a line of the CLI's output; a tool result can be
	// large, but not this large.
	maxLine = 64 << 20
)

// process is one running CLI, in a process group of its own so that the
// commands its tools run end with it. Closing our end of its stdout is
// what stops the stdout reader, whatever the CLI's children hold.
//
// It is not tied to a context: it lives from the agent's start or
// restart to its stop.
type process struct {
	*agentproc.Process
	args []string // the config flags it runs with, but --model
	// model is the model it runs ("" for the CLI's default), as started
	// or switched since; touched by the agent's start and the Prompt in
	// progress only.
	model string
	log   *slog.Logger

	writeMu sync.Mutex // one line at a time on stdin

	// lines delivers stdout line by line; it is closed at the end of
	// stdout. Nothing reads it between turns, which holds the CLI back
	// by the pipe's buffer and no more.
	lines chan []byte
	// quit is closed by stop: the stdout reader then gives up a line no
	// one will read.
	quit     chan struct{}
	quitOnce sync.Once

	readers sync.WaitGroup // the stdout reader
}

// startProcess starts command with args in dir.
func startProcess(command string, args, configArgs []string, dir string, env []string, log *slog.Logger) (*process, error) {
	cmd := exec.Command(command, args...)
	cmd.Dir = dir
	cmd.Env = env
	ap, err := agentproc.Start(cmd, agentproc.Options{
		TailSize:   stderrTail,
		Log:        log,
		LogMessage: "claude stderr",
		ReadBuffer: 1 << 10,
	})
	var pipeErr *agentproc.PipeError
	switch {
	case errors.As(err, &pipeErr):
		return nil, fmt.Errorf("claude: start %s: %w", command, err)
	case err != nil:
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%w (install the Claude Code CLI with %s)", err, InstallHint)
		}
		return nil, fmt.Errorf("claude: start %s: %w", command, plugins.Unavailable(err))
	}
	// The environment is the child's now; a resident chat need not keep
	// a copy.
	cmd.Env = nil

	p := &process{
		Process: ap,
		args:    configArgs,
		log:     log.With("pid", ap.PID()),
		lines:   make(chan []byte),
		quit:    make(chan struct{}),
	}
	p.readers.Add(1)
	go p.readStdout()
	return p, nil
}

// readStdout passes stdout on line by line. Its buffer is small: an
// idle chat should hold little, and a long line grows in line instead.
func (p *process) readStdout() {
	defer p.readers.Done()
	defer close(p.lines)
	br := bufio.NewReaderSize(p.Stdout(), 4<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case tooLong:
		case len(line)+len(chunk) > maxLine:
			p.log.Warn("dropping an overlong line of the CLI's output")
			tooLong, line = true, nil
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if trimmed := bytes.TrimSpace(line); !tooLong && len(trimmed) > 0 {
			select {
			case p.lines <- bytes.Clone(trimmed):
			case <-p.quit:
				return
			}
		}
		line, tooLong = line[:0], false
		if cap(line) > 64<<10 {
			// Not kept for the life of the chat after one large line.
			line = nil
		}
		if err != nil {
			return
		}
	}
}

// send writes v to the CLI's stdin as one line.
func (p *process) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("claude: encode a line for the CLI: %w", err)
	}
	b = append(b, '\n')
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if _, err := p.Stdin().Write(b); err != nil {
		return fmt.Errorf("claude: write to the CLI: %w", err)
	}
	return nil
}

// alive reports whether the CLI still runs.
func (p *process) alive() bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

// exitError describes how the CLI ended, with the end of what it said on
// stderr. It waits for the CLI to have exited.
func (p *process) exitError() error {
	<-p.Exited()
	p.finish()
	msg := "the Claude Code CLI exited"
	if err := p.WaitErr(); err != nil {
		msg += " (" + err.Error() + ")"
	}
	if tail := strings.TrimSpace(p.Tail().String()); tail != "" {
		msg += ": " + tail
	}
	return errors.New("claude: " + msg)
}

// stop ends the CLI: stdin closed, which makes an idle CLI exit, then a
// kill if it does not within exitWait. It returns once the CLI and the
// readers are gone.
func (p *process) stop() {
	p.CloseStdin()
	p.WaitExit(exitWait)
	p.finish()
}

// kill kills the CLI and everything it started, and returns once they
// and the readers are gone.
func (p *process) kill() {
	p.Kill()
	p.CloseStdin()
	p.finish()
}

// finish lets the readers go once the CLI has exited.
func (p *process) finish() {
	p.quitOnce.Do(func() { close(p.quit) })
	// Output still in the pipe is read (and dropped) to its end; a
	// process outside the group holding the pipe is cut off.
	done := make(chan struct{})
	go func() {
		p.readers.Wait()
		<-p.StderrDone()
		close(done)
	}()
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.endOutput()
		<-done
	}
	p.endOutput()
}

// endOutput closes our ends of the CLI's stdout and stderr, which ends
// the readers.
func (p *process) endOutput() {
	p.CloseStdout()
	p.CloseStderr()
}
