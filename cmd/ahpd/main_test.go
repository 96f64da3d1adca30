package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// ahpdBin is the daemon under test, built once by TestMain.
var ahpdBin string

// raceEnabled is set by race_test.go when the tests run with -race.
var raceEnabled bool

func TestMain(m *testing.M) {
	if dir := os.Getenv(natsServerEnv); dir != "" {
		serveNATSForTest(dir) // a NATS server for a test, not the tests
	}
	if dir := os.Getenv(builtEnv); dir != "" {
		// A test run again by its parent (internal/fulldisk): the
		// parent's builds, which it removes.
		ahpdBin, testAgentBin = filepath.Join(dir, "ahpd"), filepath.Join(dir, "testagent")
		goleak.VerifyTestMain(m)
		return
	}
	dir, err := os.MkdirTemp("", "ahpd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ahpdBin = filepath.Join(dir, "ahpd")
	testAgentBin = filepath.Join(dir, "testagent")
	os.Setenv(builtEnv, dir) // for a test this binary runs again
	err = build(ahpdBin)
	if err == nil {
		err = buildTestAgent(testAgentBin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// builtEnv names the directory of the builds TestMain made, in the
// environment of a test the test binary runs again.
const builtEnv = "AHPD_TEST_BUILT"

// build builds the command in this directory to out.
func build(out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building ahpd: %w", err)
	}
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool, append(args, ".")...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building ahpd: %v\n%s", err, output)
	}
	return nil
}

// Bounds of the waits on a daemon: guards against a hang (testwait.Hang),
// never budgets. A daemon built with the race detector on a loaded
// machine takes many times what a healthy one does on a quiet one.
const (
	startTimeout = testwait.Hang
	exitTimeout  = testwait.Hang
)

// env is a daemon's surroundings: a home, an XDG state home and a state
// directory of its own, so that no test touches the user's files or
// another test's.
type env struct {
	root      string
	home      string
	stateHome string
	state     string // what --state-dir names
	work      string // a working directory for sessions
	// extraEnv is added to the environment of its processes, after the
	// rest: it wins.
	extraEnv []string
	// extraFiles are passed to its processes from fd 3 on.
	extraFiles []*os.File
}

func newEnv(t testing.TB) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{
		root:      root,
		home:      filepath.Join(root, "home"),
		stateHome: filepath.Join(root, "xdg-state"),
		state:     filepath.Join(root, "state"),
		work:      filepath.Join(root, "work"),
	}
	for _, dir := range []string{e.home, e.stateHome, e.work} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// environ is the test's environment with HOME and XDG_* replaced by the
// env's.
func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "GORACE" || strings.HasPrefix(k, "XDG_") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "HOME="+e.home, "XDG_STATE_HOME="+e.stateHome)
	// A daemon built with the race detector otherwise sleeps a second
	// before it exits.
	gorace := "atexit_sleep_ms=0"
	if v := os.Getenv("GORACE"); v != "" {
		gorace = v + " " + gorace
	}
	return append(append(out, "GORACE="+gorace), e.extraEnv...)
}

// token returns the connection token the daemon keeps in the state
// directory.
func (e *env) token(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.state, "connection-token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// proc is a running ahpd.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser // set when launched withStdin
	stdout *os.File       // the read end of its stdout
	stderr lockedBuffer

	exited     chan struct{} // closed once Wait returned
	stdoutDone chan struct{} // closed once its stdout ended

	mu      sync.Mutex
	out     []string      // stdout, line by line
	changed chan struct{} // closed and replaced when a line comes

	// announce is the listening line, once read; from then on it must
	// be the only line of stdout.
	announce string
	addr     string // host:port it listens on
	// stopped says the test's cleanup had to end the process.
	stopped bool
}

type launchOption int

const withStdin launchOption = iota + 1

// launch starts ahpd with args in e. The process is stopped and waited for
// when the test ends.
func launch(t testing.TB, e *env, opt launchOption, args ...string) *proc {
	t.Helper()
	return launchBin(t, e, ahpdBin, opt, args...)
}

// launchBin is launch of another build of ahpd.
func launchBin(t testing.TB, e *env, bin string, opt launchOption, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = e.environ()
	cmd.Dir = e.work
	cmd.ExtraFiles = e.extraFiles
	p := &proc{t: t, cmd: cmd, exited: make(chan struct{}), stdoutDone: make(chan struct{}), changed: make(chan struct{})}
	cmd.Stderr = &p.stderr
	// A descendant holding stderr open must not keep Wait waiting.
	cmd.WaitDelay = time.Second
	if opt == withStdin {
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		p.stdin = w
	}
	// stdout is a pipe of our own rather than StdoutPipe, whose reads
	// must all end before Wait: here a goroutine reads it for the whole
	// life of the process, and Wait runs in another.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		t.Fatal(err)
	}
	w.Close()
	p.stdout = r
	go p.readStdout()
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *proc) readStdout() {
	defer close(p.stdoutDone)
	sc := bufio.NewScanner(p.stdout)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		p.mu.Lock()
		p.out = append(p.out, sc.Text())
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

// line returns stdout's line i, waiting up to timeout for it. ok is false
// when stdout ended or the time ran out first.
func (p *proc) line(i int, timeout time.Duration) (line string, ok bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		if i < len(p.out) {
			line = p.out[i]
			p.mu.Unlock()
			return line, true
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.stdoutDone:
			p.mu.Lock()
			defer p.mu.Unlock()
			if i < len(p.out) {
				return p.out[i], true
			}
			return "", false
		case <-deadline.C:
			return "", false
		}
	}
}

