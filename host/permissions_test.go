package host_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

var strict = map[string]any{"ahpd.strictConfig": true}

// TestStrictConfig: a createSession that asks for strictness is refused,
// -32602, for a key the session does not have (naming the keys it has)
// and for a value its key does not take (saying why); one that does not
// ask keeps what fits, as VS Code needs.
func TestStrictConfig(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	create := func(id string, config map[string]any, meta map[string]any) *hosttest.RPCError {
		params := map[string]any{"channel": "ahp-session:/" + id, "provider": "script",
			"workingDirectories": []string{"file://" + th.work}, "config": config}
		if meta != nil {
			params["_meta"] = meta
		}
		_, err := c.Call("createSession", params)
		return err
	}
	for _, tc := range []struct {
		config map[string]any
		want   string
	}{
		{map[string]any{"permissions": map[string]any{"mode": "bypass"}, "mode": "interactive"},
			`config: unknown key "mode"; a script session's keys are isolation, permissions, autoApprove, inputTimeout`},
		{map[string]any{"mode": "x", "sandbox": "on"}, `unknown keys "mode", "sandbox"`},
		{map[string]any{"permissions": map[string]any{"mode": "yolo"}}, `config.permissions: mode: "yolo" is not ask, acceptEdits or bypass`},
		{map[string]any{"permissions": map[string]any{"deny": []string{"Bash(git *"}}}, `config.permissions: deny[0]: "Bash(git *": a glob ends with ")"`},
		{map[string]any{"permissions": map[string]any{"allow": []string{"edit(../x)"}}}, `config.permissions: allow[0]`},
		{map[string]any{"autoApprove": "assisted"}, `config.autoApprove: want "default" or "allow"`},
		{map[string]any{"inputTimeout": "soon"}, `config.inputTimeout: want a duration`},
		{map[string]any{"isolation": "worktree"}, `config.isolation: want one of "folder"`},
	} {
		err := create("refused", tc.config, strict)
		if err == nil || err.Code != int64(protocol.CodeInvalidParams) || !strings.Contains(err.Message, tc.want) {
			t.Errorf("%v: %v, want -32602 saying %q", tc.config, err, tc.want)
		}
		if err != nil && len(err.Message) > 400 {
			t.Errorf("%v: a message of %d bytes", tc.config, len(err.Message))
		}
	}

	// Taken when it fits, in the form the session keeps.
	if err := create("strict", map[string]any{"permissions": map[string]any{"mode": "acceptEdits", "deny": []string{" execute "}},
		"autoApprove": true, "inputTimeout": 600}, strict); err != nil {
		t.Fatalf("a strict session that fits: %v", err)
	}
	st := c.Subscribe("ahp-session:/strict").State.(*protocol.SessionState)
	for k, want := range map[string]string{
		"permissions": `{"mode":"acceptEdits","deny":["execute"]}`, "autoApprove": `"allow"`, "inputTimeout": `"10m"`,
	} {
		if got := string(st.Config.Values[k]); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	if p, ok := st.Config.Schema.Properties.Get("permissions"); !ok || p.Type != "object" || p.SessionMutable == nil || !*p.SessionMutable {
		t.Errorf("the permissions property: %+v", p)
	}

	// Without strictness: VS Code's keys and values of its own are taken
	// as they fit, and the rest is left at the defaults.
	if err := create("vscode", map[string]any{"isolation": "folder", "autoApprove": "autoApprove", "mode": "interactive"}, nil); err != nil {
		t.Fatalf("VS Code's createSession: %v", err)
	}
	st = c.Subscribe("ahp-session:/vscode").State.(*protocol.SessionState)
	if got := string(st.Config.Values["autoApprove"]); got != `"allow"` {
		t.Errorf("VS Code's autoApprove \"autoApprove\" kept as %s", got)
	}
	if _, ok := st.Config.Values["mode"]; ok {
		t.Error("an unknown key was kept")
	}
	if err := create("assisted", map[string]any{"autoApprove": "assisted", "permissions": map[string]any{"mode": "bypass", "denny": []string{"run"}}}, nil); err != nil {
		t.Fatalf("a lenient createSession: %v", err)
	}
	st = c.Subscribe("ahp-session:/assisted").State.(*protocol.SessionState)
	// Permissions that cannot be read ask: never more than asked.
	if got := string(st.Config.Values["permissions"]); got != `{"mode":"ask"}` {
		t.Errorf("unreadable permissions kept as %s", got)
	}
	if got := string(st.Config.Values["autoApprove"]); got != `"default"` {
		t.Errorf("an unknown autoApprove kept as %s", got)
	}

	// A change is checked the same way, and says why it is refused.
	c.Dispatch("ahp-session:/strict", &protocol.SessionConfigChangedAction{Config: protocol.Object{"permissions": []byte(`{"mode":"all"}`)}})
	c.Wait("the refusal", func(msgs []hosttest.Message) bool {
		for _, e := range echoes(msgs, "ahp-session:/strict") {
			if e.RejectionReason != nil && strings.Contains(*e.RejectionReason, `mode: "all" is not ask, acceptEdits or bypass`) {
				return true
			}
		}
		return false
	})
}

// TestPermissionsInTheTurn: the session's permissions decide the script
// backend's write and run, and the turn shows each decision: an allowed
// call confirmed by a setting, a denied one cancelled as denied with the
// reason, both with the rule in _meta; the session never shows a wait.
func TestPermissionsInTheTurn(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", map[string]any{"permissions": map[string]any{"mode": "acceptEdits", "deny": []string{"execute"}}})
	cs := send(t, c, chat, "t1", "write a.txt alpha\nrun echo hi\nsay done")
	parts := cs.Turns[0].ResponseParts
	written, ok := parts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCompletedState)
	if !ok || !written.Success || written.Confirmed != protocol.ToolCallConfirmationReasonSetting || string(written.Meta["ahpd.permission"]) != `"mode acceptEdits"` {
		t.Errorf("the write: %+v", parts[0].(*protocol.ToolCallResponsePart).ToolCall)
	}
	denied, ok := parts[1].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCancelledState)
	if !ok || denied.Reason != protocol.ToolCallCancellationReasonDenied || denied.ReasonMessage == nil ||
		denied.ReasonMessage.Text != `Denied by the session's permissions (deny "execute").` || string(denied.Meta["ahpd.permission"]) != `"deny \"execute\""` {
		t.Errorf("the command: %+v", parts[1].(*protocol.ToolCallResponsePart).ToolCall)
	}
	if data, err := os.ReadFile(filepath.Join(th.work, "a.txt")); err != nil || string(data) != "alpha" {
		t.Errorf("a.txt = %q, %v", data, err)
	}
	for _, m := range c.Messages() {
		if e := m.Envelope; e != nil && e.Channel == session {
			if a, ok := e.Action.(*protocol.SessionInputNeededSetAction); ok {
				t.Errorf("the session showed a wait: %+v", a)
			}
		}
	}
	if text(parts) != "done\n\n" {
		t.Errorf("the turn said %q", text(parts))
	}
}

