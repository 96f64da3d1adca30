package acp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/acp"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

func TestInfo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	info := f.b.Info()
	if info.Provider != "test" || info.DisplayName != "Test agent" || info.Description == "" {
		t.Errorf("Info = %+v", info)
	}
	if len(info.Models) != 0 || len(f.b.ConfigProperties()) != 0 {
		t.Errorf("an agent that reports no models or options has models %v, properties %v", info.Models, f.b.ConfigProperties())
	}
}

func TestPromptReportsUpdates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)
	if a.ID() == "conv" || !strings.HasPrefix(a.ID(), "sess-") {
		t.Errorf("ID() = %q, want the session id the agent chose", a.ID())
	}

	turn := mustPrompt(t, a, strings.Join([]string{
		"say Hello",
		"think pondering",
		"tool t1 Read a file",
		"fail t2 Break things",
		"title My title",
		"unknown-update",
		"garbage",
		"say  bye",
		"usage",
	}, "\n"))

	if got := turn.Response(); got != "Hello bye" {
		t.Errorf("text = %q, want %q (an unknown update kind must not show)", got, "Hello bye")
	}
	if r := turn.Of("reasoning"); len(r) != 1 || r[0].Text != "pondering" {
		t.Errorf("reasoning = %v", r)
	}
	if got := turn.About("t1"); !slices.Equal(got, []string{"toolStart", "toolRunning", "toolDone"}) {
		t.Errorf("t1 events = %v", got)
	}
	start := turn.Of("toolStart")[0].Call
	want := plugins.ToolCall{ID: "t1", Name: "read", DisplayName: "Read a file", Invocation: protocol.Markdown("Read a file"), Input: `{"id":"t1"}`, Kind: "read"}
	if !reflect.DeepEqual(start, want) {
		t.Errorf("ToolStart(%+v), want %+v", start, want)
	}
	if run := turn.Of("toolRunning")[0].Call; run.Invocation != want.Invocation || run.Input != want.Input {
		t.Errorf("ToolRunning(%+v)", run)
	}
	done := turn.Of("toolDone")
	if len(done) != 2 {
		t.Fatalf("ToolDone events: %v", done)
	}
	if r := done[0].Result; !r.Success || r.PastTenseMessage != protocol.Markdown("Read a file") || len(r.Content) != 1 ||
		r.Content[0].(*protocol.ToolResultTextContent).Text != "output of t1" {
		t.Errorf("t1 result = %+v", r)
	}
	if r := done[1].Result; r.Success || r.Error == nil || r.Error.Message != "it broke" {
		t.Errorf("t2 result = %+v, want a failure saying it broke", r)
	}
	if titles := turn.Of("title"); len(titles) != 1 || titles[0].Text != "My title" {
		t.Errorf("titles = %v", titles)
	}
	if u := turn.Of("usage"); len(u) != 1 || *u[0].Usage.InputTokens != 10 || *u[0].Usage.OutputTokens != 20 {
		t.Errorf("usage = %v", u)
	}
}

func TestRefusal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)
	turn := mustPrompt(t, a, "refuse")
	if !strings.Contains(turn.Response(), "refused") {
		t.Errorf("text = %q, want the refusal shown", turn.Response())
	}
}

