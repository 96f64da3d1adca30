package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// openJournal opens an embedded journal closed after the host that uses it.
func openJournal(t testing.TB) *journal.Journal {
	t.Helper()
	j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(t.TempDir(), "journal")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := j.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return j
}

func withJournal(j *journal.Journal) hostOption {
	return func(o *host.Options) { o.Journal = j }
}

// journaled reads a session's journal as envelopes, by serverSeq.
func journaled(t *testing.T, j *journal.Journal, session string) ([]protocol.ActionEnvelope, map[int64]protocol.ActionEnvelope) {
	t.Helper()
	entries, err := j.Read(context.Background(), session, 0, journal.MaxReadLimit)
	if err != nil {
		t.Fatal(err)
	}
	list := make([]protocol.ActionEnvelope, len(entries))
	bySeq := map[int64]protocol.ActionEnvelope{}
	list = list[:0]
	for _, e := range entries {
		var probe struct {
			Snapshot, Residency json.RawMessage
		}
		if json.Unmarshal(e.Data, &probe) == nil && (probe.Snapshot != nil || probe.Residency != nil) {
			continue // a state the journal starts from, or the session sleeping or waking: not an action
		}
		var env protocol.ActionEnvelope
		if err := json.Unmarshal(e.Data, &env); err != nil {
			t.Fatalf("entry %d: %v", e.Seq, err)
		}
		list = append(list, env)
		bySeq[env.ServerSeq] = env
	}
	return list, bySeq
}

