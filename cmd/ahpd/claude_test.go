package main

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/protocol"
)

// These run the daemon with the real Claude Code CLI (claudetest.CLI:
// $AHPD_CLAUDE, else the pinned version, installed on first use by
// whichever test binary asks first), pointed at claudetest's mock of the
// Messages API.

// claudeFixture is a daemon's surroundings for the claude backend: an env,
// a mock model, and a config file declaring the CLI, pointed at the mock
// with the env's home.
type claudeFixture struct {
	e    *env
	cli  string // the CLI as the config names it
	exe  string // the program it runs, as /proc/<pid>/exe names it
	mock *claudetest.Server
	// config is the config file's path.
	config string
}

func newClaudeFixture(tb testing.TB) *claudeFixture {
	tb.Helper()
	f := &claudeFixture{e: newEnv(tb), cli: claudetest.CLI(tb)}
	exe, err := filepath.EvalSymlinks(f.cli)
	if err != nil {
		tb.Fatal(err)
	}
	f.exe = exe
	// Registered before any daemon starts, so that it closes after the
	// daemons (cleanups run last first).
	f.mock = claudetest.NewServer()
	tb.Cleanup(f.mock.Close)

	// The CLI's environment: what claudetest gives a CLI run against the
	// mock. The config's env can add variables but not remove them (an
	// entry is always KEY=VALUE), so the test process's own Anthropic and
	// Claude settings are emptied rather than removed, and the CLI's
	// configuration directory is named outright.
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "CLAUDE_") {
			vars[k] = ""
		}
	}
	for _, kv := range f.mock.Env(f.e.home) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	if vars["HOME"] != f.e.home {
		tb.Fatalf("claudetest's Env sets HOME=%s, want %s", vars["HOME"], f.e.home)
	}
	vars["CLAUDE_CONFIG_DIR"] = filepath.Join(f.e.home, ".claude")
	// JSON is YAML, and quotes every value as it must be.
	data, err := json.Marshal(map[string]any{
		"plugins": []map[string]any{{"kind": "claude", "command": f.cli, "env": vars}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	f.config = filepath.Join(f.e.root, "ahpd.yaml")
	if err := os.WriteFile(f.config, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return f
}

// serve starts a daemon on the fixture's state directory and config.
func (f *claudeFixture) serve(tb testing.TB, args ...string) *proc {
	tb.Helper()
	return serveDaemon(tb, f.e, append([]string{"--config", f.config}, args...)...)
}

// newChat creates a claude session working in the env's work directory
// and subscribes c to it and its default chat.
func (f *claudeFixture) newChat(tb testing.TB, c *hosttest.Client, id string) (sessionURI, chatURI string) {
	tb.Helper()
	sessionURI = "ahp-session:/" + id
	c.MustCall("createSession", map[string]any{
		"channel":            sessionURI,
		"provider":           "claude",
		"workingDirectories": []string{"file://" + f.e.work},
	})
	c.Subscribe(sessionURI)
	chatURI = protocol.DefaultChatURI(sessionURI)
	c.Subscribe(chatURI)
	return sessionURI, chatURI
}

// cliPIDs returns the live CLI processes working in dir: the program the
// fixture runs, in that directory. The directory is the test's own, so
// other tests running the same CLI (plugins/claude's, in parallel under
// go test ./...) are not counted, and neither is the same CLI once the
// daemon that started it has gone and left it to init.
func (f *claudeFixture) cliPIDs(tb testing.TB, dir string) []int {
	tb.Helper()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatalf("counting processes needs /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != f.exe {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir && running(pid) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// waitCLIs waits until n CLI processes work in dir and returns them.
func (f *claudeFixture) waitCLIs(tb testing.TB, dir string, n int, why string) []int {
	tb.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		pids := f.cliPIDs(tb, dir)
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: CLI processes %v in %s, want %d", why, pids, dir, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newTurnID returns a random UUID, the form clients give turn ids.
func newTurnID() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// awaitTurnEnd waits for turn turnID of chat to end and returns it.
func awaitTurnEnd(tb testing.TB, c *hosttest.Client, chat, turnID string) protocol.Turn {
	tb.Helper()
	st := c.WaitState(chat, "turn "+turnID+" to end", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) > 0 && cs.Turns[len(cs.Turns)-1].ID == turnID && cs.ActiveTurn == nil
	})
	cs := st.(*protocol.ChatState)
	return cs.Turns[len(cs.Turns)-1]
}

// sendTB is send for tests and benchmarks alike.
func sendTB(tb testing.TB, c *hosttest.Client, chat, turnID, msg string) protocol.Turn {
	tb.Helper()
	startTurn(c, chat, turnID, msg)
	return awaitTurnEnd(tb, c, chat, turnID)
}

// turnSummary describes a turn for failure messages.
func turnSummary(turn protocol.Turn) string {
	s := fmt.Sprintf("%s %s %q -> %q", turn.ID, turn.State, turn.Message.Text, text(turn.ResponseParts))
	if e := turn.ErrorPart(); e != nil {
		s += fmt.Sprintf(" error %+v", e.Error)
	}
	return s
}

// TestClaudeInTheDaemon runs the Claude Code CLI in the daemon: the agent
// is listed as available, two turns run in one CLI process, the turns
// come back from the CLI's transcript after a restart, the conversation
// goes on where it was, and no CLI outlives the daemon.
func TestClaudeInTheDaemon(t *testing.T) {
	t.Parallel()
	f := newClaudeFixture(t)
	p := f.serve(t, "--log-level", "debug")
	token := f.e.token(t)
	c := connect(t, p, token, "c1")

	if a, ok := agentNamed(t, c, "claude"); !ok || strings.HasPrefix(a.Description, "Unavailable:") {
		t.Fatalf("claude is listed as %+v (%v), want it available", a, ok)
	}

	session, chat := f.newChat(t, c, "claude1")
	t1, t2, t3 := newTurnID(), newTurnID(), newTurnID()
	f.mock.Enqueue(claudetest.Response{Blocks: []claudetest.Block{{Type: "text", Text: "The code word is pelican."}}, ChunkSize: 5})
	if turn := sendTB(t, c, chat, t1, "remember a code word"); turn.State != protocol.TurnStateComplete || text(turn.ResponseParts) != "The code word is pelican." {
		t.Fatalf("first turn: %s", turnSummary(turn))
	}
	pids := f.waitCLIs(t, f.e.work, 1, "after the first turn")

	f.mock.Enqueue(claudetest.Text("It is pelican."))
	if turn := sendTB(t, c, chat, t2, "what is the code word?"); turn.State != protocol.TurnStateComplete || text(turn.ResponseParts) != "It is pelican." {
		t.Fatalf("second turn: %s", turnSummary(turn))
	}
	if got := f.cliPIDs(t, f.e.work); !slices.Equal(got, pids) {
		t.Errorf("after the second turn the CLI processes are %v, want the first turn's %v", got, pids)
	}
	reqs := f.mock.Requests()
	want := []string{"user: remember a code word", "assistant: The code word is pelican.", "user: what is the code word?"}
	if len(reqs) != 2 || !slices.Equal(reqs[1].Texts(), want) {
		var got [][]string
		for _, r := range reqs {
			got = append(got, r.Texts())
		}
		t.Errorf("the model calls carried %q, want 2, the second %q", got, want)
	}

	// A restart: the CLI goes with the daemon, and the turns come back
	// from its transcript.
	c.Close()
	p.terminate()
	if got := f.cliPIDs(t, f.e.work); len(got) != 0 {
		t.Errorf("CLI processes %v outlived the daemon", got)
	}
	p = f.serve(t, "--log-level", "debug")
	c = connect(t, p, token, "c2")
	c.Subscribe(session)
	c.Subscribe(chat)
	st := c.WaitState(chat, "the turns read back", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.ChatState).Turns) >= 2
	})
	turns := st.(*protocol.ChatState).Turns
	wantTurns := []struct{ id, msg, reply string }{
		{t1, "remember a code word", "The code word is pelican."},
		{t2, "what is the code word?", "It is pelican."},
	}
	if len(turns) != len(wantTurns) {
		t.Errorf("after a restart the chat has %d turns, want %d", len(turns), len(wantTurns))
	}
	for i, w := range wantTurns {
		if i >= len(turns) {
			break
		}
		if turn := turns[i]; turn.ID != w.id || turn.Message.Text != w.msg || text(turn.ResponseParts) != w.reply || turn.State != protocol.TurnStateComplete {
			t.Errorf("after a restart turn %d is %s, want %s %q -> %q complete", i, turnSummary(turn), w.id, w.msg, w.reply)
		}
	}

	// The conversation goes on in a CLI resumed from the transcript.
	f.mock.Enqueue(claudetest.Text("Still pelican."))
	if turn := sendTB(t, c, chat, t3, "and now?"); turn.State != protocol.TurnStateComplete || text(turn.ResponseParts) != "Still pelican." {
		t.Fatalf("turn after the restart: %s", turnSummary(turn))
	}
	if got := f.waitCLIs(t, f.e.work, 1, "after the restart's turn"); slices.Equal(got, pids) {
		t.Errorf("the CLI after the restart has the old pid %v", got)
	}
	reqs = f.mock.Requests()
	want = append(want, "assistant: It is pelican.", "user: and now?")
	if len(reqs) != 3 || !slices.Equal(reqs[2].Texts(), want) {
		t.Errorf("the resumed model call carried %q (%d calls), want %q", reqs[len(reqs)-1].Texts(), len(reqs), want)
	}
	if n := f.mock.Pending(); n != 0 {
		t.Errorf("%d model replies were never asked for", n)
	}

	c.Close()
	p.terminate()
	if got := f.cliPIDs(t, f.e.work); len(got) != 0 {
		t.Errorf("CLI processes %v outlived the daemon", got)
	}
}

// carriesText reports whether msg is an action of chat carrying response
// text of turnID: a markdown part with content, or a delta.
func carriesText(msg hosttest.Message, chat, turnID string) bool {
	if msg.Envelope == nil || msg.Envelope.Channel != chat {
		return false
	}
	switch a := msg.Envelope.Action.(type) {
	case *protocol.ChatDeltaAction:
		return a.TurnID == turnID && a.Content != ""
	case *protocol.ChatResponsePartAction:
		md, ok := a.Part.(*protocol.MarkdownResponsePart)
		return a.TurnID == turnID && ok && md.Content != ""
	}
	return false
}

// BenchmarkClaudeTurnOverhead measures a Claude turn through the daemon,
// warm (the chat's CLI already runs, as for every turn after a chat's
// first), and what a resident Claude chat costs the daemon in memory.
//
//   - ms/first-token: from dispatching chat/turnStarted to the first
//     response text reaching the client, less the mock model's own time
//     to its first text (from taking the request to writing its first
//     delta). What remains is the daemon's work and the CLI's.
//   - ms/cli-first-token: the same for the CLI run bare, as the backend
//     runs it (same flags, same mock), its stdin and stdout driven
//     directly: the CLI's share.
//   - ms/host-overhead: the difference, the daemon's share: the
//     WebSocket both ways, the host, the backend, the pipes.
//   - ms/mock: the mock's own time, for scale.
//   - KB/resident-chat: the daemon's live heap and goroutine stacks
//     (go_memstats_heap_alloc_bytes and go_memstats_stack_inuse_bytes on
//     its /metrics) with N Claude chats resident, each with its CLI
//     running and one turn in memory, less with none, over N, with no
//     client watching them either time; KB-stack/resident-chat is the
//     stacks' part (the goroutines that tend a chat's CLI). Each reading
//     follows a collection, which the daemon makes a moment after a
//     session falls asleep, so the heap it reads is what is live: not the
//     garbage the turns left, nor pages the runtime has yet to return, nor
//     how its spans happen to be filled. The resident set, read before,
//     swung between 55 and 244 KB a chat from run to run (issue 13). The
//     CLIs are processes of their own, so they are not in it.
//
// An op is one warm turn through the daemon and one through the bare CLI,
// each to its end. AHPD_BENCH_SESSIONS=memory runs the daemon with
// --sessions memory (no records, no journal): the anchor of what keeping
// them costs a turn.
func BenchmarkClaudeTurnOverhead(b *testing.B) {
	f := newClaudeFixture(b)
	args := []string{"--log-level", "warn", "--session-residency-limit", "0"}
	if os.Getenv("AHPD_BENCH_SESSIONS") == "memory" {
		args = append(args, "--sessions", "memory")
	}
	p := f.serve(b, args...)
	c := connect(b, p, f.e.token(b), "bench")
	session, chat := f.newChat(b, c, "bench")
	f.mock.Enqueue(claudetest.Text("warm"))
	if turn := sendTB(b, c, chat, newTurnID(), "warm up"); turn.State != protocol.TurnStateComplete {
		b.Fatalf("warm-up turn: %s", turnSummary(turn))
	}
	bare := startBareCLI(b, f)
	bare.turn(b, f, "warm up")

	var daemon, cli, mock time.Duration
	n := 0
	for b.Loop() {
		n++
		f.mock.Enqueue(claudetest.Text("pong"))
		id := newTurnID()
		seen := len(c.Messages())
		start := time.Now()
		startTurn(c, chat, id, "ping")
		var at time.Time
		c.Wait("the first text of turn "+id, func(msgs []hosttest.Message) bool {
			for _, m := range msgs[min(seen, len(msgs)):] {
				if carriesText(m, chat, id) {
					at = time.Now()
					return true
				}
			}
			return false
		})
		if turn := awaitTurnEnd(b, c, chat, id); turn.State != protocol.TurnStateComplete {
			b.Fatalf("turn %d: %s", n, turnSummary(turn))
		}
		m := f.mockLatency(b)
		mock += m
		daemon += at.Sub(start) - m

		f.mock.Enqueue(claudetest.Text("pong"))
		cli += bare.turn(b, f, "ping")
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(ms(daemon), "ms/first-token")
	b.ReportMetric(ms(cli), "ms/cli-first-token")
	b.ReportMetric(ms(daemon-cli), "ms/host-overhead")
	b.ReportMetric(ms(mock), "ms/mock")
	bare.close(b)

	// Memory: none resident, then N. The benchmark's chat goes to sleep
	// first; a client watching it would keep its turns in memory. The
	// chats are made by a client of their own, gone before the second
	// reading, so that what the daemon keeps for a watcher is not counted:
	// unwatched, they stay resident (no residency limit, and they are
	// far from sleepAfterMinutes). Twenty chats hold a few MB, well above
	// what a reading after a collection varies by.
	const chats = 20
	token := f.e.token(b)
	c.Close()
	c = connect(b, p, token, "rss")
	released := metrics(b, p, token)["ahpd_memory_released_total"]
	c.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
	f.waitCLIs(b, f.e.work, 0, "with the chat asleep")
	before := awaitRelease(b, p, token, released)
	maker := connect(b, p, token, "maker")
	for i := range chats {
		_, chat := f.newChat(b, maker, fmt.Sprintf("resident%d", i))
		f.mock.Enqueue(claudetest.Text("here"))
		if turn := sendTB(b, maker, chat, newTurnID(), "stay"); turn.State != protocol.TurnStateComplete {
			b.Fatalf("resident chat %d: %s", i, turnSummary(turn))
		}
	}
	maker.Close()
	f.waitCLIs(b, f.e.work, chats, "with the chats resident")
	// A script session that runs a turn and sleeps makes the daemon
	// collect: its own remains (some KB) are within the reading's noise.
	collector := fmt.Sprintf("ahp-session:/collect-%s", newTurnID())
	c.MustCall("createSession", map[string]any{"channel": collector, "provider": "script",
		"workingDirectories": []string{"file://" + f.e.work}})
	c.Subscribe(protocol.DefaultChatURI(collector))
	if turn := sendTB(b, c, protocol.DefaultChatURI(collector), newTurnID(), "say collect"); turn.State != protocol.TurnStateComplete {
		b.Fatalf("the collecting session: %s", turnSummary(turn))
	}
	c.MustCall("unsubscribe", map[string]any{"channel": protocol.DefaultChatURI(collector)})
	released = before["ahpd_memory_released_total"]
	if st := string(c.MustCall("ahpd/suspendSession", map[string]any{"channel": collector})); st != `{"status":"inactive"}` {
		b.Fatalf("the collecting session did not sleep: %s", st)
	}
	after := awaitRelease(b, p, token, released)
	f.waitCLIs(b, f.e.work, chats, "still resident after the reading")
	grew := func(name string) float64 { return (after[name] - before[name]) / 1024 / chats }
	b.ReportMetric(grew("go_memstats_heap_alloc_bytes")+grew("go_memstats_stack_inuse_bytes"), "KB/resident-chat")
	b.ReportMetric(grew("go_memstats_stack_inuse_bytes"), "KB-stack/resident-chat")
	c.Close()
	p.terminate()
	if got := f.cliPIDs(b, f.e.work); len(got) != 0 {
		b.Errorf("CLI processes %v outlived the daemon", got)
	}
}

// mockLatency returns the mock's time for its latest request: from
// taking it to writing its first text.
func (f *claudeFixture) mockLatency(tb testing.TB) time.Duration {
	tb.Helper()
	reqs := f.mock.Requests()
	if len(reqs) == 0 || reqs[len(reqs)-1].FirstByte().IsZero() {
		tb.Fatal("the mock wrote no text")
	}
	r := reqs[len(reqs)-1]
	return r.FirstByte().Sub(r.Received)
}

// settledRSS returns a process's resident set in MB once start-up
// garbage had a moment to go: the least of a few readings.
func settledRSS(tb testing.TB, pid int) float64 {
	tb.Helper()
	least := 0.0
	for i := range 5 {
		time.Sleep(100 * time.Millisecond)
		if rss := rssMB(tb, pid); i == 0 || rss < least {
			least = rss
		}
	}
	return least
}

// bareCLI is the CLI run as the claude backend runs it, driven directly:
// the benchmark's baseline without the daemon.
type bareCLI struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   *bufio.Scanner
	session string
}

func startBareCLI(tb testing.TB, f *claudeFixture) *bareCLI {
	tb.Helper()
	dir := filepath.Join(f.e.root, "bare")
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	session := newTurnID()
	cmd := exec.Command(f.cli, "-p",
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--include-partial-messages",
		"--permission-prompt-tool", "stdio",
		"--session-id", session)
	cmd.Dir = dir
	// claudetest's environment: an entry without "=" removes a variable.
	drop := map[string]bool{"PWD": true}
	var extra []string
	for _, kv := range f.mock.Env(f.e.home) {
		k, _, ok := strings.Cut(kv, "=")
		drop[k] = true
		if ok {
			extra = append(extra, kv)
		}
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, extra...), "PWD="+dir)
	cmd.Stderr = io.Discard
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	cli := &bareCLI{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout), session: session}
	cli.lines.Buffer(make([]byte, 64<<10), 64<<20)
	tb.Cleanup(func() {
		if cli.cmd.ProcessState == nil {
			cli.cmd.Process.Kill()
			cli.cmd.Wait()
		}
	})
	return cli
}

