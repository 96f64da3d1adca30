package claude_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

// These tests run the real Claude Code CLI (claudetest.CLI: $AHPD_CLAUDE,
// else the pinned version, installed on first use) against claudetest's
// mock of the Messages API, each in a HOME of its own.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a mock model, a HOME and a working directory, and a backend
// running the CLI against them.
type fixture struct {
	cli     string
	mock    *claudetest.Server
	home    string
	dir     string
	backend *claude.Backend
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{cli: claudetest.CLI(t), mock: claudetest.NewServer(), home: t.TempDir(), dir: t.TempDir()}
	t.Cleanup(f.mock.Close)
	f.backend = f.newBackend()
	return f
}

// newBackend returns a backend as a restarted ahpd would make it.
func (f *fixture) newBackend() *claude.Backend {
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("AHPD_CLAUDE_DEBUG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	}
	return claude.New(claude.Options{Command: f.cli, Env: f.mock.Env(f.home), Logger: log})
}

func (f *fixture) conv(id string) plugins.Conversation {
	return plugins.Conversation{ID: id, Dir: f.dir}
}

// start starts an agent, closed when the test ends.
func (f *fixture) start(t testing.TB, b *claude.Backend, id string, resume bool, config protocol.Object) *claude.Agent {
	t.Helper()
	a, err := b.Start(context.Background(), plugins.StartOptions{Conversation: f.conv(id), Resume: resume, Config: config})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a.(*claude.Agent)
}

// prompt runs one turn, bounded so that a hung turn fails the test.
func prompt(t testing.TB, a plugins.Agent, turn *pluginstest.Turn, text string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	return a.Prompt(ctx, userMessage(text), turn)
}

func userMessage(text string) protocol.Message {
	return protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
}

func newID() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// lastRequest returns the model call the mock received last.
func (f *fixture) lastRequest(t testing.TB) *claudetest.Request {
	t.Helper()
	reqs := f.mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the mock received no model call")
	}
	return reqs[len(reqs)-1]
}

// gone reports whether no process has pid any more.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// waitForFile waits for the file at path, which the CLI writes, to hold
// text.
func waitForFile(t testing.TB, path, text string) {
	t.Helper()
	pluginstest.WaitFileFor(t, path, testwait.Hang, func(data []byte) bool { return strings.Contains(string(data), text) })
}

func TestTextTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	reply := "Hello from the mock model, streamed in small pieces."
	f.mock.Enqueue(claudetest.Response{Blocks: []claudetest.Block{{Type: "text", Text: reply}}, ChunkSize: 8, InputTokens: 321, OutputTokens: 45})

	turn := pluginstest.NewTurn("turn-1")
	if err := prompt(t, a, turn, "Say hello"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if got := turn.Response(); got != reply {
		t.Errorf("text = %q, want %q", got, reply)
	}
	if n := len(turn.Of("text")); n < 2 {
		t.Errorf("text came in %d piece(s), want the stream's deltas", n)
	}
	usage := turn.Of("usage")
	if len(usage) != 1 {
		t.Fatalf("usage reported %d times, want once", len(usage))
	}
	u := usage[0].Usage
	if u.InputTokens == nil || *u.InputTokens != 321 || u.OutputTokens == nil || *u.OutputTokens != 45 || u.Model == nil || *u.Model == "" {
		t.Errorf("usage = %+v", u)
	}
	if got := f.lastRequest(t).UserText(); got != "Say hello" {
		t.Errorf("the model was asked %q", got)
	}
	if !a.CanResume() {
		t.Error("CanResume is false after a turn")
	}
}

func TestTwoTurnsInOneProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	f.mock.Enqueue(claudetest.Text("first answer"), claudetest.Text("second answer"))

	first := pluginstest.NewTurn("turn-1")
	if err := prompt(t, a, first, "first question"); err != nil {
		t.Fatalf("first Prompt: %v", err)
	}
	pid := claude.PID(a)
	second := pluginstest.NewTurn("turn-2")
	if err := prompt(t, a, second, "second question"); err != nil {
		t.Fatalf("second Prompt: %v", err)
	}
	if got := claude.PID(a); got != pid || pid == 0 {
		t.Errorf("the second turn ran in process %d, the first in %d", got, pid)
	}
	if first.Response() != "first answer" || second.Response() != "second answer" {
		t.Errorf("texts = %q, %q", first.Response(), second.Response())
	}
	texts := f.lastRequest(t).Texts()
	want := []string{"user: first question", "assistant: first answer", "user: second question"}
	if !slices.Equal(texts, want) {
		t.Errorf("the second model call carried %q, want %q", texts, want)
	}

	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !gone(pid) {
		t.Errorf("process %d still runs after Close", pid)
	}
	if err := a.Prompt(context.Background(), userMessage("late"), pluginstest.NewTurn("turn-3")); err == nil {
		t.Error("Prompt after Close succeeded")
	}
}

func TestWriteAllowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	path := filepath.Join(f.dir, "hello.txt")
	f.mock.Enqueue(claudetest.Write("toolu_write_1", path, "hello, file\n"), claudetest.Text("I wrote the file."))

	turn := pluginstest.NewTurn("turn-1")
	turn.Confirms <- true
	if err := prompt(t, a, turn, "write a file"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != "hello, file\n" {
		t.Errorf("the file holds %q (%v)", data, err)
	}
	if got, want := turn.Outline(), []string{"toolStart", "confirm", "toolDone", "text", "usage"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	confirm := turn.Of("confirm")[0].Call
	if confirm.ID != "toolu_write_1" || confirm.Name != "Write" || confirm.Invocation.Text != "Write `hello.txt`" || !strings.Contains(confirm.Input, `"file_path"`) {
		t.Errorf("confirmed call = %+v", confirm)
	}
	done := turn.Of("toolDone")[0]
	if done.Text != "toolu_write_1" || !done.Result.Success || done.Result.PastTenseMessage.Text != "Wrote `hello.txt`" || len(done.Result.Content) != 2 {
		t.Errorf("ToolDone = %+v", done)
	}
	if text, ok := done.Result.Content[0].(*protocol.ToolResultTextContent); !ok || !strings.Contains(text.Text, "hello.txt") {
		t.Errorf("tool result content = %#v", done.Result.Content[0])
	}
	if _, ok := done.Result.Content[1].(*protocol.ToolResultFileEditContent); !ok {
		t.Errorf("the write's second content = %#v, want its fileEdit (TestFileEdits)", done.Result.Content[1])
	}
	if turn.Response() != "I wrote the file." {
		t.Errorf("text = %q", turn.Response())
	}
}

func TestWriteDenied(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	path := filepath.Join(f.dir, "nope.txt")
	f.mock.Enqueue(claudetest.Write("toolu_write_2", path, "should not exist\n"), claudetest.Text("Understood."))

	turn := pluginstest.NewTurn("turn-1")
	turn.Confirms <- false
	if err := prompt(t, a, turn, "write a file"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied file exists (%v)", err)
	}
	// The host ends a denied call itself: no ToolDone.
	if got, want := turn.Outline(), []string{"toolStart", "confirm", "text", "usage"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	results := f.lastRequest(t).ToolResults()
	if len(results) != 1 || !results[0].IsError || results[0].Text != claude.DenyMessage {
		t.Errorf("the model was told %+v", results)
	}
}

// TestKill kills the CLI in the middle of a turn that would stream for
// minutes: the turn ends at once, as interrupted, the CLI is gone, and
// Close has nothing left to wait for.
func TestKill(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	f.mock.Enqueue(claudetest.Response{Blocks: []claudetest.Block{{Type: "text", Text: strings.Repeat("slow words ", 200)}}, ChunkSize: 11, ChunkDelay: time.Second})
	turn := pluginstest.NewTurn("turn-1")
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(context.Background(), userMessage("talk very slowly"), turn) }()
	select {
	case <-turn.Texted():
	case err := <-errc:
		t.Fatalf("Prompt ended before any text: %v", err)
	}
	pid := claude.PID(a)
	a.Kill()
	if err := <-errc; !plugins.IsInterrupted(err) {
		t.Errorf("Prompt = %v, want an interruption", err)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the CLI (pid %d) runs on", pid)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close after Kill: %v", err)
	}
}

