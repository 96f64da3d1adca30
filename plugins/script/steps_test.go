package script_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
	"github.com/go-json-experiment/json/jsontext"
)

func TestSay(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	for _, text := range []string{
		"two words",
		"one two three four five six seven eight nine ten",
		"spaced   out\twords, and **markdown**",
	} {
		turn := pluginstest.NewTurn("")
		if err := prompt(t, a, "say "+text, turn); err != nil {
			t.Fatalf("say %q: %v", text, err)
		}
		if got := turn.Response(); got != text+"\n\n" {
			t.Errorf("say %q: text %q", text, got)
		}
		if n := len(turn.Of("text")); n < 2 {
			t.Errorf("say %q: %d Text calls, want several", text, n)
		}
	}

	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, "say first\n\n   say second paragraph  \n", turn); err != nil {
		t.Fatal(err)
	}
	if got, want := turn.Response(), "first\n\nsecond paragraph\n\n"; got != want {
		t.Errorf("two says: %q, want %q", got, want)
	}
}

func TestThinkTitleEcho(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, "think about it\ntitle A new title\nhello, world", turn); err != nil {
		t.Fatal(err)
	}
	want := []pluginstest.Event{
		{Kind: "reasoning", Text: "about it"},
		{Kind: "title", Text: "A new title"},
		{Kind: "text", Text: "hello, world\n\n"},
	}
	if got := turn.Events(); !slices.EqualFunc(got, want, func(a, b pluginstest.Event) bool { return a.Kind == b.Kind && a.Text == b.Text }) {
		t.Errorf("events = %+v, want %+v", got, want)
	}
}

func TestFail(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	err := prompt(t, a, "say before\nfail something broke\nsay after", turn)
	if err == nil || err.Error() != "something broke" {
		t.Fatalf("err = %v, want something broke", err)
	}
	if got := turn.Response(); got != "before\n\n" {
		t.Errorf("text = %q: the turn went on after fail", got)
	}
}

func TestWriteAllowed(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "allow")
	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, `write sub/dir/a.txt line one\nline two`, turn); err != nil {
		t.Fatal(err)
	}
	// autoApprove "allow" is mode bypass: the policy allows, and says so.
	if got := turn.Kinds(); !slices.Equal(got, []string{"decided", "toolDone"}) {
		t.Fatalf("events = %v", got)
	}
	if d := turn.Of("decided")[0].Decision; d.Verdict != plugins.Allow || d.Rule != "mode bypass" {
		t.Errorf("decision = %+v", d)
	}
	call := turn.Of("decided")[0].Call
	if call.ID == "" || call.Name != "write" || call.DisplayName != "Write" ||
		call.Invocation != protocol.Markdown("Write `sub/dir/a.txt`") ||
		call.Input != `{"path":"sub/dir/a.txt","content":"line one\nline two"}` {
		t.Errorf("call = %+v", call)
	}
	done := turn.Of("toolDone")[0]
	if done.Text != call.ID || !done.Result.Success || done.Result.PastTenseMessage != protocol.Markdown("Wrote `sub/dir/a.txt`") {
		t.Errorf("done = %+v", done)
	}
	checkFile(t, f.path("sub/dir/a.txt"), "line one\nline two")
	// The result is the write's fileEdit: a file created, two lines.
	created, ok := done.Result.Content[0].(*protocol.ToolResultFileEditContent)
	if !ok || created.Before != nil || created.After == nil || created.After.URI != plugins.FileURI(f.path("sub/dir/a.txt")) ||
		*created.Diff.Added != 2 || *created.Diff.Removed != 0 {
		t.Errorf("the created file's edit = %+v", done.Result.Content[0])
	}

	// Written again, the file had content: the edit says what it was,
	// and counts the line that changed.
	turn = pluginstest.NewTurn("")
	if err := prompt(t, a, `write sub/dir/a.txt line one\nline 2`, turn); err != nil {
		t.Fatal(err)
	}
	edited, ok := turn.Of("toolDone")[0].Result.Content[0].(*protocol.ToolResultFileEditContent)
	if !ok || edited.Before == nil || !strings.HasPrefix(edited.Before.Content.URI, "data:text/plain") ||
		*edited.Diff.Added != 1 || *edited.Diff.Removed != 1 {
		t.Errorf("the rewritten file's edit = %+v", turn.Of("toolDone")[0].Result.Content)
	}
	protocoltest.Validate(t, "ToolResultContent", edited)

	// An absolute path inside the working directory is fine, and the text
	// may be empty.
	turn = pluginstest.NewTurn("")
	if err := prompt(t, a, "write "+f.path("empty.txt"), turn); err != nil {
		t.Fatal(err)
	}
	checkFile(t, f.path("empty.txt"), "")
	// Tool call ids stay unique across turns.
	if id := turn.Of("decided")[0].Call.ID; id == call.ID {
		t.Errorf("second turn reused tool call id %q", id)
	}
}