// TestPermissionsDefault: the daemon's permissions are a session's when
// its config sets none, and its config's replace them.
func TestPermissionsDefault(t *testing.T) {
	t.Parallel()
	slow(t)
	th := startHost(t, "", func(o *host.Options) {
		o.Permissions = plugins.Permissions{Mode: plugins.ModeBypass, Deny: []string{"write(secret*)"}}
	})
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	cs := send(t, c, chat, "t1", "run echo hi\nwrite secret.txt x")
	parts := cs.Turns[0].ResponseParts
	if s, ok := parts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCompletedState); !ok || s.Confirmed != protocol.ToolCallConfirmationReasonSetting {
		t.Errorf("the command under the default bypass: %+v", parts[0])
	}
	if _, ok := parts[1].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCancelledState); !ok {
		t.Errorf("the write the default denies: %+v", parts[1])
	}
	_, chat = th.newSession(c, "s2", map[string]any{"permissions": map[string]any{"mode": "ask"}})
	startTurn(c, chat, "t1", "run echo hi")
	pendingTool(t, c, chat) // asks
	if _, err := host.New(host.Options{StateDir: t.TempDir(), Permissions: plugins.Permissions{Mode: "all"}}); err == nil {
		t.Error("a host took malformed default permissions")
	}
}

// TestInputTimeout: a turn left waiting for a person as long as the
// session's inputTimeout ends in chat/error saying so; one answered in
// time is not cut. The host's clock is fake and moved by the test.
func TestInputTimeout(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", func(o *host.Options) { o.Clock = clk; o.InputTimeout = time.Hour })
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", map[string]any{"inputTimeout": "5m"})

	// A confirmation nobody gives.
	startTakenAt(t, c, chat, "t1", "write a.txt x\nsay never", clk.Now())
	pendingTool(t, c, chat)
	clk.Advance(5*time.Minute - time.Second)
	clk.Advance(time.Second)
	cs := waitTurnEnd(t, c, chat, "t1")
	checkTimedOut(t, cs.Turns[0], "waited 5m for input (a tool call's confirmation) and nobody answered")
	if _, err := os.Stat(filepath.Join(th.work, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("the write nobody confirmed was done (%v)", err)
	}

	// A question nobody answers, under the daemon's timeout.
	_, chat2 := th.newSession(c, "s2", nil)
	startTakenAt(t, c, chat2, "t1", "ask Well?", clk.Now())
	c.WaitState(chat2, "the question", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).Status.Activity() == protocol.StatusInputNeeded
	})
	clk.Advance(time.Hour)
	checkTimedOut(t, waitTurnEnd(t, c, chat2, "t1").Turns[0], "waited 1h for input (an answer) and nobody answered")

	// Answered in time: the turn goes on, and nothing cuts it later.
	startTakenAt(t, c, chat, "t2", "write b.txt y\nsay written", clk.Now())
	id := pendingTool(t, c, chat)
	clk.Advance(4 * time.Minute)
	c.Dispatch(chat, &protocol.ChatToolCallConfirmedAction{TurnID: "t2", ToolCallID: id, Approved: true,
		Confirmed: new(protocol.ToolCallConfirmationReasonUserAction)})
	cs = waitTurnEnd(t, c, chat, "t2")
	clk.Advance(time.Hour)
	if last := cs.Turns[len(cs.Turns)-1]; last.State != protocol.TurnStateComplete || !strings.Contains(text(last.ResponseParts), "written") {
		t.Errorf("the turn answered in time: %s %q", last.State, text(last.ResponseParts))
	}
	// The chat takes another turn after a timeout, and the timeout can
	// change on a running session.
	c.Dispatch("ahp-session:/s1", &protocol.SessionConfigChangedAction{Config: protocol.Object{"inputTimeout": []byte(`"0"`)}})
	c.WaitState("ahp-session:/s1", "no timeout", func(s protocol.ChannelState) bool {
		return string(s.(*protocol.SessionState).Config.Values["inputTimeout"]) == `"0"`
	})
	startTakenAt(t, c, chat, "t3", "write c.txt z", clk.Now())
	id = pendingTool(t, c, chat)
	clk.Advance(24 * time.Hour)
	c.Dispatch(chat, &protocol.ChatToolCallConfirmedAction{TurnID: "t3", ToolCallID: id, Approved: true,
		Confirmed: new(protocol.ToolCallConfirmationReasonUserAction)})
	if last := waitTurnEnd(t, c, chat, "t3").Turns[2]; last.State != protocol.TurnStateComplete {
		t.Errorf("with no timeout the turn ended %s", last.State)
	}
}

