package host_test

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

func TestListSessionsPaging(t *testing.T) {
	t.Parallel()
	// The host and the client read one clock, moved a second between
	// sessions: each is modified at a time of its own.
	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", func(o *host.Options) { o.Clock = clk })
	c := th.client("c1")
	const n = 7
	for i := range n {
		_, chat := th.newSession(c, fmt.Sprintf("s%d", i), nil)
		startTakenAt(t, c, chat, "t1", "say hi", clk.Now())
		waitTurnEnd(t, c, chat, "t1")
		clk.Advance(time.Second)
	}
	all := listSessions(t, c, nil).Items
	if len(all) != n {
		t.Fatalf("listed %d, want %d", len(all), n)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].ModifiedAt <= all[i].ModifiedAt {
			t.Errorf("not most recently modified first: %s before %s", all[i-1].ModifiedAt, all[i].ModifiedAt)
		}
	}
	var paged []string
	params := map[string]any{"limit": 3}
	for page := 0; ; page++ {
		r := listSessions(t, c, params)
		for _, s := range r.Items {
			paged = append(paged, s.Resource)
		}
		if r.NextCursor == nil {
			break
		}
		if page > n {
			t.Fatal("paging does not end")
		}
		params = map[string]any{"limit": 3, "cursor": *r.NextCursor}
	}
	var want []string
	for _, s := range all {
		want = append(want, s.Resource)
	}
	if strings.Join(paged, ",") != strings.Join(want, ",") {
		t.Errorf("pages %v, want %v", paged, want)
	}
	// A huge limit is capped, not refused.
	if r := listSessions(t, c, map[string]any{"limit": 100000}); len(r.Items) != n {
		t.Errorf("limit 100000 listed %d", len(r.Items))
	}
}

// TestListingFollowsChanges checks the listing's order as sessions move
// in it: a turn in the oldest stored session lists it first, a disposed
// one goes, a new one is listed once its first turn is sent, and a client
// paging while a session moves up sees every other session once.
func TestListingFollowsChanges(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	const n = 20
	storeSessions(t, state, filepath.Join(state, "work"), n) // s00000 oldest
	th := startHost(t, state)
	c := th.client("c1")
	resources := func(r protocol.ListSessionsResult) []string {
		var out []string
		for _, s := range r.Items {
			out = append(out, s.Resource)
		}
		return out
	}
	want := make([]string, 0, n)
	for i := n - 1; i >= 0; i-- {
		want = append(want, fmt.Sprintf("ahp-session:/s%05d", i))
	}
	if got := resources(listSessions(t, c, nil)); !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}

	// A client reads the first page, then s00003 moves to the top.
	first := listSessions(t, c, map[string]any{"limit": 5})
	c.Subscribe(protocol.DefaultChatURI("ahp-session:/s00003"))
	send(t, c, protocol.DefaultChatURI("ahp-session:/s00003"), "t1", "say hi")
	rest := resources(first)
	for cursor := first.NextCursor; cursor != nil; {
		r := listSessions(t, c, map[string]any{"limit": 5, "cursor": *cursor})
		rest, cursor = append(rest, resources(r)...), r.NextCursor
	}
	moved := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "ahp-session:/s00003" })
	if !slices.Equal(rest, moved) {
		t.Errorf("paged %v while s00003 moved up, want %v", rest, moved)
	}

	want = append([]string{"ahp-session:/s00003"}, moved...)
	if got := resources(listSessions(t, c, nil)); !slices.Equal(got, want) {
		t.Errorf("after a turn in s00003 listed %v, want %v", got, want)
	}
	c.MustCall("disposeSession", map[string]any{"channel": "ahp-session:/s00010"})
	want = slices.DeleteFunc(want, func(s string) bool { return s == "ahp-session:/s00010" })
	if got := resources(listSessions(t, c, nil)); !slices.Equal(got, want) {
		t.Errorf("after disposing of s00010 listed %v, want %v", got, want)
	}
	_, chat := th.newSession(c, "fresh", nil)
	if got := resources(listSessions(t, c, nil)); !slices.Equal(got, want) {
		t.Errorf("a session nobody sent a turn in is listed: %v", got)
	}
	send(t, c, chat, "t1", "say hi")
	want = append([]string{"ahp-session:/fresh"}, want...)
	if got := resources(listSessions(t, c, nil)); !slices.Equal(got, want) {
		t.Errorf("after the first turn in fresh listed %v, want %v", got, want)
	}
}

func TestChatsComeAndGo(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hi")

	second := protocol.ChatURIFor(session, "second")
	c.MustCall("createChat", map[string]any{"channel": session, "chat": second,
		"initialMessage": protocol.Message{Text: "say from the second chat", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}})
	c.WaitState(session, "the second chat", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.SessionState).Chats) == 2
	})
	c.Subscribe(second)
	cs := c.WaitState(second, "its first turn", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) == 1
	}).(*protocol.ChatState)
	if !strings.Contains(text(cs.Turns[0].ResponseParts), "second chat") {
		t.Errorf("second chat said %q", text(cs.Turns[0].ResponseParts))
	}
	if _, err := c.Call("createChat", map[string]any{"channel": session, "chat": second}); err == nil || err.Code != -32010 {
		t.Errorf("the same chat twice: %v", err)
	}
	other := protocol.ChatURIFor("ahp-session:/elsewhere", "x")
	if _, err := c.Call("createChat", map[string]any{"channel": session, "chat": other}); err == nil || err.Code != -32602 {
		t.Errorf("a chat of another session: %v", err)
	}

	c.MustCall("disposeChat", map[string]any{"channel": second})
	c.WaitState(session, "the chat's removal", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.SessionState).Chats) == 1
	})
	if _, err := c.Call("disposeChat", map[string]any{"channel": chat}); err == nil {
		t.Error("disposed the last chat")
	}
}