func TestWriteConfirmed(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "default")
	turn := pluginstest.NewTurn("")
	errc := make(chan error, 1)
	go func() { errc <- prompt(t, a, "write a.txt hello world", turn) }()
	<-turn.Asked()
	if _, err := os.Stat(f.path("a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file exists before the write was confirmed: %v", err)
	}
	turn.Confirms <- true
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Confirm starts the call itself: no ToolStart before it.
	if got := turn.Kinds(); !slices.Equal(got, []string{"confirm", "toolDone"}) {
		t.Errorf("events = %v", got)
	}
	if r := turn.Of("toolDone")[0].Result; !r.Success {
		t.Errorf("result = %+v", r)
	}
	checkFile(t, f.path("a.txt"), "hello world")
}

// TestWriteDenied checks a write a person denies is not written and the
// turn says it was skipped, in the text the transcript keeps: a turn of
// nothing but a denied write reads back as more than an empty answer.
func TestWriteDenied(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "") // no config: the default asks
	turn := pluginstest.NewTurn("")
	turn.Confirms <- false
	if err := prompt(t, a, "write a.txt secret\nsay next", turn); err != nil {
		t.Fatal(err)
	}
	if got := turn.Kinds(); !slices.Equal(got, []string{"confirm", "text", "text"}) {
		t.Errorf("events = %v", got)
	}
	const skipped = "Skipped writing `a.txt`: the write was denied.\n\n"
	if got := turn.Response(); got != skipped+"next\n\n" {
		t.Errorf("text = %q", got)
	}
	if _, err := os.Stat(f.path("a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("denied write wrote the file: %v", err)
	}

	// A turn of a denied write alone, read back as a reload reads it.
	alone := pluginstest.NewTurn("")
	alone.Confirms <- false
	if err := prompt(t, a, "write b.txt secret", alone); err != nil {
		t.Fatal(err)
	}
	turns, err := f.backend.Turns(context.Background(), f.conv)
	if err != nil || len(turns) != 2 {
		t.Fatalf("turns read back: %d, %v", len(turns), err)
	}
	parts := turns[1].ResponseParts
	if len(parts) != 2 {
		t.Fatalf("the denied turn reads back as %d parts, want the call and its text", len(parts))
	}
	if tc, ok := parts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCancelledState); !ok || tc.Reason != protocol.ToolCallCancellationReasonDenied {
		t.Errorf("the call reads back as %#v", parts[0].(*protocol.ToolCallResponsePart).ToolCall)
	}
	if md, ok := parts[1].(*protocol.MarkdownResponsePart); !ok || md.Content != "Skipped writing `b.txt`: the write was denied.\n\n" {
		t.Errorf("the text reads back as %#v", parts[1])
	}
}

func TestWriteConfirmCancelled(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("write a.txt x"), turn) }()
	<-turn.Asked()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(f.path("a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cancelled write wrote the file: %v", err)
	}
}