func TestPermission(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)

	t.Run("approved", func(t *testing.T) {
		turn := pluginstest.NewTurn("")
		turn.Confirms <- true
		if err := prompt(t, a, "permit p1 Edit x.txt", turn); err != nil {
			t.Fatal(err)
		}
		// The permission may overtake the tool_call before it: then
		// Confirm starts the call.
		got := turn.About("p1")
		if !slices.Equal(got, []string{"toolStart", "confirm", "toolDone"}) && !slices.Equal(got, []string{"confirm", "toolDone"}) {
			t.Errorf("p1 events = %v", got)
		}
		c := turn.Of("confirm")[0].Call
		if c.Name != "edit" || c.DisplayName != "Edit x.txt" {
			t.Errorf("Confirm(%+v)", c)
		}
		if r := turn.Of("toolDone")[0].Result; !r.Success {
			t.Errorf("result = %+v", r)
		}
		// allow_once, not the allow_always listed before it.
		if !strings.Contains(turn.Response(), "allowed p1") {
			t.Errorf("text = %q", turn.Response())
		}
	})

	t.Run("denied", func(t *testing.T) {
		turn := pluginstest.NewTurn("")
		turn.Confirms <- false
		if err := prompt(t, a, "permit p2 Edit y.txt", turn); err != nil {
			t.Fatal(err)
		}
		// The host ends a denied call; the agent's failed update for it
		// is not reported over the denial.
		if got := turn.About("p2"); slices.Contains(got, "toolDone") || slices.Contains(got, "toolRunning") {
			t.Errorf("p2 events = %v", got)
		}
		if !strings.Contains(turn.Response(), "reject p2") {
			t.Errorf("text = %q, want the reject_once option chosen", turn.Response())
		}
	})

	t.Run("unknown tool call", func(t *testing.T) {
		turn := pluginstest.NewTurn("")
		turn.Confirms <- true
		if err := prompt(t, a, "permit-unknown u1 Mystery thing", turn); err != nil {
			t.Fatal(err)
		}
		confirms := turn.Of("confirm")
		if len(confirms) != 1 || confirms[0].Call.ID != "u1" || confirms[0].Call.DisplayName != "Mystery thing" {
			t.Errorf("confirms = %+v", confirms)
		}
		if !strings.Contains(turn.Response(), "allowed u1") {
			t.Errorf("text = %q", turn.Response())
		}
	})

	t.Run("cancelled while asking", func(t *testing.T) {
		turn := pluginstest.NewTurn("")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- a.Prompt(ctx, userMessage("permit p3 Edit z.txt"), turn) }()
		select {
		case <-turn.Asked():
		case <-time.After(testwait.Hang):
			t.Fatal("no confirmation asked")
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		// The agent got a cancelled outcome and ended the turn; it still
		// works.
		if got := mustPrompt(t, a, "say still here").Response(); got != "still here" {
			t.Errorf("next turn text = %q", got)
		}
	})
}

// TestCancel cancels a turn the agent ends at session/cancel: the turn
// ends then, not at the grace's end, which is an hour.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	acp.SetCancelGrace(f.b, time.Hour)
	a := f.start(t, f.b, "conv", false)
	turn := pluginstest.NewTurn("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("wait"), turn) }()
	wctx, wcancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer wcancel()
	if !turn.WaitText(wctx, "waiting") {
		t.Fatal("the agent did not start waiting")
	}
	cancel()
	if err := ended(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := mustPrompt(t, a, "say after").Response(); got != "after" {
		t.Errorf("next turn text = %q", got)
	}
}

// TestCancelStubbornAgentIsKilled cancels a turn the agent goes on with:
// at the grace's end the agent is killed and the turn ends.
func TestCancelStubbornAgentIsKilled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	acp.SetCancelGrace(f.b, 300*time.Millisecond)
	a := f.start(t, f.b, "conv", false)
	pid := acp.AgentPID(a)
	turn := pluginstest.NewTurn("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("wait-stubborn"), turn) }()
	wctx, wcancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer wcancel()
	if !turn.WaitText(wctx, "waiting") {
		t.Fatal("the agent did not start waiting")
	}
	start := time.Now()
	cancel()
	if err := ended(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// The agent had its grace: no machine, however slow, ends it sooner.
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the stubborn agent's turn ended %v after the cancel, within its grace", d)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the agent (pid %d) runs on", pid)
	}
	if err := prompt(t, a, "say hi", pluginstest.NewTurn("")); err == nil {
		t.Error("a killed agent took another turn")
	}
}

// TestKillHungAgent kills an agent that hangs mid-turn, ignoring
// session/cancel and the end of its stdin: the cancelled turn, which
// would otherwise wait out an hour's grace, ends at the kill, as
// cancelled, and the process is gone.
func TestKillHungAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	acp.SetCancelGrace(f.b, time.Hour)
	a := f.start(t, f.b, "conv", false)
	pid := acp.AgentPID(a)
	turn := pluginstest.NewTurn("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("hang"), turn) }()
	wctx, wcancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer wcancel()
	if !turn.WaitText(wctx, "hanging") {
		t.Fatal("the agent did not hang")
	}
	cancel()
	// The agent logs the cancel it got, and ignores it.
	f.log.waitFor(t, "testagent: cancel received")
	a.(plugins.Killer).Kill()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the agent (pid %d) runs on", pid)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close after Kill: %v", err)
	}
}

func TestCrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)
	pid := acp.AgentPID(a)
	turn := pluginstest.NewTurn("")
	err := prompt(t, a, "say before\ncrash", turn)
	if err == nil || !strings.Contains(err.Error(), "fatal: boom") || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one quoting the agent's stderr", err)
	}
	if !plugins.IsInterrupted(err) {
		t.Errorf("a turn the agent died in is not an interruption: %v", err)
	}
	t.Logf("the turn's error: %v", err)
	if turn.Response() != "before" {
		t.Errorf("text = %q", turn.Response())
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the agent (pid %d) runs on", pid)
	}
	if err := prompt(t, a, "say again", pluginstest.NewTurn("")); err == nil || !strings.Contains(err.Error(), "fatal: boom") {
		t.Errorf("a turn of the dead agent: err = %v", err)
	}
	a.Close()

	// The next Start launches the agent again.
	a2 := f.start(t, f.b, "conv", false)
	if got := mustPrompt(t, a2, "say back").Response(); got != "back" {
		t.Errorf("text = %q", got)
	}
}

func TestCloseDuringTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)
	pid := acp.AgentPID(a)
	turn := pluginstest.NewTurn("")
	errc := make(chan error, 1)
	go func() { errc <- prompt(t, a, "wait", turn) }()
	wctx, wcancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer wcancel()
	if !turn.WaitText(wctx, "waiting") {
		t.Fatal("the agent did not start waiting")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Error("a turn cut short by Close succeeded")
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the agent (pid %d) runs on", pid)
	}
	if err := prompt(t, a, "say hi", pluginstest.NewTurn("")); err == nil {
		t.Error("a closed agent took a turn")
	}
}

func TestGarbageOnStdout(t *testing.T) {
	t.Parallel()
	t.Run("skipped", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, map[string]string{"TESTAGENT_GARBAGE": "lines"})
		a := f.start(t, f.b, "conv", false)
		if got := mustPrompt(t, a, "say fine").Response(); got != "fine" {
			t.Errorf("text = %q", got)
		}
	})
	t.Run("then exit", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, map[string]string{"TESTAGENT_GARBAGE": "exit"})
		_, err := f.b.Start(context.Background(), plugins.StartOptions{Conversation: f.conv("conv")})
		if err == nil || !strings.Contains(err.Error(), "giving up") {
			t.Errorf("Start: err = %v, want one quoting the agent's stderr", err)
		}
		t.Logf("Start: %v", err)
	})
	t.Run("then silence", func(t *testing.T) {
		t.Parallel()
		// The caller's deadline ends the start, not the backend's own
		// bound, an hour here: a Start that ignored it would not end in
		// the test's time.
		f := newFixture(t, map[string]string{"TESTAGENT_GARBAGE": "hang"})
		f.startTimeout = time.Hour
		f.b = f.backend(testAgent)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := f.b.Start(ctx, plugins.StartOptions{Conversation: f.conv("conv")})
			errc <- err
		}()
		err := ended(t, errc)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Start: err = %v, want context.DeadlineExceeded", err)
		}
		t.Logf("Start: %v", err)
	})
}

func TestFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	outside := t.TempDir()
	if err := os.WriteFile(f.path("notes.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, f.path("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "nothing-yet"), f.path("dangling")); err != nil {
		t.Fatal(err)
	}
	a := f.start(t, f.b, "conv", false)

	tests := []struct {
		step, want string
	}{
		{"write sub/new.txt hello there", "wrote sub/new.txt"},
		{"read notes.txt 2 1", "read: two\n"},
		{"read notes.txt", "read: one\ntwo\nthree\n"},
		{"read missing.txt", "read failed"},
		{"write ../escape.txt nope", "write failed"},
		{"write " + filepath.Join(outside, "abs.txt") + " nope", "write failed"},
		{"write link/via-link.txt nope", "write failed"},
		{"write dangling nope", "write failed"},
		{"read link/secret.txt", "read failed"},
	}
	for _, tt := range tests {
		turn := mustPrompt(t, a, tt.step)
		if got := turn.Response(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: %q, want %q...", tt.step, got, tt.want)
		}
	}
	if b, err := os.ReadFile(f.path("sub/new.txt")); err != nil || string(b) != "hello there" {
		t.Errorf("sub/new.txt = %q, %v", b, err)
	}
	for _, name := range []string{"escape.txt", "abs.txt", "via-link.txt", "nothing-yet"} {
		for _, dir := range []string{filepath.Dir(f.dir), outside} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				t.Errorf("%s was written outside the working directory", filepath.Join(dir, name))
			}
		}
	}
}

