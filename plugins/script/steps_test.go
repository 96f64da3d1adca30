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

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

func TestSay(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	for _, text := range []string{
		"two words",
		"one two three four five six seven eight nine ten",
		"spaced   out\twords, and **markdown**",
	} {
		turn := newTurn()
		if err := prompt(t, a, "say "+text, turn); err != nil {
			t.Fatalf("say %q: %v", text, err)
		}
		if got := turn.text(); got != text+"\n\n" {
			t.Errorf("say %q: text %q", text, got)
		}
		if n := len(turn.of("text")); n < 2 {
			t.Errorf("say %q: %d Text calls, want several", text, n)
		}
	}

	turn := newTurn()
	if err := prompt(t, a, "say first\n\n   say second paragraph  \n", turn); err != nil {
		t.Fatal(err)
	}
	if got, want := turn.text(), "first\n\nsecond paragraph\n\n"; got != want {
		t.Errorf("two says: %q, want %q", got, want)
	}
}

func TestThinkTitleEcho(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	if err := prompt(t, a, "think about it\ntitle A new title\nhello, world", turn); err != nil {
		t.Fatal(err)
	}
	want := []event{
		{kind: "reasoning", text: "about it"},
		{kind: "title", text: "A new title"},
		{kind: "text", text: "hello, world\n\n"},
	}
	if got := turn.all(); !slices.EqualFunc(got, want, func(a, b event) bool { return a.kind == b.kind && a.text == b.text }) {
		t.Errorf("events = %+v, want %+v", got, want)
	}
}

func TestFail(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	err := prompt(t, a, "say before\nfail something broke\nsay after", turn)
	if err == nil || err.Error() != "something broke" {
		t.Fatalf("err = %v, want something broke", err)
	}
	if got := turn.text(); got != "before\n\n" {
		t.Errorf("text = %q: the turn went on after fail", got)
	}
}

func TestWriteAllowed(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "allow")
	turn := newTurn()
	if err := prompt(t, a, `write sub/dir/a.txt line one\nline two`, turn); err != nil {
		t.Fatal(err)
	}
	if got := turn.kinds(); !slices.Equal(got, []string{"toolStart", "toolRunning", "toolDone"}) {
		t.Fatalf("events = %v", got)
	}
	call := turn.of("toolStart")[0].call
	if call.ID == "" || call.Name != "write" || call.DisplayName != "Write" ||
		call.Invocation != protocol.Markdown("Write `sub/dir/a.txt`") ||
		call.Input != `{"path":"sub/dir/a.txt","content":"line one\nline two"}` {
		t.Errorf("call = %+v", call)
	}
	done := turn.of("toolDone")[0]
	if done.text != call.ID || !done.result.Success || done.result.PastTenseMessage != protocol.Markdown("Wrote `sub/dir/a.txt`") {
		t.Errorf("done = %+v", done)
	}
	checkFile(t, f.path("sub/dir/a.txt"), "line one\nline two")

	// An absolute path inside the working directory is fine, and the text
	// may be empty.
	turn = newTurn()
	if err := prompt(t, a, "write "+f.path("empty.txt"), turn); err != nil {
		t.Fatal(err)
	}
	checkFile(t, f.path("empty.txt"), "")
	// Tool call ids stay unique across turns.
	if id := turn.of("toolStart")[0].call.ID; id == call.ID {
		t.Errorf("second turn reused tool call id %q", id)
	}
}

func TestWriteConfirmed(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "default")
	turn := newTurn()
	errc := make(chan error, 1)
	go func() { errc <- prompt(t, a, "write a.txt hello world", turn) }()
	<-turn.asked
	if _, err := os.Stat(f.path("a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file exists before the write was confirmed: %v", err)
	}
	turn.confirms <- true
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Confirm starts the call itself: no ToolStart before it.
	if got := turn.kinds(); !slices.Equal(got, []string{"confirm", "toolDone"}) {
		t.Errorf("events = %v", got)
	}
	if r := turn.of("toolDone")[0].result; !r.Success {
		t.Errorf("result = %+v", r)
	}
	checkFile(t, f.path("a.txt"), "hello world")
}

func TestWriteDenied(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "") // no config: the default asks
	turn := newTurn()
	turn.confirms <- false
	if err := prompt(t, a, "write a.txt secret\nsay next", turn); err != nil {
		t.Fatal(err)
	}
	if got := turn.kinds(); !slices.Equal(got, []string{"confirm", "text"}) {
		t.Errorf("events = %v", got)
	}
	if _, err := os.Stat(f.path("a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("denied write wrote the file: %v", err)
	}
}

