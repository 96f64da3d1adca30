package host_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestTitles checks a session takes its first message's words as its
// title at once, its agent's title after, and keeps a title a person set.
func TestTitles(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	long := "say " + strings.Repeat("word ", 60)
	startTurn(c, chat, "t1", long)
	want := titleOf(long)
	c.WaitState(session, "the title from the message", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Title == want
	})
	if n := len([]rune(want)); n != 200 {
		t.Errorf("the title has %d characters, want 200", n)
	}
	waitTurnEnd(t, c, chat, "t1")
	send(t, c, chat, "t2", "title Named by the agent")
	c.WaitState(session, "the agent's title", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Title == "Named by the agent"
	})
	c.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "Mine"})
	c.WaitState(session, "the person's title", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Title == "Mine"
	})
	send(t, c, chat, "t3", "title Not any more")
	if got := c.State(session).(*protocol.SessionState).Title; got != "Mine" {
		t.Errorf("the agent renamed a session a person named: %q", got)
	}
}

// TestDefaultChatTitle checks the default chat's entry in its session's
// state, whose title VS Code's chat header shows, carries the session's
// title: from the first message, the agent and a person, live
// (session/chatUpdated), to a new subscriber, in the listing, and after a
// restart. The chat's own state keeps its title: no chat action could
// tell its subscribers of another.
func TestDefaultChatTitle(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	entryTitle := func(ss *protocol.SessionState) string {
		if len(ss.Chats) != 1 {
			t.Fatalf("the session has %d chats", len(ss.Chats))
		}
		return ss.Chats[0].Title
	}
	titled := func(what, want string) {
		t.Helper()
		c.WaitState(session, "the default chat's entry titled "+what, func(s protocol.ChannelState) bool {
			return entryTitle(s.(*protocol.SessionState)) == want
		})
		late := th.client("late")
		defer late.Close()
		if got := entryTitle(late.Subscribe(session).State.(*protocol.SessionState)); got != want {
			t.Errorf("a new subscriber's default chat entry is titled %q, want %q", got, want)
		}
		if row := findRow(t, listSessions(t, late, nil).Items, session); len(row.Chats) != 1 || row.Chats[0].Title != want {
			t.Errorf("the listing's default chat = %+v, want titled %q", row.Chats, want)
		}
	}
	if got := entryTitle(c.State(session).(*protocol.SessionState)); got != "New Session" {
		t.Errorf("the new default chat's entry is titled %q", got)
	}
	send(t, c, chat, "t1", "say hello there")
	titled("from the message", "say hello there")
	send(t, c, chat, "t2", "title Named by the agent")
	titled("by the agent", "Named by the agent")
	c.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "Mine"})
	titled("by a person", "Mine")
	if got := c.State(chat).(*protocol.ChatState).Title; got != "New Session" {
		t.Errorf("the chat's own state is titled %q", got)
	}

	// A reopened session, after a restart.
	th.stop()
	th2 := startHost(t, th.state)
	c2 := th2.client("c2")
	if got := entryTitle(c2.Subscribe(session).State.(*protocol.SessionState)); got != "Mine" {
		t.Errorf("after a restart the default chat's entry is titled %q", got)
	}
}

// titleOf is the title the host gives a message: its words on one line,
// cut at 200 characters.
func titleOf(text string) string {
	title := strings.Join(strings.Fields(text), " ")
	if r := []rune(title); len(r) > 200 {
		title = string(r[:200])
	}
	return title
}