func checkTimedOut(t *testing.T, turn protocol.Turn, says string) {
	t.Helper()
	e := turn.ErrorPart()
	if turn.State != protocol.TurnStateError || e == nil || e.Error.ErrorType != "inputTimeout" || !strings.Contains(e.Error.Message, says) {
		t.Errorf("the turn ended %s with %+v, want inputTimeout saying %q", turn.State, e, says)
	}
}

// readyOf returns the chat/toolCallReady c was sent for a tool call.
func readyOf(t *testing.T, c *hosttest.Client, chat, toolCallID string) *protocol.ChatToolCallReadyAction {
	t.Helper()
	for _, m := range c.Messages() {
		if e := m.Envelope; e != nil && e.Channel == chat {
			if a, ok := e.Action.(*protocol.ChatToolCallReadyAction); ok && a.ToolCallID == toolCallID {
				return a
			}
		}
	}
	t.Fatalf("no chat/toolCallReady for %s", toolCallID)
	return nil
}

// toolCalls returns the tool calls of a turn, in order.
func toolCalls(turn protocol.Turn) []protocol.ToolCallState {
	var out []protocol.ToolCallState
	for _, p := range turn.ResponseParts {
		if tp, ok := p.(*protocol.ToolCallResponsePart); ok {
			out = append(out, tp.ToolCall)
		}
	}
	return out
}

func confirm(c *hosttest.Client, chat, turnID, toolCallID, option string) {
	c.Dispatch(chat, &protocol.ChatToolCallConfirmedAction{TurnID: turnID, ToolCallID: toolCallID, Approved: true,
		Confirmed: new(protocol.ToolCallConfirmationReasonUserAction), SelectedOptionID: &option})
}

