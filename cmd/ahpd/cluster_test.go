package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestDaemonsJoinTheCluster: two daemons on one NATS, each with --host-id
// and --labels, are in the cluster's host registry while they run, with
// their labels and where they listen; one that stops leaves it.
func TestDaemonsJoinTheCluster(t *testing.T) {
	c := clustertest.Start(t, 1)
	nats := []string{"--nats", c.URL(0)}
	config := func(e *env) string {
		return writeConfig(t, e, "nats: {user: "+clustertest.User+", password: "+clustertest.Password+"}\n")
	}
	ea, eb := newEnv(t), newEnv(t)
	a := serveDaemon(t, ea, append(nats, "--config", config(ea), "--host-id", "a", "--labels", "repos=/srv/a,/srv/b,zone=x")...)
	b := serveDaemon(t, eb, append(nats, "--config", config(eb), "--host-id", "b")...)

	obs, err := cluster.Join(clustertest.WaitContext(t), c.Connect(0), cluster.Config{HostID: "observer"})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close(clustertest.WaitContext(t))
	hosts, err := obs.Hosts(clustertest.WaitContext(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hosts {
		ids = append(ids, h.ID)
		if h.ID == "a" && (h.Labels["repos"] != "/srv/a,/srv/b" || h.Labels["zone"] != "x" || h.Addr != a.addr) {
			t.Errorf("host a: %+v", h)
		}
	}
	if !slices.Equal(ids, []string{"a", "b", "observer"}) {
		t.Fatalf("hosts %v", ids)
	}
	b.terminate()
	hosts, err = obs.Hosts(clustertest.WaitContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 2 || hosts[0].ID != "a" {
		t.Errorf("after b stopped: %+v", hosts)
	}
}

// TestClusterSettings refuses a host id without a NATS to share, and
// labels that are not key=value.
func TestClusterSettings(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--host-id", "a"}, "--host-id needs --nats"},
		{[]string{"--nats", "nats://127.0.0.1:4222", "--host-id", "a", "--labels", "oops"}, "is not key=value"},
		{[]string{"--config", writeConfig(t, e, "cluster: {labels: {a: b}}\n")}, "labels without a hostId"},
	} {
		args := append([]string{"--state-dir", e.state}, tc.args...)
		if _, err := parseConfig(args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		err  bool
	}{
		{"", map[string]string{}, false},
		{"zone=x", map[string]string{"zone": "x"}, false},
		{"repos=/a,/b,zone=x", map[string]string{"repos": "/a,/b", "zone": "x"}, false},
		{"empty=", map[string]string{"empty": ""}, false},
		{"/a,repos=/b", nil, true},
		{"=x", nil, true},
	} {
		got, err := parseLabels(tc.in)
		if (err != nil) != tc.err || (!tc.err && !maps.Equal(got, tc.want)) {
			t.Errorf("parseLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestThreeHostsShareSessions: three daemons on a three-node NATS cluster,
// each on its own node. A client of A makes a session in a folder only B
// and C reach: it is placed on B. Turns sent through A run on B, and A's
// client sees the same stream as B's. B is killed with SIGKILL mid-turn:
// its lease runs out and the session shows inactive; the next message,
// through A, wakes it on C, where the cut turn ends as the host's stop
// and every turn is still there.
func TestThreeHostsShareSessions(t *testing.T) {
	tr := startTrio(t)
	envs, procs := tr.envs, tr.procs
	ca, cb, session, chat := tr.sessionOnB(t, "shared")
	if r := cli(t, envs["a"], "status", "shared"); r.code != 0 || r.stdout != "active on host b\n" {
		t.Errorf("ahpd status through A: %d %q %q, want \"active on host b\"", r.code, r.stdout, r.stderr)
	}
	from := len(ca.Messages())
	fromB := len(cb.Messages())
	send(t, ca, chat, "t2", "say two\nwrite two.txt 2")
	// Waited for in the messages each client recorded, which may come a
	// moment after the state it reduced them into.
	for _, c := range []*hosttest.Client{ca, cb} {
		turnEnded(t, c, chat, "t2")
	}
	if a, b := chatActions(ca.Messages()[from:], chat), chatActions(cb.Messages()[fromB:], chat); !slices.Equal(a, b) {
		t.Fatalf("A's client saw\n%v\nB's saw\n%v", a, b)
	}

	// B dies mid-turn.
	freed := tr.freed(t)
	streamLong(ca, chat, "t3", 200, 20)
	killed := time.Now()
	procs["b"].signal(syscall.SIGKILL)
	procs["b"].wait(exitTimeout)
	for id := range freed {
		if id == "shared" {
			break
		}
	}
	if st, on := statusOf(t, ca, session); st != "inactive" || on != "" {
		t.Fatalf("status after B died = %s on %q, want inactive", st, on)
	}
	send(t, ca, chat, "t4", "say four")
	t.Logf("from B's death to the next turn's end on C: %v", time.Since(killed))
	if st, on := statusOf(t, ca, session); st != "active" || on != "c" {
		t.Fatalf("status after the next message = %s on %q, want active on c", st, on)
	}
	cs := ca.State(chat).(*protocol.ChatState)
	var ids []string
	for _, turn := range cs.Turns {
		ids = append(ids, turn.ID+":"+string(turn.State))
	}
	if want := []string{"t1:complete", "t2:complete", "t3:error", "t4:complete"}; !slices.Equal(ids, want) {
		t.Fatalf("turns %v, want %v", ids, want)
	}
	if msg := cs.Turns[2].ErrorPart(); msg == nil || !strings.Contains(string(msg.Error.ErrorType), "hostStopped") {
		t.Fatalf("the cut turn ended with %+v, want hostStopped", msg)
	}
	cc := connect(t, procs["c"], envs["c"].token(t), "cc")
	cc.Subscribe(chat)
	got, want := cc.State(chat).(*protocol.ChatState), cs
	if len(got.Turns) != len(want.Turns) || text(got.Turns[1].ResponseParts) != text(want.Turns[1].ResponseParts) || text(got.Turns[2].ResponseParts) != text(want.Turns[2].ResponseParts) {
		t.Fatalf("C's client and A's differ:\nC %+v\nA %+v", got.Turns, want.Turns)
	}
}

// trio is three daemons on a three-node NATS cluster, each on its own
// node, with a 1 s lease: A reaches only its own folder, B and C a shared
// one too.
type trio struct {
	nc     *clustertest.Cluster
	shared string
	envs   map[string]*env
	procs  map[string]*proc
}

func startTrio(t *testing.T) *trio {
	t.Helper()
	tr := &trio{nc: clustertest.Start(t, 3), shared: t.TempDir(), envs: map[string]*env{}, procs: map[string]*proc{}}
	for i, id := range []string{"a", "b", "c"} {
		e := newEnv(t)
		repos := e.work
		if id != "a" {
			repos += "," + tr.shared
		}
		cfg := writeConfig(t, e, "nats: {user: "+clustertest.User+", password: "+clustertest.Password+"}\ncluster: {replicas: 3}\n")
		tr.envs[id] = e
		tr.procs[id] = serveDaemon(t, e, "--config", cfg, "--nats", tr.nc.URL(i), "--host-id", id,
			"--labels", "repos="+repos, "--lease-ttl", "1s", "--log-level", "debug")
	}
	return tr
}

// sessionOnB makes session id in the shared folder through a client of
// A: it is placed on B (the least id of the hosts reaching it), its first
// turn runs there, and clients of A and B watch it.
func (tr *trio) sessionOnB(t *testing.T, id string) (ca, cb *hosttest.Client, session, chat string) {
	t.Helper()
	ca = connect(t, tr.procs["a"], tr.envs["a"].token(t), "ca")
	session = "ahp-session:/" + id
	chat = protocol.DefaultChatURI(session)
	ca.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script", "workingDirectories": []string{"file://" + tr.shared},
		"config": map[string]any{"autoApprove": "allow"},
	})
	cb = connect(t, tr.procs["b"], tr.envs["b"].token(t), "cb")
	startTurn(ca, chat, "t1", "say one")
	cb.Wait("B to run the session", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if m.Method == "root/sessionAdded" && strings.Contains(string(m.Params), session) {
				return true
			}
		}
		return false
	})
	for _, c := range []*hosttest.Client{ca, cb} {
		c.Subscribe(session)
		c.Subscribe(chat)
		waitTurns(c, chat, 1)
	}
	if st, on := statusOf(t, ca, session); st != "active" || on != "b" {
		t.Fatalf("status through A = %s on %q, want active on b", st, on)
	}
	return ca, cb, session, chat
}

// freed follows the leases that end in the trio's cluster, by session id,
// as an observer of the cluster.
func (tr *trio) freed(t *testing.T) <-chan string {
	t.Helper()
	obs, err := cluster.Join(clustertest.WaitContext(t), tr.nc.Connect(0), cluster.Config{HostID: "observer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = obs.Close(ctx)
	})
	freed, err := obs.Freed(clustertest.WaitContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return freed
}

// streamLong starts turn turnID in chat through c, parts "say part N"
// lines 20 ms apart, and waits until c has seen more than seen of its
// actions.
func streamLong(c *hosttest.Client, chat, turnID string, parts, seen int) {
	var long strings.Builder
	for i := range parts {
		fmt.Fprintf(&long, "say part %d\nwait 20ms\n", i)
	}
	before := len(chatActions(c.Messages(), chat))
	startTurn(c, chat, turnID, long.String())
	c.Wait(turnID+" to stream", func(msgs []hosttest.Message) bool {
		return len(chatActions(msgs, chat)) > before+seen
	})
}

// statusOf asks for a session's status and the host its _meta names.
func statusOf(t *testing.T, c *hosttest.Client, session string) (string, string) {
	t.Helper()
	var res struct {
		Status string `json:"status"`
		Meta   struct {
			Host string `json:"ahpd.host"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(c.MustCall("ahpd/sessionStatus", map[string]any{"channel": session}), &res); err != nil {
		t.Fatal(err)
	}
	return res.Status, res.Meta.Host
}

// chatActions lists a chat's actions among msgs, as their JSON without
// serverSeq, which each host numbers its own way.
// turnEnded waits until c has recorded the end of chat's turn turnID.
func turnEnded(t *testing.T, c *hosttest.Client, chat, turnID string) {
	t.Helper()
	c.Wait(turnID+" to end", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.Channel == chat {
				if a, ok := e.Action.(*protocol.ChatTurnCompleteAction); ok && a.TurnID == turnID {
					return true
				}
			}
		}
		return false
	})
}

func chatActions(msgs []hosttest.Message, chat string) []string {
	var out []string
	for _, m := range msgs {
		if e := m.Envelope; e != nil && e.Channel == chat && e.RejectionReason == nil {
			data, _ := json.Marshal(e.Action)
			out = append(out, string(data))
		}
	}
	return out
}
