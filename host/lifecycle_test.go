package host_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

func listSessions(t *testing.T, c *hosttest.Client, params map[string]any) protocol.ListSessionsResult {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["channel"] = protocol.RootURI
	var r protocol.ListSessionsResult
	if err := json.Unmarshal(c.MustCall("listSessions", params), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func methods(msgs []hosttest.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Envelope != nil {
			out = append(out, string(m.Envelope.Action.Type()))
		} else {
			out = append(out, m.Method)
		}
	}
	return out
}

// TestProvisionalSession checks that a new session is its creator's alone
// until its first turn reaches the backend, and is then announced, then
// ready.
func TestProvisionalSession(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("creator")
	other := th.client("other")
	session, chat := th.newSession(c, "s1", nil)

	if n := len(listSessions(t, other, nil).Items); n != 0 {
		t.Errorf("another client lists %d sessions before the first turn", n)
	}
	// VS Code makes a session for every empty chat it shows: until a turn,
	// it is nobody's listing, its creator's included.
	if n := len(listSessions(t, c, nil).Items); n != 0 {
		t.Errorf("the creator lists %d sessions before the first turn, want 0", n)
	}
	if _, err := other.Call("subscribe", map[string]any{"channel": session}); err == nil || err.Code != -32001 {
		t.Errorf("another client subscribed to a provisional session: %v", err)
	}
	if st := c.State(session).(*protocol.SessionState); st.Lifecycle != protocol.SessionLifecycleCreating {
		t.Errorf("lifecycle %s before the first turn", st.Lifecycle)
	}

	send(t, c, chat, "t1", "say hi")
	other.Wait("the announcement", func(msgs []hosttest.Message) bool {
		return slices.Contains(methods(msgs), "root/sessionAdded")
	})
	c.Wait("ready", func(msgs []hosttest.Message) bool { return slices.Contains(methods(msgs), "session/ready") })
	got := methods(c.Messages())
	if added, ready := slices.Index(got, "root/sessionAdded"), slices.Index(got, "session/ready"); added > ready {
		t.Errorf("session/ready came before root/sessionAdded: %v", got)
	}
	if n := len(listSessions(t, other, nil).Items); n != 1 {
		t.Errorf("another client lists %d sessions after the first turn, want 1", n)
	}
}

// TestFirstTurnFailureKeepsTheStartOwed checks that a session whose first
// turn cannot reach the backend fails its creation, is announced, and
// starts when a later message can.
func TestFirstTurnFailureKeepsTheStartOwed(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	dir := filepath.Join(th.state, "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	session := "ahp-session:/s1"
	c.MustCall("createSession", map[string]any{"channel": session, "provider": "script", "workingDirectories": []string{"file://" + dir}})
	chat := protocol.DefaultChatURI(session)
	c.Subscribe(session)
	c.Subscribe(chat)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	cs := send(t, c, chat, "t1", "say hi")
	if cs.Turns[0].State != protocol.TurnStateError {
		t.Fatalf("first turn: %s", cs.Turns[0].State)
	}
	c.WaitState(session, "creation to fail", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Lifecycle == protocol.SessionLifecycleFailed
	})
	c.Wait("the announcement", func(msgs []hosttest.Message) bool {
		return slices.Contains(methods(msgs), "root/sessionAdded")
	})
	got := methods(c.Messages())
	failed, added := slices.Index(got, "session/creationFailed"), slices.Index(got, "root/sessionAdded")
	if failed < 0 || added < failed {
		t.Errorf("want chat/error, session/creationFailed, root/sessionAdded; got %v", got)
	}

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cs = send(t, c, chat, "t2", "say hi again")
	if cs.Turns[1].State != protocol.TurnStateComplete {
		t.Fatalf("second turn: %s", cs.Turns[1].State)
	}
	c.WaitState(session, "ready", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Lifecycle == protocol.SessionLifecycleReady
	})
}

func TestDisposeSession(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	other := th.client("other")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hi")
	transcript := filepath.Join(th.state, "transcripts", "script", "s1.jsonl")
	if _, err := os.Stat(transcript); err != nil {
		t.Fatalf("no transcript after a turn: %v", err)
	}
	c.MustCall("disposeSession", map[string]any{"channel": session})
	other.Wait("the removal", func(msgs []hosttest.Message) bool {
		return slices.Contains(methods(msgs), "root/sessionRemoved")
	})
	if _, err := os.Stat(transcript); !os.IsNotExist(err) {
		t.Errorf("the backend's transcript is still there (%v)", err)
	}
	if n := len(listSessions(t, c, nil).Items); n != 0 {
		t.Errorf("%d sessions listed after dispose", n)
	}
	if _, err := c.Call("subscribe", map[string]any{"channel": session}); err == nil {
		t.Error("subscribed to a disposed session")
	}
	if files, _ := filepath.Glob(filepath.Join(th.state, "sessions", "*.json")); len(files) != 0 {
		t.Errorf("store files left: %v", files)
	}
}

