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

// A full disk cannot be made safely in a test, so the store's temporary
// files are made to fail as one does (host.DiskFull); everything else,
// the store's clean-up included, is the real thing.

const noSpace = "could not store the session: no space left on device"

// startFullHost starts a host whose disk fills when the test says so.
func startFullHost(t *testing.T, state string) (*testHost, *host.DiskFull) {
	t.Helper()
	disk := &host.DiskFull{}
	return startHost(t, state, func(o *host.Options) { host.WithDiskFull(o, disk) }), disk
}

// storeFiles lists what is in the state directory's sessions folder.
func storeFiles(t *testing.T, state string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(state, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// announced lists the sessions a client was told of with root/sessionAdded.
func announced(t *testing.T, msgs []hosttest.Message) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		if m.Method != "root/sessionAdded" {
			continue
		}
		var p protocol.SessionAddedParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Summary.Resource)
	}
	return out
}

// storeErrorMeta returns the ErrorInfo a session's _meta carries when its
// latest changes are not stored, or nil.
func storeErrorMeta(t *testing.T, meta protocol.Object) *protocol.ErrorInfo {
	t.Helper()
	v, ok := meta["ahpd.storeError"]
	if !ok {
		return nil
	}
	var info protocol.ErrorInfo
	if err := json.Unmarshal(v, &info); err != nil {
		t.Fatalf("ahpd.storeError is not an ErrorInfo: %s", v)
	}
	return &info
}

// TestFullDiskFirstTurnKeepsNothing checks that a session that cannot be
// stored when its first turn sets out is never announced: the turn fails
// with the reason, its creator sees its creation fail, and nothing of it
// is left (no record, no temporary file, no transcript, no worktree, no
// checkpoint), before or after a restart.
func TestFullDiskFirstTurnKeepsNothing(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th, disk := startFullHost(t, state)
	c := th.client("creator")
	other := th.client("other")
	repo := newRepo(t)
	session, chat := worktreeSession(t, c, "s1", repo, nil)

	disk.Set(true)
	cs := send(t, c, chat, "t1", "say hi")
	if got := errorText(cs.Turns[0]); got != noSpace {
		t.Errorf("the first turn ended with %q, want %q", got, noSpace)
	}
	st := c.WaitState(session, "creation to fail", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Lifecycle == protocol.SessionLifecycleFailed
	}).(*protocol.SessionState)
	if e := st.CreationError; e == nil || e.ErrorType != "storeFailed" || e.Message != noSpace {
		t.Errorf("creationError %+v", e)
	}
	if n := th.h.StoreWriteErrors(); n == 0 {
		t.Error("no store write error counted")
	}

	// Another session, on a disk with room again, is announced to the other
	// client after anything the first would have been.
	disk.Set(false)
	_, chat2 := th.newSession(c, "s2", nil)
	send(t, c, chat2, "t1", "say hi")
	other.Wait("the second session's announcement", func(msgs []hosttest.Message) bool {
		return slices.Contains(announced(t, msgs), "ahp-session:/s2")
	})
	for _, cl := range []*hosttest.Client{c, other} {
		if got := announced(t, cl.Messages()); slices.Contains(got, session) {
			t.Errorf("a client was told of the session that was not stored: %v", got)
		}
		for _, row := range listSessions(t, cl, nil).Items {
			if row.Resource == session {
				t.Errorf("the session that was not stored is listed")
			}
		}
	}

	if _, err := os.Stat(filepath.Join(state, "transcripts", "script", "s1.jsonl")); !os.IsNotExist(err) {
		t.Errorf("the backend has a transcript of the session that was not stored (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(repo), "project.worktrees")); !os.IsNotExist(err) {
		t.Errorf("a worktree was made for the session that was not stored (%v)", err)
	}
	if refs := git(t, repo, "for-each-ref", "refs/agents/"); refs != "" {
		t.Errorf("checkpoints of the session that was not stored: %q", refs)
	}
	if out := git(t, repo, "worktree", "list", "--porcelain"); strings.Count(out, "worktree ") != 1 {
		t.Errorf("git knows of more than the repository's own tree:\n%s", out)
	}

	c.Close()
	other.Close()
	th.stop() // no write is under way
	if got := storeFiles(t, state); !slices.Equal(got, []string{"s2.json"}) {
		t.Errorf("the store holds %v, want only s2.json", got)
	}
	th = startHost(t, state)
	c = th.client("creator")
	rows := listSessions(t, c, nil).Items
	if len(rows) != 1 || rows[0].Resource != "ahp-session:/s2" {
		t.Errorf("after a restart the host lists %+v, want s2 alone", rows)
	}
	if _, err := c.Call("subscribe", map[string]any{"channel": session}); err == nil || err.Code != -32001 {
		t.Errorf("subscribing to the session that was not stored after a restart: %v", err)
	}
}

