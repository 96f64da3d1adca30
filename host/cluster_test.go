package host_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/clock"
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
	conn   *nats.Conn // the member's
	// crashed says the host was stopped as by a crash: its member cannot
	// leave cleanly.
	crashed bool
}

// crash stops the host as a crash would for the cluster: its connection
// to the cluster goes first, so its leases are neither released nor
// renewed and run out, then the host stops.
func (ch *clusterHost) crash() {
	ch.crashed = true
	ch.conn.Close()
	ch.stop()
}

// startClusterHost starts host id on node of nc, reaching its own working
// directory (repos=) only, so that where a session runs follows its folder.
func startClusterHost(t testing.TB, nc *clustertest.Cluster, node int, id string, opts ...hostOption) *clusterHost {
	return startClusterHostReaching(t, nc, node, id, "", opts...)
}

// startClusterHostReaching is startClusterHost reaching repos (comma
// separated folders) besides its own working directory. opts apply to
// the host's options after the harness's.
func startClusterHostReaching(t testing.TB, nc *clustertest.Cluster, node int, id, repos string, opts ...hostOption) *clusterHost {
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
	reach := state + "/work"
	if repos != "" {
		reach += "," + repos
	}
	m, err := cluster.Join(ctx, conn, cluster.Config{
		HostID: id, Labels: map[string]string{cluster.LabelRepos: reach},
		HostTTL: time.Second, LeaseTTL: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := &clusterHost{member: m, j: j, conn: conn}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil && !ch.crashed {
			t.Error(err)
		}
	})
	th := startHost(t, state, append([]hostOption{withJournal(j), func(o *host.Options) { o.Cluster = m }}, opts...)...)
	ch.testHost = th
	return ch
}

// clusterStatus asks a host's client for a session's status, and the host its
// _meta names.
func clusterStatus(t testing.TB, c *hosttest.Client, session string) (string, string) {
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
	t.Parallel()
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
	// Its creator watches it at once, before its first turn, as VS Code
	// does; another client may not, as on one host.
	if snap := ca.Subscribe(session); snap == nil || snap.State.(*protocol.SessionState).Provider != "script" {
		t.Fatalf("the creator's snapshot through A: %+v", snap)
	}
	ca.Subscribe(chat)
	if _, err := a.client("other").Call("subscribe", map[string]any{"channel": session}); err == nil || err.Code != int64(protocol.CodeSessionNotFound) {
		t.Fatalf("another client subscribing to a session not yet made through A: %v, want -32001 (no such session)", err)
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
	// A lists it, as B wrote its record, and told its clients of it.
	ca.Wait("A to announce the session B made", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if m.Method == "root/sessionAdded" && strings.Contains(string(m.Params), session) {
				return true
			}
		}
		return false
	})
	var listed protocol.ListSessionsResult
	if err := json.Unmarshal(ca.MustCall("listSessions", map[string]any{"channel": protocol.RootURI}), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Items) != 1 || listed.Items[0].Resource != session || listed.Items[0].Title != "say hello from b" {
		t.Fatalf("A lists %+v", listed.Items)
	}

	// A client of A watches the session from the journal: the same
	// state as B's client, and a turn sent through A streams to it, its
	// own action echoed with its origin.
	// (It follows the journal, a moment behind B: once it has the turn's
	// end too, the two agree.)
	ca.Subscribe(session)
	ca.Subscribe(chat)
	waitTurnEnd(t, ca, chat, "t1")
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

	// A chat made through A is there to watch through A at once.
	second := protocol.ChatURIFor(session, "second")
	ca.MustCall("createChat", map[string]any{"channel": session, "chat": second})
	if snap := ca.Subscribe(second); snap == nil || snap.State.(*protocol.ChatState).Resource != second {
		t.Fatalf("the new chat's snapshot through A: %+v", snap)
	}
	send(t, ca, second, "s1", "say in the second chat")

	// A's client comes back after its connection dropped: what it missed
	// is replayed, numbered as A numbered it, and the session streams on.
	// (Another client of A watches meanwhile, so A keeps following the
	// session; one nobody here watched is sent snapshots, below.)
	watcher := a.client("watcher")
	watcher.Subscribe(chat)
	ca.Close()
	ca2 := hosttest.Dial(t, a.url)
	if r := ca2.Resume(ca, "ca"); r == nil {
		t.Fatal("no reconnect result")
	} else if _, ok := r.(*protocol.ReconnectReplayResult); !ok {
		t.Fatalf("reconnect through A answered %T, want a replay", r)
	}
	send(t, ca2, chat, "t3", "say third")
	waitTurnEnd(t, cb, chat, "t3")
	sameState(t, ca2.State(chat), cb.State(chat))
	// One that is too far behind is sent the mirror's snapshots.
	ca3 := hosttest.Dial(t, a.url)
	r := ca3.Reconnect("ca", 1, []string{chat})
	snaps, ok := r.(*protocol.ReconnectSnapshotResult)
	if !ok || len(snaps.Snapshots) != 1 {
		t.Fatalf("reconnect from serverSeq 1 answered %+v, want a snapshot", r)
	}
	sameState(t, snaps.Snapshots[0].State, cb.State(chat))
	ca = ca2

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