func TestTerminal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)

	got := mustPrompt(t, a, `run sh -c 'echo out; echo err >&2; echo $TESTAGENT_VAR; pwd; exit 3'`).Response()
	want := "exit 3 truncated=false: out\nerr\nfrom-env\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("run: %q, want %q...", got, want)
	}
	if wd := strings.TrimSpace(strings.TrimPrefix(got, want)); !strings.HasSuffix(wd, filepath.Base(f.dir)) {
		t.Errorf("the command ran in %q, not the working directory", wd)
	}

	got = mustPrompt(t, a, `run sh -c 'yes abcdefg | head -c 5000'`).Response()
	if !strings.HasPrefix(got, "exit 0 truncated=true: ") || len(got) > len("exit 0 truncated=true: ")+1024 {
		t.Errorf("long output: %d bytes, %q...", len(got), got[:min(len(got), 60)])
	}

	got = mustPrompt(t, a, "run-kill sleep 30").Response()
	if !strings.HasPrefix(got, "signal SIGKILL") {
		t.Errorf("run-kill: %q", got)
	}

	got = mustPrompt(t, a, "run no-such-command-here").Response()
	if !strings.HasPrefix(got, "terminal failed") {
		t.Errorf("missing command: %q", got)
	}

	// A terminal the agent never releases ends with the agent.
	got = mustPrompt(t, a, `run-leave sh -c 'echo $$ > pid; exec sleep 3600'`).Response()
	if !strings.HasPrefix(got, "left term-") {
		t.Fatalf("run-leave: %q", got)
	}
	pid := pluginstest.WaitForPID(t, f.path("pid"))
	agentPID := acp.AgentPID(a)
	a.Close()
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the terminal's command (pid %d) outlived Close", pid)
	}
	if !pluginstest.ProcessGone(agentPID) {
		t.Errorf("the agent (pid %d) outlived Close", agentPID)
	}
}

func TestResumeAndTurns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "chosen-by-host", false)
	if !a.(plugins.Resumable).CanResume() {
		t.Error("an agent that loads sessions cannot resume")
	}
	id := a.ID()
	first := pluginstest.NewTurn("0b6c7a52-2f39-4d6e-9d55-3c1f2f6a8e11")
	if err := prompt(t, a, "say first\ntool t1 Read it", first); err != nil {
		t.Fatal(err)
	}
	mustPrompt(t, a, "think hmm\nsay second")
	pid := acp.AgentPID(a)
	a.Close()
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("the agent (pid %d) outlived Close", pid)
	}

	// A restart: a new backend reads the turns back and resumes.
	b := f.backend(testAgent)
	turns, err := b.Turns(context.Background(), f.conv(id))
	if err != nil {
		t.Fatalf("Turns: %v", err)
	}
	if len(turns) != 2 {
		t.Fatalf("%d turns, want 2: %+v", len(turns), turns)
	}
	t0, t1 := turns[0], turns[1]
	if t0.ID != first.ID() || t0.Message.Text != "say first\ntool t1 Read it" || t0.State != protocol.TurnStateComplete {
		t.Errorf("turn 0 = %+v", t0)
	}
	if len(t0.ResponseParts) != 2 {
		t.Fatalf("turn 0 parts = %+v", t0.ResponseParts)
	}
	if md, ok := t0.ResponseParts[0].(*protocol.MarkdownResponsePart); !ok || md.Content != "first" {
		t.Errorf("turn 0 part 0 = %+v", t0.ResponseParts[0])
	}
	tool, ok := t0.ResponseParts[1].(*protocol.ToolCallResponsePart)
	if !ok {
		t.Fatalf("turn 0 part 1 = %+v", t0.ResponseParts[1])
	}
	if done, ok := tool.ToolCall.(*protocol.ToolCallCompletedState); !ok || done.ToolCallID != "t1" || !done.Success || done.DisplayName != "Read it" {
		t.Errorf("tool call = %+v", tool.ToolCall)
	}
	if t1.ID != "turn-2" || len(t1.ResponseParts) != 2 {
		t.Fatalf("turn 1 = %+v", t1)
	}
	if r, ok := t1.ResponseParts[0].(*protocol.ReasoningResponsePart); !ok || r.Content != "hmm" {
		t.Errorf("turn 1 part 0 = %+v", t1.ResponseParts[0])
	}

	if _, err := b.Turns(context.Background(), f.conv("sess-unknown")); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Turns of an unknown session: err = %v, want ErrNotFound", err)
	}

	a2 := f.start(t, b, id, true)
	if a2.ID() != id {
		t.Errorf("resumed ID() = %q, want %q", a2.ID(), id)
	}
	if got := mustPrompt(t, a2, "history").Response(); got != "history: 2" {
		t.Errorf("resumed session: %q, want the two turns before", got)
	}
}