// TestFullDiskFirstTurnTriedAgain checks that once the disk has room, the
// next message of a session that could not be stored stores it, starts
// it and announces it.
func TestFullDiskFirstTurnTriedAgain(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th, disk := startFullHost(t, state)
	c := th.client("creator")
	other := th.client("other")
	session, chat := th.newSession(c, "s1", nil)

	disk.Set(true)
	if cs := send(t, c, chat, "t1", "say hi"); errorText(cs.Turns[0]) != noSpace {
		t.Fatalf("the first turn ended with %q", errorText(cs.Turns[0]))
	}
	disk.Set(false)
	cs := send(t, c, chat, "t2", "say again")
	if last := cs.Turns[len(cs.Turns)-1]; last.State != protocol.TurnStateComplete || !strings.Contains(text(last.ResponseParts), "again") {
		t.Fatalf("the second turn: %s %q", last.State, errorText(last))
	}
	c.WaitState(session, "ready", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Lifecycle == protocol.SessionLifecycleReady
	})
	other.Wait("the announcement", func(msgs []hosttest.Message) bool {
		return slices.Contains(announced(t, msgs), session)
	})
	c.Close()
	other.Close()
	th.stop() // no write is under way
	if got := storeFiles(t, state); !slices.Equal(got, []string{"s1.json"}) {
		t.Errorf("the store holds %v, want s1.json", got)
	}
}

