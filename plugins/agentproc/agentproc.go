// Package agentproc starts a backend's child process in a process group
// of its own, so that everything it starts ends with it; keeps the tail
// of its stderr for error messages; and tells how it ended.
//
// The backends that run an agent for as long as a conversation lasts
// (acp, claude) start it with Start; one that runs a command to its end
// under a context (script) uses Run; one that keeps exec's own pipes
// (acp's terminals) uses SetProcessGroup and KillGroup directly.
//
// A process that leaves its group (setsid, as a double-forking daemon
// does) is out of reach of all of these: ahpd does not track it.
package agentproc

import (
	"bufio"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options says what Start does with a child's stderr.
type Options struct {
	// TailSize is how many of the last bytes of stderr Tail keeps.
	TailSize int
	// Log, if not nil, gets each line of stderr at debug level, as
	// LogMessage with the child's "pid" and the "line".
	Log        *slog.Logger
	LogMessage string
	// ReadBuffer is the size of the stderr reader's buffer, which is the
	// longest piece of a line logged as one. Zero means 4 KB.
	ReadBuffer int
}

// Process is a child started by Start. Its standard streams are pipes
// made here, not by exec: Wait then returns as soon as the child exits,
// whoever else holds the other ends, and closing our ends is what stops
// the readers.
//
// A Process is not tied to a context: it ends when its owner kills it,
// or when it exits. Once it has exited, what it left running in its group
// is killed.
type Process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of the child's stdout, for the owner to read
	stderr *os.File // our end of the child's stderr, read into tail

	tail       *Tail
	stderrDone chan struct{} // closed when the stderr reader returns

	exited  chan struct{} // closed once the child was reaped
	waitErr error         // Wait's result; read after exited is closed

	closeStdin, closeStdout, closeStderr sync.Once
}

// Start starts cmd, with pipes for its standard streams, as the leader
// of a process group of its own. cmd's Stdin, Stdout and Stderr must be
// nil: Start sets them. A failure to make a pipe is a *PipeError, else
// the error is cmd.Start's; the pipes made before it are closed.
func Start(cmd *exec.Cmd, opts Options) (*Process, error) {
	var toClose []*os.File
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			return nil, nil, &PipeError{err}
		}
		toClose = append(toClose, r, w)
		return r, w, nil
	}
	fail := func(err error) (*Process, error) {
		for _, f := range toClose {
			f.Close()
		}
		return nil, err
	}
	if cmd.Stdin != nil || cmd.Stdout != nil || cmd.Stderr != nil {
		return nil, errors.New("agentproc: the command's standard streams are already set")
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
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	SetProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	// The child has its ends now; ours would keep the pipes open after it
	// exits.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &Process{
		cmd:        cmd,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		tail:       NewTail(opts.TailSize),
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
	}
	go p.readStderr(opts)
	running.Add(1)
	go func() {
		defer running.Add(-1)
		p.waitErr = cmd.Wait()
		// What the child left running in its group would outlive it and
		// hold its output open.
		KillGroup(cmd.Process)
		close(p.exited)
	}()
	return p, nil
}

// running counts the children Start started and that were not reaped.
var running atomic.Int64

// Running reports how many children Start started are running, in this
// process: for the daemon's metrics.
func Running() int64 { return running.Load() }

// PipeError is Start failing to make a pipe, before any program ran:
// a lack of file descriptors, not a missing program. Its message is the
// underlying error's.
type PipeError struct {
	Err error
}

func (e *PipeError) Error() string { return e.Err.Error() }
func (e *PipeError) Unwrap() error { return e.Err }

// readStderr keeps the tail of stderr and logs each line.
func (p *Process) readStderr(opts Options) {
	defer close(p.stderrDone)
	size := opts.ReadBuffer
	if size <= 0 {
		size = 4 << 10
	}
	br := bufio.NewReaderSize(p.stderr, size)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			p.tail.Write(line)
			if opts.Log != nil {
				opts.Log.Debug(opts.LogMessage, "pid", p.PID(), "line", strings.TrimRight(string(line), "\r\n"))
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// PID returns the child's process id, which is also its group's.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Stdin returns our end of the child's stdin.
func (p *Process) Stdin() *os.File { return p.stdin }

// Stdout returns our end of the child's stdout, for the owner to read.
func (p *Process) Stdout() *os.File { return p.stdout }

// CloseStdin closes our end of the child's stdin. Only the first call
// does anything.
func (p *Process) CloseStdin() { p.closeStdin.Do(func() { p.stdin.Close() }) }

// CloseStdout closes our end of the child's stdout, which ends whatever
// reads it. Only the first call does anything.
func (p *Process) CloseStdout() { p.closeStdout.Do(func() { p.stdout.Close() }) }

// CloseStderr closes our end of the child's stderr, which ends the
// reader keeping its tail. Only the first call does anything.
func (p *Process) CloseStderr() { p.closeStderr.Do(func() { p.stderr.Close() }) }

// StderrDone is closed once all of stderr was read into the tail: at its
// end, or once CloseStderr cut it off.
func (p *Process) StderrDone() <-chan struct{} { return p.stderrDone }

// Tail returns the tail of the child's stderr.
func (p *Process) Tail() *Tail { return p.tail }

// Exited is closed once the child was reaped and what it left in its
// group killed.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// WaitErr returns what waiting for the child returned: nil for a
// successful exit, an *exec.ExitError for an exit status or a signal. It
// is nil until Exited is closed.
func (p *Process) WaitErr() error {
	select {
	case <-p.exited:
		return p.waitErr
	default:
		return nil
	}
}

// Kill kills the child and everything in its group, also after the child
// itself exited, and waits until it was reaped.
func (p *Process) Kill() {
	KillGroup(p.cmd.Process)
	<-p.exited
}

// WaitExit waits up to d for the child to exit, and kills it and its
// group if it does not.
func (p *Process) WaitExit(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.Kill()
	}
}