func TestWriteOutside(t *testing.T) {
	f := newFixture(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, f.path("link")); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(outside, "victim.txt")
	if err := os.WriteFile(victim, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, f.path("filelink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "new.txt"), f.path("dangling")); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(outside, "escape.txt")
	a := f.start(t, "allow")
	for _, path := range []string{
		"../escape.txt",
		"sub/../../escape.txt",
		escape,
		"/etc/ahpd-script-test.txt",
		"link/escape.txt",
		"link/deeper/escape.txt",
		"filelink",
		"dangling",
		".",
		f.conv.Dir,
	} {
		turn := pluginstest.NewTurn("")
		if err := prompt(t, a, "write "+path+" pwned", turn); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		if got := turn.Kinds(); !slices.Equal(got, []string{"toolStart", "toolRunning", "toolDone"}) {
			t.Errorf("write %s: events = %v", path, got)
			continue
		}
		r := turn.Of("toolDone")[0].Result
		if r.Success || r.Error == nil || !strings.Contains(r.Error.Message, "outside the working directory") ||
			!strings.HasPrefix(r.PastTenseMessage.Text, "Refused to write") {
			t.Errorf("write %s: result = %+v", path, r)
		}
	}
	for _, p := range []string{escape, filepath.Join(outside, "deeper"), filepath.Join(outside, "new.txt"), "/etc/ahpd-script-test.txt"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created", p)
		}
	}
	checkFile(t, victim, "original")
}

func TestRun(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "allow")
	if err := os.WriteFile(f.path("input.txt"), []byte("from the working directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, "run cat input.txt; echo; echo oops >&2\nrun echo partial; exit 3\nsay still here", turn); err != nil {
		t.Fatalf("a failing command failed the turn: %v", err)
	}
	starts, dones := turn.Of("decided"), turn.Of("toolDone")
	if len(starts) != 2 || len(dones) != 2 || len(turn.Of("confirm")) != 0 {
		t.Fatalf("events = %v", turn.Kinds())
	}
	if c := starts[0].Call; c.Name != "run" || c.DisplayName != "Run" || c.Invocation != protocol.Markdown("Run `cat input.txt; echo; echo oops >&2`") {
		t.Errorf("call = %+v", c)
	}
	ok := dones[0].Result
	if !ok.Success || ok.Error != nil || ok.PastTenseMessage != protocol.Markdown("Ran `cat input.txt; echo; echo oops >&2`") ||
		resultText(ok) != "from the working directory\noops\n" {
		t.Errorf("success result = %+v (%q)", ok, resultText(ok))
	}
	failed := dones[1].Result
	if failed.Success || failed.Error == nil || !strings.Contains(failed.Error.Message, "exit status 3") || resultText(failed) != "partial\n" {
		t.Errorf("failed result = %+v (%q)", failed, resultText(failed))
	}
	if turn.Response() != "still here\n\n" {
		t.Errorf("text = %q", turn.Response())
	}
}

func TestRunOutputTruncated(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "allow")
	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, "run head -c 200000 /dev/zero | tr '\\0' x", turn); err != nil {
		t.Fatal(err)
	}
	out := resultText(turn.Of("toolDone")[0].Result)
	if !strings.HasPrefix(out, strings.Repeat("x", 64<<10)+"\n[output truncated") {
		t.Errorf("output of %d bytes, starting %.80q", len(out), out)
	}
	if len(out) > 64<<10+100 {
		t.Errorf("output of %d bytes kept", len(out))
	}
}