// TestFullDiskLaterWriteReported checks that a change the store cannot
// keep is told to every client through the session's _meta, the session
// goes on, nothing is left beside the old record, and the next write that
// succeeds catches up and takes the mark away.
func TestFullDiskLaterWriteReported(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th, disk := startFullHost(t, state)
	c := th.client("c1")
	other := th.client("other")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "title First\nsay one")
	// The record is written off the turn's path: the disk fills once the
	// first turn's is there.
	if err := th.h.Settle(t.Context(), session); err != nil {
		t.Fatal(err)
	}
	var first struct{ Title, Lifecycle string }
	if data, err := os.ReadFile(filepath.Join(state, "sessions", "s1.json")); err != nil || json.Unmarshal(data, &first) != nil || first.Title != "First" || first.Lifecycle != "ready" {
		t.Fatalf("the settled record: %v %q", err, data)
	}

	disk.Set(true)
	cs := send(t, c, chat, "t2", "title Second\nsay two")
	if last := cs.Turns[len(cs.Turns)-1]; last.State != protocol.TurnStateComplete {
		t.Fatalf("a turn on a full disk: %s %q", last.State, errorText(last))
	}
	st := c.WaitState(session, "the store error", func(s protocol.ChannelState) bool {
		return storeErrorMeta(t, s.(*protocol.SessionState).Meta) != nil
	}).(*protocol.SessionState)
	if e := storeErrorMeta(t, st.Meta); e.ErrorType != "storeFailed" || !strings.HasPrefix(e.Message, noSpace) {
		t.Errorf("the store error: %+v", e)
	}
	// A client watching only root sees it on the session's row.
	other.Wait("the row's store error", func(msgs []hosttest.Message) bool {
		return rowMeta(t, msgs, session, func(m protocol.Object) bool { return storeErrorMeta(t, m) != nil })
	})
	// The old record is there, whole.
	var rec struct{ Title string }
	if data, err := os.ReadFile(filepath.Join(state, "sessions", "s1.json")); err != nil || json.Unmarshal(data, &rec) != nil || rec.Title != "First" {
		t.Errorf("the record on a full disk: %v %q", err, data)
	}
	if th.h.StoreWriteErrors() == 0 {
		t.Error("no store write error counted")
	}

	// Room again: the next change writes the whole record.
	disk.Set(false)
	c.Dispatch(session, &protocol.SessionIsReadChangedAction{IsRead: true})
	c.WaitState(session, "the store error to go", func(s protocol.ChannelState) bool {
		return storeErrorMeta(t, s.(*protocol.SessionState).Meta) == nil
	})
	other.Wait("the row's store error to go", func(msgs []hosttest.Message) bool {
		return rowMeta(t, msgs, session, func(m protocol.Object) bool { return m != nil && storeErrorMeta(t, m) == nil })
	})

	c.Close()
	other.Close()
	th.stop() // no write is under way
	if got := storeFiles(t, state); !slices.Equal(got, []string{"s1.json"}) {
		t.Errorf("the store holds %v after failed writes, want s1.json alone", got)
	}
	th = startHost(t, state)
	c = th.client("c1")
	rows := listSessions(t, c, nil).Items
	if len(rows) != 1 || rows[0].Title != "Second" || rows[0].Status&protocol.StatusIsRead == 0 {
		t.Fatalf("after a restart: %+v", rows)
	}
	if rows[0].Meta != nil {
		t.Errorf("the row's _meta after a restart: %v", rows[0].Meta)
	}
	if cs := c.Subscribe(chat).State.(*protocol.ChatState); len(cs.Turns) != 2 {
		t.Errorf("%d turns after a restart, want 2", len(cs.Turns))
	}
}

// rowMeta reports whether the last root/sessionSummaryChanged of session
// that changed its _meta satisfies ok.
func rowMeta(t *testing.T, msgs []hosttest.Message, session string, ok func(protocol.Object) bool) bool {
	t.Helper()
	var last protocol.Object
	seen := false
	for _, m := range msgs {
		if m.Method != "root/sessionSummaryChanged" {
			continue
		}
		var p protocol.SessionSummaryChangedParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.Session == session && p.Changes.Meta != nil {
			last, seen = p.Changes.Meta, true
		}
	}
	return seen && ok(last)
}

// TestFullDiskCreateChatFails checks that a chat that cannot be stored is
// not added: createChat fails with the reason and nobody is told of it.
func TestFullDiskCreateChatFails(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th, disk := startFullHost(t, state)
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")

	disk.Set(true)
	chat2 := strings.Replace(chat, "/default/", "/c2/", 1)
	_, err := c.Call("createChat", map[string]any{"channel": session, "chat": chat2})
	if err == nil || err.Code != -32603 || err.Message != noSpace {
		t.Fatalf("createChat on a full disk: %v", err)
	}
	disk.Set(false)
	// The next createChat is a barrier: the first chat's session/chatAdded
	// would have come before its own.
	chat3 := strings.Replace(chat, "/default/", "/c3/", 1)
	c.MustCall("createChat", map[string]any{"channel": session, "chat": chat3})
	st := c.WaitState(session, "the chat added", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.SessionState).Chats) == 2
	}).(*protocol.SessionState)
	for _, e := range st.Chats {
		if e.Resource == chat2 {
			t.Errorf("the chat that was not stored was added")
		}
	}
	if _, err := c.Call("subscribe", map[string]any{"channel": chat2}); err == nil {
		t.Error("subscribed to the chat that was not stored")
	}
}