// TestClusterFailover: a session runs on B; B dies; its lease runs out and
// the session shows inactive; the next message, sent through A, wakes it on
// C, the other host reaching its folder, from its record and journal: every
// turn is still there, and A's client, watching all along, sees the new one.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	nc := clustertest.Start(t, 1)
	shared := t.TempDir()
	// C starts first: its serverSeqs start lower than B's, and still the
	// session's rise when C takes it over.
	c := startClusterHostReaching(t, nc, 0, "c", shared)
	a := startClusterHost(t, nc, 0, "a")
	b := startClusterHostReaching(t, nc, 0, "b", shared)

	ca := a.client("ca")
	session := "ahp-session:/moving"
	chat := protocol.DefaultChatURI(session)
	ca.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + shared},
	})
	startTakenRemote(t, ca, b, session, chat, "t1", "say one")
	if st, on := clusterStatus(t, ca, session); st != "active" || on != "b" {
		t.Fatalf("status = %s on %q, want active on b (placed on the least id of equals)", st, on)
	}
	ca.Subscribe(session)
	ca.Subscribe(chat)
	send(t, ca, chat, "t2", "say two")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	freed, err := c.member.Freed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.crash()
	for id := range freed {
		if id == "moving" {
			break
		}
	}
	if st, on := clusterStatus(t, ca, session); st != "inactive" || on != "" {
		t.Fatalf("status after B died = %s on %q, want inactive on none", st, on)
	}

	st := send(t, ca, chat, "t3", "say three")
	if st, on := clusterStatus(t, ca, session); st != "active" || on != "c" {
		t.Fatalf("status after the next message = %s on %q, want active on c", st, on)
	}
	var said []string
	for _, turn := range st.Turns {
		said = append(said, strings.TrimSpace(text(turn.ResponseParts)))
	}
	if strings.Join(said, ",") != "one,two,three" {
		t.Fatalf("the turns said %q, want one, two, three", said)
	}
	cc := c.client("cc")
	cc.Subscribe(chat)
	sameState(t, ca.State(chat), cc.State(chat))
	list, _ := journaled(t, c.j, session)
	for i := 1; i < len(list); i++ {
		if list[i].ServerSeq <= list[i-1].ServerSeq {
			t.Fatalf("the session's journal goes from serverSeq %d to %d (entry %d of %d)", list[i-1].ServerSeq, list[i].ServerSeq, i, len(list))
		}
	}
}

// startTakenRemote sends a session's first turn through c and waits for
// the host it runs on (on) to announce the session.
func startTakenRemote(t testing.TB, c *hosttest.Client, on *clusterHost, session, chat, turnID, text string) {
	t.Helper()
	watch := on.client("watch-" + turnID)
	c.Dispatch(chat, &protocol.ChatTurnStartedAction{
		TurnID: turnID, StartedAt: protocol.FormatTime(time.Now()),
		Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
	watch.Wait("the session to be announced", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if m.Method == "root/sessionAdded" && strings.Contains(string(m.Params), session) {
				return true
			}
		}
		return false
	})
	watch.Subscribe(chat)
	watch.WaitState(chat, "turn "+turnID+" to end", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) > 0 && cs.Turns[len(cs.Turns)-1].ID == turnID && cs.ActiveTurn == nil
	})
}

