//go:build unix

package agentproc_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins/agentproc"
	"github.com/ahpd/ahpd/plugins/pluginstest"
)

// start starts script with sh and ends it, and all it started, when the
// test ends.
func start(t *testing.T, script string, opts agentproc.Options) *agentproc.Process {
	t.Helper()
	p, err := agentproc.Start(exec.Command("sh", "-c", script), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		p.CloseStdin()
		p.CloseStdout()
		p.CloseStderr()
		<-p.StderrDone()
	})
	return p
}

// readPID reads a pid, on a line of its own, from the child's stdout.
func readPID(t *testing.T, p *agentproc.Process) int {
	t.Helper()
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatalf("reading a pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("reading a pid: %v", err)
	}
	return pid
}

// waitExited waits for p to have been reaped.
func waitExited(t *testing.T, p *agentproc.Process) {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(testwait.Hang):
		t.Fatal("the child did not exit")
	}
}

func TestKillReachesGrandchild(t *testing.T) {
	p := start(t, "sleep 3600 & echo $!; wait", agentproc.Options{})
	pid := readPID(t, p)
	p.Kill()
	select {
	case <-p.Exited():
	default:
		t.Fatal("Kill returned before the child was reaped")
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the grandchild (pid %d) still runs after Kill", pid)
	}
	if sig, ok := exitSignal(p.WaitErr()); !ok || sig != "SIGKILL" {
		t.Errorf("the child ended with %v, want SIGKILL", p.WaitErr())
	}
}

func TestExitKillsWhatWasLeft(t *testing.T) {
	// sh exits at once; sleep, in its group, would outlive it.
	p := start(t, "sleep 3600 & echo $!", agentproc.Options{})
	pid := readPID(t, p)
	waitExited(t, p)
	if err := p.WaitErr(); err != nil {
		t.Errorf("WaitErr() = %v, want nil", err)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the grandchild (pid %d) still runs after the child exited", pid)
	}
}

func TestStopEndsBackgroundChild(t *testing.T) {
	// An agent that leaves a child running and exits when its stdin ends,
	// as the backends' stop asks it to: the child goes with it.
	p := start(t, "sleep 3600 & echo $!; read x", agentproc.Options{})
	pid := readPID(t, p)
	p.CloseStdin()
	p.WaitExit(testwait.Hang)
	if sig, ok := exitSignal(p.WaitErr()); ok {
		t.Errorf("the agent was killed (%s), not let exit", sig)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the agent's child (pid %d) outlived the agent", pid)
	}
}

func TestWaitExit(t *testing.T) {
	// A child that ends when its stdin does.
	p := start(t, "read x", agentproc.Options{})
	p.CloseStdin()
	// It returns when the child exits, not at the end of its bound (an
	// hour), when it would kill it.
	waited := make(chan struct{})
	go func() {
		p.WaitExit(time.Hour)
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(testwait.Hang):
		t.Fatal("WaitExit did not return when the child exited")
	}
	if err := p.WaitErr(); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		// read fails at the end of input.
		t.Errorf("WaitErr() = %v, want exit status 1", err)
	}

	// A child that does not.
	p = start(t, "exec sleep 3600", agentproc.Options{})
	p.WaitExit(50 * time.Millisecond)
	if sig, ok := exitSignal(p.WaitErr()); !ok || sig != "SIGKILL" {
		t.Errorf("WaitErr() = %v, want it killed", p.WaitErr())
	}
}

func TestStderrTail(t *testing.T) {
	// 10,000 bytes of digits, then "abcdéf" (é is two bytes).
	p := start(t, `i=0; while [ $i -lt 1000 ]; do printf 0123456789 >&2; i=$((i+1)); done; printf 'abcd\303\251f' >&2`,
		agentproc.Options{TailSize: 10})
	waitExited(t, p)
	<-p.StderrDone()
	tail := p.Tail()
	if out, cut := tail.Output(); string(out) != "789abcdéf" || !cut {
		t.Errorf("Output() = %q, %v; want the last 10 bytes, cut", out, cut)
	}
	// Cutting through é skips what is left of it.
	if got := string(tail.Last(2)); got != "f" {
		t.Errorf("Last(2) = %q, want %q", got, "f")
	}
	if got := string(tail.Last(3)); got != "éf" {
		t.Errorf("Last(3) = %q, want %q", got, "éf")
	}
	if got := tail.String(); got != "789abcdéf" {
		t.Errorf("String() = %q", got)
	}
}