func TestResumeCapability(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"TESTAGENT_CAPS": "resume"})
	a := f.start(t, f.b, "x", false)
	id := a.ID()
	mustPrompt(t, a, "say one")
	a.Close()

	a2 := f.start(t, f.backend(testAgent), id, true)
	if a2.ID() != id {
		t.Errorf("resumed ID() = %q, want %q", a2.ID(), id)
	}
	if got := mustPrompt(t, a2, "history").Response(); got != "history: 1" {
		t.Errorf("resumed session: %q", got)
	}
	if _, err := f.b.Turns(context.Background(), f.conv(id)); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Turns of an agent that cannot load: err = %v, want ErrNotFound", err)
	}
}

func TestNoResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"TESTAGENT_CAPS": "none"})
	a := f.start(t, f.b, "x", false)
	if a.(plugins.Resumable).CanResume() {
		t.Error("an agent without load or resume can resume")
	}
	id := a.ID()
	a.Close()

	a2 := f.start(t, f.b, id, true)
	if a2.ID() == id {
		t.Error("a conversation the agent cannot resume kept its id")
	}
	if !strings.Contains(f.log.String(), "starting a new one") {
		t.Error("starting anew was not logged")
	}
	if got := mustPrompt(t, a2, "history").Response(); got != "history: 0" {
		t.Errorf("new session: %q", got)
	}
	if _, err := f.b.Turns(context.Background(), f.conv(id)); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Turns: err = %v, want ErrNotFound", err)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if _, err := f.backend(filepath.Join(t.TempDir(), "missing")).Start(context.Background(), plugins.StartOptions{Conversation: f.conv("c")}); err == nil {
		t.Error("a missing command started")
	}
	if _, err := f.b.Start(context.Background(), plugins.StartOptions{Conversation: plugins.Conversation{ID: "c", Dir: "relative"}}); err == nil {
		t.Error("a relative working directory was accepted")
	}
	if err := f.b.Delete(context.Background(), f.conv("c")); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

// TestContinueAfterCrash checks a turn the agent died in goes on in a new
// process, which loads the conversation and is asked to pick up.
func TestContinueAfterCrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)
	id := a.ID()
	mustPrompt(t, a, "say first")
	if err := prompt(t, a, "say before\ncrash", pluginstest.NewTurn("")); !plugins.IsInterrupted(err) {
		t.Fatalf("the crash: %v", err)
	}
	a.Close()
	a2 := f.start(t, f.b, id, true)
	rest := pluginstest.NewTurn("")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if err := a2.(plugins.Continuer).Continue(ctx, protocol.Message{Text: "say before\ncrash"}, rest); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	// The new process has the conversation: the first prompt (the one it
	// died in was not kept; a fresh session would have none).
	if got := rest.Response(); got != "continuing after 1 prompts" {
		t.Errorf("the continued turn: %q", got)
	}
}

// stalledTurn is a Turn whose first Text waits for gate: ahpd falling
// behind an agent, for a moment.
type stalledTurn struct {
	*pluginstest.Turn
	gate chan struct{}
	once sync.Once
}

func (s *stalledTurn) Text(text string) {
	s.once.Do(func() { <-s.gate })
	s.Turn.Text(text)
}

// TestFloodWhileBehind has the agent stream 5,000 chunks at 2,000 a second
// (a fast model) while ahpd takes
// none: the SDK's queue of 1,024 once filled and it dropped the agent's
// connection. Every chunk now arrives, in order, once ahpd goes on.
func TestFloodWhileBehind(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.start(t, f.b, "conv", false)
	turn := &stalledTurn{Turn: pluginstest.NewTurn(""), gate: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
		defer cancel()
		errc <- a.Prompt(ctx, userMessage("flood 5000 2000 x\nwrite flooded.txt yes"), turn)
	}()
	// The agent asks to write the file once it has sent every chunk.
	marker := filepath.Join(f.dir, "flooded.txt")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if _, err := pluginstest.WaitFile(ctx, marker, func([]byte) bool { return true }); err != nil {
		close(turn.gate)
		t.Fatalf("the agent never got past its chunks: %v (%v)", err, <-errc)
	}
	close(turn.gate)
	if err := <-errc; err != nil {
		t.Fatalf("the turn: %v", err)
	}
	if got := turn.Response(); got != strings.Repeat("x", 5000)+"wrote flooded.txt" {
		t.Errorf("the turn said %d bytes: %.40q…", len(got), got)
	}
}
