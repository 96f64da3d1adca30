package host_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// otherChat is a chat URI of the session of chat, with another chat id.
func otherChat(chat, id string) string { return strings.Replace(chat, "/default/", "/"+id+"/", 1) }

// TestForkAndSideChat makes a fork and a side chat of a script session's
// chat over the wire, runs a turn in each, and finds both as they were
// after the host restarts on the same state directory.
func TestForkAndSideChat(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state)
	c := th.client("c1")

	// Root's entry for the script backend advertises both.
	root := c.State(protocol.RootURI).(*protocol.RootState)
	i := slices.IndexFunc(root.Agents, func(a protocol.AgentInfo) bool { return a.Provider == "script" })
	if i < 0 {
		t.Fatal("root lists no script agent")
	}
	if caps := root.Agents[i].Capabilities; caps == nil || caps.MultipleChats == nil ||
		caps.MultipleChats.Fork == nil || !*caps.MultipleChats.Fork || caps.MultipleChats.SideChat == nil || !*caps.MultipleChats.SideChat {
		t.Errorf("the script agent's capabilities = %+v, want multipleChats fork and sideChat", root.Agents[i].Capabilities)
	}

	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")
	send(t, c, chat, "t2", "say two")

	// A fork at turn 1 shows turn 1 only, and goes on from there.
	fork := otherChat(chat, "fork1")
	c.MustCall("createChat", map[string]any{"channel": session, "chat": fork,
		"source": map[string]any{"kind": "fork", "chat": chat, "turnId": "t1"}})
	fs := c.Subscribe(fork).State.(*protocol.ChatState)
	if got := turnIDs(fs); got != "t1" {
		t.Fatalf("the fork shows turns %v, want t1", got)
	}
	if o, ok := fs.Origin.(*protocol.ChatOriginFork); !ok || o.Chat != chat || o.TurnID != "t1" {
		t.Errorf("the fork's origin = %#v", fs.Origin)
	}
	if got := text(fs.Turns[0].ResponseParts); !strings.Contains(got, "one") {
		t.Errorf("the fork's turn 1 says %q", got)
	}
	fs = send(t, c, fork, "f1", "say forked")
	if got := turnIDs(fs); got != "t1 f1" {
		t.Errorf("the fork after a turn shows %q, want %q", got, "t1 f1")
	}
	if got := turnIDs(c.State(chat).(*protocol.ChatState)); got != "t1 t2" {
		t.Errorf("the source shows %q after the fork's turn, want %q", got, "t1 t2")
	}
	sess := c.State(session).(*protocol.SessionState)
	if !slices.ContainsFunc(sess.Chats, func(s protocol.ChatSummary) bool {
		_, ok := s.Origin.(*protocol.ChatOriginFork)
		return s.Resource == fork && ok
	}) {
		t.Errorf("the session's chats do not list the fork with its origin: %+v", sess.Chats)
	}

	// A side chat of turn 2 shows nothing of the source, keeps the
	// selection, and runs.
	side := otherChat(chat, "side1")
	c.MustCall("createChat", map[string]any{"channel": session, "chat": side,
		"source": map[string]any{"kind": "sideChat", "chat": chat, "turnId": "t2", "selection": map[string]any{"text": "two"}}})
	ss := c.Subscribe(side).State.(*protocol.ChatState)
	if len(ss.Turns) != 0 {
		t.Errorf("the side chat shows turns %v, want none", turnIDs(ss))
	}
	if o, ok := ss.Origin.(*protocol.ChatOriginSideChat); !ok || o.TurnID != "t2" || o.Selection == nil || o.Selection.Text != "two" {
		t.Errorf("the side chat's origin = %#v", ss.Origin)
	}
	ss = send(t, c, side, "b1", "say aside")
	if got := turnIDs(ss); got != "b1" {
		t.Errorf("the side chat after a turn shows %q, want b1", got)
	}

	// Bad sources are refused, saying why.
	_, otherDefault := th.newSession(c, "s2", nil)
	for _, bad := range []struct {
		name   string
		chat   string
		source map[string]any
		want   string
	}{
		{"unknown chat", otherChat(chat, "x1"), map[string]any{"kind": "fork", "chat": otherChat(chat, "nope"), "turnId": "t1"}, "has no chat"},
		{"unknown turn", otherChat(chat, "x2"), map[string]any{"kind": "fork", "chat": chat, "turnId": "t9"}, "has no turn"},
		{"another session's chat", otherChat(chat, "x3"), map[string]any{"kind": "fork", "chat": otherDefault, "turnId": "t1"}, "a chat of session"},
		{"the chat itself", otherChat(chat, "x4"), map[string]any{"kind": "fork", "chat": otherChat(chat, "x4"), "turnId": "t1"}, "being created"},
		{"empty selection", otherChat(chat, "x5"), map[string]any{"kind": "sideChat", "chat": chat, "turnId": "t1", "selection": map[string]any{"text": ""}}, "selection"},
	} {
		_, err := c.Call("createChat", map[string]any{"channel": session, "chat": bad.chat, "source": bad.source})
		if err == nil || err.Code != int64(protocol.CodeInvalidParams) || !strings.Contains(err.Message, bad.want) {
			t.Errorf("createChat from %s: %v, want -32602 saying %q", bad.name, err, bad.want)
		}
	}
	if n := len(c.State(session).(*protocol.SessionState).Chats); n != 3 {
		t.Errorf("the session has %d chats after the refusals, want 3", n)
	}

	// A restart on the same state directory keeps both as they were.
	c.Close()
	th.stop()
	th = startHost(t, state)
	c = th.client("c1")
	c.Subscribe(session)
	fs = c.Subscribe(fork).State.(*protocol.ChatState)
	if got := turnIDs(fs); got != "t1 f1" {
		t.Errorf("after a restart the fork shows %q, want %q", got, "t1 f1")
	}
	if _, ok := fs.Origin.(*protocol.ChatOriginFork); !ok {
		t.Errorf("after a restart the fork's origin is %#v", fs.Origin)
	}
	ss = c.Subscribe(side).State.(*protocol.ChatState)
	if got := turnIDs(ss); got != "b1" {
		t.Errorf("after a restart the side chat shows %q, want b1", got)
	}
	if _, ok := ss.Origin.(*protocol.ChatOriginSideChat); !ok {
		t.Errorf("after a restart the side chat's origin is %#v", ss.Origin)
	}
	fs = send(t, c, fork, "f2", "say again")
	if got := turnIDs(fs); got != "t1 f1 f2" {
		t.Errorf("the fork after a restart and a turn shows %q", got)
	}

	// A fork needs a finished turn; a side chat may start from the one
	// running, as it stands.
	c.Subscribe(chat)
	startTaken(t, c, chat, "t3", "say before\nask Which file?")
	c.WaitState(chat, "turn t3 to ask", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return cs.ActiveTurn != nil && cs.ActiveTurn.ID == "t3" && cs.Status&protocol.StatusInputNeeded != 0
	})
	_, err := c.Call("createChat", map[string]any{"channel": session, "chat": otherChat(chat, "x6"),
		"source": map[string]any{"kind": "fork", "chat": chat, "turnId": "t3"}})
	if err == nil || err.Code != int64(protocol.CodeInvalidParams) || !strings.Contains(err.Message, "still running") {
		t.Errorf("a fork of a running turn: %v, want -32602 saying it is still running", err)
	}
	side2 := otherChat(chat, "side2")
	c.MustCall("createChat", map[string]any{"channel": session, "chat": side2,
		"source": map[string]any{"kind": "sideChat", "chat": chat, "turnId": "t3"}})
	ss = c.Subscribe(side2).State.(*protocol.ChatState)
	if len(ss.Turns) != 0 {
		t.Errorf("the side chat of a running turn shows %q", turnIDs(ss))
	}
	send(t, c, side2, "b2", "say beside")
}

