package host_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ahpd/ahpd/host"

	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// natsServer is a JetStream server on 127.0.0.1 that a test stops and
// starts again on the same port and store, as an operator's NATS that
// goes away and comes back.
type natsServer struct {
	t    *testing.T
	dir  string
	port int
	srv  *server.Server
}

func startNATS(t *testing.T) *natsServer {
	t.Helper()
	n := &natsServer{t: t, dir: t.TempDir(), port: -1}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *natsServer) start() {
	n.t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.dir, NoSigs: true, NoLog: true})
	if err != nil {
		n.t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(time.Minute) {
		srv.Shutdown()
		n.t.Fatal("NATS server not ready")
	}
	n.srv, n.port = srv, srv.Addr().(*net.TCPAddr).Port
}

func (n *natsServer) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

func (n *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// TestJournalDownRefusesWork: while the journal does not take what the
// host writes, nothing is sent that it does not hold, a turn streaming
// waits for it, and new work is refused with the reason; once it is back
// the turn ends whole and work is taken again. Every action a client saw
// is in the journal.
func TestJournalDownRefusesWork(t *testing.T) {
	t.Parallel()
	slow(t)
	n := startNATS(t)
	j, err := journal.Open(context.Background(), journal.Config{URL: n.url()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close(context.Background()) })
	th := startHost(t, "", withJournal(j))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	var script strings.Builder
	for i := range 200 {
		fmt.Fprintf(&script, "say line %d\nwait 5ms\n", i)
	}
	startTaken(t, c, chat, "t1", script.String())
	c.WaitState(chat, "the reply to stream", func(st protocol.ChannelState) bool {
		at := st.(*protocol.ChatState).ActiveTurn
		return at != nil && strings.Contains(text(at.ResponseParts), "line 10\n")
	})

	n.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := th.h.AwaitJournal(ctx, true); err != nil {
		t.Fatalf("the journal gone, the host did not count it failing: %v", err)
	}
	if err := th.h.Ready(); err == nil || !strings.Contains(err.Error(), "journal") {
		t.Errorf("the journal gone, Ready says %v", err)
	}
	// What was sent before the append that failed may still be on its
	// way: a ping's answer comes behind it on the same connection.
	c.MustCall("ping", nil)
	sentWhileDown := len(c.Messages())
	other := th.client("c2")
	_, rerr := other.Call("createSession", map[string]any{
		"channel": "ahp-session:/s2", "provider": "script", "workingDirectories": []string{"file://" + th.work},
	})
	if rerr == nil || !strings.Contains(rerr.Message, "cannot record new work") {
		t.Fatalf("createSession with the journal down: %v", rerr)
	}
	if got := len(c.Messages()); got != sentWhileDown {
		t.Errorf("%d messages were sent while the journal was down", got-sentWhileDown)
	}

	n.start()
	if err := th.h.AwaitJournal(ctx, false); err != nil {
		t.Fatalf("the journal back, the host still counts it failing: %v", err)
	}
	if err := th.h.Ready(); err != nil {
		t.Errorf("the journal back, Ready says %v", err)
	}
	other.MustCall("createSession", map[string]any{
		"channel": "ahp-session:/s3", "provider": "script", "workingDirectories": []string{"file://" + th.work},
	})
	cs := waitTurnEnd(t, c, chat, "t1")
	if got := text(cs.Turns[0].ResponseParts); cs.Turns[0].State != protocol.TurnStateComplete || !strings.Contains(got, "line 199\n") {
		t.Errorf("the turn ended %s with %d bytes", cs.Turns[0].State, len(got))
	}
	if len(c.Messages()) <= sentWhileDown {
		t.Errorf("nothing was sent once the journal was back")
	}

	msgs := c.Messages() // before the journal is read: each was in it before it was sent
	_, kept := journaled(t, j, session)
	missing := 0
	for _, m := range msgs {
		env := m.Envelope
		if env == nil || env.RejectionReason != nil || (env.Channel != session && env.Channel != chat) {
			continue
		}
		if _, ok := kept[env.ServerSeq]; !ok {
			missing++
			t.Logf("not in the journal: %s %d on %s", env.Action.Type(), env.ServerSeq, env.Channel)
		}
	}
	if missing > 0 {
		t.Errorf("%d actions a client was sent are not in the journal", missing)
	}
}

// TestSlowJournalHoldsTheAgentBack: an agent streaming flat out while the
// journal takes nothing waits once its session has MaxBacklog changes
// queued, so memory stays bounded; once the journal is back the turn ends
// with every word, in order.
func TestSlowJournalHoldsTheAgentBack(t *testing.T) {
	t.Parallel()
	slow(t)
	n := startNATS(t)
	j, err := journal.Open(context.Background(), journal.Config{URL: n.url()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close(context.Background()) })
	th := startHost(t, "", withJournal(j))
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t0", "say warm")

	words := strings.Repeat("word ", 60_000) // about 20,000 deltas, more than the backlog holds
	startTaken(t, c, chat, "t1", "ask Go on?\nsay "+words+"end")
	question := asking(t, c, chat)
	n.stop()
	// The answer is taken (nothing it says is sent until the journal is
	// back), and the agent goes on flat out.
	answer(c, chat, question, "yes")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		waiting, backlog := th.h.JournalWaiting()
		if backlog > host.MaxBacklog {
			t.Fatalf("a session queued %d changes, more than %d", backlog, host.MaxBacklog)
		}
		if waiting > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the agent never waited for the journal")
		case <-time.After(10 * time.Millisecond): // a poll of the host's count, not a budget
		}
	}

	n.start()
	cs := waitTurnEnd(t, c, chat, "t1")
	if got := text(cs.Turns[1].ResponseParts); !strings.HasSuffix(got, words+"end\n\n") {
		t.Errorf("the turn said %d bytes, want %d at its end", len(got), len(words)+5)
	}
}
