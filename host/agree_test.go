package host_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// agree fails t unless a client's state of a channel, kept by applying the
// actions it was sent through the reducers, is the host's fresh snapshot.
// What no action a version has can keep up is left out, and only that:
//   - a session's activity bits, which come from its chats and which no
//     session action carries (the protocol's own rule);
//   - for 0.9, a chat's marks, movable and background work, and the order
//     of a session's chats, which only 1.0 actions change.
func agree(t *testing.T, version string, got, want protocol.ChannelState) {
	t.Helper()
	a, b := comparable(t, version, got), comparable(t, version, want)
	if !reflect.DeepEqual(a, b) {
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		t.Errorf("a %s client's state differs from the host's snapshot:\nclient: %s\n  host: %s", version, ga, gb)
	}
}

func comparable(t *testing.T, version string, s protocol.ChannelState) any {
	t.Helper()
	old := version == "0.9.0"
	switch st := s.(type) {
	case *protocol.SessionState:
		c := *st
		c.Status &^= 0x1f
		if old {
			c.Chats = slices.Clone(c.Chats)
			for i := range c.Chats {
				c.Chats[i].Status &^= markFlags
				c.Chats[i].Movable = nil
			}
			slices.SortFunc(c.Chats, func(a, b protocol.ChatSummary) int { return cmpString(a.Resource, b.Resource) })
		}
		s = &c
	case *protocol.ChatState:
		if old {
			c := *st
			c.Status &^= markFlags
			c.Movable, c.BackgroundWork = nil, nil
			s = &c
		}
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

const markFlags = protocol.StatusIsRead | protocol.StatusIsArchived

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// agreeAll checks every channel c holds against a fresh client of the same
// version. Actions the host sent before the snapshot may still be on their
// way to c, so c is given until they are in.
func agreeAll(t *testing.T, th *testHost, c *hosttest.Client, channels ...string) {
	t.Helper()
	fresh := hosttest.Dial(t, th.url)
	fresh.InitializeAt([]string{c.Version()}, "fresh-"+c.Version())
	defer fresh.Close()
	for _, ch := range channels {
		snap := fresh.Subscribe(ch)
		if snap == nil {
			t.Fatalf("no snapshot of %s", ch)
		}
		want := comparable(t, c.Version(), snap.State)
		caughtUp := false
		c.WaitOrNot("the actions before the snapshot of "+ch, func([]hosttest.Message) bool {
			caughtUp = reflect.DeepEqual(comparable(t, c.Version(), c.State(ch)), want)
			return caughtUp
		})
		if !caughtUp {
			agree(t, c.Version(), c.State(ch), snap.State)
		}
	}
}

// TestClientsAgreeWithSnapshots takes clients of 0.9.0 and 1.0.0 through a
// cancel and a turn right after it, a turn interrupted and resumed, chats
// moved within and between sessions and into a new one, background work,
// marks, and a dropped connection resumed, applying every action they get
// through the reducers; at each step what they hold is what a fresh client
// of their version is given.
func TestClientsAgreeWithSnapshots(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"0.9.0", "1.0.0"} {
		t.Run(version, func(t *testing.T) {
			th := startHost(t, "")
			c := hosttest.Dial(t, th.url)
			c.InitializeAt([]string{version}, "client", protocol.RootURI)
			driver := th.client("driver") // 1.0: moves chats
			s1, chat := th.newSession(c, "s1", nil)
			watched := []string{protocol.RootURI, s1, chat}
			check := func(step string) {
				t.Helper()
				t.Run(step, func(t *testing.T) { agreeAll(t, th, c, watched...) })
			}
			send(t, c, chat, "t1", "say hello")
			check("a turn")

			// A cancel, and a turn dispatched the moment its echo is in.
			startTurn(c, chat, "t2", "wait 30s")
			c.WaitState(chat, "t2 running", func(s protocol.ChannelState) bool { return s.(*protocol.ChatState).ActiveTurn != nil })
			c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t2", Duration: 5})
			waitTurnEnd(t, c, chat, "t2")
			if cs := send(t, c, chat, "t3", "say right after"); cs.Turns[len(cs.Turns)-1].State != protocol.TurnStateComplete {
				t.Fatalf("the turn after a cancel: %+v", cs.Turns[len(cs.Turns)-1])
			}
			check("a cancel")

			// An interrupted turn, resumed.
			cs := send(t, c, chat, "t4", "say one\ncrash the agent process died\nsay two\nbackground 1h")
			last := cs.Turns[len(cs.Turns)-1]
			if e := last.ErrorPart(); last.State != protocol.TurnStateError || e == nil || e.Resumable == nil || !*e.Resumable {
				t.Fatalf("the interrupted turn: %+v", last)
			}
			check("an interruption")
			c.Dispatch(chat, &protocol.ChatTurnResumeAction{TurnID: "t4"})
			cs = c.WaitState(chat, "t4 resumed and done", func(s protocol.ChannelState) bool {
				cs := s.(*protocol.ChatState)
				n := len(cs.Turns)
				return cs.ActiveTurn == nil && n > 0 && cs.Turns[n-1].ID == "t4" && cs.Turns[n-1].State == protocol.TurnStateComplete
			}).(*protocol.ChatState)
			if got := text(cs.Turns[len(cs.Turns)-1].ResponseParts); got != "one\n\ntwo\n\n" {
				t.Errorf("the resumed turn says %q", got)
			}
			check("a resume")
			c.Dispatch(s1, &protocol.SessionIsReadChangedAction{IsRead: true})
			c.WaitState(s1, "read", func(s protocol.ChannelState) bool {
				return s.(*protocol.SessionState).Status&protocol.StatusIsRead != 0
			})
			check("a mark")

			// Chats moved: within the session, into another, into a new one.
			c2, c3 := protocol.ChatURIFor(s1, "two"), protocol.ChatURIFor(s1, "three")
			for _, ch := range []string{c2, c3} {
				c.MustCall("createChat", map[string]any{"channel": s1, "chat": ch})
				c.Subscribe(ch)
				watched = append(watched, ch)
			}
			send(t, c, c2, "c2-1", "say in two")
			driver.MustCall("moveChat", map[string]any{"channel": c3, "destination": map[string]any{"kind": "session", "session": s1}})
			order := c.WaitState(s1, "the reorder", func(s protocol.ChannelState) bool {
				return version == "0.9.0" || s.(*protocol.SessionState).Chats[0].Resource == c3
			}).(*protocol.SessionState).Chats
			if version == "1.0.0" && (order[1].Resource != chat || order[2].Resource != c2) {
				t.Errorf("after the reorder: %v", order)
			}
			check("a reorder")
			s2, _ := th.newSession(c, "s2", nil)
			watched = append(watched, s2)
			send(t, c, protocol.DefaultChatURI(s2), "s2-1", "say s2")
			driver.MustCall("moveChat", map[string]any{"channel": c2, "destination": map[string]any{"kind": "session", "session": s2}})
			c.WaitState(s2, "the chat moved in", func(s protocol.ChannelState) bool {
				chats := s.(*protocol.SessionState).Chats
				return len(chats) == 2 && (version == "0.9.0" || chats[0].Resource == c2)
			})
			check("a move into another session")
			raw := driver.MustCall("moveChat", map[string]any{"channel": c3, "destination": map[string]any{"kind": "newSession"}})
			var moved protocol.MoveChatResult
			if err := json.Unmarshal(raw, &moved); err != nil || moved.Session == s1 {
				t.Fatalf("moveChat to a new session: %s", raw)
			}
			c.Subscribe(moved.Session)
			watched = append(watched, moved.Session)
			// A moved chat goes on as it was, where it went.
			send(t, c, c2, "c2-2", "say moved")
			check("moves")
			if version == "0.9.0" {
				if _, err := c.Call("moveChat", map[string]any{"channel": c2, "destination": map[string]any{"kind": "newSession"}}); err == nil || err.Code != -32601 {
					t.Errorf("a 0.9.0 client moved a chat: %v", err)
				}
			}

			// The connection drops; the client comes back and carries on.
			c.Close()
			again := hosttest.Dial(t, th.url)
			again.Resume(c, "client")
			send(t, again, chat, "t5", "say after the drop")
			agreeAll(t, th, again, watched...)
		})
	}
}