// TestClusterReadsItsWrites: a session made and put to sleep through one
// host is known at once to another, which has not yet heard of it through
// its watch of the records: asked about it straight after, it answers for
// it rather than that there is no such session. The other host's watch
// is held back for the whole test.
func TestClusterReadsItsWrites(t *testing.T) {
	t.Parallel()
	nc := clustertest.Start(t, 1)
	shared := t.TempDir()
	b := startClusterHostReaching(t, nc, 0, "b", shared)
	held := make(chan struct{})
	c := startClusterHostReaching(t, nc, 0, "c", shared, func(o *host.Options) { host.WithRecordsHeld(o, held) })
	defer close(held)
	cb, cc := b.client("cb"), c.client("cc")
	for i := range 3 {
		session := fmt.Sprintf("ahp-session:/ryw%d", i)
		chat := protocol.DefaultChatURI(session)
		cb.MustCall("createSession", map[string]any{
			"channel": session, "provider": "script",
			"workingDirectories": []string{"file://" + shared},
		})
		cb.Subscribe(chat)
		send(t, cb, chat, "t1", "say one")
		cb.MustCall("unsubscribe", map[string]any{"channel": chat})
		cb.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
		if st, on := clusterStatus(t, cc, session); st != "inactive" || on != "" {
			t.Fatalf("round %d: through the other host, status = %s on %q, want inactive on none", i, st, on)
		}
	}
}

// TestClusterWakeRace: two hosts reaching a sleeping session's folder are
// asked to wake it at once (one of them twice); exactly one takes it, the
// other forwards to it, and messages through both reach the one holding it.
func TestClusterWakeRace(t *testing.T) {
	t.Parallel()
	nc := clustertest.Start(t, 1)
	shared := t.TempDir()
	b := startClusterHostReaching(t, nc, 0, "b", shared)
	c := startClusterHostReaching(t, nc, 0, "c", shared)
	cb, cc, cc2 := b.client("cb"), c.client("cc"), c.client("cc2")
	session := "ahp-session:/raced"
	chat := protocol.DefaultChatURI(session)
	cb.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + shared},
	})
	cb.Subscribe(chat)
	send(t, cb, chat, "t1", "say one")
	cb.MustCall("unsubscribe", map[string]any{"channel": chat})
	cb.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
	if st, on := clusterStatus(t, cc, session); st != "inactive" || on != "" {
		t.Fatalf("status after suspending = %s on %q, want inactive on none", st, on)
	}

	for round := range 5 {
		// Both at once: each host reaches the folder and tries to take it.
		turnB, turnC := fmt.Sprintf("b%d", round), fmt.Sprintf("c%d", round)
		// (And two clients of one host at once: the second waits for the
		// first's taking, and does not fail.)
		pb := cb.Start("ahpd/resumeSession", map[string]any{"channel": session})
		pc := cc.Start("ahpd/resumeSession", map[string]any{"channel": session})
		pc2 := cc2.Start("ahpd/resumeSession", map[string]any{"channel": session})
		for name, p := range map[string]*hosttest.Pending{"b": pb, "c": pc, "c again": pc2} {
			if _, err := p.Await(); err != nil {
				t.Fatalf("round %d: resume through %s: %v", round, name, err)
			}
		}
		_, onB := clusterStatus(t, cb, session)
		_, onC := clusterStatus(t, cc, session)
		if onB == "" || onB != onC {
			t.Fatalf("round %d: b says %q holds the session, c says %q", round, onB, onC)
		}
		held := 0
		for _, x := range []*clusterHost{b, c} {
			if st, _ := x.h.Status(session); st == "active" {
				held++
			}
		}
		if held != 1 {
			t.Fatalf("round %d: the session is awake on %d hosts", round, held)
		}
		// A turn through each reaches the holder.
		cb.Subscribe(chat)
		cc.Subscribe(chat)
		send(t, cb, chat, turnB, "say "+turnB)
		send(t, cc, chat, turnC, "say "+turnC)
		cb.MustCall("unsubscribe", map[string]any{"channel": chat})
		cc.MustCall("unsubscribe", map[string]any{"channel": chat})
		holder := cb
		if onB == "c" {
			holder = cc
		}
		holder.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
	}
}