// TestFullDiskMoveToNewSessionFails checks that moving a chat into a new
// session that cannot be stored fails and changes nothing: the chat stays
// where it was and no session is announced.
func TestFullDiskMoveToNewSessionFails(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th, disk := startFullHost(t, state)
	c := th.client("c1")
	other := th.client("other")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")
	chat2 := strings.Replace(chat, "/default/", "/c2/", 1)
	c.MustCall("createChat", map[string]any{"channel": session, "chat": chat2})
	c.Subscribe(chat2)

	disk.Set(true)
	_, err := c.Call("moveChat", map[string]any{"channel": chat2, "destination": map[string]any{"kind": "newSession"}})
	if err == nil || err.Code != -32603 || err.Message != noSpace {
		t.Fatalf("moveChat into a new session on a full disk: %v", err)
	}
	// A session action of its own is a barrier: a chat/removed on the
	// failed move would have come before it.
	c.Dispatch(session, &protocol.SessionIsReadChangedAction{IsRead: true})
	c.WaitState(session, "read", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Status&protocol.StatusIsRead != 0
	})
	if n := chatsRemoved(c.Messages(), session); n != 0 || len(c.State(session).(*protocol.SessionState).Chats) != 2 {
		t.Errorf("the failed move took the chat out of its session (%d session/chatRemoved)", n)
	}

	disk.Set(false)
	var moved protocol.MoveChatResult
	if err := json.Unmarshal(c.MustCall("moveChat", map[string]any{"channel": chat2, "destination": map[string]any{"kind": "newSession"}}), &moved); err != nil {
		t.Fatal(err)
	}
	other.Wait("the new session's announcement", func(msgs []hosttest.Message) bool {
		return slices.Contains(announced(t, msgs), moved.Session)
	})
	if got := announced(t, other.Messages()); !slices.Equal(got, []string{session, moved.Session}) {
		t.Errorf("sessions announced: %v, want s1 and the one the chat moved to", got)
	}
	c.Close()
	other.Close()
	th.stop() // no write is under way
	if got := storeFiles(t, state); len(got) != 2 || !slices.Contains(got, "s1.json") {
		t.Errorf("the store holds %v, want s1 and the new session", got)
	}
}

// chatsRemoved counts the session/chatRemoved actions of a session.
func chatsRemoved(msgs []hosttest.Message, session string) int {
	n := 0
	for _, m := range msgs {
		if e := m.Envelope; e != nil && e.Channel == session && e.Action.Type() == protocol.ActionSessionChatRemoved {
			n++
		}
	}
	return n
}

// A client never waits on the disk: while a session's record is being
// synced, its clients subscribe, send and are answered.
func TestSlowDiskHoldsNobody(t *testing.T) {
	t.Parallel()
	disk := host.NewSlowDisk()
	th := startHost(t, t.TempDir(), func(o *host.Options) { host.WithSlowDisk(o, disk) })
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")

	for len(disk.Entered()) > 0 {
		<-disk.Entered()
	}
	disk.Hold()
	held := true
	t.Cleanup(func() {
		if held {
			disk.Release()
		}
	})
	c.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "renamed"})
	<-disk.Entered() // the rename's write waits on the disk
	other := th.client("other")
	other.Subscribe(session)
	other.Subscribe(chat)
	if cs := send(t, other, chat, "t2", "say two"); len(cs.Turns) != 2 {
		t.Errorf("%d turns", len(cs.Turns))
	}
	disk.Release()
	held = false
	c.Close()
	other.Close()
	th.stop()
	th = startHost(t, th.state)
	c = th.client("c1")
	if rows := listSessions(t, c, nil).Items; len(rows) != 1 || rows[0].Title != "renamed" {
		t.Errorf("after a restart: %+v", rows)
	}
}
