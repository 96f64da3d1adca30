package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// subscribeView subscribes c to a chat with view.turns and returns the
// chat's state as given.
func subscribeView(t *testing.T, c *hosttest.Client, chat string, turns int) *protocol.ChatState {
	t.Helper()
	raw := c.MustCall("subscribe", map[string]any{"channel": chat, "view": map[string]any{"turns": turns}})
	var r protocol.SubscribeResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r.Snapshot.State.(*protocol.ChatState)
}

// fetchPage asks for the turns before cursor and waits for c's copy of the
// chat to have moved past it.
func fetchPage(t *testing.T, c *hosttest.Client, chat, cursor string) *protocol.ChatState {
	t.Helper()
	c.MustCall("fetchTurns", map[string]any{"channel": chat, "cursor": cursor})
	return c.WaitState(chat, "the page before "+cursor, func(s protocol.ChannelState) bool {
		n := s.(*protocol.ChatState).TurnsNextCursor
		return n == nil || *n != cursor
	}).(*protocol.ChatState)
}

// turnIDs lists a chat's finished turns by id.
func turnIDs(cs *protocol.ChatState) string {
	ids := make([]string, len(cs.Turns))
	for i, t := range cs.Turns {
		ids[i] = t.ID
	}
	return strings.Join(ids, " ")
}

func cursorOf(cs *protocol.ChatState) string {
	if cs.TurnsNextCursor == nil {
		return ""
	}
	return *cs.TurnsNextCursor
}

// TestViewTurns: a subscriber that asks for the last n turns of a chat
// of ten is given those and a cursor; fetchTurns with that cursor gives it
// what everyone holds, leaves the others' states as they were, and from
// there it pages on as they do. With a turn window (the host holds the
// last 4 after a restart) the cursors number turns as the chat's own do,
// and a page another client loads first fills the view's gap.
func TestViewTurns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		window int  // the host's TurnWindow, and a restart so that it holds that many
		turns  int  // view.turns
		other  bool // another client pages with the chat's own cursor first
		want   string
		cursor string // of the view's snapshot
	}{
		{name: "all held", turns: 3, want: "t7 t8 t9", cursor: "before:7"},
		{name: "more than held", turns: 12, want: "t0 t1 t2 t3 t4 t5 t6 t7 t8 t9"},
		{name: "past the window", window: 4, turns: 2, want: "t8 t9", cursor: "before:8"},
		{name: "another pages first", window: 4, turns: 1, other: true, want: "t9", cursor: "before:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			var opts []hostOption
			if tc.window > 0 {
				opts = append(opts, func(o *host.Options) { o.TurnWindow = tc.window })
			}
			th := startHost(t, state, opts...)
			c := th.client("writer")
			_, chat := th.newSession(c, "s1", nil)
			for i := range 10 {
				send(t, c, chat, fmt.Sprintf("t%d", i), fmt.Sprintf("say turn %d", i))
			}
			if tc.window > 0 {
				c.Close()
				th.stop()
				th = startHost(t, state, opts...)
			}
			full := th.client("full")
			before := full.Subscribe(chat).State.(*protocol.ChatState)

			viewer := th.client("viewer")
			got := subscribeView(t, viewer, chat, tc.turns)
			if turnIDs(got) != tc.want || cursorOf(got) != tc.cursor {
				t.Fatalf("view of %d: turns %q cursor %q, want %q and %q", tc.turns, turnIDs(got), cursorOf(got), tc.want, tc.cursor)
			}
			if tc.cursor == "" {
				sameState(t, got, before)
				return
			}
			if tc.other {
				// The full subscriber pages: the viewer gets what lies
				// between too, and holds no hole.
				before = fetchPage(t, full, chat, cursorOf(before))
				viewed := viewer.WaitState(chat, "the other's page", func(s protocol.ChannelState) bool {
					return cursorOf(s.(*protocol.ChatState)) == cursorOf(before)
				})
				sameState(t, viewed, before)
				// The chat holds turns 2 to 9 now: a cursor outside them
				// is no view's.
				for _, cursor := range []string{"before:1", "before:11"} {
					if _, err := viewer.Call("fetchTurns", map[string]any{"channel": chat, "cursor": cursor}); err == nil || err.Code != -32602 {
						t.Errorf("fetchTurns with %s: %v, want -32602", cursor, err)
					}
				}
			} else {
				viewed := fetchPage(t, viewer, chat, tc.cursor)
				sameState(t, viewed, before)
				// The others got the page as an action that changed nothing.
				full.Wait("the view's page", func(msgs []hosttest.Message) bool {
					for _, m := range msgs {
						if e := m.Envelope; e != nil && e.Channel == chat && e.Action.Type() == protocol.ActionChatTurnsLoaded {
							return true
						}
					}
					return false
				})
				sameState(t, full.State(chat), before)
				sameState(t, th.client("fresh").Subscribe(chat).State, before)
			}
			// Both page on with the chat's own cursor to the first turn.
			for cs := viewer.State(chat).(*protocol.ChatState); cs.TurnsNextCursor != nil; {
				cs = fetchPage(t, viewer, chat, *cs.TurnsNextCursor)
			}
			all := viewer.State(chat).(*protocol.ChatState)
			if turnIDs(all) != "t0 t1 t2 t3 t4 t5 t6 t7 t8 t9" {
				t.Errorf("after paging, the viewer holds %q", turnIDs(all))
			}
			sameState(t, full.WaitState(chat, "every turn", func(s protocol.ChannelState) bool {
				return s.(*protocol.ChatState).TurnsNextCursor == nil
			}), all)
		})
	}
}

