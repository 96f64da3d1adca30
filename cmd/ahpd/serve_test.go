package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

func TestStdoutIsTheListeningLineOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e, "--without-connection-token", "--log-level", "debug")
	// Work that logs, so that a log line sent to stdout would show.
	c := connect(t, p, "", "c1")
	_, chat := newSession(t, c, e, "s1")
	send(t, c, chat, "t1", "say hi")
	c.Close()
	p.terminate()
	if out := p.stdoutLines(); len(out) != 1 || !listeningLine.MatchString(out[0]) {
		t.Errorf("stdout = %q, want the one listening line", out)
	}
	// The logs go to stderr instead.
	if s := p.stderr.String(); !strings.Contains(s, "level=DEBUG") || !strings.Contains(s, `msg="shutting down"`) {
		t.Errorf("stderr has not the logs:\n%s", s)
	}
}

// TestJSONLog: with --log-format json every log line on stderr is one
// JSON object with the time, the level and the message, values as plain
// JSON; the lines meant for a person (how to connect) stay as they are.
func TestJSONLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e, "--without-connection-token", "--log-format", "json")
	c := connect(t, p, "", "c1")
	_, chat := newSession(t, c, e, "s1")
	send(t, c, chat, "t1", "say hi")
	c.Close()
	p.terminate()
	msgs := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		if strings.HasPrefix(line, "ahpd: ") {
			continue // for the person who started it
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %q (%v)", line, err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("a log line without %q: %s", k, line)
			}
		}
		msgs[rec["msg"].(string)] = rec
	}
	serving, ok := msgs["serving"]
	if !ok {
		t.Fatalf("no \"serving\" line among %d", len(msgs))
	}
	if v, _ := serving["version"].(string); serving["addr"] != p.addr || v == "" {
		t.Errorf("the serving line is %v: want addr %s and a version", serving, p.addr)
	}
	if _, ok := msgs["shutting down"]; !ok {
		t.Errorf("no \"shutting down\" line")
	}
}

func TestGeneratedToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e)

	path := filepath.Join(e.state, "connection-token")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, mode)
	}
	token := e.token(t)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(token) {
		t.Errorf("token %q is not 16 random bytes in hex", token)
	}
	// The person who started ahpd is told how to connect. stderr is not
	// a terminal here, but a log: it never carries the token.
	p.waitStderr(fmt.Sprintf("ahpd: connect with ws://%s and the token kept in %s\n", p.addr, path), startTimeout)
	if n := strings.Count(p.stderr.String(), token); n != 0 {
		t.Errorf("stderr, a log, shows the token %d times:\n%s", n, p.stderr.String())
	}

	for _, tc := range []struct {
		name   string
		url    string
		header http.Header
		want   int
	}{
		{"no token", p.url(""), nil, http.StatusUnauthorized},
		{"wrong tkn", p.url(string(token[0]^1) + token[1:]), nil, http.StatusUnauthorized},
		{"wrong bearer", p.url(""), bearer(token + "x"), http.StatusUnauthorized},
		{"empty bearer", p.url(""), bearer(""), http.StatusUnauthorized},
		{"basic", p.url(""), http.Header{"Authorization": {"Basic " + token}}, http.StatusUnauthorized},
		{"tkn", p.url(token), nil, http.StatusSwitchingProtocols},
		{"bearer", p.url(""), bearer(token), http.StatusSwitchingProtocols},
	} {
		if got := handshake(t, tc.url, tc.header); got != tc.want {
			t.Errorf("%s: handshake status %d, want %d", tc.name, got, tc.want)
		}
	}
	// A real client with the token speaks AHP.
	connect(t, p, token, "c1").Close()

	// A second start keeps the token, and says it again.
	p.terminate()
	p2 := serveDaemon(t, e)
	if got := e.token(t); got != token {
		t.Errorf("after a restart the token is %q, want %q", got, token)
	}
	p2.waitStderr("ahpd: connect with ws://"+p2.addr+" and the token kept in "+path, startTimeout)
	if got := handshake(t, p2.url(token), nil); got != http.StatusSwitchingProtocols {
		t.Errorf("the kept token after a restart: handshake status %d, want 101", got)
	}
}