func TestWriteConfirmCancelled(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("write a.txt x"), turn) }()
	<-turn.asked
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
		turn := newTurn()
		if err := prompt(t, a, "write "+path+" pwned", turn); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		if got := turn.kinds(); !slices.Equal(got, []string{"toolStart", "toolRunning", "toolDone"}) {
			t.Errorf("write %s: events = %v", path, got)
			continue
		}
		r := turn.of("toolDone")[0].result
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
	a := f.start(t, "")
	if err := os.WriteFile(f.path("input.txt"), []byte("from the working directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	turn := newTurn()
	if err := prompt(t, a, "run cat input.txt; echo; echo oops >&2\nrun echo partial; exit 3\nsay still here", turn); err != nil {
		t.Fatalf("a failing command failed the turn: %v", err)
	}
	starts, dones := turn.of("toolStart"), turn.of("toolDone")
	if len(starts) != 2 || len(dones) != 2 || len(turn.of("confirm")) != 0 {
		t.Fatalf("events = %v", turn.kinds())
	}
	if c := starts[0].call; c.Name != "run" || c.DisplayName != "Run" || c.Invocation != protocol.Markdown("Run `cat input.txt; echo; echo oops >&2`") {
		t.Errorf("call = %+v", c)
	}
	ok := dones[0].result
	if !ok.Success || ok.Error != nil || ok.PastTenseMessage != protocol.Markdown("Ran `cat input.txt; echo; echo oops >&2`") ||
		resultText(ok) != "from the working directory\noops\n" {
		t.Errorf("success result = %+v (%q)", ok, resultText(ok))
	}
	failed := dones[1].result
	if failed.Success || failed.Error == nil || !strings.Contains(failed.Error.Message, "exit status 3") || resultText(failed) != "partial\n" {
		t.Errorf("failed result = %+v (%q)", failed, resultText(failed))
	}
	if turn.text() != "still here\n\n" {
		t.Errorf("text = %q", turn.text())
	}
}

func TestRunOutputTruncated(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	if err := prompt(t, a, "run head -c 200000 /dev/zero | tr '\\0' x", turn); err != nil {
		t.Fatal(err)
	}
	out := resultText(turn.of("toolDone")[0].result)
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
	turn := newTurn()
	errc := make(chan error, 1)
	go func() { errc <- prompt(t, a, "ask What is your name?\nask Favourite colour?", turn) }()

	<-turn.asked
	req := turn.of("ask")[0].req
	if req.ID == "" || req.Message == nil || *req.Message != "What is your name?" || len(req.Questions) != 1 {
		t.Fatalf("request = %+v", req)
	}
	q, ok := req.Questions[0].(*protocol.ChatInputTextQuestion)
	if !ok || q.ID != "answer" || q.Message != "What is your name?" || q.Required == nil || !*q.Required {
		t.Fatalf("question = %#v", req.Questions[0])
	}
	answers := protocol.NewMap[protocol.ChatInputAnswer]()
	answers.Set("answer", &protocol.ChatInputAnswered{State: "submitted", Value: &protocol.ChatInputTextAnswerValue{Value: "Ada"}})
	turn.answers <- plugins.Answer{Response: protocol.ChatInputResponseKindAccept, Answers: answers}

	<-turn.asked
	if second := turn.of("ask")[1].req; second.ID == req.ID {
		t.Errorf("both requests have id %q", req.ID)
	}
	turn.answers <- plugins.Answer{Response: protocol.ChatInputResponseKindDecline}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got, want := turn.text(), "Ada\n\nNo answer was given.\n\n"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
}

func TestAskCancelled(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("ask Well?"), turn) }()
	<-turn.asked
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestWait(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")

	start := time.Now()
	if err := prompt(t, a, "wait 30ms\nsay done", newTurn()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("wait 30ms took %v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := a.Prompt(ctx, userMessage("wait 1h"), newTurn()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled wait took %v", d)
	}

	err := prompt(t, a, "say ok\nwait soon", newTurn())
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "wait soon") {
		t.Errorf("bad duration: err = %v", err)
	}
}

func TestBackground(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	start := time.Now()
	if err := prompt(t, a, "background 300ms\nsay meanwhile", turn); err != nil {
		t.Fatal(err)
	}
	// The turn goes on at once: it ended before the work did.
	if got := turn.kinds(); !slices.Equal(got, []string{"busy", "text"}) || !turn.all()[0].busy {
		t.Errorf("events when the turn ended = %v", got)
	}
	waitFor(t, turn, func() bool { return len(turn.of("busy")) == 2 })
	if busy := turn.of("busy"); busy[1].busy {
		t.Errorf("second Busy report is true")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("busy ended after %v", d)
	}
}

func TestBackgroundOverlapping(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	if err := prompt(t, a, "background 10ms\nbackground 1h", turn); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	// The short work has ended, the long one has not: still busy.
	for _, e := range turn.of("busy") {
		if !e.busy {
			t.Fatal("reported not busy while background work runs")
		}
	}
	a.Close()
	if busy := turn.of("busy"); len(busy) != 3 || busy[2].busy {
		t.Errorf("busy reports after Close = %+v", busy)
	}
}

func TestCloseStopsBackground(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
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
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	busy := turn.of("busy")
	if len(busy) != 2 || !busy[0].busy || busy[1].busy {
		t.Errorf("busy reports = %+v", busy)
	}
	// goleak, in TestMain, checks that no timer goroutine is left.
}

func TestCloseCancelsTurn(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	errc := make(chan error, 1)
	go func() { errc <- prompt(t, a, "say started\nwait 1h", turn) }()
	waitFor(t, turn, func() bool { return turn.text() != "" })
	a.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("turn completed although the agent closed")
		}
	case <-time.After(5 * time.Second):
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
func waitFor(t *testing.T, turn *recordingTurn, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-turn.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("timed out waiting for the agent")
		}
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
	turn := newTurn()
	if err := prompt(t, a, "write dirlink/a.txt A\nwrite filelink B", turn); err != nil {
		t.Fatal(err)
	}
	for _, d := range turn.of("toolDone") {
		if !d.result.Success {
			t.Errorf("%s: %+v", d.text, d.result.Error)
		}
	}
	checkFile(t, f.path("real/a.txt"), "A")
	checkFile(t, f.path("real/target.txt"), "B")
}