func TestAsk(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	errc := make(chan error, 1)
	go func() { errc <- prompt(t, a, "ask What is your name?\nask Favourite colour?", turn) }()

	<-turn.Asked()
	req := turn.Of("ask")[0].Req
	if req.ID == "" || req.Message == nil || *req.Message != "What is your name?" || len(req.Questions) != 1 {
		t.Fatalf("request = %+v", req)
	}
	q, ok := req.Questions[0].(*protocol.ChatInputTextQuestion)
	if !ok || q.ID != "answer" || q.Message != "What is your name?" || q.Required == nil || !*q.Required {
		t.Fatalf("question = %#v", req.Questions[0])
	}
	answers := protocol.NewMap[protocol.ChatInputAnswer]()
	answers.Set("answer", &protocol.ChatInputAnswered{State: "submitted", Value: &protocol.ChatInputTextAnswerValue{Value: "Ada"}})
	turn.Answers <- plugins.Answer{Response: protocol.ChatInputResponseKindAccept, Answers: answers}

	<-turn.Asked()
	if second := turn.Of("ask")[1].Req; second.ID == req.ID {
		t.Errorf("both requests have id %q", req.ID)
	}
	turn.Answers <- plugins.Answer{Response: protocol.ChatInputResponseKindDecline}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got, want := turn.Response(), "Ada\n\nNo answer was given.\n\n"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
}

func TestAskCancelled(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("ask Well?"), turn) }()
	<-turn.Asked()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestWait(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")

	start := time.Now()
	if err := prompt(t, a, "wait 30ms\nsay done", pluginstest.NewTurn("")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("wait 30ms took %v", d)
	}

	// The deadline ends a wait of an hour.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("wait 1h"), pluginstest.NewTurn("")) }()
	if err := ended(t, errc); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}

	err := prompt(t, a, "say ok\nwait soon", pluginstest.NewTurn(""))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "wait soon") {
		t.Errorf("bad duration: err = %v", err)
	}
}

func TestBackground(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	start := time.Now()
	if err := prompt(t, a, "background 300ms\nsay meanwhile", turn); err != nil {
		t.Fatal(err)
	}
	// The turn goes on at once: it ended before the work did.
	if got := turn.Kinds(); !slices.Equal(got, []string{"background", "text"}) {
		t.Errorf("events when the turn ended = %v", got)
	}
	first := turn.Of("background")[0]
	if first.Done || first.Work.ID == "" || first.Work.Label != "background 300ms" || first.Work.Command == "" {
		t.Errorf("the work reported = %+v", first)
	}
	waitFor(t, turn, func() bool { return len(turn.Of("background")) == 2 })
	if end := turn.Of("background")[1]; !end.Done || end.Work.ID != first.Work.ID {
		t.Errorf("the end reported = %+v", end)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the work ended after %v", d)
	}
}

func TestBackgroundOverlapping(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, "background 10ms\nbackground 1h", turn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, turn, func() bool { return len(turn.Of("background")) == 3 })
	// The short work ended, the long one has not.
	events := turn.Of("background")
	short, long := events[0].Work.ID, events[1].Work.ID
	if short == long || !events[2].Done || events[2].Work.ID != short {
		t.Errorf("reports = %+v", events)
	}
	a.Close()
	if events := turn.Of("background"); len(events) != 4 || !events[3].Done || events[3].Work.ID != long {
		t.Errorf("reports after Close = %+v", events)
	}
}

func TestCloseStopsBackground(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, "background 1h", turn); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		a.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testwait.Hang):
		t.Fatal("Close did not return")
	}
	events := turn.Of("background")
	if len(events) != 2 || events[0].Done || !events[1].Done {
		t.Errorf("reports = %+v", events)
	}
	// goleak, in TestMain, checks that no timer goroutine is left.
}

func TestCloseCancelsTurn(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	errc := make(chan error, 1)
	go func() { errc <- prompt(t, a, "say started\nwait 1h", turn) }()
	waitFor(t, turn, func() bool { return turn.Response() != "" })
	a.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("turn completed although the agent closed")
		}
	case <-time.After(testwait.Hang):
		t.Fatal("Close did not end the running turn")
	}
}

// checkFile fails unless the file at path holds want.
func checkFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("read %s: %v", path, err)
		return
	}
	if string(got) != want {
		t.Errorf("%s holds %q, want %q", path, got, want)
	}
}