// TestInterrupt cancels a turn while the model streams a reply that would
// take a minute: the CLI is interrupted, not killed, the turn ends with
// part of the reply, and the same CLI takes the next turn.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	slow := strings.Repeat("slow words ", 3000)
	f.mock.Enqueue(
		claudetest.Response{Blocks: []claudetest.Block{{Type: "text", Text: slow}}, ChunkSize: 11, ChunkDelay: 20 * time.Millisecond},
		claudetest.Text("after the interrupt"),
	)

	turn := pluginstest.NewTurn("turn-1")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("talk slowly"), turn) }()
	select {
	case <-turn.Texted():
	case err := <-errc:
		t.Fatalf("Prompt ended before any text: %v", err)
	}
	pid := claude.PID(a)
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Prompt = %v, want context.Canceled", err)
	}
	if n := len(turn.Response()); n == 0 || n >= len(slow) {
		t.Errorf("the interrupted turn got %d bytes of text", n)
	}

	next := pluginstest.NewTurn("turn-2")
	if err := prompt(t, a, next, "are you there?"); err != nil {
		t.Fatalf("Prompt after the interrupt: %v", err)
	}
	if next.Response() != "after the interrupt" {
		t.Errorf("text after the interrupt = %q", next.Response())
	}
	if got := claude.PID(a); got != pid {
		t.Errorf("the CLI was restarted (%d, then %d) by the interrupt", pid, got)
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := newID()
	a := f.start(t, f.backend, id, false, nil)
	f.mock.Enqueue(claudetest.Text("The code word is pelican."))
	if err := prompt(t, a, pluginstest.NewTurn("turn-1"), "remember a code word"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	pid := claude.PID(a)
	if !a.CanResume() {
		t.Fatal("CanResume is false after a turn")
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !gone(pid) {
		t.Fatalf("process %d still runs after Close", pid)
	}

	// A restarted ahpd: a new backend, the conversation resumed.
	b := f.newBackend()
	if _, err := b.Start(context.Background(), plugins.StartOptions{Conversation: f.conv(id)}); err == nil {
		t.Error("starting an existing conversation anew succeeded")
	}
	resumed := f.start(t, b, id, true, nil)
	if resumed.ID() != id {
		t.Errorf("resumed ID = %q, want %q", resumed.ID(), id)
	}
	f.mock.Enqueue(claudetest.Text("It was pelican."))
	turn := pluginstest.NewTurn("turn-2")
	if err := prompt(t, resumed, turn, "what was the code word?"); err != nil {
		t.Fatalf("resumed Prompt: %v", err)
	}
	texts := f.lastRequest(t).Texts()
	want := []string{"user: remember a code word", "assistant: The code word is pelican.", "user: what was the code word?"}
	if !slices.Equal(texts, want) {
		t.Errorf("the resumed model call carried %q, want %q", texts, want)
	}
	if turn.Response() != "It was pelican." {
		t.Errorf("text = %q", turn.Response())
	}
}

func TestExitMidTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := newID()
	a := f.start(t, f.backend, id, false, nil)
	f.mock.Enqueue(claudetest.Text("a first, good turn"))
	if err := prompt(t, a, pluginstest.NewTurn("turn-1"), "hello"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}

	// The CLI writes its transcript every 100 ms; one that dies sooner
	// loses what it had not written.
	waitForFile(t, claude.TranscriptPath(a), "a first, good turn")

	// A line the CLI cannot parse makes it exit, complaining on stderr,
	// while it waits for the model.
	f.mock.Enqueue(claudetest.Response{
		Blocks:     []claudetest.Block{{Type: "text", Text: strings.Repeat("never finished ", 50)}},
		ChunkSize:  10,
		ChunkDelay: 50 * time.Millisecond,
		OnRequest: func(*claudetest.Request) {
			if err := claude.WriteRaw(a, "this is not json"); err != nil {
				t.Errorf("WriteRaw: %v", err)
			}
		},
	})
	pid := claude.PID(a)
	err := prompt(t, a, pluginstest.NewTurn("turn-2"), "this turn dies")
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt = %v, want the CLI's exit", err)
	}
	if !strings.Contains(err.Error(), "exit status") || !strings.Contains(err.Error(), "Error parsing streaming input line") {
		t.Errorf("the error does not say how the CLI exited, with its stderr: %v", err)
	}
	if !plugins.IsInterrupted(err) {
		t.Errorf("a turn the CLI died in is not an interruption: %v", err)
	}
	if !gone(pid) {
		t.Errorf("process %d still runs", pid)
	}

	// The next turn starts the CLI again, in the same conversation.
	f.mock.Enqueue(claudetest.Text("back again"))
	turn := pluginstest.NewTurn("turn-3")
	if err := prompt(t, a, turn, "are you back?"); err != nil {
		t.Fatalf("Prompt after the exit: %v", err)
	}
	if got := claude.PID(a); got == pid || got == 0 {
		t.Errorf("the turn after the exit ran in process %d", got)
	}
	if texts := f.lastRequest(t).Texts(); !slices.Contains(texts, "assistant: a first, good turn") {
		t.Errorf("the restarted CLI lost the conversation: %q", texts)
	}

	// As does Start after Close, when the CLI is killed outright.
	f.mock.Enqueue(claudetest.Response{
		Blocks:    []claudetest.Block{{Type: "text", Text: "never sent"}},
		OnRequest: func(*claudetest.Request) { syscall.Kill(claude.PID(a), syscall.SIGKILL) },
	})
	err = prompt(t, a, pluginstest.NewTurn("turn-4"), "this one is killed")
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Prompt of a killed CLI = %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close after the kill: %v", err)
	}
	again := f.start(t, f.backend, id, true, nil)
	f.mock.Enqueue(claudetest.Text("started again"))
	if err := prompt(t, again, pluginstest.NewTurn("turn-5"), "hello again"); err != nil {
		t.Fatalf("Prompt after Start: %v", err)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	config := protocol.Object{
		claude.ConfigModel:           jsontext.Value(`"claude-test-model"`),
		claude.ConfigDisallowedTools: jsontext.Value(`["WebFetch","WebSearch"]`),
	}
	a := f.start(t, f.backend, newID(), false, config)
	if err := prompt(t, a, pluginstest.NewTurn("turn-1"), "hello"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	req := f.lastRequest(t)
	if req.Model != "claude-test-model" {
		t.Errorf("the model called is %q", req.Model)
	}
	if slices.Contains(req.Tools, "WebFetch") || slices.Contains(req.Tools, "WebSearch") || !slices.Contains(req.Tools, "Write") {
		t.Errorf("the tools offered are %q", req.Tools)
	}
	pid := claude.PID(a)

	// A change applies from the next turn, in a CLI restarted on the same
	// conversation.
	a.SetConfig(protocol.Object{
		claude.ConfigModel:          jsontext.Value(`"claude-other-model"`),
		claude.ConfigPermissionMode: jsontext.Value(`"acceptEdits"`),
	})
	path := filepath.Join(f.dir, "edit.txt")
	f.mock.Enqueue(claudetest.Write("toolu_w", path, "accepted\n"), claudetest.Text("done"))
	turn := pluginstest.NewTurn("turn-2")
	if err := prompt(t, a, turn, "write without asking"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if got := claude.PID(a); got == pid {
		t.Error("the CLI was not restarted for the new config")
	}
	req = f.lastRequest(t)
	if req.Model != "claude-other-model" || !slices.Contains(req.Tools, "WebFetch") {
		t.Errorf("after the change the model is %q and the tools %q", req.Model, req.Tools)
	}
	if texts := req.Texts(); !slices.Contains(texts, "user: hello") {
		t.Errorf("the restarted CLI lost the conversation: %q", texts)
	}
	// acceptEdits writes without asking: the call runs, then is done.
	if got, want := turn.Outline(), []string{"toolStart", "toolRunning", "toolDone", "text", "usage"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the accepted edit: %v", err)
	}
}

// TestPickedModel: a turn runs on the model its message picked (a
// client's model picker), over the session config's; a turn that picks
// none, "default", or what no flag may carry, runs the config's.
func TestPickedModel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, protocol.Object{claude.ConfigModel: jsontext.Value(`"claude-config-model"`)})
	for i, tc := range []struct{ picked, want string }{
		{"claude-picked-model", "claude-picked-model"},
		{"", "claude-config-model"},
		{"haiku", "claude-haiku"}, // an alias, which the CLI resolves
		{"default", "claude-config-model"},
		{"--dangerously-skip-permissions", "claude-config-model"},
		{"a model with spaces", "claude-config-model"},
	} {
		msg := userMessage(fmt.Sprintf("turn %d", i))
		if tc.picked != "" {
			msg.Model = &protocol.ModelSelection{ID: tc.picked}
		}
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
		err := a.Prompt(ctx, msg, pluginstest.NewTurn(fmt.Sprintf("turn-%d", i)))
		cancel()
		if err != nil {
			t.Fatalf("picking %q: %v", tc.picked, err)
		}
		if got := f.lastRequest(t).Model; !strings.HasPrefix(got, tc.want) {
			t.Errorf("picking %q, the model called is %q, want %q", tc.picked, got, tc.want)
		}
	}
}