// TestJournalHoldsWhatClientsSaw: every action a client is sent on a
// session's channels is in the session's journal, under the serverSeq it
// was sent with, in serverSeq order; disposing of the session deletes it.
func TestJournalHoldsWhatClientsSaw(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	th := startHost(t, "", withJournal(j))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", map[string]any{"autoApprove": "allow"})
	send(t, c, chat, "t1", "title Notes\nsay one\nwrite notes.txt hello\nsay two")
	send(t, c, chat, "t2", "say three")

	// What the client was sent by now, then the journal: each of those was
	// written before it was sent.
	msgs := c.Messages()
	list, bySeq := journaled(t, j, session)
	for i := 1; i < len(list); i++ {
		if list[i].ServerSeq <= list[i-1].ServerSeq {
			t.Fatalf("journal entries %d and %d out of serverSeq order", list[i-1].ServerSeq, list[i].ServerSeq)
		}
	}
	seen := 0
	for _, m := range msgs {
		env := m.Envelope
		if env == nil || env.RejectionReason != nil || (env.Channel != session && env.Channel != chat) {
			continue
		}
		seen++
		got, ok := bySeq[env.ServerSeq]
		if !ok || got.Channel != env.Channel || got.Action.Type() != env.Action.Type() {
			t.Errorf("sent %s on %s at %d; the journal has %+v", env.Action.Type(), env.Channel, env.ServerSeq, got)
			for _, e := range list {
				t.Logf("journal: %d %s %s", e.ServerSeq, e.Channel, e.Action.Type())
			}
			for _, m := range c.Messages() {
				if m.Envelope != nil {
					t.Logf("client: %d %s %s", m.Envelope.ServerSeq, m.Envelope.Channel, m.Envelope.Action.Type())
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("the client saw %d actions", seen)
	}

	c.MustCall("disposeSession", map[string]any{"channel": session})
	if list, _ := journaled(t, j, session); len(list) != 0 {
		t.Errorf("a disposed session's journal holds %d entries", len(list))
	}
}

// TestAwayClientIsReplayedFromTheJournal: a client away for far more
// actions than the host keeps in memory is replayed them from the
// journal, not sent snapshots, and ends where a fresh snapshot is.
func TestAwayClientIsReplayedFromTheJournal(t *testing.T) {
	t.Parallel()
	slow(t)
	j := openJournal(t)
	th := startHost(t, "", withJournal(j), func(o *host.Options) { o.Replay = 16 })
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hello")
	c.Close()

	w := th.client("writer")
	w.Subscribe(session)
	w.Subscribe(chat)
	words := strings.Repeat("word ", 30_000) // about 10,000 deltas
	send(t, w, chat, "t2", "title Away\nsay "+words)

	again := hosttest.Dial(t, th.url)
	res := again.Resume(c, "c1")
	replay, ok := res.(*protocol.ReconnectReplayResult)
	if !ok {
		t.Fatalf("got %T, want a replay", res)
	}
	if len(replay.Actions) < 10_000 {
		t.Errorf("replayed %d actions", len(replay.Actions))
	}
	for i := 1; i < len(replay.Actions); i++ {
		if replay.Actions[i].ServerSeq <= replay.Actions[i-1].ServerSeq {
			t.Fatalf("replay out of order at %d", i)
		}
	}
	agreeAll(t, th, again, protocol.RootURI, session, chat)
	// And it goes on live.
	send(t, w, chat, "t3", "say live")
	agreeAll(t, th, again, session, chat)
}

// TestSeqRisesPastTheJournal: a host whose clock is behind what its
// journal holds (the clock went back) numbers past the journal's newest.
func TestSeqRisesPastTheJournal(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	ahead := time.Now().Add(24 * time.Hour).UnixMicro()
	env, _ := json.Marshal(map[string]any{"channel": "ahp-session:/old", "serverSeq": ahead,
		"action": map[string]any{"type": "session/titleChanged", "title": "old"}})
	if _, err := j.Append(context.Background(), "ahp-session:/old", env); err != nil {
		t.Fatal(err)
	}
	th := startHost(t, "", withJournal(j))
	c := hosttest.Dial(t, th.url)
	if seq := c.Initialize("c1").ServerSeq; seq < ahead {
		t.Errorf("serverSeq %d starts behind the journal's %d", seq, ahead)
	}
}

// TestSessionTimeline pages through a session's timeline: newest first,
// oldest first from after, by kind; every event names its actions; bad
// params are refused naming the field.
func TestSessionTimeline(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	th := startHost(t, "", withJournal(j))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", map[string]any{"autoApprove": "allow"})
	send(t, c, chat, "t1", "say one\nwrite notes.txt hello")
	send(t, c, chat, "t2", "fail it broke")
	// The session's row follows the chat's failure a moment after: the
	// timeline's last event.
	c.WaitState(session, "the failure on the session", func(s protocol.ChannelState) bool {
		chats := s.(*protocol.SessionState).Chats
		return len(chats) == 1 && chats[0].Status.Activity() == protocol.StatusError
	})

	page := func(params map[string]any) (events []map[string]any, more bool) {
		t.Helper()
		params["channel"] = session
		var res struct {
			Events []map[string]any `json:"events"`
			More   bool             `json:"more"`
		}
		if err := json.Unmarshal(c.MustCall("ahpd/sessionEvents", params), &res); err != nil {
			t.Fatal(err)
		}
		return res.Events, res.More
	}
	kinds := func(events []map[string]any) string {
		var out []string
		for _, e := range events {
			out = append(out, e["kind"].(string))
		}
		return strings.Join(out, " ")
	}

	all, more := page(map[string]any{"after": 0})
	got := kinds(all)
	for _, want := range []string{"turn_started human_input", "tool_call", "tool_result artifact", "turn_completed", "turn_failed error"} {
		if !strings.Contains(got, want) {
			t.Errorf("the timeline %q lacks %q", got, want)
		}
	}
	if more {
		t.Error("more after the whole timeline")
	}
	for i, e := range all {
		acts := e["actions"].([]any)
		if len(acts) == 0 || e["seq"] != acts[0] || e["time"] == "" {
			t.Errorf("event %d: %v", i, e)
		}
		if i > 0 && e["seq"].(float64) < all[i-1]["seq"].(float64) {
			t.Errorf("oldest first, yet event %d comes before %d", i, i-1)
		}
	}

	// A page holds its last action's events whole: two, or a few more.
	newest, more := page(map[string]any{"limit": 2})
	if len(newest) < 2 || len(newest) > 4 || !more || newest[0]["kind"] != all[len(all)-1]["kind"] || newest[0]["seq"].(float64) < newest[1]["seq"].(float64) {
		t.Errorf("the newest two: %v (more %v); the last is %v", newest, more, all[len(all)-1])
	}
	last := newest[len(newest)-1]["seq"]
	older, _ := page(map[string]any{"limit": 2, "before": last})
	if len(older) < 2 || len(older) > 4 || older[0]["seq"].(float64) >= last.(float64) {
		t.Errorf("the two before: %v", older)
	}
	tools, _ := page(map[string]any{"after": 0, "kinds": []string{"tool_call", "tool_result"}})
	if kinds(tools) != "tool_call tool_result" {
		t.Errorf("tool events: %q", kinds(tools))
	}

	for _, tc := range []struct {
		params map[string]any
		field  string
	}{
		{map[string]any{"channel": session, "limit": 5000}, "limit"},
		{map[string]any{"channel": session, "kinds": []string{"gossip"}}, "kinds"},
		{map[string]any{"channel": session, "after": 9, "before": 3}, "before"},
		{map[string]any{}, "channel"},
	} {
		_, err := c.Call("ahpd/sessionEvents", tc.params)
		if err == nil || err.Code != -32602 || !strings.Contains(err.Message, tc.field) {
			t.Errorf("%v: %v, want -32602 naming %s", tc.params, err, tc.field)
		}
	}
	if _, err := c.Call("ahpd/sessionEvents", map[string]any{"channel": "ahp-session:/nope"}); err == nil || err.Code != -32001 {
		t.Errorf("an unknown session: %v", err)
	}
}

// BenchmarkReplayFromJournal reconnects a client that missed a reply of
// about 10,000 deltas, past what the host keeps in memory, and reports how
// fast the gap is read back from the journal and sent (actions/s).
func BenchmarkReplayFromJournal(b *testing.B) {
	j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(b.TempDir(), "journal")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = j.Close(context.Background()) }) // after the host's, registered next
	th := startBenchHostIn(b, b.TempDir(), withJournal(j), func(o *host.Options) { o.Replay = 16 })
	c := hosttest.Dial(b, th.url)
	c.Initialize("away")
	session := "ahp-session:/bench"
	c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + th.work}})
	chat := protocol.DefaultChatURI(session)
	c.Subscribe(session)
	c.Subscribe(chat)
	startTurn(c, chat, "t1", "say hello")
	c.WaitState(chat, "the first turn", func(s protocol.ChannelState) bool { return len(s.(*protocol.ChatState).Turns) == 1 })
	seen := c.LastSeq()
	c.Close()
	w := hosttest.Dial(b, th.url)
	w.Initialize("writer")
	w.Subscribe(chat)
	startTurn(w, chat, "t2", "say "+strings.Repeat("word ", 30_000))
	w.WaitState(chat, "the long turn", func(s protocol.ChannelState) bool { return len(s.(*protocol.ChatState).Turns) == 2 })
	actions := 0
	for b.Loop() {
		// A raw connection: what is measured is the host, not a client
		// checking 10,000 actions against the schemas.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ws, _, err := websocket.Dial(ctx, th.url, nil)
		if err != nil {
			b.Fatal(err)
		}
		ws.SetReadLimit(256 << 20)
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "reconnect", "params": map[string]any{
			"clientId": "away", "lastSeenServerSeq": seen, "subscriptions": []string{session, chat}}})
		if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
			b.Fatal(err)
		}
		var res struct {
			Result struct {
				Actions []json.RawMessage `json:"actions"`
			} `json:"result"`
		}
		for len(res.Result.Actions) == 0 {
			_, data, err := ws.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(data, []byte(`"id":1,`)) {
				if err := json.Unmarshal(data, &res); err != nil || len(res.Result.Actions) == 0 {
					b.Fatalf("not a replay: %.200s", data)
				}
			}
		}
		actions += len(res.Result.Actions)
		_ = ws.Close(websocket.StatusNormalClosure, "")
		cancel()
	}
	b.ReportMetric(float64(actions)/b.Elapsed().Seconds(), "actions/s")
}