// TestForkIsNoExternalSession: the copy a fork's backend writes is the
// host's own from before it is written, so the catalogue, which lists the
// transcripts no session holds, never shows it as an external session
// (VS Code, asking for recent external sessions, was sent one).
func TestForkIsNoExternalSession(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state, withTranscripts)
	c := th.client("c1")
	setMode(c, "last7Days")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")
	c.MustCall("createChat", map[string]any{"channel": session, "chat": otherChat(chat, "fork1"),
		"source": map[string]any{"kind": "fork", "chat": chat, "turnId": "t1"}})
	// A transcript of nobody's, written after the fork's copy: once the
	// catalogue shows it, it has seen the copy too.
	writeScriptTranscript(t, filepath.Join(state, "transcripts", "script"), "stranger", "a stranger's", time.Now())
	c.Wait("the stranger's session listed", func(msgs []hosttest.Message) bool {
		return slices.Contains(rootNotes(msgs, "root/sessionAdded"), "script:/stranger")
	})
	for _, added := range rootNotes(c.Messages(), "root/sessionAdded") {
		if strings.HasPrefix(added, "script:/s1-") {
			t.Errorf("the fork's copy %s was listed as an external session", added)
		}
	}
	if _, external := listed(t, c); !slices.Equal(external, []string{"script:/stranger"}) {
		t.Errorf("external sessions %v, want the stranger's alone", external)
	}
}