// turn sends a prompt and reads the CLI's lines to the turn's result. It
// returns the time from the write to the first text delta, less the
// mock's own.
func (cli *bareCLI) turn(tb testing.TB, f *claudeFixture, prompt string) time.Duration {
	tb.Helper()
	line, _ := json.Marshal(map[string]any{
		"type": "user", "uuid": newTurnID(), "session_id": "", "parent_tool_use_id": nil,
		"message": map[string]any{"role": "user", "content": prompt},
	})
	start := time.Now()
	if _, err := cli.stdin.Write(append(line, '\n')); err != nil {
		tb.Fatalf("writing to the bare CLI: %v", err)
	}
	var first time.Time
	for cli.lines.Scan() {
		var l struct {
			Type  string `json:"type"`
			Event struct {
				Type  string `json:"type"`
				Delta struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"delta"`
			} `json:"event"`
			IsError bool `json:"is_error"`
		}
		if err := json.Unmarshal(cli.lines.Bytes(), &l); err != nil {
			continue
		}
		switch {
		case l.Type == "stream_event" && l.Event.Type == "content_block_delta" && l.Event.Delta.Type == "text_delta" && l.Event.Delta.Text != "" && first.IsZero():
			first = time.Now()
		case l.Type == "result":
			if l.IsError || first.IsZero() {
				tb.Fatalf("the bare CLI's turn: %s", cli.lines.Bytes())
			}
			return first.Sub(start) - f.mockLatency(tb)
		}
	}
	tb.Fatalf("the bare CLI's output ended: %v", cli.lines.Err())
	return 0
}

// close ends the bare CLI as the backend does: its stdin closed.
func (cli *bareCLI) close(tb testing.TB) {
	tb.Helper()
	cli.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cli.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("the bare CLI: %v", err)
		}
	case <-time.After(exitTimeout):
		cli.cmd.Process.Kill()
		<-done
		tb.Errorf("the bare CLI did not exit within %v of its stdin closing", exitTimeout)
	}
}