// TestReplaySessionAtEachTurn: the state ahpd/replaySession rebuilds from
// the journal right after the action a snapshot was taken at equals that
// snapshot, for the session and its chat, at every turn's end.
func TestReplaySessionAtEachTurn(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	th := startHost(t, "", withJournal(j))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", map[string]any{"autoApprove": "allow"})
	type taken struct{ session, chat *protocol.Snapshot }
	var snaps []taken
	take := func() {
		fresh := th.client(fmt.Sprintf("fresh-%d", len(snaps)))
		snaps = append(snaps, taken{fresh.Subscribe(session), fresh.Subscribe(chat)})
		fresh.Close()
	}
	send(t, c, chat, "t1", "say one")
	take()
	c.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "Renamed"})
	send(t, c, chat, "t2", "write notes.txt hello\nsay wrote it")
	take()
	send(t, c, chat, "t3", "say three")
	take()

	replay := func(at int64) (*protocol.SessionState, *protocol.ChatState) {
		t.Helper()
		var res struct {
			Session *protocol.SessionState `json:"session"`
			Chats   []*protocol.ChatState  `json:"chats"`
		}
		if err := json.Unmarshal(c.MustCall("ahpd/replaySession", map[string]any{"channel": session, "atSeq": at}), &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Chats) != 1 {
			t.Fatalf("replayed %d chats", len(res.Chats))
		}
		return res.Session, res.Chats[0]
	}
	for i, sn := range snaps {
		ss, _ := replay(sn.session.FromSeq)
		sameState(t, ss, sn.session.State)
		_, cs := replay(sn.chat.FromSeq)
		sameState(t, cs, sn.chat.State)
		if i == 0 && len(cs.Turns) != 1 {
			t.Errorf("after the first turn the replay holds %d turns", len(cs.Turns))
		}
	}
	if _, err := c.Call("ahpd/replaySession", map[string]any{"channel": session, "atSeq": 1}); err == nil || !strings.Contains(err.Message, "no state") {
		t.Errorf("a replay from before the session began: %v", err)
	}
}

