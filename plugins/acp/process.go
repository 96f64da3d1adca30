package acp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stderrTail is how much of an agent's stderr an error quotes.
const stderrTail = 2 << 10

// process is a running agent. Its standard streams are pipes ahpd made
// itself, not exec's: Wait then returns as soon as the agent exits, and
// closing our ends is what stops the readers, whoever else holds the
// other ends.
//
// The process is not tied to a context: it outlives the request that
// started it and ends only by stop or kill, or by exiting.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of the agent's stdin
	stdout *os.File // our end of the agent's stdout, read by the ACP connection
	stderr *os.File // our end of the agent's stderr, read into tail

	input   *inputWriter // stdin as the ACP connection writes it
	tail    *tailBuffer
	readers sync.WaitGroup // the stderr reader

	exited  chan struct{} // closed once the process was reaped
	waitErr error         // Wait's result; read after exited is closed

	closeStdout sync.Once
}

// startProcess starts cfg's command in dir.
func startProcess(cfg Config, dir string, log *slog.Logger) (*process, error) {
	if cfg.Command == "" {
		return nil, fmt.Errorf("acp: agent %q has no command", cfg.Name)
	}
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
		return nil, fmt.Errorf("acp: start %s: %w", cfg.Name, err)
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

	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = dir
	if cfg.Dir != "" {
		cmd.Dir = cfg.Dir
	}
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(cfg.Env)) {
		cmd.Env = append(cmd.Env, k+"="+cfg.Env[k])
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// A group of its own, so that the helpers an agent starts (a node
	// runtime, language servers) end with it.
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	// The child has its ends now; ours would keep the pipes open after it
	// exits.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &process{
		cmd:    cmd,
		stdin:  inW,
		input:  &inputWriter{f: inW},
		stdout: outR,
		stderr: errR,
		tail:   newTailBuffer(2 * stderrTail),
		exited: make(chan struct{}),
	}
	p.readers.Add(1)
	go p.readStderr(log)
	go func() {
		p.waitErr = cmd.Wait()
		// Helpers the agent left behind would hold its stdout open and
		// keep the connection from seeing the end.
		killGroup(cmd.Process)
		close(p.exited)
	}()
	return p, nil
}

// readStderr keeps the tail of the agent's stderr for errors and logs
// each line at debug level.
func (p *process) readStderr(log *slog.Logger) {
	defer p.readers.Done()
	br := bufio.NewReaderSize(p.stderr, 4<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			p.tail.Write(line)
			log.Debug("agent stderr", "line", strings.TrimRight(string(line), "\r\n"))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// pid returns the agent's process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// kill kills the agent and everything it started, and makes sure the
// connection sees its end even if something outside the group holds the
// agent's stdout.
func (p *process) kill() {
	killGroup(p.cmd.Process)
	<-p.exited
	p.endOutput()
}

// endOutput closes our end of the agent's stdout, which ends the ACP
// connection reading it.
func (p *process) endOutput() {
	p.closeStdout.Do(func() { p.stdout.Close() })
}

// stop ends the agent: stdin is closed, which tells an ACP agent to
// exit; after grace the group is killed, and every reader stops.
func (p *process) stop(grace time.Duration) {
	p.stdin.Close()
	timer := time.NewTimer(grace)
	select {
	case <-p.exited:
	case <-timer.C:
	}
	timer.Stop()
	killGroup(p.cmd.Process)
	<-p.exited
	p.endOutput()
	p.stderr.Close()
	p.readers.Wait()
}

// exitError describes how the agent ended, with the tail of its stderr,
// once it has (waiting up to a second for that). It is nil while the
// agent still runs.
func (p *process) exitError() error {
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		return nil
	}
	status := "exited"
	if p.waitErr != nil {
		status = p.waitErr.Error()
	}
	// What the agent wrote last may still be in the pipe.
	waitTimeout(&p.readers, 500*time.Millisecond)
	if tail := strings.TrimSpace(string(p.tail.Tail(stderrTail))); tail != "" {
		return fmt.Errorf("%s; stderr:\n%s", status, tail)
	}
	return errors.New(status)
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

// waitTimeout waits for wg, at most d.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
}

// tailBuffer keeps the last bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu        sync.Mutex
	buf       []byte
	limit     int
	truncated bool
}

func newTailBuffer(limit int) *tailBuffer {
	return &tailBuffer{limit: max(limit, 0)}
}

// Write keeps b, dropping the oldest bytes beyond the limit. It never
// fails.
func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	// Trimming only past twice the limit keeps the copying linear.
	if len(t.buf) > 2*t.limit+4096 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
		t.truncated = true
	}
	return len(b), nil
}

// Tail returns at most the last n bytes written, starting on a UTF-8
// character boundary.
func (t *tailBuffer) Tail(n int) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, _ := t.tail(n)
	return out
}

// Output returns what the limit keeps and whether anything was dropped.
func (t *tailBuffer) Output() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tail(t.limit)
}

func (t *tailBuffer) tail(n int) ([]byte, bool) {
	b := t.buf
	cut := t.truncated
	if len(b) > n {
		b = b[len(b)-n:]
		cut = true
		// Skip continuation bytes of a character cut in two.
		for len(b) > 0 && b[0]&0xC0 == 0x80 {
			b = b[1:]
		}
	}
	return append([]byte(nil), b...), cut
}

// compile-time check that tailBuffer is a Writer.
var _ io.Writer = (*tailBuffer)(nil)