// TestClusterLostLease: a host whose lease of a session is taken from it
// (here, removed behind its back, as an expiry during a partition would)
// stops the session: its running turn is cancelled and its agent let go,
// for another host may run it now, and it no longer answers as holder.
func TestClusterLostLease(t *testing.T) {
	t.Parallel()
	nc := clustertest.Start(t, 1)
	b := startClusterHost(t, nc, 0, "b")
	cb := b.client("cb")
	session, chat := b.newSession(cb, "lost", nil)
	send(t, cb, chat, "t1", "say one")
	startTaken(t, cb, chat, "t2", "say two\nwait 30s\nsay never")

	js, err := jetstream.New(nc.Connect(0))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), "ahpd_leases")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(context.Background(), base64.RawURLEncoding.EncodeToString([]byte("lost"))); err != nil {
		t.Fatal(err)
	}
	st := waitTurnEnd(t, cb, chat, "t2")
	if got := st.Turns[1].State; got != protocol.TurnStateCancelled {
		t.Fatalf("the turn ended %s, want cancelled", got)
	}
	if st, on := clusterStatus(t, cb, session); on == "b" {
		t.Fatalf("b still holds the session after losing its lease: %s", st)
	}
}

// TestClusterReleasesUnusedLease: a request that takes a sleeping
// session's lease and runs nothing (here, labelling it) leaves the lease
// held; the residency checks give it up once the session has been quiet a
// while (it falls asleep, or was asleep), and not before.
func TestClusterReleasesUnusedLease(t *testing.T) {
	t.Parallel()
	nc := clustertest.Start(t, 1)
	clk := clock.NewFake(time.Now())
	b := startClusterHost(t, nc, 0, "b", func(o *host.Options) { o.Clock, o.SleepAfter = clk, 10*time.Second })
	cb := b.client("cb")
	session, chat := b.newSession(cb, "unused", nil)
	send(t, cb, chat, "t1", "say one")
	cb.MustCall("unsubscribe", map[string]any{"channel": chat})
	cb.MustCall("unsubscribe", map[string]any{"channel": session})
	cb.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
	if _, on := clusterStatus(t, cb, session); on != "" {
		t.Fatalf("a sleeping session is held by %q", on)
	}
	cb.MustCall("ahpd/setSessionMetadata", map[string]any{"channel": session, "metadata": map[string]any{"k": "v"}})
	// (Taken, it may hold its turns again, read back from the journal:
	// awake, and falling asleep as any quiet session does.)
	if _, on := clusterStatus(t, cb, session); on != "b" {
		t.Fatalf("after labelling it: held by %q, want b", on)
	}
	b.h.Balance()
	if _, on := clusterStatus(t, cb, session); on != "b" {
		t.Fatal("a lease just taken was given up")
	}
	clk.Advance(time.Minute)
	b.h.Balance()
	if st, on := clusterStatus(t, cb, session); st != "inactive" || on != "" {
		t.Fatalf("after a minute unused: %s on %q, want inactive on none", st, on)
	}
}

// TestClusterRelays: the holder keeps a relay for each connection that
// forwards to it; the relay goes when that connection ends (a note from
// its host) or when it has been idle ten minutes (its host may have died
// without a word), and a later request opens another.
func TestClusterRelays(t *testing.T) {
	t.Parallel()
	nc := clustertest.Start(t, 1)
	clk := clock.NewFake(time.Now())
	a := startClusterHost(t, nc, 0, "a")
	closed := make(chan struct{}, 1)
	b := startClusterHost(t, nc, 0, "b", func(o *host.Options) {
		o.Clock = clk
		host.WithRelayClosed(o, closed)
	})
	ca := a.client("ca")
	session := "ahp-session:/relayed"
	ca.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script", "workingDirectories": []string{"file://" + b.work},
	})
	if n := b.h.Relays(); n != 1 {
		t.Fatalf("b keeps %d relays after a forwarded request, want 1", n)
	}
	ca.MustCall("ahpd/sessionStatus", map[string]any{"channel": session})
	if n := b.h.Relays(); n != 1 {
		t.Fatalf("b keeps %d relays after a second request of the same connection, want 1", n)
	}
	clk.Advance(11 * time.Minute)
	b.h.Balance()
	select {
	case <-closed:
	case <-time.After(hosttest.Timeout):
		t.Fatal("the idle relay did not close")
	}
	if n := b.h.Relays(); n != 0 {
		t.Fatalf("b keeps %d relays idle for eleven minutes, want 0", n)
	}
	if st, on := clusterStatus(t, ca, session); st != "active" || on != "b" {
		t.Fatalf("after the relay went: %s on %q", st, on)
	}
	if n := b.h.Relays(); n != 1 {
		t.Fatalf("b keeps %d relays after a new request, want 1", n)
	}
	// The connection ending closes its relay.
	ca.Close()
	select {
	case <-closed:
	case <-time.After(hosttest.Timeout):
		t.Fatal("the relay did not close after its connection ended")
	}
	if n := b.h.Relays(); n != 0 {
		t.Fatalf("b keeps %d relays after the connection ended, want 0", n)
	}
}