// TestViewTurnsParams: view.turns must be a whole number of at least 1;
// more than 50 is taken as 50; a session's channel, which holds no turns,
// ignores it.
func TestViewTurnsParams(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")
	for _, turns := range []any{0, -3, 2.5, "3", map[string]any{}} {
		_, err := c.Call("subscribe", map[string]any{"channel": chat, "view": map[string]any{"turns": turns}})
		if err == nil || err.Code != -32602 || !strings.Contains(err.Message, "view.turns") {
			t.Errorf("view.turns %v: %v, want -32602 naming view.turns", turns, err)
		}
	}
	if got := subscribeView(t, c, chat, 1000); len(got.Turns) != 1 || got.TurnsNextCursor != nil {
		t.Errorf("view.turns 1000 of a chat of one turn: %d turns, cursor %v", len(got.Turns), got.TurnsNextCursor)
	}
	raw := c.MustCall("subscribe", map[string]any{"channel": session, "view": map[string]any{"turns": 1}})
	var r protocol.SubscribeResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	sameState(t, r.Snapshot.State, c.State(session))
	for _, cursor := range []string{"before:0", "before:2", "after:1", "before:-1"} {
		if _, err := c.Call("fetchTurns", map[string]any{"channel": chat, "cursor": cursor}); err == nil || err.Code != -32602 {
			t.Errorf("fetchTurns with %q: %v, want -32602", cursor, err)
		}
	}
}

// TestViewKeepsTheActiveTurn: a view of one turn taken while a turn runs
// holds the last finished turn and the one under way.
func TestViewKeepsTheActiveTurn(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")
	send(t, c, chat, "t2", "say two")
	startTaken(t, c, chat, "t3", "ask Which file?")
	c.WaitState(chat, "the question", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return cs.ActiveTurn != nil && len(cs.ActiveTurn.ResponseParts) > 0
	})
	got := subscribeView(t, th.client("viewer"), chat, 1)
	if turnIDs(got) != "t2" || got.ActiveTurn == nil || got.ActiveTurn.ID != "t3" || cursorOf(got) != "before:1" {
		t.Errorf("view of 1 with a turn under way: turns %q, active %v, cursor %q", turnIDs(got), got.ActiveTurn, cursorOf(got))
	}
	c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t3", Duration: 1})
	waitTurnEnd(t, c, chat, "t3")
}