// TestReadOnlySubscription: a connection that subscribed to a chat with
// _meta ahpd.readOnly has its actions on it refused with read_only, still
// sees what others do, and acts again once it subscribes without it.
func TestReadOnlySubscription(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("writer")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")

	viewer := th.client("viewer")
	if _, err := viewer.Call("subscribe", map[string]any{"channel": chat, "_meta": map[string]any{"ahpd.readOnly": true}}); err != nil {
		t.Fatal(err)
	}
	viewer.Subscribe(session)
	viewer.Dispatch(chat, &protocol.ChatIsReadChangedAction{IsRead: true})
	viewer.Wait("the refusal", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.RejectionReason != nil && strings.HasPrefix(*e.RejectionReason, "read_only") {
				return true
			}
		}
		return false
	})
	// The session itself was not subscribed read-only.
	viewer.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "viewer's title"})
	viewer.WaitState(session, "the viewer's title", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Title == "viewer's title"
	})
	send(t, c, chat, "t2", "say two")
	viewer.WaitState(chat, "the writer's turn", func(s protocol.ChannelState) bool { return len(s.(*protocol.ChatState).Turns) == 2 })
	if st := viewer.State(chat).(*protocol.ChatState); st.Status&protocol.StatusIsRead != 0 {
		t.Error("a read-only subscriber marked the chat read")
	}
	viewer.Subscribe(chat) // again, without the mark
	viewer.Dispatch(chat, &protocol.ChatIsReadChangedAction{IsRead: true})
	viewer.WaitState(chat, "the chat read", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).Status&protocol.StatusIsRead != 0
	})
}