// tickURI is the automation tickEverySecond declares.
const tickURI = "ahp-automation:/tick"

// tickEverySecond declares an automation running a turn in folder every
// second, as each host of a cluster sharing one config does.
func tickEverySecond(folder string) []automations.Declared {
	provider := "script"
	return []automations.Declared{{Resource: tickURI, Definition: protocol.AutomationDefinition{
		Title:   "tick every second",
		Message: protocol.Message{Text: "say tick", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Session: protocol.AutomationSessionTemplate{Provider: &provider, WorkingDirectories: []protocol.URI{"file://" + folder}},
		Enabled: true,
		Triggers: []protocol.AutomationTrigger{&protocol.AutomationScheduleTrigger{ID: "tick",
			Schedule: protocol.AutomationSchedule{Expression: "* * * * * *", TimeZone: "UTC"}}},
	}}}
}

// scheduling is two hosts declaring tickEverySecond on one node, the
// schedules' clock fake: a takes the schedules first; b's host clock is
// fake too, for when it asks for them again. Their clients watch the
// automations' catalogue.
type scheduling struct {
	clk, hostClock *clock.Fake
	a, b           *clusterHost
	ca, cb         *hosttest.Client
}

func startScheduling(t *testing.T) *scheduling {
	t.Helper()
	nc := clustertest.Start(t, 1)
	sc := &scheduling{clk: automations.NewFakeClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)), hostClock: clock.NewFake(time.Now())}
	shared := t.TempDir()
	declared := tickEverySecond(shared)
	declare := func(o *host.Options) { o.Automations.Clock, o.Automations.Declared = sc.clk, declared }
	sc.a = startClusterHostReaching(t, nc, 0, "a", shared, declare)
	sc.b = startClusterHostReaching(t, nc, 0, "b", shared, declare, func(o *host.Options) { o.Clock = sc.hostClock })
	sc.ca, sc.cb = sc.a.client("ca"), sc.b.client("cb")
	sc.ca.Subscribe(automations.CatalogueURI)
	sc.cb.Subscribe(automations.CatalogueURI)
	return sc
}

// TestClusterSchedulesRunOnce: hosts declaring the same scheduled
// automation, as a cluster's hosts sharing one config do, run each of its
// occurrences once, on the host holding the schedules' lease; when that
// host stops, another takes the schedules on.
func TestClusterSchedulesRunOnce(t *testing.T) {
	t.Parallel()
	sc := startScheduling(t)
	clk, a, b, hostClock, ca, cb := sc.clk, sc.a, sc.b, sc.hostClock, sc.ca, sc.cb
	const uri = tickURI
	runs := func() (int, int) {
		return completedRuns(ca.State(automations.CatalogueURI), uri), completedRuns(cb.State(automations.CatalogueURI), uri)
	}
	for i := 1; i <= 2; i++ {
		clk.Advance(time.Second)
		ca.WaitState(automations.CatalogueURI, fmt.Sprintf("run %d on a", i), func(st protocol.ChannelState) bool {
			return completedRuns(st, uri) == i
		})
	}
	if na, nb := runs(); na != 2 || nb != 0 {
		t.Fatalf("runs on a and b: %d and %d, want 2 and 0 (a took the schedules first)", na, nb)
	}
	// a stops, giving the schedules' lease up; b takes them at its next
	// residency check.
	ca.Close()
	a.stop()
	hostClock.Advance(time.Minute)
	b.h.Balance()
	clk.Advance(time.Second)
	cb.WaitState(automations.CatalogueURI, "a run on b", func(st protocol.ChannelState) bool {
		return completedRuns(st, uri) == 1
	})
}

