package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ahpd/ahpd/protocol"
)

// cliResult is what a command printed and its exit status.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cliCmd is the ahpd command line in e, pointed at the daemon by its
// state directory, as a person on the same machine runs it.
func cliCmd(e *env, args ...string) *exec.Cmd {
	cmd := exec.Command(ahpdBin, append(args, "--state-dir", e.state)...)
	cmd.Env = e.environ()
	cmd.Dir = e.work
	// Once the command exits, what it wrote is copied out of the pipes:
	// a loaded machine may take more than a second to get to it. A
	// descendant holding a pipe would make Run fail, after this long.
	cmd.WaitDelay = exitTimeout
	return cmd
}

// cli runs a command to its end with stdin not a terminal.
func cli(t *testing.T, e *env, args ...string) cliResult {
	t.Helper()
	cmd := cliCmd(e, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{out.String(), errb.String(), code}
}

// sessionLine is what `ahpd run` says on stderr about the session it made.
var sessionLine = regexp.MustCompile(`ahpd run: session ([0-9a-f]+)`)

func TestCLIRunExitStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		file     string // written by the turn, or not when code != 0
		wantFile bool
	}{
		{name: "complete", args: []string{"--approve", "all", "say hello there\nrun echo from-a-tool"}, code: 0, stdout: "hello there"},
		{name: "failed", args: []string{"fail the disk is full"}, code: 1, stderr: "the turn failed: the disk is full"},
		{name: "approval without a terminal", args: []string{"write a.txt alpha"}, code: 3,
			stderr: "needs approval, and stdin is no terminal to ask on. The turn waits: approve \"Write: Write `a.txt`\": `ahpd approve ", file: "a.txt"},
		{name: "question without a terminal", args: []string{"ask Which file?"}, code: 3,
			stderr: "the agent asks \"Which file?\", and stdin is no terminal to ask on. The turn waits: answer \"Which file?\": `ahpd answer "},
		{name: "last tool failed", args: []string{"--approve", "all", "say trying\nrun exit 127"}, code: 4,
			stderr: "the turn completed, but its last tool call failed: Run: "},
		{name: "a tool failed, a later one did not", args: []string{"--approve", "all", "run exit 127\nrun echo recovered"}, code: 0, stdout: "recovered"},
		{name: "auto-approved", args: []string{"--auto-approve", "write b.txt beta"}, code: 0,
			stdout: "✓ Write", file: "b.txt", wantFile: true},
		{name: "unknown provider", args: []string{"--provider", "nobody", "say x"}, code: 1, stderr: "choose one with --provider"},
		{name: "no message", args: []string{"--provider", "script"}, code: 2, stderr: "give the message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--provider", "script"}, tt.args...)
			if tt.name == "unknown provider" || tt.name == "no message" {
				args = append([]string{"run"}, tt.args...)
			}
			r := cli(t, e, args...)
			if m := sessionLine.FindStringSubmatch(r.stderr); m != nil && r.code == exitNeedsInput {
				// Left waiting for an answer: cancelled, so that the
				// daemon has no turn to wait for as it stops.
				defer cli(t, e, "cancel", m[1])
			}
			if r.code != tt.code || !strings.Contains(r.stdout, tt.stdout) || !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d with %q / %q", r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
			}
			if tt.file != "" {
				_, err := os.Stat(filepath.Join(e.work, tt.file))
				if tt.wantFile != (err == nil) {
					t.Errorf("%s written: %v, want %v", tt.file, err == nil, tt.wantFile)
				}
			}
		})
	}
	// A tool's output shows as its own lines, after the text.
	r := cli(t, e, "run", "--provider", "script", "--approve", "all", "say first\nrun echo x")
	if !regexp.MustCompile(`first\n+→ Run: .*\n✓ Run: `).MatchString(r.stdout) {
		t.Errorf("run output %q", r.stdout)
	}
}

// events reads `ahpd run --json` lines as they come.
func events(t *testing.T, r io.Reader) <-chan turnEvent {
	ch := make(chan turnEvent, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var ev turnEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("not one JSON event a line: %q: %v", sc.Text(), err)
				continue
			}
			ch <- ev
		}
	}()
	return ch
}

func nextEvent(t *testing.T, ch <-chan turnEvent, want func(turnEvent) bool) turnEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the events ended first")
			}
			if want(ev) {
				return ev
			}
		case <-time.After(startTimeout):
			t.Fatal("no such event in time")
		}
	}
}

func TestCLIRunJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	r := cli(t, e, "run", "--json", "--provider", "script", "--approve", "all", "say hi\nrun echo x")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev turnEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		kinds = append(kinds, ev.Event+":"+ev.State)
		if ev.Event == "end" && (ev.Exit == nil || *ev.Exit != 0 || ev.DurationMs == nil) {
			t.Errorf("end event %+v", ev)
		}
		if ev.Event == "approval" && (ev.Approved == nil || !*ev.Approved || ev.By != "permissions" || ev.Message != "mode bypass" || ev.Tool != "Run") {
			t.Errorf("approval event %+v, want the run approved by the permissions' mode bypass", ev)
		}
	}
	// The run is approved by the session's permissions (--approve all),
	// shown before it runs.
	want := []string{"session:", "text:", "approval:", "tool:running", "tool:completed", "end:complete"}
	got := strings.Join(slicesCompact(kinds), " ")
	if got != strings.Join(want, " ") {
		t.Errorf("events %s, want %s", got, strings.Join(want, " "))
	}
}