func TestTokenOptions(t *testing.T) {
	t.Parallel()

	t.Run("connection-token", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		p := serveDaemon(t, e, "--connection-token", "s3cret")
		checkToken(t, p, "s3cret")
		connect(t, p, "s3cret", "c1").Close()
		if _, err := os.Stat(filepath.Join(e.state, "connection-token")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a token was kept though one was given: %v", err)
		}
		if strings.Contains(p.stderr.String(), "s3cret") {
			t.Errorf("stderr shows the token:\n%s", p.stderr.String())
		}
	})

	t.Run("connection-token-file", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		file := filepath.Join(e.root, "token")
		// An editor's trailing newline is not part of the token.
		if err := os.WriteFile(file, []byte("from-a-file\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := serveDaemon(t, e, "--connection-token-file", file)
		checkToken(t, p, "from-a-file")
		if strings.Contains(p.stderr.String(), "from-a-file") {
			t.Errorf("stderr shows the token:\n%s", p.stderr.String())
		}
	})

	t.Run("without-connection-token", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		p := serveDaemon(t, e, "--without-connection-token")
		if got := handshake(t, p.url(""), nil); got != http.StatusSwitchingProtocols {
			t.Errorf("no token: handshake status %d, want 101", got)
		}
		connect(t, p, "", "c1").Close()
		// With no token to stop them, pages of other origins are refused,
		// as a browser visiting a hostile site would connect.
		if got := handshake(t, p.url(""), http.Header{"Origin": {"https://evil.example"}}); got != http.StatusForbidden {
			t.Errorf("a cross-origin page: handshake status %d, want 403", got)
		}
		if _, err := os.Stat(filepath.Join(e.state, "connection-token")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a token was kept though none is asked: %v", err)
		}
	})

	t.Run("empty file", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		file := filepath.Join(e.root, "token")
		if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := launch(t, e, 0, "--listen", "127.0.0.1:0", "--state-dir", e.state, "--connection-token-file", file)
		if code := p.wait(exitTimeout); code == 0 {
			t.Error("an empty token file was accepted")
		}
		if s := p.stderr.String(); !strings.Contains(s, "ahpd: the connection token file "+file+" is empty") {
			t.Errorf("stderr does not say the file is empty:\n%s", s)
		}
		if out := p.stdoutLines(); len(out) != 0 {
			t.Errorf("stdout = %q, want nothing", out)
		}
	})

	for _, args := range [][]string{
		{"--connection-token", "a", "--connection-token-file", "f"},
		{"--connection-token", "a", "--without-connection-token"},
		{"--connection-token-file", "f", "--without-connection-token"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			p := launch(t, e, 0, append([]string{"--listen", "127.0.0.1:0", "--state-dir", e.state}, args...)...)
			if code := p.wait(exitTimeout); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			want := "ahpd: give at most one of --connection-token, --connection-token-file and --without-connection-token"
			if s := p.stderr.String(); !strings.Contains(s, want) {
				t.Errorf("stderr = %q, want %q", s, want)
			}
			if out := p.stdoutLines(); len(out) != 0 {
				t.Errorf("stdout = %q, want nothing", out)
			}
		})
	}
}

// checkToken checks that the daemon accepts token, as ?tkn= and as a
// Bearer token, and nothing else.
func checkToken(t *testing.T, p *proc, token string) {
	t.Helper()
	for _, tc := range []struct {
		name   string
		url    string
		header http.Header
		want   int
	}{
		{"no token", p.url(""), nil, http.StatusUnauthorized},
		{"wrong tkn", p.url(token + "x"), nil, http.StatusUnauthorized},
		{"wrong bearer", p.url(""), bearer("x" + token), http.StatusUnauthorized},
		{"tkn", p.url(token), nil, http.StatusSwitchingProtocols},
		{"bearer", p.url(""), bearer(token), http.StatusSwitchingProtocols},
	} {
		if got := handshake(t, tc.url, tc.header); got != tc.want {
			t.Errorf("%s: handshake status %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestNonLoopbackNeedsAToken(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		t.Run(addr, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			p := launch(t, e, 0, "--listen", addr, "--state-dir", e.state)
			if code := p.wait(exitTimeout); code == 0 {
				t.Error("ahpd started beyond loopback with no token option")
			}
			want := "ahpd: listening on " + addr + ", beyond this machine, needs --connection-token, --connection-token-file or --without-connection-token"
			if s := p.stderr.String(); !strings.Contains(s, want) {
				t.Errorf("stderr does not say %q:\n%s", want, s)
			}
			// It never listened: the listening line is printed as soon as
			// it does.
			if out := p.stdoutLines(); len(out) != 0 {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if strings.Contains(p.stderr.String(), "msg=serving") {
				t.Errorf("it served:\n%s", p.stderr.String())
			}
			if _, err := os.Stat(filepath.Join(e.state, "connection-token")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("it made a token to refuse: %v", err)
			}
		})
	}
}

func TestSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			// An idle client must not hold the shutdown up: with a grace
			// of an hour, a daemon waiting for it would not exit in the
			// test's time.
			p := serveDaemon(t, e, "--shutdown-grace", "1h")
			c := connect(t, p, e.token(t), "c1")
			p.signal(sig)
			if code := p.wait(exitTimeout); code != 0 {
				t.Errorf("exit status %d after %v, want 0", code, sig)
			}
			select {
			case <-c.Done():
			case <-time.After(exitTimeout):
				t.Error("the client's connection is still open")
			}
		})
	}
}

