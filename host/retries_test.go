package host_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestResentActionsAreTakenOnce: a client sends ten actions, loses its
// connection, and sends its last twenty again (the ten taken and ten it
// never sent) on a new one; with a restart of the host between, clean or
// as after a crash, too. Every action is taken once: a watcher sees each
// clientSeq published once, and the client has each answered without a
// refusal (the ten taken echoed again, unchanged). Without the host's
// memory of them the titles of the first ten would be set again, and its
// turn refused as "already exists".
func TestResentActionsAreTakenOnce(t *testing.T) {
	t.Parallel()
	for _, restart := range []string{"", "clean", "crash"} {
		t.Run(restart+"restart", func(t *testing.T) {
			t.Parallel()
			j := openJournal(t)
			state := t.TempDir()
			th := startHost(t, state, withJournal(j))
			c := th.client("c")
			session, chat := th.newSession(c, "s1", nil)
			send(t, c, chat, "t0", "say the session is in use, so others may watch it") // clientSeq 1
			w := th.client("watcher")
			w.Subscribe(session)
			w.Subscribe(chat)

			action := func(i int) (string, protocol.Action) {
				if i%10 == 5 {
					return chat, &protocol.ChatTurnStartedAction{TurnID: fmt.Sprintf("t%d", i),
						Message: protocol.Message{Text: fmt.Sprintf("say turn %d", i), Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}}
				}
				return session, &protocol.SessionTitleChangedAction{Title: fmt.Sprintf("title %d", i)}
			}
			for i := 1; i <= 10; i++ {
				ch, a := action(i)
				dispatchAt(c, ch, seqOf(i), a)
			}
			answered(t, c, seqOf(1), seqOf(10))
			waitTurnEnd(t, c, chat, "t5")
			th.leave(c, "c")

			if restart != "" {
				th.leave(w, "watcher")
				th.stop()
				if restart == "crash" {
					if err := j.SetMark(context.Background(), host.CleanKey, []byte(`{}`)); err != nil {
						t.Fatal(err)
					}
				}
				th = startHost(t, state, withJournal(j))
				w = th.client("watcher2")
				w.Subscribe(session)
				w.Subscribe(chat)
			}
			again := hosttest.Dial(t, th.url)
			if _, ok := again.Resume(c, "c").(*protocol.ReconnectReplayResult); !ok {
				t.Fatal("the reconnect was not replayed")
			}
			for i := 1; i <= 20; i++ {
				ch, a := action(i)
				dispatchAt(again, ch, seqOf(i), a)
			}
			answered(t, again, seqOf(1), seqOf(20))
			// Anything applied twice would reach the watcher before an
			// action of its own sent after.
			mark := w.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "the watcher's"})
			w.Wait("its own title change", func(msgs []hosttest.Message) bool {
				for _, m := range msgs {
					if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == mark && e.Origin.ClientID != "c" {
						return true
					}
				}
				return false
			})
			published := map[int64]int{}
			for _, m := range w.Messages() {
				if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientID == "c" && e.RejectionReason == nil {
					published[e.Origin.ClientSeq]++
				}
			}
			first := 1
			if restart != "" {
				first = 11 // the watcher came after the first ten
			}
			for i := first; i <= 20; i++ {
				if n := published[seqOf(i)]; n != 1 {
					t.Errorf("action %d was published %d times, want once", i, n)
				}
			}
			if n := len(published); n != 21-first {
				t.Errorf("the watcher saw %d of the client's actions published (%v), want %d", n, published, 21-first)
			}
			cs := waitTurnEnd(t, again, chat, "t15")
			if len(cs.Turns) != 3 {
				t.Errorf("the chat has %d turns, want t0, t5 and t15", len(cs.Turns))
			}
		})
	}
}

// seqOf is the clientSeq of the test's action i: after the first turn's.
func seqOf(i int) int64 { return int64(100 + i) }

// dispatchAt sends a client action with the clientSeq given.
func dispatchAt(c *hosttest.Client, channel string, seq int64, a protocol.Action) {
	c.Notify("dispatchAction", map[string]any{"channel": channel, "clientSeq": seq, "action": a})
}

// answered waits until c has seen its actions first..last answered, and
// fails the test on a refusal of any.
func answered(t *testing.T, c *hosttest.Client, first, last int64) {
	t.Helper()
	var refused string
	c.Wait(fmt.Sprintf("actions %d to %d answered", first, last), func(msgs []hosttest.Message) bool {
		seen := map[int64]bool{}
		for _, m := range msgs {
			e := m.Envelope
			if e == nil || e.Origin == nil || e.Origin.ClientSeq < first || e.Origin.ClientSeq > last {
				continue
			}
			if e.RejectionReason != nil {
				refused = fmt.Sprintf("clientSeq %d was refused: %s", e.Origin.ClientSeq, *e.RejectionReason)
				return true
			}
			seen[e.Origin.ClientSeq] = true
		}
		return len(seen) == int(last-first+1)
	})
	if refused != "" {
		t.Fatal(refused)
	}
}

// TestNumberingsSideBySide: connections that initialize with one client id
// side by side (the HTTP API's, one id a person) number their actions
// each on their own: the same clientSeq on each, with other actions, is
// taken on each, and a client that initializes again numbers anew.
func TestNumberingsSideBySide(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	owner := th.client("owner")
	session, _ := th.newSession(owner, "s1", map[string]any{})
	send(t, owner, protocol.DefaultChatURI(session), "t1", "say in use")
	a, b := th.client("c"), th.client("c")
	for _, c := range []*hosttest.Client{a, b} {
		c.Subscribe(session)
	}
	dispatchAt(a, session, 1, &protocol.SessionTitleChangedAction{Title: "from a"})
	dispatchAt(b, session, 1, &protocol.SessionTitleChangedAction{Title: "from b"})
	answered(t, a, 1, 1)
	answered(t, b, 1, 1)
	a.Close()
	again := th.client("c")
	again.Subscribe(session)
	dispatchAt(again, session, 1, &protocol.SessionTitleChangedAction{Title: "anew"})
	answered(t, again, 1, 1)
	owner.WaitState(session, "the last title", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Title == "anew"
	})
}
