package claude

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/ahpd/ahpd/plugins"
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

// process is one running CLI. Its pipes are ahpd's own rather than
// exec's, so that Wait returns as soon as the CLI exits whatever its
// children hold, and closing our ends is what stops the readers.
//
// It is not tied to a context: it lives from the agent's start or
// restart to its stop.
type process struct {
	cmd    *exec.Cmd
	args   []string // the config flags it runs with
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	log    *slog.Logger

	writeMu sync.Mutex // one line at a time on stdin

	// lines delivers stdout line by line; it is closed at the end of
	// stdout. Nothing reads it between turns, which holds the CLI back
	// by the pipe's buffer and no more.
	lines chan []byte
	// quit is closed by stop: the stdout reader then gives up a line no
	// one will read.
	quit     chan struct{}
	quitOnce sync.Once

	tail    *tailBuffer
	readers sync.WaitGroup

	exited  chan struct{} // closed once the CLI was reaped
	waitErr error         // Wait's result; read after exited is closed

	closeStdin  sync.Once
	closeStdout sync.Once
}

// startProcess starts command with args in dir.
func startProcess(command string, args, configArgs []string, dir string, env []string, log *slog.Logger) (*process, error) {
	var toClose []*os.File
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			toClose = append(toClose, r, w)
		}
		return r, w, err
	}
	fail := func(err error) (*process, error) {
		for _, f := range toClose {
			f.Close()
		}
		return nil, fmt.Errorf("claude: start %s: %w", command, err)
	}
	inR, inW, err := pipe()
	if err != nil {
		return fail(err)
	}
	outR, outW, err := pipe()
	if err != nil {
		return fail(err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return fail(err)
	}

	cmd := exec.Command(command, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// A group of its own, so that the commands its tools run end with
	// it.
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%w (install the Claude Code CLI with %s)", err, InstallHint)
		}
		return fail(plugins.Unavailable(err))
	}
	// The child has its ends now; ours would keep the pipes open after it
	// exits.
	inR.Close()
	outW.Close()
	errW.Close()
	// The environment is the child's now; a resident chat need not keep
	// a copy.
	cmd.Env = nil

	p := &process{
		cmd:    cmd,
		args:   configArgs,
		stdin:  inW,
		stdout: outR,
		stderr: errR,
		log:    log.With("pid", cmd.Process.Pid),
		lines:  make(chan []byte),
		quit:   make(chan struct{}),
		tail:   newTailBuffer(stderrTail),
		exited: make(chan struct{}),
	}
	p.readers.Add(2)
	go p.readStdout()
	go p.readStderr()
	go func() {
		p.waitErr = cmd.Wait()
		// What the CLI left running in its group would outlive it and
		// hold its stdout open.
		killGroup(cmd.Process)
		close(p.exited)
	}()
	return p, nil
}

// pid returns the CLI's process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// readStdout passes stdout on line by line. Its buffer is small: an
// idle chat should hold little, and a long line grows in line instead.
func (p *process) readStdout() {
	defer p.readers.Done()
	defer close(p.lines)
	br := bufio.NewReaderSize(p.stdout, 4<<10)
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

// readStderr keeps the tail of stderr for errors and logs each line.
func (p *process) readStderr() {
	defer p.readers.Done()
	br := bufio.NewReaderSize(p.stderr, 1<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			p.tail.Write(line)
			p.log.Debug("claude stderr", "line", strings.TrimRight(string(line), "\r\n"))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
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
	if _, err := p.stdin.Write(b); err != nil {
		return fmt.Errorf("claude: write to the CLI: %w", err)
	}
	return nil
}

// alive reports whether the CLI still runs.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitError describes how the CLI ended, with the end of what it said on
// stderr. It waits for the CLI to have exited.
func (p *process) exitError() error {
	<-p.exited
	p.finish()
	msg := "the Claude Code CLI exited"
	if p.waitErr != nil {
		msg += " (" + p.waitErr.Error() + ")"
	}
	if tail := strings.TrimSpace(p.tail.String()); tail != "" {
		msg += ": " + tail
	}
	return errors.New("claude: " + msg)
}

// waitExit waits up to d for the CLI to exit, and kills it if it does
// not.
func (p *process) waitExit(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		killGroup(p.cmd.Process)
		<-p.exited
	}
}

// stop ends the CLI: stdin closed, which makes an idle CLI exit, then a
// kill if it does not within exitWait. It returns once the CLI and the
// readers are gone.
func (p *process) stop() {
	p.closeStdin.Do(func() { p.stdin.Close() })
	p.waitExit(exitWait)
	p.finish()
}

// kill kills the CLI and everything it started, and returns once they
// and the readers are gone.
func (p *process) kill() {
	killGroup(p.cmd.Process)
	<-p.exited
	p.closeStdin.Do(func() { p.stdin.Close() })
	p.finish()
}

// finish lets the readers go once the CLI has exited.
func (p *process) finish() {
	p.quitOnce.Do(func() { close(p.quit) })
	// Output still in the pipe is read (and dropped) to its end; a
	// process outside the group holding the pipe is cut off.
	done := make(chan struct{})
	go func() { p.readers.Wait(); close(done) }()
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
	p.closeStdout.Do(func() {
		p.stdout.Close()
		p.stderr.Close()
	})
}

// tailBuffer keeps the last bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the tail, valid UTF-8 even where the cut fell inside a
// character.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "")
}

var _ io.Writer = (*tailBuffer)(nil)
