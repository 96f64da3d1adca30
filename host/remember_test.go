package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestReconnectReplaysAfterRestart: a client away while the host stopped
// (cleanly, or as after a crash, with no clean stop marked) reconnects to
// the new host with its lastSeenServerSeq and is replayed everything it
// missed, from before the stop and after the start, ending where a fresh
// snapshot is.
func TestReconnectReplaysAfterRestart(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "crash"}[crash], func(t *testing.T) {
			t.Parallel()
			j := openJournal(t)
			state := t.TempDir()
			th := startHost(t, state, withJournal(j))
			c := th.client("watcher")
			session, chat := th.newSession(c, "s1", nil)
			send(t, c, chat, "t1", "say before")
			th.leave(c, "watcher")

			w := th.client("writer")
			w.Subscribe(session)
			w.Subscribe(chat)
			send(t, w, chat, "t2", "title Missed\nsay while away")
			th.stop()
			if crash {
				if err := j.SetMark(context.Background(), host.CleanKey, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}

			th = startHost(t, state, withJournal(j))
			w = th.client("writer")
			w.Subscribe(session)
			w.Subscribe(chat)
			send(t, w, chat, "t3", "say after the restart")

			again := hosttest.Dial(t, th.url)
			res := again.Resume(c, "watcher")
			replay, ok := res.(*protocol.ReconnectReplayResult)
			if !ok {
				t.Fatalf("got %T (%v), want a replay", res, res)
			}
			turns := map[string]bool{}
			for i, env := range replay.Actions {
				if i > 0 && env.ServerSeq <= replay.Actions[i-1].ServerSeq {
					t.Fatalf("replay out of order at %d", i)
				}
				if ts, ok := env.Action.(*protocol.ChatTurnStartedAction); ok {
					turns[ts.TurnID] = true
				}
			}
			if !turns["t2"] || !turns["t3"] || turns["t1"] {
				t.Errorf("replayed the turns %v, want t2 and t3 only", turns)
			}
			agreeAll(t, th, again, protocol.RootURI, session, chat)
			send(t, w, chat, "t4", "say live")
			agreeAll(t, th, again, session, chat)
		})
	}
}

// TestRestartForgetsClientsPastTheirWindow: a client whose window ended
// while the host was stopped is not known after the start (-32008), and
// its note is dropped; one connected when the host stopped has its window
// from the start.
func TestRestartForgetsClientsPastTheirWindow(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	state := t.TempDir()
	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	opts := func(o *host.Options) { o.ClientWindow, o.Clock, o.Journal = time.Minute, clk, j }
	th := startHost(t, state, opts)
	gone := th.client("gone")
	th.leave(gone, "gone")
	th.client("stays") // connected as the host stops
	th.stop()
	// As after a crash: a client whose connection was open has a note
	// with no time it left.
	for _, id := range []string{"crashed", "crashed-away"} {
		if err := j.SetNote(context.Background(), "clients", id, []byte(`{"principal":"root:test","version":"1.0.0"}`)); err != nil {
			t.Fatal(err)
		}
	}

	clk.Advance(2 * time.Minute)
	th = startHost(t, state, opts)
	c := hosttest.Dial(t, th.url)
	if _, err := c.Call("reconnect", map[string]any{"clientId": "gone", "lastSeenServerSeq": 0, "subscriptions": []string{}}); err == nil || err.Code != -32008 {
		t.Errorf("reconnect of a client away past its window: %v, want -32008", err)
	}
	if _, ok, _ := j.GetNote(context.Background(), "clients", "gone"); ok {
		t.Error("the forgotten client's note is still there")
	}
	for _, id := range []string{"stays", "crashed"} {
		c = hosttest.Dial(t, th.url)
		if _, err := c.Call("reconnect", map[string]any{"clientId": id, "lastSeenServerSeq": 0, "subscriptions": []string{}}); err != nil {
			t.Errorf("reconnect of %s, connected when the host stopped: %v", id, err)
		}
	}
	// Their windows run from the start: one that never came back is
	// forgotten a window after it.
	th.stop()
	clk.Advance(2 * time.Minute)
	th = startHost(t, state, opts)
	c = hosttest.Dial(t, th.url)
	if _, err := c.Call("reconnect", map[string]any{"clientId": "crashed-away", "lastSeenServerSeq": 0, "subscriptions": []string{}}); err == nil || err.Code != -32008 {
		t.Errorf("a client away two windows after the start: %v, want -32008", err)
	}
}

// TestReconnectFromAnotherHost: a client whose note says it was last
// connected to another host of a cluster is known here, and sent
// snapshots saying why, not -32008: the serverSeqs it saw are not this
// host's.
func TestReconnectFromAnotherHost(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	th := startHost(t, "", withJournal(j))
	note := `{"principal":"root:test","version":"1.0.0","host":"elsewhere"}`
	if err := j.SetNote(context.Background(), "clients", "roamer", []byte(note)); err != nil {
		t.Fatal(err)
	}
	c := hosttest.Dial(t, th.url)
	raw := c.MustCall("reconnect", map[string]any{"clientId": "roamer", "lastSeenServerSeq": 1, "subscriptions": []string{protocol.RootURI}})
	res, err := protocol.UnmarshalReconnectResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	snap, ok := res.(*protocol.ReconnectSnapshotResult)
	if !ok || len(snap.Snapshots) != 1 || !strings.Contains(string(raw), `"ahpd.reason":"moved_host"`) {
		t.Errorf("reconnect of another host's client: %s", raw)
	}
	// Somebody else cannot take its id.
	if err := j.SetNote(context.Background(), "clients", "theirs", []byte(`{"principal":"user:bob","version":"1.0.0","host":"elsewhere"}`)); err != nil {
		t.Fatal(err)
	}
	c = hosttest.Dial(t, th.url)
	if _, err := c.Call("reconnect", map[string]any{"clientId": "theirs", "lastSeenServerSeq": 1, "subscriptions": []string{}}); err == nil || err.Code != -32008 {
		t.Errorf("reconnect as another principal's client: %v, want -32008", err)
	}
}