func TestThinkingAndAPIError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	f.mock.Enqueue(claudetest.Thinking("Let me think about it.", "Forty-two."), claudetest.Error("the mock refuses"))

	turn := pluginstest.NewTurn("turn-1")
	if err := prompt(t, a, turn, "think"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if got, want := turn.Outline(), []string{"reasoning", "text", "usage"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	var reasoning strings.Builder
	for _, e := range turn.Of("reasoning") {
		reasoning.WriteString(e.Text)
	}
	if reasoning.String() != "Let me think about it." || turn.Response() != "Forty-two." {
		t.Errorf("reasoning %q, text %q", reasoning.String(), turn.Response())
	}

	failed := pluginstest.NewTurn("turn-2")
	err := prompt(t, a, failed, "fail")
	if err == nil || !strings.Contains(err.Error(), "the mock refuses") {
		t.Errorf("Prompt of a failed model call = %v", err)
	}
	if text := failed.Response(); text != "" {
		t.Errorf("the failure was also reported as text %q", text)
	}
}

func TestConversationIDNotUUID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, "conv-1", false, nil)
	id := a.ID()
	if id == "conv-1" || id != claude.SessionID("conv-1") || len(id) != 36 {
		t.Errorf("ID = %q", id)
	}
	if err := prompt(t, a, pluginstest.NewTurn("turn-1"), "hello"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	// The host records ID() and names the conversation by it from then on;
	// the original id still finds it. The CLI writes its transcript a
	// little after the turn, and at the latest when it exits.
	a.Close()
	for _, conv := range []string{id, "conv-1"} {
		turns, err := f.backend.Turns(context.Background(), f.conv(conv))
		if err != nil || len(turns) != 1 {
			t.Errorf("Turns(%q) = %d turns, %v", conv, len(turns), err)
		}
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for name, opts := range map[string]plugins.StartOptions{
		"relative dir": {Conversation: plugins.Conversation{ID: newID(), Dir: "relative"}},
		"missing dir":  {Conversation: plugins.Conversation{ID: newID(), Dir: filepath.Join(f.dir, "missing")}},
		"no id":        {Conversation: plugins.Conversation{Dir: f.dir}},
	} {
		if a, err := f.backend.Start(ctx, opts); err == nil {
			a.Close()
			t.Errorf("%s: Start succeeded", name)
		}
	}
	missing := claude.New(claude.Options{Command: filepath.Join(f.dir, "no-such-claude")})
	_, err := missing.Start(ctx, plugins.StartOptions{Conversation: f.conv(newID())})
	if err == nil || !strings.Contains(err.Error(), "npm install") {
		t.Errorf("Start without the CLI = %v, want how to install it", err)
	}
}

// TestInfoAndConfigProperties: the models a client picks from are in
// Info, the CLI's aliases unless the options name others, and the config
// offers no model of its own (VS Code would show it as a second picker).
func TestInfoAndConfigProperties(t *testing.T) {
	b := claude.New(claude.Options{})
	info := b.Info()
	if info.Provider != "claude" || info.DisplayName != "Claude Code" || info.Description == "" {
		t.Errorf("Info = %+v", info)
	}
	models := func(info protocol.AgentInfo) []string {
		var out []string
		for _, m := range info.Models {
			if m.Provider != "claude" {
				t.Errorf("model %s has provider %q", m.ID, m.Provider)
			}
			out = append(out, m.ID+"="+m.Name)
		}
		return out
	}
	if got, want := models(info), []string{"default=Default", "sonnet=Claude Sonnet", "opus=Claude Opus", "haiku=Claude Haiku"}; !slices.Equal(got, want) {
		t.Errorf("models = %q, want %q", got, want)
	}
	custom := claude.New(claude.Options{Models: []claude.Model{{ID: "claude-sonnet-5", Name: "Sonnet 5"}, {ID: "--evil"}, {ID: "opus[1m]"}}})
	if got, want := models(custom.Info()), []string{"claude-sonnet-5=Sonnet 5", "opus[1m]=opus[1m]"}; !slices.Equal(got, want) {
		t.Errorf("configured models = %q, want %q", got, want)
	}
	var keys []string
	for _, p := range b.ConfigProperties() {
		keys = append(keys, p.Key)
		if p.Schema.SessionMutable == nil || !*p.Schema.SessionMutable {
			t.Errorf("%s is not session-mutable", p.Key)
		}
	}
	if want := []string{"permissionMode", "allowedTools", "disallowedTools"}; !slices.Equal(keys, want) {
		t.Errorf("config keys = %q, want %q", keys, want)
	}
}

func TestCancelDuringPermissionPrompt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	path := filepath.Join(f.dir, "unanswered.txt")
	f.mock.Enqueue(claudetest.Write("toolu_pending", path, "x\n"), claudetest.Text("still here"))

	// The user never answers; the turn is cancelled while the CLI waits.
	turn := pluginstest.NewTurn("turn-1")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("write"), turn) }()
	select {
	case asked := <-turn.Asked():
		if call := asked.Call; call.ID != "toolu_pending" {
			t.Errorf("asked about %+v", call)
		}
	case err := <-errc:
		t.Fatalf("Prompt ended before asking: %v", err)
	}
	pid := claude.PID(a)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unanswered write happened (%v)", err)
	}

	next := pluginstest.NewTurn("turn-2")
	if err := prompt(t, a, next, "hello?"); err != nil {
		t.Fatalf("Prompt after the cancel: %v", err)
	}
	if next.Response() != "still here" || claude.PID(a) != pid {
		t.Errorf("after the cancel: text %q in process %d (was %d)", next.Response(), claude.PID(a), pid)
	}
}

func TestCloseDuringTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	f.mock.Enqueue(claudetest.Write("toolu_pending", filepath.Join(f.dir, "x.txt"), "x\n"))

	turn := pluginstest.NewTurn("turn-1")
	errc := make(chan error, 1)
	go func() { errc <- prompt(t, a, turn, "write") }()
	select {
	case <-turn.Asked():
	case err := <-errc:
		t.Fatalf("Prompt ended before asking: %v", err)
	}
	pid := claude.PID(a)
	// Close is bounded by the backend itself: the CLI has a few seconds
	// to exit once its stdin is closed, and is killed then.
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-errc; err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("Prompt cut short by Close = %v", err)
	}
	if !gone(pid) || !gone(-pid) {
		t.Errorf("process %d or its group still runs after Close", pid)
	}
}

// TestCheck checks a missing CLI is reported, with how to install it,
// before any session tries it.
func TestCheck(t *testing.T) {
	missing := claude.New(claude.Options{Command: filepath.Join(t.TempDir(), "claude")})
	if err := missing.Check(context.Background()); err == nil || !strings.Contains(err.Error(), claude.InstallHint) {
		t.Errorf("Check with a missing CLI: %v", err)
	}
	if err := claude.New(claude.Options{Command: claudetest.CLI(t)}).Check(context.Background()); err != nil {
		t.Errorf("Check with the CLI: %v", err)
	}
	_, err := missing.Start(context.Background(), plugins.StartOptions{Conversation: plugins.Conversation{ID: "c1", Dir: t.TempDir()}})
	if !plugins.IsUnavailable(err) {
		t.Errorf("Start with a missing CLI: %v, want an UnavailableError", err)
	}
}