// TestBackgroundWorkAndMarks checks background work shows in the chat, and
// the default chat's marks and the session's move together.
func TestBackgroundWorkAndMarks(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	old := hosttest.Dial(t, th.url)
	old.InitializeAt([]string{"0.9.0"}, "old", protocol.RootURI)
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "background 1h\nsay meanwhile")
	old.Subscribe(session)
	old.Subscribe(chat)
	cs := c.WaitState(chat, "the work listed", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.ChatState).BackgroundWork) == 1
	}).(*protocol.ChatState)
	if w, ok := cs.BackgroundWork[0].(*protocol.BackgroundShellWork); !ok || w.Label != "background 1h0m0s" {
		t.Errorf("the work = %#v", cs.BackgroundWork[0])
	}

	c.Dispatch(chat, &protocol.ChatIsArchivedChangedAction{IsArchived: true})
	c.WaitState(session, "the session archived with its default chat", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Status&protocol.StatusIsArchived != 0
	})
	c.Dispatch(session, &protocol.SessionIsReadChangedAction{IsRead: true})
	c.WaitState(chat, "the default chat read with its session", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).Status&protocol.StatusIsRead != 0
	})
	old.WaitState(session, "the 0.9 client told of the session's marks", func(s protocol.ChannelState) bool {
		st := s.(*protocol.SessionState).Status
		return st&protocol.StatusIsRead != 0 && st&protocol.StatusIsArchived != 0
	})
	row := findRow(t, listSessions(t, c, nil).Items, session)
	if want := protocol.StatusIsRead | protocol.StatusIsArchived; row.Status&want != want || *row.Chats[0].Status&want != want {
		t.Errorf("the row: %d, its chat %d", row.Status, *row.Chats[0].Status)
	}
	// The marks are kept across a restart.
	th.stop()
	th2 := startHost(t, th.state)
	c2 := th2.client("c2")
	if st := c2.Subscribe(chat).State.(*protocol.ChatState).Status; st&protocol.StatusIsArchived == 0 || st&protocol.StatusIsRead == 0 {
		t.Errorf("after a restart the chat's status is %d", st)
	}
}

// TestSummaryChangesCarryCounts checks the counts read when a turn ends
// reach root/sessionSummaryChanged.
func TestSummaryChangesCarryCounts(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	c.MustCall("createSession", map[string]any{"channel": "ahp-session:/counted", "provider": "script",
		"workingDirectories": []string{"file://" + repo}, "config": map[string]any{"autoApprove": "allow"}})
	chat := protocol.DefaultChatURI("ahp-session:/counted")
	c.Subscribe(chat)
	send(t, c, chat, "t1", "write notes.txt one\\ntwo\\nthree")
	c.Wait("the counts in a summary change", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			var p protocol.SessionSummaryChangedParams
			if m.Method == "root/sessionSummaryChanged" && json.Unmarshal(m.Params, &p) == nil &&
				p.Changes.Changes != nil && p.Changes.Changes.Files != nil && *p.Changes.Changes.Files == 1 {
				return true
			}
		}
		return false
	})
}

// TestRefusalsOfWhatIsNotOffered checks what ahpd does not do yet is
// refused with a reason, and what it refuses by rule too.
func TestRefusalsOfWhatIsNotOffered(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hi")

	refused := func(channel string, a protocol.Action, want string) {
		t.Helper()
		seq := c.Dispatch(channel, a)
		var reason string
		c.Wait(string(a.Type())+" to come back", func(msgs []hosttest.Message) bool {
			for _, m := range msgs {
				if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq {
					if e.RejectionReason != nil {
						reason = *e.RejectionReason
					}
					return true
				}
			}
			return false
		})
		if !strings.Contains(reason, want) {
			t.Errorf("%s: refused with %q, want it to say %q", a.Type(), reason, want)
		}
	}
	refused(session, &protocol.SessionMCPServerBackgroundRequestedAction{ID: "m1"}, "no MCP server")
	refused(session, &protocol.SessionWorkingDirectoryReplacedAction{Directory: "file://" + th.work, Replacement: "file:///tmp"}, "first working directory")
	refused(chat, &protocol.ChatTurnResumeAction{TurnID: "t1"}, "not the chat's latest turn stopped at an error")
	refused(session, &protocol.AutomationRemovedAction{Resource: "ahp-automation:/a"}, "does not belong on channel")
	for _, m := range []string{"createTerminal", "invokeChangesetOperation"} {
		if _, err := c.Call(m, map[string]any{}); err == nil || err.Code != -32601 || !strings.Contains(err.Message, "does not offer") {
			t.Errorf("%s: %v, want -32601 saying it is not offered", m, err)
		}
	}
	// A cursor once every turn is loaded is refused, not answered {}.
	if _, err := c.Call("fetchTurns", map[string]any{"channel": chat, "cursor": "before:0"}); err == nil || err.Code != -32602 {
		t.Errorf("fetchTurns with a forged cursor: %v, want -32602", err)
	}
}