// TestTimelineSleepAndWake: a session falling asleep and woken again shows
// both on its timeline, in their place among its turns.
func TestTimelineSleepAndWake(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	th := startHost(t, "", withJournal(j))
	session, chat := runAndLeave(t, th, "s1")
	c := th.client("c1")
	suspendAsleep(t, c, session)
	c.Subscribe(chat)
	send(t, c, chat, "t2", "say awake")
	var res struct {
		Events []struct {
			Kind string `json:"kind"`
		} `json:"events"`
	}
	if err := json.Unmarshal(c.MustCall("ahpd/sessionEvents", map[string]any{"channel": session, "after": 0}), &res); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range res.Events {
		if e.Kind == "turn_completed" || e.Kind == "sleep" || e.Kind == "wake" {
			kinds = append(kinds, e.Kind)
		}
	}
	if got := strings.Join(kinds, " "); got != "turn_completed sleep wake turn_completed" {
		t.Errorf("the timeline's turns and residency: %q", got)
	}
	// A replay and a reconnect's gap pass over them.
	if _, err := c.Call("ahpd/replaySession", map[string]any{"channel": session}); err != nil {
		t.Errorf("replay across a sleep: %v", err)
	}
}

// TestSessionTimelinePagedBothWays: over a long session (a turn of many
// streamed entries, then short ones, and a copy of an entry appended
// again as a retried append leaves one), the newest-first pages, read
// back with before until none is left, are the oldest-first timeline
// reversed: the windows the newest pages read the journal in miss
// nothing, double nothing, and show a copied entry once.
func TestSessionTimelinePagedBothWays(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	th := startHost(t, "", withJournal(j))
	c := th.client("c1")
	session, chat := th.newSession(c, "paged", nil)
	send(t, c, chat, "long", "say "+strings.Repeat("word ", 3000))
	for i := range 12 {
		send(t, c, chat, fmt.Sprint("s", i), "say short")
	}
	// A copy of the last entry of a short turn, as an append tried again
	// after a lost answer writes it.
	entries, err := j.Read(context.Background(), session, 0, journal.MaxReadLimit)
	if err != nil || len(entries) < 100 {
		t.Fatalf("%d entries: %v", len(entries), err)
	}
	if _, err := j.Append(context.Background(), session, entries[len(entries)-1].Data); err != nil {
		t.Fatal(err)
	}
	type event struct {
		Seq  int64  `json:"seq"`
		Kind string `json:"kind"`
	}
	page := func(params map[string]any) ([]event, bool) {
		t.Helper()
		params["channel"] = session
		var res struct {
			Events []event `json:"events"`
			More   bool    `json:"more"`
		}
		if err := json.Unmarshal(c.MustCall("ahpd/sessionEvents", params), &res); err != nil {
			t.Fatal(err)
		}
		return res.Events, res.More
	}
	var forward []event
	for after := int64(0); ; {
		evs, more := page(map[string]any{"after": after, "limit": 9})
		forward = append(forward, evs...)
		if !more {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	var backward []event
	params := map[string]any{"limit": 7}
	for {
		evs, more := page(params)
		backward = append(backward, evs...)
		if !more {
			break
		}
		params = map[string]any{"limit": 7, "before": evs[len(evs)-1].Seq}
	}
	slices.Reverse(backward)
	if len(forward) < 40 || !slices.Equal(forward, backward) {
		t.Fatalf("%d events oldest first, %d newest first reversed:\n%v\n%v", len(forward), len(backward), forward, backward)
	}
	seen := map[event]bool{}
	for _, e := range forward {
		if seen[e] {
			t.Fatalf("event %v twice", e)
		}
		seen[e] = true
	}
}