// TestContinueAfterExit checks a turn the CLI died in goes on in a CLI
// started again on the conversation, and reads back as one turn: asked to
// pick up when the CLI had written the prompt down, sent the prompt again
// when it had not.
func TestContinueAfterExit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := newID()
	a := f.start(t, f.backend, id, false, nil)
	f.mock.Enqueue(claudetest.Text("a first, good turn"))
	if err := prompt(t, a, pluginstest.NewTurn("turn-1"), "hello"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	waitForFile(t, claude.TranscriptPath(a), "a first, good turn")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()

	// Killed at once: the prompt never reached the transcript.
	f.mock.Enqueue(claudetest.Response{
		Blocks:    []claudetest.Block{{Type: "text", Text: "never sent"}},
		OnRequest: func(*claudetest.Request) { syscall.Kill(claude.PID(a), syscall.SIGKILL) },
	})
	if err := prompt(t, a, pluginstest.NewTurn("turn-2"), "this turn dies early"); !plugins.IsInterrupted(err) {
		t.Fatalf("Prompt = %v, want an interruption", err)
	}
	a.Close()
	a = f.start(t, f.backend, id, true, nil)
	f.mock.Enqueue(claudetest.Text("answered the second time"))
	rest := pluginstest.NewTurn("turn-2")
	if err := plugins.Continuer(a).Continue(ctx, protocol.Message{Text: "this turn dies early"}, rest); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	if texts := f.lastRequest(t).Texts(); !slices.Contains(texts, "user: this turn dies early") {
		t.Errorf("the lost prompt was not sent again: %q", texts)
	}
	waitForFile(t, claude.TranscriptPath(a), "answered the second time")

	// Killed once the prompt is down: the CLI is asked to go on.
	transcript := claude.TranscriptPath(a)
	f.mock.Enqueue(claudetest.Response{
		Blocks: []claudetest.Block{{Type: "text", Text: "never sent"}},
		OnRequest: func(*claudetest.Request) {
			// The CLI writes its transcript every 100 ms. This runs
			// on the mock's goroutine, which cannot fail the test: it
			// kills the CLI once the prompt is down, or, should it
			// never be, when the test gives up waiting.
			wctx, cancel := context.WithTimeout(ctx, testwait.Hang)
			defer cancel()
			_, _ = pluginstest.WaitFile(wctx, transcript, func(data []byte) bool { return strings.Contains(string(data), "this turn dies late") })
			syscall.Kill(claude.PID(a), syscall.SIGKILL)
		},
	})
	if err := prompt(t, a, pluginstest.NewTurn("turn-3"), "this turn dies late"); !plugins.IsInterrupted(err) {
		t.Fatalf("Prompt = %v, want an interruption", err)
	}
	a.Close()
	a = f.start(t, f.backend, id, true, nil)
	f.mock.Enqueue(claudetest.Text("picking up where I was"))
	rest = pluginstest.NewTurn("turn-3")
	if err := plugins.Continuer(a).Continue(ctx, protocol.Message{Text: "this turn dies late"}, rest); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	if got := rest.Response(); got != "picking up where I was" {
		t.Errorf("the continued turn said %q", got)
	}
	if texts := strings.Join(f.lastRequest(t).Texts(), "\n"); !strings.Contains(texts, "Continue where you left off") || !strings.Contains(texts, "this turn dies late") {
		t.Errorf("the model was not asked to go on in the conversation: %q", texts)
	}
	waitForFile(t, claude.TranscriptPath(a), "picking up where I was")
	turns, err := f.backend.Turns(ctx, f.conv(id))
	if err != nil || len(turns) != 3 {
		t.Fatalf("turns read back: %d, %v", len(turns), err)
	}
	if turns[2].Message.Text != "this turn dies late" || !strings.Contains(responseText(turns[2]), "picking up where I was") {
		t.Errorf("the continued turn read back: %+v", turns[2])
	}
}