func TestFetchTurnsPagesOlderTurns(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	window := func(o *host.Options) { o.TurnWindow = 2 }
	th := startHost(t, state, window)
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	for i := range 5 {
		send(t, c, chat, fmt.Sprintf("t%d", i), fmt.Sprintf("say turn %d", i))
	}
	c.Close()
	th.stop()

	th = startHost(t, state, window)
	c = th.client("c1")
	cs := c.Subscribe(chat).State.(*protocol.ChatState)
	if len(cs.Turns) != 2 || cs.TurnsNextCursor == nil {
		t.Fatalf("after restart: %d turns, cursor %v; want the last 2 and a cursor", len(cs.Turns), cs.TurnsNextCursor)
	}
	for cs.TurnsNextCursor != nil {
		cursor := *cs.TurnsNextCursor
		c.MustCall("fetchTurns", map[string]any{"channel": chat, "cursor": cursor})
		cs = c.WaitState(chat, "a page", func(s protocol.ChannelState) bool {
			n := s.(*protocol.ChatState).TurnsNextCursor
			return n == nil || *n != cursor
		}).(*protocol.ChatState)
	}
	if len(cs.Turns) != 5 {
		t.Fatalf("%d turns after paging, want 5", len(cs.Turns))
	}
	for i, turn := range cs.Turns {
		if !strings.Contains(text(turn.ResponseParts), fmt.Sprintf("turn %d", i)) {
			t.Errorf("turn %d says %q", i, text(turn.ResponseParts))
		}
	}
	c2 := th.client("c2")
	sameState(t, cs, c2.Subscribe(chat).State)
}

// TestReconnect checks both ways a client catches up: the changes it
// missed, when the host still holds them, else fresh snapshots.
func TestReconnect(t *testing.T) {
	t.Parallel()
	th := startHost(t, "", func(o *host.Options) { o.Replay = 64 })
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hi")
	probe := hosttest.Dial(t, th.url)
	seen := probe.Initialize("probe").ServerSeq
	probe.Close()
	c.Close()

	w := th.client("writer")
	w.Subscribe(session)
	w.Subscribe(chat)
	send(t, w, chat, "t2", "say missed")

	r := hosttest.Dial(t, th.url)
	res := r.Reconnect("c1", seen, []string{protocol.RootURI, session, chat, "ahp-session:/gone"})
	replay, ok := res.(*protocol.ReconnectReplayResult)
	if !ok {
		t.Fatalf("got %T, want a replay", res)
	}
	if len(replay.Missing) != 1 || replay.Missing[0] != "ahp-session:/gone" {
		t.Errorf("missing = %v", replay.Missing)
	}
	var turns int
	for _, env := range replay.Actions {
		if env.ServerSeq <= seen {
			t.Errorf("replayed %d, which the client had seen", env.ServerSeq)
		}
		if _, ok := env.Action.(*protocol.ChatTurnStartedAction); ok {
			turns++
		}
	}
	if turns != 1 {
		t.Errorf("replay has %d turn starts, want 1", turns)
	}
	// The reconnected client is subscribed again.
	send(t, w, chat, "t3", "say live")
	r.Wait("live actions", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if m.Envelope != nil && m.Envelope.Channel == chat {
				return true
			}
		}
		return false
	})

	// Past the buffer: snapshots.
	for i := range 40 {
		send(t, w, chat, fmt.Sprintf("u%d", i), "say more and more words to fill the buffer")
	}
	s := hosttest.Dial(t, th.url)
	res = s.Reconnect("c1", seen, []string{session, chat})
	snaps, ok := res.(*protocol.ReconnectSnapshotResult)
	if !ok || len(snaps.Snapshots) != 2 {
		t.Fatalf("got %T with %v, want two snapshots", res, res)
	}
}

// TestSubscribeWhileStreaming checks that a client subscribing in the middle
// of a turn gets every delta after its snapshot and none twice.
func TestSubscribeWhileStreaming(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t0", "say hi")
	words := strings.Repeat("lorem ipsum dolor sit amet ", 400)
	startTurn(c, chat, "t1", "say "+words)
	late := th.client("late")
	late.Subscribe(chat)
	waitTurnEnd(t, c, chat, "t1")
	final := waitTurnEnd(t, late, chat, "t1")
	if got := text(final.Turns[1].ResponseParts); !strings.Contains(got, strings.TrimSpace(words)) {
		t.Errorf("the late client's text is not the whole answer (%d bytes)", len(got))
	}
	sameState(t, late.State(chat), c.State(chat))
}

func TestStdio(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- th.h.ServeStdio(inR, outW) }()
	dec := json.NewDecoder(outR)
	write := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() map[string]any {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"channel":"ahp-root://","protocolVersions":["1.0.0"],"clientId":"stdio"}}`)
	if m := read(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	write(`{"jsonrpc":"2.0","id":2,"method":`)
	if m := read(); m["error"].(map[string]any)["code"].(float64) != -32700 {
		t.Errorf("malformed line: %v", m)
	}
	write(`{"jsonrpc":"2.0","id":3,"method":"ping","params":{"channel":"ahp-root://"}}`)
	if m := read(); m["id"].(float64) != 3 {
		t.Errorf("ping: %v", m)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Error(err)
	}
	outW.Close()
}
