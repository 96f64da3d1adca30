package host_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/protocol"
)

var stressFor = flag.Duration("stress", 10*time.Second, "how long TestStress's clients act (go test ./host -run TestStress -stress=2m for a long run)")

// TestStress has 20 clients act at random on 10 sessions (turns, cancels,
// steering and queued messages, titles, marks) for -stress, with no
// waiting between actions. Afterwards every client's reduced state of
// what it watches equals a fresh snapshot, and, after a restart, the
// store holds what the clients last saw.
func TestStress(t *testing.T) {
	t.Parallel()
	slow(t)
	const nSessions, nClients = 10, 20
	th := startHost(t, "")
	setup := th.client("setup")
	sessions := make([]string, nSessions)
	chats := make([]string, nSessions)
	for i := range sessions {
		sessions[i], chats[i] = th.newSession(setup, fmt.Sprintf("stress-%d", i), nil)
		send(t, setup, chats[i], "t0", "title session "+fmt.Sprint(i)+"\nsay ready")
	}
	setup.Close()
	// The driver watches every chat, keeping states but no messages: a
	// client that keeps every message falls behind a host this busy.
	driver := th.client("driver").Light()
	for _, ch := range chats {
		driver.Subscribe(ch)
	}

	clients := make([]*hosttest.Client, nClients)
	watched := make([][]int, nClients)
	for i := range clients {
		clients[i] = th.client(fmt.Sprintf("stress-client-%d", i)).Light()
		for _, j := range rand.Perm(nSessions)[:3] {
			clients[i].Subscribe(sessions[j])
			clients[i].Subscribe(chats[j])
			watched[i] = append(watched[i], j)
		}
	}

	d := *stressFor
	if lockcheck.Enabled {
		// Every lock is slower tracked: the clients run ahead of the host
		// further each second, so a short run checks the locks as well.
		d = min(d, 3*time.Second)
	}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for n := 0; time.Now().Before(deadline); n++ {
				j := watched[i][r.IntN(len(watched[i]))]
				act(c, r, sessions[j], chats[j], fmt.Sprintf("c%d-%d", i, n))
				if n%50 == 49 {
					// A round trip now and then keeps a client from
					// running ahead of what the host has taken.
					_, _ = c.Call("ahpd/sessionStatus", map[string]any{"channel": sessions[j]})
				}
			}
		})
	}
	wg.Wait()

	// Quiet: every running turn cancelled or ended, nothing pending.
	for i, chat := range chats {
		st := driver.State(chat).(*protocol.ChatState)
		if at := st.ActiveTurn; at != nil {
			driver.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: at.ID, Duration: 1})
		}
		driver.WaitState(chat, "chat "+fmt.Sprint(i)+" to be idle", func(s protocol.ChannelState) bool {
			cs := s.(*protocol.ChatState)
			return cs.ActiveTurn == nil && len(cs.QueuedMessages) == 0 && cs.SteeringMessage == nil
		})
	}
	fresh := th.client("fresh").Light()
	for i, c := range clients {
		for _, j := range watched[i] {
			for _, ch := range []string{sessions[j], chats[j]} {
				snap := fresh.Subscribe(ch)
				converged(t, c, ch, snap.State)
				fresh.Notify("unsubscribe", map[string]any{"channel": ch})
			}
		}
	}
	titles := map[string]string{}
	for _, s := range sessions {
		titles[s] = fresh.Subscribe(s).State.(*protocol.SessionState).Title
	}
	turns := 0
	for _, ch := range chats {
		turns += len(fresh.Subscribe(ch).State.(*protocol.ChatState).Turns)
	}
	t.Logf("%d turns in %d sessions", turns, nSessions)

	for _, c := range append(clients, driver, fresh) {
		c.Close()
	}
	th.stop()
	for _, s := range sessions {
		su, _ := protocol.ParseSessionURI(s)
		data, err := os.ReadFile(filepath.Join(th.state, "sessions", su.ID+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct{ Title string }
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Title != titles[s] {
			t.Errorf("%s is stored as %q, its clients saw %q", s, rec.Title, titles[s])
		}
	}
}

// act does one random thing a client may do in a session.
func act(c *hosttest.Client, r *rand.Rand, session, chat, id string) {
	msg := func(text string) protocol.Message {
		return protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
	}
	state, _ := c.State(chat).(*protocol.ChatState)
	switch r.IntN(8) {
	case 0, 1:
		c.Dispatch(chat, &protocol.ChatTurnStartedAction{TurnID: id, StartedAt: protocol.FormatTime(time.Now()),
			Message: msg("say working " + id + "\nwait 20ms\nsay done")})
	case 2:
		if state != nil && state.ActiveTurn != nil {
			c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: state.ActiveTurn.ID, Duration: 1})
		}
	case 3:
		c.Dispatch(chat, &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindSteering, ID: id, Message: msg("say steered " + id)})
	case 4:
		c.Dispatch(chat, &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindQueued, ID: id, Message: msg("say queued " + id)})
	case 5:
		c.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "title " + id})
	case 6:
		c.Dispatch(session, &protocol.SessionIsReadChangedAction{IsRead: r.IntN(2) == 0})
	case 7:
		if state != nil && len(state.QueuedMessages) > 0 {
			c.Dispatch(chat, &protocol.ChatPendingMessageRemovedAction{Kind: protocol.PendingMessageKindQueued, ID: state.QueuedMessages[0].ID})
		}
	}
}

// converged waits until c's state of ch is want, a snapshot taken once
// the host is quiet: the last changes may still be on their way to c (a
// session hands its changes on after letting its lock go), and none may
// be missing once they have come.
func converged(t *testing.T, c *hosttest.Client, ch string, want protocol.ChannelState) {
	t.Helper()
	w := masked(t, want)
	// A client of a loaded host may be a long way behind.
	if !c.WaitOrNot(ch+" to catch up", func([]hosttest.Message) bool {
		return reflect.DeepEqual(masked(t, c.State(ch)), w)
	}) {
		sameState(t, c.State(ch), want)
	}
}