// TestRestart checks that a new host on the same state directory has the
// same sessions, titles, createdAt, read and archived bits, and turns.
func TestRestart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state)
	c := th.client("c1")
	s1, chat1 := th.newSession(c, "s1", nil)
	send(t, c, chat1, "t1", "title First\nsay one")
	send(t, c, chat1, "t2", "say two")
	s2, chat2 := th.newSession(c, "s2", nil)
	send(t, c, chat2, "t1", "title Second\nsay three")
	c.Dispatch(s1, &protocol.SessionIsReadChangedAction{IsRead: true})
	c.Dispatch(s2, &protocol.SessionIsArchivedChangedAction{IsArchived: true})
	c.WaitState(s2, "archived", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Status&protocol.StatusIsArchived != 0
	})
	c.WaitState(s1, "read", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Status&protocol.StatusIsRead != 0
	})
	before := listSessions(t, c, nil).Items
	seen := c.State(chat1).(*protocol.ChatState).Turns
	c.Close()
	th.stop()

	th = startHost(t, state)
	c = th.client("c1")
	after := listSessions(t, c, nil).Items
	if len(after) != 2 {
		t.Fatalf("%d sessions after restart, want 2", len(after))
	}
	for i := range before {
		b, a := before[i], after[i]
		if a.Resource != b.Resource || a.Title != b.Title || a.CreatedAt != b.CreatedAt || a.Status != b.Status {
			t.Errorf("session %s changed across a restart:\nbefore %+v\n after %+v", b.Resource, b, a)
		}
	}
	cs := c.Subscribe(chat1).State.(*protocol.ChatState)
	if len(cs.Turns) != 2 || !strings.Contains(text(cs.Turns[1].ResponseParts), "two") {
		t.Fatalf("turns after restart: %d", len(cs.Turns))
	}
	if cs.Turns[0].ID != "t1" || cs.Turns[1].ID != "t2" {
		t.Errorf("turn ids after restart: %s, %s; want the client's t1, t2", cs.Turns[0].ID, cs.Turns[1].ID)
	}
	// Read back from the transcript, the turns start and last as clients
	// were told.
	for i, turn := range cs.Turns {
		if *turn.StartedAt != *seen[i].StartedAt || *turn.Duration != *seen[i].Duration {
			t.Errorf("turn %s was %s + %d ms, reads back as %s + %d ms", turn.ID, *seen[i].StartedAt, *seen[i].Duration, *turn.StartedAt, *turn.Duration)
		}
	}
	// The session goes on where it was.
	c.Subscribe(s1)
	cs = send(t, c, chat1, "t3", "say three")
	if len(cs.Turns) != 3 {
		t.Errorf("%d turns after a turn following the restart", len(cs.Turns))
	}
}

// TestCorruptStoreFileIsSkipped checks that a file the store cannot read
// is logged and skipped, and never silently overwritten.
func TestCorruptStoreFileIsSkipped(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir := filepath.Join(state, "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"s1.json": "{not json", "other.json": `{"hello":"world"}`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	th := startHost(t, state)
	c := th.client("c1")
	if n := len(listSessions(t, c, nil).Items); n != 0 {
		t.Fatalf("%d sessions from unreadable files", n)
	}
	_, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hi")
	aside, _ := filepath.Glob(filepath.Join(dir, "s1.json.unreadable-*"))
	if len(aside) != 1 {
		t.Fatalf("the unreadable s1.json was not moved aside: %v", aside)
	}
	if data, _ := os.ReadFile(aside[0]); string(data) != "{not json" {
		t.Errorf("the moved file changed: %q", data)
	}
}

func TestMemoryStoreKeepsNothing(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state, func(o *host.Options) { o.Sessions = "memory" })
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hi")
	c.Close()
	th.stop()
	th = startHost(t, state, func(o *host.Options) { o.Sessions = "memory" })
	if n := len(listSessions(t, th.client("c1"), nil).Items); n != 0 {
		t.Errorf("%d sessions after a restart of a memory store", n)
	}
}