// TestClusterScheduleHandoverLosesNoSecond: a schedule every second while
// its lease moves late: the host running it stops, a second comes due
// with nobody running the schedules, and the other host takes them only
// after. That second runs once, on the host that took them (it claims the
// occurrence it let pass), and every second after too: over five seconds,
// five runs, none on both hosts.
func TestClusterScheduleHandoverLosesNoSecond(t *testing.T) {
	t.Parallel()
	sc := startScheduling(t)
	clk, a, b, hostClock, ca, cb := sc.clk, sc.a, sc.b, sc.hostClock, sc.ca, sc.cb
	const uri = tickURI
	for i := 1; i <= 2; i++ {
		clk.Advance(time.Second)
		ca.WaitState(automations.CatalogueURI, fmt.Sprintf("run %d on a", i), func(st protocol.ChannelState) bool {
			return completedRuns(st, uri) == i
		})
	}
	// a stops; second 3 comes due before b takes the schedules. b looks
	// again at the second it let pass as its scheduler next wakes (second
	// 4), and runs both.
	ca.Close()
	a.stop()
	clk.Advance(time.Second)
	hostClock.Advance(time.Minute) // (b's own residency check may take them first)
	b.h.Balance()
	takenBy := time.Now().Add(hosttest.Timeout)
	for !b.h.RunsSchedules() {
		if time.Now().After(takenBy) {
			t.Fatal("b never took the schedules")
		}
		runtime.Gosched()
	}
	for i, want := range []int{2, 3} {
		clk.Advance(time.Second)
		cb.WaitState(automations.CatalogueURI, fmt.Sprintf("%d runs on b by second %d", want, 4+i), func(st protocol.ChannelState) bool {
			return completedRuns(st, uri) >= want
		})
	}
	if nb := completedRuns(cb.State(automations.CatalogueURI), uri); nb != 3 {
		t.Fatalf("b ran %d, want seconds 3, 4 and 5", nb)
	}
}

// TestClusterFailoverTenTimes: on a three-node cluster, the hosts on its
// nodes in turn, a session fails over ten times, each time
// to a host started before the holder it takes over from wrote its turns,
// whose clock reads 2001: its own serverSeqs are below everything the
// session's journal came to hold. Each holder runs a turn and crashes,
// the next message wakes the session on the next host from the
// shared journal and record alone (each host's script transcripts are its
// own, so a turn read from a dead host's would be lost), every turn
// completed before a crash is there after it, and the session's journal
// numbers its actions rising across all the hosts.
func TestClusterFailoverTenTimes(t *testing.T) {
	t.Parallel()
	nc := clustertest.Start(t, 3)
	shared := t.TempDir()
	w := startClusterHost(t, nc, 0, "w") // the watcher's, reaching no session's folder
	holder := startClusterHostReaching(t, nc, 1, "h00", shared)
	cw := w.client("cw")
	session := "ahp-session:/tenfold"
	chat := protocol.DefaultChatURI(session)
	cw.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + shared}})
	startTakenRemote(t, cw, holder, session, chat, "t00", "say turn 0")
	cw.Subscribe(session)
	cw.Subscribe(chat)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	freed, err := w.member.Freed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The next holders start now, each taking the session when those
	// before it are gone (the least id of the hosts reaching its folder).
	var next []*clusterHost
	for round := 1; round <= 10; round++ {
		past := clock.NewFake(time.Date(2001, 1, 1, 0, 0, round, 0, time.UTC))
		next = append(next, startClusterHostReaching(t, nc, round%3, fmt.Sprintf("h%02d", round), shared, func(o *host.Options) { o.Clock = past }))
	}
	want := []string{"turn 0"}
	for round := 1; round <= 10; round++ {
		next := next[round-1]
		send(t, cw, chat, fmt.Sprintf("u%02d", round), "say more") // the journal grows past the next holder's start
		want = append(want, "more")
		holder.crash()
		for id := range freed {
			if id == "tenfold" {
				break
			}
		}
		turn := fmt.Sprintf("turn %d", round)
		st := send(t, cw, chat, fmt.Sprintf("t%02d", round), "say "+turn)
		if _, on := clusterStatus(t, cw, session); on != next.member.HostID() {
			t.Fatalf("round %d: the session runs on %q, want %s", round, on, next.member.HostID())
		}
		want = append(want, turn)
		var said []string
		for _, tn := range st.Turns {
			said = append(said, strings.TrimSpace(text(tn.ResponseParts)))
		}
		if !slices.Equal(said, want) {
			t.Fatalf("round %d: the turns say %q, want %q", round, said, want)
		}
		holder = next
	}
	list, _ := journaled(t, holder.j, session)
	for i := 1; i < len(list); i++ {
		if list[i].ServerSeq <= list[i-1].ServerSeq {
			t.Fatalf("the session's journal goes from serverSeq %d to %d (entry %d of %d)", list[i-1].ServerSeq, list[i].ServerSeq, i, len(list))
		}
	}
	fresh := holder.client("fresh")
	fresh.Subscribe(chat)
	sameState(t, cw.State(chat), fresh.State(chat))
}