func resultText(r protocol.ToolCallResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*protocol.ToolResultTextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitFor waits until cond holds, checking after each event of turn.
func waitFor(t *testing.T, turn *pluginstest.Turn, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if !turn.Wait(ctx, cond) {
		t.Fatal("timed out waiting for the agent")
	}
}

func TestWriteThroughLinkInside(t *testing.T) {
	f := newFixture(t)
	if err := os.Mkdir(f.path("real"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, dest := range map[string]string{
		"dirlink":  f.path("real"),
		"filelink": "real/target.txt", // to nothing yet, relative
	} {
		if err := os.Symlink(dest, f.path(name)); err != nil {
			t.Fatal(err)
		}
	}
	a := f.start(t, "allow")
	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, "write dirlink/a.txt A\nwrite filelink B", turn); err != nil {
		t.Fatal(err)
	}
	for _, d := range turn.Of("toolDone") {
		if !d.Result.Success {
			t.Errorf("%s: %+v", d.Text, d.Result.Error)
		}
	}
	checkFile(t, f.path("real/a.txt"), "A")
	checkFile(t, f.path("real/target.txt"), "B")
}

// TestCrashAndContinue checks a crash step stops the turn in a way it can
// go on from, and a new agent for the conversation continues it from the
// next step, recording one turn with all it did.
func TestCrashAndContinue(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "allow")
	first := pluginstest.NewTurn("turn-7")
	msg := userMessage("say one\ncrash the process died\nwrite after.txt two\nsay three")
	err := a.Prompt(context.Background(), msg, first)
	if !plugins.IsInterrupted(err) || !strings.Contains(err.Error(), "the process died") {
		t.Fatalf("a crash step: %v, want an interruption", err)
	}
	if _, err := os.Stat(f.path("after.txt")); !os.IsNotExist(err) {
		t.Errorf("a step after the crash ran: %v", err)
	}
	a.Close()

	// The process is gone; a new agent resumes the conversation.
	b, err := f.backend.Start(context.Background(), plugins.StartOptions{Conversation: f.conv, Resume: true,
		Config: protocol.Object{"autoApprove": jsontext.Value(`"allow"`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rest := pluginstest.NewTurn("turn-7")
	if err := b.(plugins.Continuer).Continue(context.Background(), msg, rest); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	if got := rest.Response(); strings.Contains(got, "one") || !strings.Contains(got, "three") {
		t.Errorf("the continued turn said %q", got)
	}
	if data, err := os.ReadFile(f.path("after.txt")); err != nil || string(data) != "two" {
		t.Errorf("after.txt = %q, %v", data, err)
	}
	turns, err := f.backend.Turns(context.Background(), f.conv)
	if err != nil || len(turns) != 1 {
		t.Fatalf("turns read back: %d, %v", len(turns), err)
	}
	turn := turns[0]
	var kinds []string
	for _, p := range turn.ResponseParts {
		switch p := p.(type) {
		case *protocol.MarkdownResponsePart:
			kinds = append(kinds, "text")
		case *protocol.ErrorResponsePart:
			if p.Resumable == nil || !*p.Resumable {
				t.Errorf("the error part is not resumable: %+v", p)
			}
			kinds = append(kinds, "error")
		case *protocol.ToolCallResponsePart:
			kinds = append(kinds, "tool")
		}
	}
	if turn.ID != "turn-7" || turn.State != protocol.TurnStateComplete || !slices.Equal(kinds, []string{"text", "error", "tool", "text"}) {
		t.Errorf("the turn read back: %s %s %v", turn.ID, turn.State, kinds)
	}

	// Nothing left to continue.
	if err := b.(plugins.Continuer).Continue(context.Background(), msg, pluginstest.NewTurn("turn-7")); err == nil {
		t.Error("a turn that completed was continued")
	}
}