// slicesCompact drops repeats in a row (text arrives in several deltas).
func slicesCompact(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// TestCLIRunInterrupted: SIGINT cancels the turn, and ahpd run exits 130.
func TestCLIRunInterrupted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	cmd := cliCmd(e, "run", "--json", "--provider", "script", "say started\nwait 30s\nsay never")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	evs := events(t, stdout)
	session := nextEvent(t, evs, func(ev turnEvent) bool { return ev.Event == "session" }).Session
	nextEvent(t, evs, func(ev turnEvent) bool { return ev.Event == "text" && strings.Contains(ev.Text, "started") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	end := nextEvent(t, evs, func(ev turnEvent) bool { return ev.Event == "end" })
	if end.State != string(protocol.TurnStateCancelled) || end.Exit == nil || *end.Exit != 130 {
		t.Errorf("end %+v, want cancelled, exit 130", end)
	}
	for range evs {
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130", err)
	}
	show := cli(t, e, "show", session)
	if show.code != 0 || !strings.Contains(show.stdout, "\nstarted\n\n[cancelled]") {
		t.Errorf("show after the interrupt: %d %q %q", show.code, show.stdout, show.stderr)
	}
}

// TestCLIQuestionOnATerminal answers the agent's question on a pseudo-
// terminal, as a person would.
func TestCLIQuestionOnATerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	cmd := cliCmd(e, "run", "--provider", "script", "ask What is your name?")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	// What the terminal shows, chunk by chunk as the command writes it.
	chunks := make(chan string, 256)
	go func() {
		defer close(chunks)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			if n > 0 {
				chunks <- string(buf[:n])
			}
			if err != nil {
				return // EIO once the command has exited
			}
		}
	}()
	var shown strings.Builder
	waitFor := func(s string) {
		t.Helper()
		timeout := time.After(startTimeout)
		for !strings.Contains(shown.String(), s) {
			select {
			case c, ok := <-chunks:
				if !ok {
					t.Fatalf("the terminal closed before showing %q: %q", s, shown.String())
				}
				shown.WriteString(c)
			case <-timeout:
				t.Fatalf("the terminal never showed %q: %q", s, shown.String())
			}
		}
	}
	waitFor("What is your name? ")
	if _, err := tty.Write([]byte("Ada Lovelace\n")); err != nil {
		t.Fatal(err)
	}
	waitFor("✓ done in")
	for c := range chunks {
		shown.WriteString(c)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit %v; the terminal showed %q", err, shown.String())
	}
	if !strings.Contains(shown.String(), "Ada Lovelace") {
		t.Errorf("the terminal showed %q", shown.String())
	}
}

func TestCLISessionCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	r := cli(t, e, "run", "--provider", "script", "--title", "First of all", "say one")
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("run: %d %q", r.code, r.stderr)
	}
	id := m[1]
	expect := func(what string, r cliResult, code int, stdout string) {
		t.Helper()
		if r.code != code || !strings.Contains(r.stdout+r.stderr, stdout) {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want %d with %q", what, r.code, r.stdout, r.stderr, code, stdout)
		}
	}
	expect("ls", cli(t, e, "ls"), 0, id)
	ls := cli(t, e, "ls", "--json")
	var rows []protocol.SessionSummary
	if err := json.Unmarshal([]byte(ls.stdout), &rows); err != nil || len(rows) != 1 || rows[0].Title != "First of all" {
		t.Fatalf("ls --json: %v %q", err, ls.stdout)
	}
	expect("show", cli(t, e, "show", id[:6]), 0, "> say one\none")
	expect("run --session", cli(t, e, "run", "--session", id, "say two"), 0, "two")
	expect("send", cli(t, e, "send", id, "say waiting\nwait 30s"), 0, "sent")
	expect("send while busy", cli(t, e, "send", id, "say later"), 0, "queued")
	expect("cancel", cli(t, e, "cancel", id), 0, "cancelled")
	expect("status", cli(t, e, "status", id), 0, "active")
	// The queued message runs once the cancelled turn is gone; a turn
	// that continues the session waits for it.
	expect("run after the queue", cli(t, e, "run", "--session", id, "say three"), 0, "three")
	expect("suspend", cli(t, e, "suspend", id), 0, "inactive")
	expect("status asleep", cli(t, e, "status", id), 0, "inactive")
	expect("resume", cli(t, e, "resume", id), 0, "active")
	expect("show all", cli(t, e, "show", id), 0, "> say later")
	expect("cancel when idle", cli(t, e, "cancel", id), 1, "nothing to cancel")
	expect("rm", cli(t, e, "rm", id), 0, "removed")
	expect("show after rm", cli(t, e, "show", id), 1, "ahpd ls --all")
	if r := cli(t, e, "ls"); strings.Contains(r.stdout, id) {
		t.Errorf("ls after rm: %q", r.stdout)
	}
}

func TestCLIErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no daemon", []string{"ls"}, 1, "start one with `ahpd`"},
		{"nothing answers", []string{"ls", "--url", "ws://127.0.0.1:1"}, 1, "no ahpd answers at ws://127.0.0.1:1"},
		{"bad flag", []string{"ls", "--bogus"}, 2, "usage: ahpd ls"},
		{"no session named", []string{"status"}, 2, "name one session"},
	}
	for _, tt := range tests {
		r := cli(t, e, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d with %q", tt.name, r.code, r.stderr, tt.code, tt.want)
		}
	}
	serveDaemon(t, e)
	r := cli(t, e, "ls", "--token", "wrong")
	if r.code != 1 || !strings.Contains(r.stderr, "refused the token") {
		t.Errorf("a wrong token: exit %d, stderr %q", r.code, r.stderr)
	}
}