// TestAllowInSession: a confirmation offers allow in this session, allow
// once and deny (validated against the schemas); picking allow in this
// session adds an allow rule for the tool anywhere in the folder to the
// session's permissions, which every client sees in its config and which
// outlives a restart, and the next writes, of another file too, run
// confirmed by that setting. Allow once, and an option the host never
// offered, allow the one call: the next asks again.
func TestAllowInSession(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state)
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)

	startTaken(t, c, chat, "t1", "write a.txt one\nwrite c.txt two")
	id := pendingTool(t, c, chat)
	ready := readyOf(t, c, chat, id)
	protocoltest.Validate(t, "ChatToolCallReadyAction", ready)
	var got []string
	for _, o := range ready.Options {
		g := ""
		if o.Group != nil {
			g = fmt.Sprint(*o.Group)
		}
		got = append(got, o.ID+"|"+o.Label+"|"+string(o.Kind)+"|"+g)
	}
	if want := []string{"allow-session|Allow in this Session|approve|1", "allow-once|Allow Once|approve|", "deny|Deny|deny|2"}; !slices.Equal(got, want) {
		t.Errorf("the options: %q, want %q", got, want)
	}
	confirm(c, chat, "t1", id, "allow-session")
	// The turn's second write, another file, runs on the rule at once.
	cs := waitTurnEnd(t, c, chat, "t1")
	calls := toolCalls(cs.Turns[0])
	first, ok := calls[0].(*protocol.ToolCallCompletedState)
	if !ok || first.Confirmed != protocol.ToolCallConfirmationReasonUserAction || first.SelectedOption == nil || first.SelectedOption.ID != "allow-session" {
		t.Errorf("the write allowed in the session: %+v", calls[0])
	}
	wantRule := `{"mode":"ask","allow":["write(**)"]}`
	checkSetting := func(call protocol.ToolCallState) {
		t.Helper()
		done, ok := call.(*protocol.ToolCallCompletedState)
		if !ok || !done.Success || done.Confirmed != protocol.ToolCallConfirmationReasonSetting || string(done.Meta["ahpd.permission"]) != `"allow \"write(**)\""` {
			t.Errorf("a write after allow in this session: %+v", call)
		}
	}
	checkSetting(calls[1])
	st := c.WaitState(session, "the rule in the config", func(s protocol.ChannelState) bool {
		return string(s.(*protocol.SessionState).Config.Values["permissions"]) == wantRule
	}).(*protocol.SessionState)
	if p, ok := st.Config.Schema.Properties.Get("permissions"); !ok || p.SessionMutable == nil || !*p.SessionMutable {
		t.Errorf("the permissions property: %+v", p)
	}
	// Another client sees it too, from the session's state.
	c2 := th.client("c2")
	if got := string(c2.Subscribe(session).State.(*protocol.SessionState).Config.Values["permissions"]); got != wantRule {
		t.Errorf("another client's config: %s", got)
	}

	cs = send(t, c, chat, "t2", "write b.txt three\nwrite a.txt four")
	for _, call := range toolCalls(cs.Turns[1]) {
		checkSetting(call)
	}
	for name, want := range map[string]string{"a.txt": "four", "b.txt": "three", "c.txt": "two"} {
		if data, err := os.ReadFile(filepath.Join(th.work, name)); err != nil || string(data) != want {
			t.Errorf("%s = %q, %v", name, data, err)
		}
	}

	// Allow once, then an option the host did not offer: each allows its
	// call alone, and the permissions stay as they were.
	s2, chat2 := th.newSession(c, "s2", nil)
	for i, option := range []string{"allow-once", "always"} {
		turnID := fmt.Sprintf("t%d", i+1)
		startTaken(t, c, chat2, turnID, "write d.txt "+option)
		id := pendingTool(t, c, chat2)
		confirm(c, chat2, turnID, id, option)
		last := waitTurnEnd(t, c, chat2, turnID).Turns[i]
		if done, ok := toolCalls(last)[0].(*protocol.ToolCallCompletedState); !ok || done.Confirmed != protocol.ToolCallConfirmationReasonUserAction {
			t.Errorf("%s: %+v", option, toolCalls(last)[0])
		}
	}
	// A third asks again; deny refuses it.
	startTaken(t, c, chat2, "t3", "write d.txt denied")
	id = pendingTool(t, c, chat2)
	c.Dispatch(chat2, &protocol.ChatToolCallConfirmedAction{TurnID: "t3", ToolCallID: id, Approved: false,
		Reason: new(protocol.ToolCallCancellationReasonDenied), SelectedOptionID: new(chats.OptionDeny)})
	if _, ok := toolCalls(waitTurnEnd(t, c, chat2, "t3").Turns[2])[0].(*protocol.ToolCallCancelledState); !ok {
		t.Error("the denied write was not cancelled")
	}
	if data, _ := os.ReadFile(filepath.Join(th.work, "d.txt")); string(data) != "always" {
		t.Errorf("d.txt = %q", data)
	}
	if got := string(c.Subscribe(s2).State.(*protocol.SessionState).Config.Values["permissions"]); got != `{"mode":"ask"}` {
		t.Errorf("allow once changed the permissions: %s", got)
	}

	// The rule outlives a restart of the host.
	th.stop()
	th = startHost(t, state)
	c = th.client("c3")
	if got := string(c.Subscribe(session).State.(*protocol.SessionState).Config.Values["permissions"]); got != wantRule {
		t.Errorf("after a restart the permissions are %s", got)
	}
}
