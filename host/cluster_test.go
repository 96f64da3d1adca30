package host_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// clusterHost is a host sharing sessions through a NATS cluster.
type clusterHost struct {
	*testHost
	member *cluster.Member
	j      *journal.Journal
}

// startClusterHost starts host id on node of nc, reaching its own working
// directory (repos=) only, so that where a session runs follows its folder.
func startClusterHost(t *testing.T, nc *clustertest.Cluster, node int, id string) *clusterHost {
	t.Helper()
	ctx := context.Background()
	j, err := journal.Open(ctx, nc.Config(node))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := j.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	conn, err := cluster.Dial(ctx, nc.Config(node), "host "+id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	state := t.TempDir()
	m, err := cluster.Join(ctx, conn, cluster.Config{
		HostID: id, Labels: map[string]string{cluster.LabelRepos: state + "/work"},
		HostTTL: time.Second, LeaseTTL: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	th := startHost(t, state, withJournal(j), func(o *host.Options) { o.Cluster = m })
	return &clusterHost{testHost: th, member: m, j: j}
}

// clusterStatus asks a host's client for a session's status, and the host its
// _meta names.
func clusterStatus(t *testing.T, c *hosttest.Client, session string) (string, string) {
	t.Helper()
	raw := c.MustCall("ahpd/sessionStatus", map[string]any{"channel": session})
	var res struct {
		Status string `json:"status"`
		Meta   struct {
			Host string `json:"ahpd.host"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res.Status, res.Meta.Host
}

// TestClusterForwards: a session made through host A in a folder only B
// reaches is placed on B; A answers for it as B's, and a turn sent
// through A runs on B, seen by B's clients; a refusal comes back to A's
// client as if A had refused it.
func TestClusterForwards(t *testing.T) {
	nc := clustertest.Start(t, 1)
	a := startClusterHost(t, nc, 0, "a")
	b := startClusterHost(t, nc, 0, "b")

	ca := a.client("ca")
	session := "ahp-session:/placed"
	chat := protocol.DefaultChatURI(session)
	ca.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + b.work},
	})
	if st, on := clusterStatus(t, ca, session); st != "active" || on != "b" {
		t.Fatalf("status through A = %s on %q, want active on b", st, on)
	}

	// A turn sent through A runs on B.
	cb := b.client("cb")
	ca.Dispatch(chat, &protocol.ChatTurnStartedAction{
		TurnID: "t1", StartedAt: protocol.FormatTime(time.Now()),
		Message: protocol.Message{Text: "say hello from b", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
	cb.Wait("B to announce the session", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if m.Method == "root/sessionAdded" && strings.Contains(string(m.Params), session) {
				return true
			}
		}
		return false
	})
	cb.Subscribe(session)
	cb.Subscribe(chat)
	st := cb.WaitState(chat, "the turn to end on B", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) == 1 && cs.ActiveTurn == nil
	}).(*protocol.ChatState)
	if got := strings.TrimSpace(text(st.Turns[0].ResponseParts)); got != "hello from b" {
		t.Fatalf("the turn said %q", got)
	}
	if got := st.Turns[0].Message.Text; got != "say hello from b" {
		t.Fatalf("the turn's message is %q", got)
	}
	if st, on := clusterStatus(t, cb, session); st != "active" || on != "b" {
		t.Fatalf("status on B = %s on %q, want active on b", st, on)
	}

	// A client of A watches the session from the journal: the same
	// state as B's client, and a turn sent through A streams to it, its
	// own action echoed with its origin.
	ca.Subscribe(session)
	ca.Subscribe(chat)
	sameState(t, ca.State(chat), cb.State(chat))
	startTaken(t, ca, chat, "t2", "say second")
	gotA := waitTurnEnd(t, ca, chat, "t2")
	gotB := waitTurnEnd(t, cb, chat, "t2")
	if got := strings.TrimSpace(text(gotA.Turns[1].ResponseParts)); got != "second" {
		t.Fatalf("A's client saw %q", got)
	}
	sameState(t, gotA, gotB)
	// (A session's own state gets no action for its activity, which
	// follows its chats: each client has it as of its snapshot.)
	if ta, tb := ca.State(session).(*protocol.SessionState).Title, cb.State(session).(*protocol.SessionState).Title; ta != tb {
		t.Fatalf("the session's title is %q on A and %q on B", ta, tb)
	}

	// A refused action comes back to its sender through A.
	seq := ca.Dispatch(chat, &protocol.ChatTurnStartedAction{
		TurnID: "t1", StartedAt: protocol.FormatTime(time.Now()),
		Message: protocol.Message{Text: "again", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
	ca.Wait("the refusal", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq && e.RejectionReason != nil {
				return true
			}
		}
		return false
	})
}