func responseText(t protocol.Turn) string {
	var b strings.Builder
	for _, p := range t.ResponseParts {
		if md, ok := p.(*protocol.MarkdownResponsePart); ok {
			b.WriteString(md.Content)
		}
	}
	return b.String()
}

// A steering message the chat hands the CLI once its reply ended is a
// second prompt of the same turn: the model is told it comes while it
// works on the turn, and the transcript reads back as one turn holding
// both replies.
func TestSteeringIsOneTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := newID()
	a := f.start(t, f.backend, id, false, nil)
	f.mock.Enqueue(claudetest.Text("the first reply"), claudetest.Text("the steered reply"))
	turn := pluginstest.NewTurn("turn-1")
	if err := prompt(t, a, turn, "build it"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if err := prompt(t, a, turn, "use make, not go build"); err != nil {
		t.Fatalf("the steering Prompt: %v", err)
	}
	texts := strings.Join(f.lastRequest(t).Texts(), "\n")
	if !strings.Contains(texts, "while you work on this turn") || !strings.Contains(texts, "use make, not go build") {
		t.Errorf("the model was not told the message steers the turn: %q", texts)
	}
	waitForFile(t, claude.TranscriptPath(a), "the steered reply")
	turns, err := f.backend.Turns(context.Background(), f.conv(id))
	if err != nil || len(turns) != 1 {
		t.Fatalf("turns read back: %d, %v", len(turns), err)
	}
	if got := responseText(turns[0]); turns[0].ID != "turn-1" || turns[0].Message.Text != "build it" ||
		!strings.Contains(got, "the first reply") || !strings.Contains(got, "the steered reply") {
		t.Errorf("the steered turn read back: %s %q %q", turns[0].ID, turns[0].Message.Text, got)
	}
}
