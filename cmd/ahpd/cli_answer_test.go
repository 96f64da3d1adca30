package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// waitingOn waits until chat's running turn waits on something of kind
// ("question" or "approval") and returns its id.
func waitingOn(t *testing.T, c *hosttest.Client, chat, kind string) string {
	t.Helper()
	id := ""
	c.WaitState(chat, "the turn to wait for a "+kind, func(s protocol.ChannelState) bool {
		at := s.(*protocol.ChatState).ActiveTurn
		if at == nil {
			return false
		}
		for _, p := range at.ResponseParts {
			switch p := p.(type) {
			case *protocol.InputRequestResponsePart:
				if kind == "question" && p.Response == nil {
					id = p.Request.ID
					return true
				}
			case *protocol.ToolCallResponsePart:
				if tc, ok := p.ToolCall.(*protocol.ToolCallPendingConfirmationState); ok && kind == "approval" {
					id = tc.ToolCallID
					return true
				}
			}
		}
		return false
	})
	return id
}

// turnEnds waits until chat has n ended turns and none running, and
// returns the last.
func turnEnds(t *testing.T, c *hosttest.Client, chat string, n int) protocol.Turn {
	t.Helper()
	st := c.WaitState(chat, "the turn to end", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return cs.ActiveTurn == nil && len(cs.Turns) >= n
	})
	cs := st.(*protocol.ChatState)
	return cs.Turns[len(cs.Turns)-1]
}

// TestCLIAnswerAndApprove: a turn left waiting by `ahpd run` (exit 3) is
// listed by `ahpd pending` and answered, approved and denied with `ahpd
// answer`, `approve` and `deny` against a real daemon; what a turn that
// ended asked is refused saying so.
func TestCLIAnswerAndApprove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e)
	run := cli(t, e, "run", "--provider", "script", "ask Which file?\nwrite notes.txt hi")
	m := sessionLine.FindStringSubmatch(run.stderr)
	if run.code != exitNeedsInput || m == nil {
		t.Fatalf("ahpd run: exit %d, %q", run.code, run.stderr)
	}
	sid := m[1]
	w := connect(t, p, e.token(t), "watch")
	chat := protocol.DefaultChatURI("ahp-session:/" + sid)
	w.Subscribe("ahp-session:/" + sid)
	w.Subscribe(chat)
	ask := waitingOn(t, w, chat, "question")

	pending := cli(t, e, "pending")
	if pending.code != 0 || !strings.Contains(pending.stdout, sid+"  "+ask+"  question  Which file?") {
		t.Fatalf("ahpd pending: %d %q %q", pending.code, pending.stdout, pending.stderr)
	}
	var rows []pendingRow
	if r := cli(t, e, "pending", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) != 1 || rows[0].Kind != "question" || rows[0].Request == nil {
		t.Fatalf("ahpd pending --json: %d %q", r.code, r.stdout)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"answer", sid, "nope", "x"}, 1, `has no question "nope"`},
		{[]string{"approve", sid}, 1, "has no open approval"},
		{[]string{"answer", sid}, 2, "name the session"},
		{[]string{"answer", "--answer", "colour=red", sid}, 1, `no question "colour"`},
	} {
		if r := cli(t, e, tt.args...); r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("ahpd %v: exit %d %q, want %d %q", tt.args, r.code, r.stderr, tt.code, tt.want)
		}
	}
	// The one open question, by the session's prefix.
	if r := cli(t, e, "answer", sid[:6], "notes.txt"); r.code != 0 || !strings.Contains(r.stdout, "answered "+ask) {
		t.Fatalf("ahpd answer: %d %q %q", r.code, r.stdout, r.stderr)
	}
	write := waitingOn(t, w, chat, "approval")
	if r := cli(t, e, "pending"); !strings.Contains(r.stdout, write+"  approval  Write: Write `notes.txt`") {
		t.Fatalf("ahpd pending: %q", r.stdout)
	}
	if r := cli(t, e, "approve", sid, write[:len(write)-1]); r.code != 0 || !strings.Contains(r.stdout, "approved "+write) {
		t.Fatalf("ahpd approve: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if turn := turnEnds(t, w, chat, 1); turn.State != protocol.TurnStateComplete || !strings.Contains(text(turn.ResponseParts), "notes.txt") {
		t.Fatalf("the turn: %s", turnSummary(turn))
	}
	if data, err := os.ReadFile(filepath.Join(e.work, "notes.txt")); err != nil || string(data) != "hi" {
		t.Errorf("notes.txt: %q %v", data, err)
	}
	if r := cli(t, e, "answer", sid, ask, "late"); r.code != 1 || !strings.Contains(r.stderr, "belongs to a turn that has ended") {
		t.Errorf("answering an ended turn's question: %d %q", r.code, r.stderr)
	}
	if r := cli(t, e, "pending"); r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "nothing waits on you") {
		t.Errorf("ahpd pending with nothing open: %q %q", r.stdout, r.stderr)
	}

	// Denied, the write does not happen.
	cli(t, e, "send", sid, "write other.txt x")
	waitingOn(t, w, chat, "approval")
	if r := cli(t, e, "deny", sid); r.code != 0 || !strings.Contains(r.stdout, "denied ") {
		t.Fatalf("ahpd deny: %d %q %q", r.code, r.stdout, r.stderr)
	}
	turnEnds(t, w, chat, 2)
	if _, err := os.Stat(filepath.Join(e.work, "other.txt")); err == nil {
		t.Error("a denied write was written")
	}
}