// TestTooManyAttached: a connection holds 20 sessions; the 21st subscribe
// is refused with too_many_attached, while chats and root do not count, a
// session held already can be subscribed again, and an unsubscribe makes
// room. A reconnect resumes 20 and names the rest missing.
func TestTooManyAttached(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	var sessions []string
	for i := range host.DefaultAttached + 1 {
		s := fmt.Sprintf("ahp-session:/s%02d", i)
		c.MustCall("createSession", map[string]any{"channel": s, "provider": "script", "workingDirectories": []string{"file://" + th.work}})
		sessions = append(sessions, s)
	}
	for _, s := range sessions[:host.DefaultAttached] {
		c.Subscribe(s)
		c.Subscribe(protocol.DefaultChatURI(s)) // chats do not count
	}
	last := sessions[host.DefaultAttached]
	refused := func() {
		t.Helper()
		_, err := c.Call("subscribe", map[string]any{"channel": last})
		if err == nil || err.Code != -32600 || !strings.HasPrefix(err.Message, "too_many_attached: ") {
			t.Fatalf("subscribe to session %d: %v, want -32600 too_many_attached", host.DefaultAttached+1, err)
		}
		var data struct {
			Reason string `json:"reason"`
			Limit  int    `json:"limit"`
		}
		if json.Unmarshal(err.Data, &data) != nil || data.Reason != "too_many_attached" || data.Limit != host.DefaultAttached {
			t.Errorf("the refusal's data: %s", err.Data)
		}
	}
	refused()
	c.Subscribe(protocol.DefaultChatURI(last)) // a chat of it does
	c.Subscribe(protocol.RootURI)
	c.Subscribe(sessions[0]) // held already
	refused()

	c.MustCall("unsubscribe", map[string]any{"channel": sessions[0]})
	c.Subscribe(last)
	if _, err := c.Call("subscribe", map[string]any{"channel": sessions[0]}); err == nil || !strings.HasPrefix(err.Message, "too_many_attached") {
		t.Errorf("subscribe past the limit after an unsubscribe: %v", err)
	}

	// A reconnect of all of them resumes 20, and says the 21st is missing.
	seen := c.LastSeq()
	c.Close()
	again := hosttest.Dial(t, th.url)
	res, ok := again.Reconnect("c1", seen, sessions).(*protocol.ReconnectReplayResult)
	if !ok {
		t.Fatal("not a replay")
	}
	if len(res.Missing) != 1 || res.Missing[0] != last {
		t.Errorf("missing %v, want the last session", res.Missing)
	}
	if _, err := again.Call("subscribe", map[string]any{"channel": last}); err == nil || !strings.HasPrefix(err.Message, "too_many_attached") {
		t.Errorf("subscribe past the limit after a reconnect: %v", err)
	}
}

// TestAttachedSessionsLimit: the limit is Limits.AttachedSessions.
func TestAttachedSessionsLimit(t *testing.T) {
	t.Parallel()
	th := startHost(t, "", withLimits(host.Limits{AttachedSessions: 1}))
	c := th.client("c1")
	s1, chat := th.newSession(c, "s1", nil)
	c.MustCall("createSession", map[string]any{"channel": "ahp-session:/s2", "provider": "script", "workingDirectories": []string{"file://" + th.work}})
	if _, err := c.Call("subscribe", map[string]any{"channel": "ahp-session:/s2"}); err == nil || !strings.HasPrefix(err.Message, "too_many_attached") {
		t.Errorf("a second session with a limit of one: %v", err)
	}
	c.Subscribe(s1)
	c.Subscribe(chat)
}

// TestReconnectTooFarBehind: a client whose gap is past what the host
// keeps, in memory without a journal or in a journal that retention
// trimmed, is sent snapshots, and the answer says too_far_behind.
func TestReconnectTooFarBehind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget int64 // of the journal's bytes per session; 0: no journal
	}{
		{name: "no journal"},
		{name: "past retention", budget: 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []hostOption{func(o *host.Options) { o.Replay = 16 }}
			var j *journal.Journal
			if tc.budget > 0 {
				var err error
				j, err = journal.Open(context.Background(), journal.Config{Dir: filepath.Join(t.TempDir(), "journal"), MaxBytesPerSession: tc.budget})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := j.Close(context.Background()); err != nil {
						t.Error(err)
					}
				})
				opts = append(opts, withJournal(j))
			}
			th := startHost(t, "", opts...)
			c := th.client("c1")
			session, chat := th.newSession(c, "s1", nil)
			send(t, c, chat, "t1", "say hello")
			var seen uint64
			if j != nil {
				seen, _ = j.SessionLastSeq(context.Background(), session)
			}
			c.Close()

			w := th.client("writer")
			w.Subscribe(chat)
			send(t, w, chat, "t2", "say "+strings.Repeat("word ", 1000))
			if j != nil {
				waitKept(t, j, session, seen+1)
			}

			again := hosttest.Dial(t, th.url)
			res, ok := again.Resume(c, "c1").(*protocol.ReconnectSnapshotResult)
			if !ok {
				t.Fatalf("got %T, want snapshots", res)
			}
			if meta := string(res.Extra["_meta"]); meta != `{"ahpd.reason":"too_far_behind"}` {
				t.Errorf("the snapshots' _meta: %s", meta)
			}
			agreeAll(t, th, again, session, chat)
		})
	}
}

// waitKept waits for retention to have dropped a session's entries
// before seq: trims run in the journal's background.
func waitKept(t *testing.T, j *journal.Journal, session string, seq uint64) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(hosttest.Timeout)
	for {
		kept, err := j.KeptFrom(context.Background(), session)
		if err != nil {
			t.Fatal(err)
		}
		if kept > seq {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("retention kept %s from %d, not past %d", session, kept, seq)
		}
	}
}