// stdoutLines returns what stdout carried so far.
func (p *proc) stdoutLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.out)
}

var listeningLine = regexp.MustCompile(`^ahpd listening on ws://(127\.0\.0\.1:([0-9]+))$`)

// awaitListening reads the line the daemon prints once it listens.
func (p *proc) awaitListening() {
	p.t.Helper()
	p.awaitListeningIn(startTimeout)
}

// awaitListeningIn is awaitListening waiting up to d.
func (p *proc) awaitListeningIn(d time.Duration) {
	p.t.Helper()
	line, ok := p.line(0, d)
	if !ok {
		p.t.Fatalf("ahpd printed no listening line in %v; stdout %q, stderr:\n%s", d, p.stdoutLines(), p.stderr.String())
	}
	m := listeningLine.FindStringSubmatch(line)
	if m == nil || m[2] == "0" {
		p.t.Fatalf("ahpd's first line is %q, want \"ahpd listening on ws://127.0.0.1:PORT\"", line)
	}
	p.announce, p.addr = line, m[1]
}

// url is the daemon's WebSocket address, carrying token as ?tkn= unless
// it is empty.
func (p *proc) url(token string) string {
	if token == "" {
		return "ws://" + p.addr
	}
	return "ws://" + p.addr + "?tkn=" + token
}

// serveDaemon starts ahpd on a free loopback port with e's state
// directory, then args (a flag given twice takes its last value), and
// waits until it listens.
func serveDaemon(t testing.TB, e *env, args ...string) *proc {
	t.Helper()
	p := launch(t, e, 0, append([]string{"--listen", "127.0.0.1:0", "--state-dir", e.state}, args...)...)
	p.awaitListening()
	return p
}

// exitedWithin waits up to d for the process to exit.
func (p *proc) exitedWithin(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-p.exited:
			return true
		default:
			return false
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.exited:
		return true
	case <-timer.C:
		return false
	}
}

// wait waits for the process to exit and returns its exit status. Once it
// returns, stdoutLines holds all the process wrote.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	if !p.exitedWithin(timeout) {
		p.t.Fatalf("ahpd did not exit within %v; stderr:\n%s", timeout, p.stderr.String())
	}
	// The reader may not have taken the last lines yet.
	select {
	case <-p.stdoutDone:
	case <-time.After(exitTimeout):
		p.t.Fatal("ahpd's stdout is still open after it exited: a child of it holds it")
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signalling ahpd: %v", err)
	}
}

// terminate sends SIGTERM and expects a clean exit.
func (p *proc) terminate() {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	if code := p.wait(exitTimeout); code != 0 {
		p.t.Fatalf("ahpd exited with status %d after SIGTERM; stderr:\n%s", code, p.stderr.String())
	}
}