// TestCLIGuestCannotAnswer: `ahpd pending` lists only what the caller's
// grants let them answer; a member's session is not even found by a
// guest until it is shared, and then the host refuses the guest's answer.
func TestCLIGuestCannotAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	users, mo, gus := moAndGus(t, e)
	p := serveDaemon(t, e, "--users", users)

	run := cli(t, e, "run", "--token", mo, "--provider", "script", "ask Which file?")
	m := sessionLine.FindStringSubmatch(run.stderr)
	if run.code != exitNeedsInput || m == nil {
		t.Fatalf("ahpd run as mo: exit %d, %q", run.code, run.stderr)
	}
	if r := cli(t, e, "pending", "--token", gus); r.code != 0 || r.stdout != "" {
		t.Errorf("ahpd pending as a guest: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, e, "answer", "--token", gus, m[1], "x"); r.code != 1 || !strings.Contains(r.stderr, "no session") {
		t.Errorf("ahpd answer as a guest, the session private: %d %q", r.code, r.stderr)
	}
	owner := connect(t, p, mo, "mo-shares")
	session := "ahp-session:/" + m[1]
	owner.Subscribe(session)
	seq := owner.Dispatch(session, &protocol.SessionConfigChangedAction{Config: protocol.Object{"sharing": jsontext.Value(`"team"`)}})
	owner.Wait("the session shared", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq {
				if e.RejectionReason != nil {
					t.Fatalf("sharing refused: %s", *e.RejectionReason)
				}
				return true
			}
		}
		return false
	})
	if r := cli(t, e, "answer", "--token", gus, m[1], "x"); r.code != 1 || !strings.Contains(r.stderr, "user:gus may not chat:answer") {
		t.Errorf("ahpd answer as a guest: %d %q", r.code, r.stderr)
	}
	if r := cli(t, e, "pending", "--token", mo); !strings.Contains(r.stdout, "Which file?") {
		t.Errorf("ahpd pending as mo: %q %q", r.stdout, r.stderr)
	}
	if r := cli(t, e, "answer", "--token", mo, m[1], "notes.txt"); r.code != 0 {
		t.Errorf("ahpd answer as mo: %d %q", r.code, r.stderr)
	}
}

// TestCLIRunWaits: `ahpd run --wait` with no terminal says what the turn
// waits on, goes on following it, and completes once the question is
// answered over the HTTP API.
func TestCLIRunWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e)
	cmd := cliCmd(e, "run", "--wait", "--json", "--provider", "script", "ask Which file?")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	evs := events(t, stdout)
	session := nextEvent(t, evs, func(ev turnEvent) bool { return ev.Event == "session" }).Session
	q := nextEvent(t, evs, func(ev turnEvent) bool { return ev.Event == "input" })
	if q.Message != "Which file?" {
		t.Errorf("the question shown: %+v", q)
	}
	id := strings.TrimPrefix(session, "ahp-session:/")
	if status, body := apiCall(t, p, e.token(t), "POST", "/v1/sessions/"+id+"/questions/"+q.ID, map[string]any{"answer": "notes.txt"}); status != 200 {
		t.Fatalf("answering over HTTP: %d %v", status, body)
	}
	end := nextEvent(t, evs, func(ev turnEvent) bool { return ev.Event == "end" })
	for range evs {
	}
	if err := cmd.Wait(); err != nil || end.State != "complete" || end.Exit == nil || *end.Exit != 0 {
		t.Fatalf("ahpd run --wait: %v, end %+v", err, end)
	}
	if !strings.Contains(stderr.String(), "waiting for somebody to answer \"Which file?\": `ahpd answer "+id+" "+q.ID+" TEXT`") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestCLIAutomationRunWaits: `ahpd automations run` says when its run
// waits on a person and how to answer; `ahpd automations show` says it
// too; answered, the run completes.
func TestCLIAutomationRunWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	if r := cli(t, e, "automations", "add", "--id", "asks", "--message", "ask Which branch?", "--provider", "script"); r.code != 0 {
		t.Fatalf("automations add: %d %q", r.code, r.stderr)
	}
	cmd := cliCmd(e, "automations", "run", "asks")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	hint := regexp.MustCompile("the run waits for somebody to answer \"Which branch\\?\": `ahpd answer ([0-9a-f]+) (\\S+) TEXT`")
	var m []string
	for m == nil {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("ahpd automations run ended without saying the run waits")
			}
			m = hint.FindStringSubmatch(line)
		case <-time.After(startTimeout):
			t.Fatal("ahpd automations run never said the run waits")
		}
	}
	if r := cli(t, e, "automations", "show", "asks"); r.code != 0 || !strings.Contains(r.stdout, "running") || !strings.Contains(r.stdout, "waits for somebody to answer \"Which branch?\": `ahpd answer "+m[1]+" "+m[2]) {
		t.Fatalf("automations show: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, e, "answer", m[1], m[2], "main"); r.code != 0 {
		t.Fatalf("answer: %d %q", r.code, r.stderr)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ahpd automations run: %v", err)
	}
	if r := cli(t, e, "automations", "show", "asks"); !strings.Contains(r.stdout, "completed") || strings.Contains(r.stdout, "waits for") {
		t.Errorf("automations show after: %q", r.stdout)
	}
}