// TestShutdownEndsRunningTurns stops the daemon while a turn runs a
// command that would last an hour: after the grace period the command is
// killed and the daemon exits. The config file's grace, an hour too, is
// what a daemon ignoring the flag would wait.
func TestShutdownEndsRunningTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	config := writeConfig(t, e, "shutdownGrace: 1h\n")
	p := serveDaemon(t, e, "--config", config, "--shutdown-grace", "500ms")
	c := connect(t, p, e.token(t), "c1")
	_, chat := newSessionWith(t, c, e, "s1", bypass)

	// The command records its pid, then becomes sleep under that pid.
	pidFile := filepath.Join(e.root, "sleep.pid")
	startTurn(c, chat, "t1", "run echo $$ > "+pidFile+"; exec sleep 3600")
	c.WaitState(chat, "the command to run", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		if cs.ActiveTurn == nil {
			return false
		}
		for _, part := range cs.ActiveTurn.ResponseParts {
			if tp, ok := part.(*protocol.ToolCallResponsePart); ok {
				if _, ok := tp.ToolCall.(*protocol.ToolCallRunningState); ok {
					return true
				}
			}
		}
		return false
	})
	pid := readPid(t, pidFile)
	if !running(pid) {
		t.Fatalf("the command (pid %d) is not running", pid)
	}

	start := time.Now()
	p.signal(syscall.SIGTERM)
	if code := p.wait(exitTimeout); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	// The turn was given its grace: a machine slower than any is no
	// quicker than that.
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("ahpd exited %v after SIGTERM, before the grace of 500ms was out", d)
	}
	// The daemon kills its children; one it left behind would be
	// reparented and sleep on.
	if !endsWithin(pid, exitTimeout) {
		t.Fatalf("the command (pid %d) outlived ahpd", pid)
	}
}

// TestBackgroundCommandEndsWithItsStep runs a turn whose command leaves
// sleep in the background: it ends with its step, so it neither outlives
// the turn nor the daemon.
func TestBackgroundCommandEndsWithItsStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e)
	c := connect(t, p, e.token(t), "c1")
	_, chat := newSessionWith(t, c, e, "s1", bypass)

	pidFile := filepath.Join(e.root, "sleep.pid")
	send(t, c, chat, "t1", "run sleep 300 & echo $! > "+pidFile)
	pid := readPid(t, pidFile)
	t.Cleanup(func() {
		if running(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !endsWithin(pid, exitTimeout) {
		t.Errorf("sleep (pid %d) outlived its turn", pid)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(exitTimeout); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if running(pid) {
		t.Errorf("sleep (pid %d) outlived ahpd", pid)
	}
}

// endsWithin reports whether pid stops running within d.
func endsWithin(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); running(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// readPid waits for a command to write its pid to file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		data, err := os.ReadFile(file)
		if err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("%s holds %q", file, data)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s after %v (%v)", file, startTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running reports whether pid is a live process: not gone, and not a
// zombie waiting for a parent to reap it.
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		// No /proc, or it just went: kill -0 alone decides.
		return syscall.Kill(pid, 0) == nil
	}
	for line := range strings.Lines(string(data)) {
		if state, ok := strings.CutPrefix(line, "State:"); ok {
			state = strings.TrimSpace(state)
			return !strings.HasPrefix(state, "Z") && !strings.HasPrefix(state, "X")
		}
	}
	return true
}

func TestRestartKeepsSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e)
	token := e.token(t)
	c := connect(t, p, token, "c1")
	session, chat := newSession(t, c, e, "s1")
	if turn := send(t, c, chat, "t1", "say hello"); turn.State != protocol.TurnStateComplete {
		t.Fatalf("turn state %s, error %+v", turn.State, turn.ErrorPart())
	}
	before := listSessions(t, c)
	if len(before) != 1 || before[0].Resource != session {
		t.Fatalf("listSessions = %+v, want %s", before, session)
	}
	c.Close()
	p.terminate()

	p2 := serveDaemon(t, e)
	c2 := connect(t, p2, token, "c2")
	after := listSessions(t, c2)
	if len(after) != 1 || after[0].Resource != session {
		t.Fatalf("after a restart listSessions = %+v, want %s", after, session)
	}
	if after[0].CreatedAt != before[0].CreatedAt {
		t.Errorf("after a restart createdAt = %s, want %s", after[0].CreatedAt, before[0].CreatedAt)
	}
	snap := c2.Subscribe(chat)
	cs, ok := snap.State.(*protocol.ChatState)
	if !ok {
		t.Fatalf("the chat's snapshot is a %T", snap.State)
	}
	// The turn comes back from the backend's transcript: it is known by
	// its message and response.
	var found bool
	for _, turn := range cs.Turns {
		if turn.Message.Text == "say hello" && turn.State == protocol.TurnStateComplete && strings.Contains(text(turn.ResponseParts), "hello") {
			found = true
		}
	}
	if !found {
		t.Errorf("after a restart the chat's turns are %+v, want the hello turn", cs.Turns)
	}
}

func TestMemorySessionsGoWithTheProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e, "--sessions", "memory")
	token := e.token(t)
	c := connect(t, p, token, "c1")
	session, chat := newSession(t, c, e, "s1")
	send(t, c, chat, "t1", "say hello")
	if got := listSessions(t, c); len(got) != 1 || got[0].Resource != session {
		t.Fatalf("listSessions = %+v, want %s", got, session)
	}
	c.Close()
	p.terminate()

	p2 := serveDaemon(t, e, "--sessions", "memory")
	if got := listSessions(t, connect(t, p2, token, "c2")); len(got) != 0 {
		t.Errorf("after a restart with --sessions memory listSessions = %+v, want none", got)
	}
}

func listSessions(t *testing.T, c *hosttest.Client) []protocol.SessionSummary {
	t.Helper()
	raw := c.MustCall("listSessions", map[string]any{"channel": protocol.RootURI})
	var r protocol.ListSessionsResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r.Items
}

// TestDefaultStateDir starts ahpd with no --state-dir: it keeps its state
// in $XDG_STATE_HOME/ahpd, else in ~/.local/state/ahpd.
func TestDefaultStateDir(t *testing.T) {
	t.Parallel()
	t.Run("XDG_STATE_HOME", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		p := launch(t, e, 0, "--listen", "127.0.0.1:0")
		p.awaitListening()
		want := filepath.Join(e.stateHome, "ahpd", "connection-token")
		p.waitStderr("and the token kept in "+want+"\n", startTimeout)
	})
	t.Run("HOME", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.stateHome = "" // as if unset
		p := launch(t, e, 0, "--listen", "127.0.0.1:0")
		p.awaitListening()
		want := filepath.Join(e.home, ".local", "state", "ahpd", "connection-token")
		p.waitStderr("and the token kept in "+want+"\n", startTimeout)
	})
}

// TestConnectLine checks the token is shown on a terminal and nowhere else.
func TestConnectLine(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	if got := connectLine("127.0.0.1:9187", token, "/s/connection-token", true); got != "ahpd: connect with ws://127.0.0.1:9187?tkn="+token+" (the token is kept in /s/connection-token)\n"+
		"ahpd: the dashboard: http://127.0.0.1:9187/ui/?tkn="+token+"\n" {
		t.Errorf("on a terminal: %q", got)
	}
	if got := connectLine("127.0.0.1:9187", token, "/s/connection-token", false); strings.Contains(got, token) {
		t.Errorf("into a log: %q", got)
	}
}

// TestWorldWritableStateDir checks ahpd warns of a state directory others
// may write to.
func TestWorldWritableStateDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.state, 0o777); err != nil {
		t.Fatal(err)
	}
	p := serveDaemon(t, e)
	p.waitStderr("the state directory is writable by others", startTimeout)
}