func TestStderrTailCutsCharacter(t *testing.T) {
	// The limit falls inside é: its second byte alone is no character.
	p := start(t, `printf 'abc\303\251f' >&2`, agentproc.Options{TailSize: 2})
	waitExited(t, p)
	<-p.StderrDone()
	if out, cut := p.Tail().Output(); string(out) != "f" || !cut {
		t.Errorf("Output() = %q, %v; want %q, cut", out, cut, "f")
	}
	if got := p.Tail().String(); got != "f" {
		t.Errorf("String() = %q, want %q", got, "f")
	}
}

func TestStderrLog(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := start(t, "echo one >&2; echo two >&2", agentproc.Options{TailSize: 100, Log: log, LogMessage: "child stderr"})
	waitExited(t, p)
	<-p.StderrDone()
	want := fmt.Sprintf("msg=\"child stderr\" pid=%d line=one\n", p.PID())
	if got := buf.String(); !strings.Contains(got, want) || !strings.Contains(got, "line=two") {
		t.Errorf("log:\n%s\nwant lines like %q", got, want)
	}
	if got := strings.TrimSpace(p.Tail().String()); got != "one\ntwo" {
		t.Errorf("tail = %q", got)
	}
}

func TestCloseStderrStopsReader(t *testing.T) {
	// The child holds stderr open while it runs: only closing our end
	// stops the reader before then.
	p := start(t, "echo started >&2; exec sleep 3600", agentproc.Options{TailSize: 100})
	select {
	case <-p.StderrDone():
		t.Fatal("the stderr reader stopped while the child runs")
	case <-time.After(50 * time.Millisecond):
	}
	p.CloseStderr()
	select {
	case <-p.StderrDone():
	case <-time.After(testwait.Hang):
		t.Fatal("CloseStderr did not stop the reader")
	}
}

func TestExitSignal(t *testing.T) {
	for _, c := range []struct {
		script string
		code   int
		signal string
	}{
		{"exit 0", 0, ""},
		{"exit 3", 3, ""},
		{"kill -TERM $$", -1, "SIGTERM"},
		{"kill -KILL $$", -1, "SIGKILL"},
		// One that has no name here is named by its number.
		{"kill -VTALRM $$", -1, fmt.Sprintf("SIG%d", int(syscall.SIGVTALRM))},
	} {
		cmd := exec.Command("sh", "-c", c.script)
		cmd.Run()
		if sig, ok := agentproc.ExitSignal(cmd.ProcessState); sig != c.signal || ok != (c.signal != "") {
			t.Errorf("%s: ExitSignal = %q, %v; want %q", c.script, sig, ok, c.signal)
		}
		if got := cmd.ProcessState.ExitCode(); got != c.code {
			t.Errorf("%s: exit code %d, want %d", c.script, got, c.code)
		}
	}
}

func TestStartFailure(t *testing.T) {
	before := openFiles()
	cmd := exec.Command(filepath.Join(t.TempDir(), "missing"))
	if _, err := agentproc.Start(cmd, agentproc.Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start: err = %v, want one that is os.ErrNotExist", err)
	} else if pe := new(agentproc.PipeError); errors.As(err, &pe) {
		t.Errorf("Start: err = %v, a PipeError", err)
	}
	if after := openFiles(); before >= 0 && after != before {
		t.Errorf("%d files open after a failed Start, %d before", after, before)
	}

	cmd = exec.Command("sh", "-c", "exit 0")
	cmd.Stdout = os.Stdout
	if _, err := agentproc.Start(cmd, agentproc.Options{}); err == nil {
		t.Error("Start took a command whose stdout was set")
	}
}

// openFiles counts this process's open files, or returns -1 where it
// cannot.
func openFiles() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries)
}

// exitSignal returns the signal that ended the process err is the Wait
// error of.
func exitSignal(err error) (string, bool) {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return "", false
	}
	return agentproc.ExitSignal(exit.ProcessState)
}

// syncBuffer is a bytes.Buffer for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