// waitStderr waits until stderr contains s.
func (p *proc) waitStderr(s string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("stderr does not say %q; stderr:\n%s", s, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the process at the end of its test: SIGTERM, then SIGKILL if
// it lingers. It checks that the process is gone, and that a daemon which
// announced itself printed nothing else on stdout.
func (p *proc) stop() {
	t := p.t
	if !p.exitedWithin(0) {
		p.stopped = true
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if !p.exitedWithin(exitTimeout) {
			t.Errorf("ahpd did not exit within %v of SIGTERM; killing it", exitTimeout)
			_ = p.cmd.Process.Kill()
			<-p.exited // sure after SIGKILL; WaitDelay bounds the pipes
		} else if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("ahpd exited with status %d after SIGTERM", code)
		}
	}
	// Wait reaped it: a pid still there is another process, or ours
	// escaped.
	if err := syscall.Kill(p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("ahpd (pid %d) outlived its test: kill -0 says %v", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.stdoutDone:
	case <-time.After(exitTimeout):
		t.Errorf("ahpd's stdout is still open after it exited: a child of it holds it")
	}
	p.stdout.Close()
	<-p.stdoutDone
	if p.announce != "" {
		if out := p.stdoutLines(); !slices.Equal(out, []string{p.announce}) {
			t.Errorf("stdout = %q, want only %q", out, p.announce)
		}
	}
	if t.Failed() {
		t.Logf("ahpd %q stderr:\n%s", p.cmd.Args[1:], p.stderr.String())
	}
}

// lockedBuffer is a bytes.Buffer that the process's stderr copier and the
// test can use at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// handshake tries a WebSocket handshake on url with header and returns
// the HTTP status: 101 when the connection was accepted.
func handshake(t *testing.T, url string, header http.Header) int {
	t.Helper()
	// A client of its own, whose idle connections (after a refusal) are
	// closed here rather than left to outlive the test.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: client, HTTPHeader: header})
	if err == nil {
		ws.CloseNow()
		return resp.StatusCode
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return resp.StatusCode
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// connect dials the daemon with hosttest and initializes, subscribed to
// the root.
func connect(t testing.TB, p *proc, token, clientID string) *hosttest.Client {
	t.Helper()
	c := hosttest.Dial(t, p.url(token))
	c.Initialize(clientID, protocol.RootURI)
	return c
}

// newSession creates a script session working in e.work and subscribes c
// to it and its default chat.
func newSession(t *testing.T, c *hosttest.Client, e *env, id string) (sessionURI, chatURI string) {
	t.Helper()
	return newSessionWith(t, c, e, id, nil)
}

// bypass is the session config under which a script session's steps run
// without a person confirming them (docs/PERMISSIONS.md): for sessions
// that run commands, which the default permissions ask about.
var bypass = map[string]any{"permissions": map[string]any{"mode": "bypass"}}

// newSessionWith is newSession for a session made with config, which
// the host takes as given or refuses (ahpd.strictConfig).
func newSessionWith(t *testing.T, c *hosttest.Client, e *env, id string, config map[string]any) (sessionURI, chatURI string) {
	t.Helper()
	sessionURI = "ahp-session:/" + id
	params := map[string]any{
		"channel":            sessionURI,
		"provider":           "script",
		"workingDirectories": []string{"file://" + e.work},
	}
	if config != nil {
		params["config"] = config
		params["_meta"] = map[string]any{"ahpd.strictConfig": true}
	}
	c.MustCall("createSession", params)
	c.Subscribe(sessionURI)
	chatURI = protocol.DefaultChatURI(sessionURI)
	c.Subscribe(chatURI)
	return sessionURI, chatURI
}

// startTurn dispatches a user message starting turn turnID.
func startTurn(c *hosttest.Client, chat, turnID, text string) {
	c.Dispatch(chat, &protocol.ChatTurnStartedAction{
		TurnID: turnID, StartedAt: protocol.FormatTime(time.Now()),
		Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
}

// send starts a turn and waits for it to end.
func send(t *testing.T, c *hosttest.Client, chat, turnID, text string) protocol.Turn {
	t.Helper()
	startTurn(c, chat, turnID, text)
	st := c.WaitState(chat, "turn "+turnID+" to end", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) > 0 && cs.Turns[len(cs.Turns)-1].ID == turnID && cs.ActiveTurn == nil
	})
	cs := st.(*protocol.ChatState)
	return cs.Turns[len(cs.Turns)-1]
}

// text returns the markdown of a turn's response.
func text(parts []protocol.ResponsePart) string {
	var b strings.Builder
	for _, p := range parts {
		if md, ok := p.(*protocol.MarkdownResponsePart); ok {
			b.WriteString(md.Content)
		}
	}
	return b.String()
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"},
		{"-h"},
		{"help"},
		{"serve", "--help"},
		{"-help"},
		// Help asked after other flags is still help, not a usage error.
		{"--state-dir", "x", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			p := launch(t, newEnv(t), 0, args...)
			if code := p.wait(exitTimeout); code != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", code, p.stderr.String())
			}
			out := strings.Join(p.stdoutLines(), "\n")
			for _, want := range []string{"Usage:", "ahpd [serve] [flags]", "--connection-token", "--shutdown-grace"} {
				if !strings.Contains(out, want) {
					t.Errorf("usage does not mention %q:\n%s", want, out)
				}
			}
			if s := p.stderr.String(); s != "" {
				t.Errorf("stderr = %q, want nothing", s)
			}
		})
	}
}

// TestUsageErrors covers what the command line refuses before doing
// anything: exit status 2, a message on stderr, nothing on stdout.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"argument", []string{"extra"}, `unexpected argument "extra"`},
		{"sessions", []string{"--sessions", "disk"}, `--sessions must be file or memory, not "disk"`},
		{"log level", []string{"--log-level", "loud"}, `--log-level: "loud" is not`},
		{"bad duration", []string{"--shutdown-grace", "soon"}, "invalid value"},
		{"relative root", []string{"--allowed-roots", "/tmp,projects"}, `allowed root "projects" is not an absolute path`},
		{"missing root", []string{"--allowed-roots", "/no/such/ahpd-root"}, `allowed root "/no/such/ahpd-root" does not exist`},
		{"root not a directory", []string{"--allowed-roots", ahpdBin}, "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			p := launch(t, e, 0, append(tc.args, "--state-dir", e.state)...)
			if code := p.wait(exitTimeout); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if s := p.stderr.String(); !strings.Contains(s, tc.want) || !strings.HasPrefix(s, "ahpd: ") {
				t.Errorf("stderr = %q, want ahpd: ...%s...", s, tc.want)
			}
			if out := p.stdoutLines(); len(out) != 0 {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if _, err := os.Stat(e.state); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused start made the state directory: %v", err)
			}
		})
	}
}
