package main

import (
	"context"
	"syscall"
	"time"

	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahpd/ahpd/protocol"
)

// freeAddrs returns n distinct loopback ports nobody listens on, below
// the range the kernel hands out for outgoing connections, so that no
// test's outgoing connection takes one before its daemon listens (as
// clustertest's freePort); each is held until all are chosen.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for tries := 0; len(out) < n; tries++ {
		if tries == 200*n {
			t.Fatal("no free ports in 20000-32767")
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(32768-20000)))
		if err != nil {
			continue // taken
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}

// TestDaemonsRunTheirOwnNATS: three daemons, each running a NATS node of
// its own that routes to the others', form a cluster with nothing else
// installed: a session made through one is watched through another, and
// when the first stops (its NATS node with it), the next message wakes the
// session on another host, every turn there.
func TestDaemonsRunTheirOwnNATS(t *testing.T) {
	shared := t.TempDir()
	envs, procs, clients := startOwnNATSHosts(t, "--lease-ttl", "1s")
	ca := connect(t, procs["a"], envs["a"].token(t), "ca")
	session := "ahp-session:/own-nats"
	chat := protocol.DefaultChatURI(session)
	ca.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script", "workingDirectories": []string{"file://" + shared},
	})
	ca.Subscribe(session)
	ca.Subscribe(chat)
	send(t, ca, chat, "t1", "say one")
	if st, on := statusOf(t, ca, session); st != "active" || on != "a" {
		t.Fatalf("status = %s on %q, want active on a", st, on)
	}

	cb := connect(t, procs["b"], envs["b"].token(t), "cb")
	cb.Subscribe(chat)
	waitTurns(cb, chat, 1)
	send(t, cb, chat, "t2", "say two")
	waitTurns(ca, chat, 2)

	procs["a"].terminate() // and its NATS node
	awaitStreams(t, clients["b"])
	send(t, cb, chat, "t3", "say three")
	if st, on := statusOf(t, cb, session); st != "active" || on != "b" {
		t.Fatalf("status after a stopped = %s on %q, want active on b", st, on)
	}
	cs := cb.State(chat).(*protocol.ChatState)
	var said []string
	for _, turn := range cs.Turns {
		said = append(said, strings.TrimSpace(text(turn.ResponseParts)))
	}
	if fmt.Sprint(said) != "[one two three]" {
		t.Fatalf("turns said %v", said)
	}
	cc := connect(t, procs["c"], envs["c"].token(t), "cc")
	cc.Subscribe(chat)
	waitTurns(cc, chat, 3)
	// The hosts stop in turn, the last with no NATS quorum left: it does
	// not wait long for a cluster that cannot answer.
	cc.Close()
	cb.Close()
	procs["b"].terminate()
	procs["c"].signal(syscall.SIGTERM)
	if code := procs["c"].wait(30 * time.Second); code != 0 {
		t.Errorf("the last host exited with %d", code)
	}
}

// awaitStreams waits until the NATS node at addr makes a consumer of each
// of the cluster's streams again (the journal's, and the leases', hosts'
// and records' buckets): after a node of the cluster went, each elects a
// new leader.
func awaitStreams(t *testing.T, addr string) {
	t.Helper()
	nc, err := nats.Connect("nats://"+addr, nats.UserInfo("ahpd", "node-test-pass"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(startTimeout)
	for _, name := range []string{"AHPD_JOURNAL", "KV_ahpd_leases", "KV_ahpd_hosts", "KV_ahpd_sessions"} {
		for {
			// An attempt is cut short and made again: a request lost while
			// the cluster elects its leaders is never answered.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := js.Stream(ctx, name)
			if err == nil {
				var cons jetstream.Consumer
				if cons, err = st.CreateConsumer(ctx, jetstream.ConsumerConfig{MemoryStorage: true, AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Second}); err == nil {
					_ = st.DeleteConsumer(ctx, cons.CachedInfo().Name)
				}
			}
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream %s did not answer again in %v: %v", name, startTimeout, err)
			}
		}
	}
}

// TestNATSNodeSettings refuses a node that cannot work.
func TestNATSNodeSettings(t *testing.T) {
	e := newEnv(t)
	creds := writeConfig(t, e, "nats: {user: u, password: p}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-listen", "127.0.0.1:4222"}, "would take anyone"},
		{[]string{"--config", creds, "--nats-listen", "127.0.0.1:4222", "--nats", "nats://x:4222"}, "not both"},
		{[]string{"--config", creds, "--nats-listen", "nope"}, "is not host:port"},
		{[]string{"--config", creds, "--nats-cluster", "127.0.0.1:6222"}, "need --nats-listen"},
		{[]string{"--config", creds, "--nats-listen", "127.0.0.1:4222", "--nats-routes", "nats://127.0.0.1:6223"}, "needs --nats-cluster"},
		{[]string{"--config", creds, "--nats-listen", "127.0.0.1:4222", "--nats-cluster", "127.0.0.1:6222", "--nats-routes", "::"}, "is not a route URL"},
	} {
		args := append([]string{"--state-dir", e.state}, tc.args...)
		if _, err := parseConfig(args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// startOwnNATSHosts starts three daemons a, b and c, each running a NATS
// node of its own routed to the others' (replicas 3), with args more, and
// waits until each listens.
func startOwnNATSHosts(t *testing.T, args ...string) (map[string]*env, map[string]*proc, map[string]string) {
	t.Helper()
	return startOwnNATSHostsWith(t, func(string) string { return "nats: {user: ahpd, password: node-test-pass}\ncluster: {replicas: 3}\n" }, args...)
}

// startOwnNATSHostsWith is startOwnNATSHosts with each host's config file
// as config gives it.
func startOwnNATSHostsWith(t *testing.T, config func(id string) string, args ...string) (map[string]*env, map[string]*proc, map[string]string) {
	t.Helper()
	ids := []string{"a", "b", "c"}
	clients, routes := map[string]string{}, map[string]string{}
	addrs := freeAddrs(t, 2*len(ids))
	for i, id := range ids {
		clients[id], routes[id] = addrs[2*i], addrs[2*i+1]
	}
	envs, procs := map[string]*env{}, map[string]*proc{}
	for _, id := range ids {
		var others []string
		for _, o := range ids {
			if o != id {
				others = append(others, "nats://"+routes[o])
			}
		}
		e := newEnv(t)
		cfg := writeConfig(t, e, config(id))
		envs[id] = e
		procs[id] = launch(t, e, 0, append([]string{"--listen", "127.0.0.1:0", "--state-dir", e.state, "--config", cfg,
			"--nats-listen", clients[id], "--nats-cluster", routes[id], "--nats-routes", strings.Join(others, ","),
			"--host-id", id, "--log-level", "debug"}, args...)...)
	}
	for _, id := range ids {
		procs[id].awaitListening()
	}
	return envs, procs, clients
}

// TestOwnNATSHostsStopInTime: three daemons, each running a NATS node of
// its own and holding a session with a turn done, stop one after the
// other; each stops within its shutdown grace plus 3 s, the last too,
// which has no JetStream quorum left to release its leases or remove its
// record with (docs/CLUSTER.md). The last says what it left undone.
func TestOwnNATSHostsStopInTime(t *testing.T) {
	const grace = time.Second
	envs, procs, _ := startOwnNATSHosts(t, "--shutdown-grace", grace.String())
	for _, id := range []string{"a", "b", "c"} {
		c := connect(t, procs[id], envs[id].token(t), "c"+id)
		session := "ahp-session:/stop-" + id
		chat := protocol.DefaultChatURI(session)
		// In the host's own folder, which only it reaches: held there.
		c.MustCall("createSession", map[string]any{
			"channel": session, "provider": "script", "workingDirectories": []string{"file://" + envs[id].work},
		})
		c.Subscribe(session)
		c.Subscribe(chat)
		send(t, c, chat, "t1", "say one")
		if st, on := statusOf(t, c, session); st != "active" || on != id {
			t.Fatalf("status of %s = %s on %q, want active on %s", session, st, on, id)
		}
		c.Close()
	}
	bound := grace + 3*time.Second
	for _, id := range []string{"a", "b", "c"} {
		start := time.Now()
		procs[id].signal(syscall.SIGTERM)
		code := procs[id].wait(exitTimeout)
		took := time.Since(start)
		t.Logf("host %s stopped in %v (exit %d)", id, took.Round(10*time.Millisecond), code)
		if code != 0 {
			t.Errorf("host %s exited with %d", id, code)
		}
		if took > bound {
			t.Errorf("host %s took %v to stop, over its grace %v + 3 s; stderr:\n%s", id, took, grace, procs[id].stderr.String())
		}
	}
}

// TestOwnNATSHolderKilled: three daemons, each running a NATS node of its
// own; the one holding a session is killed with SIGKILL, its node with it
// (maybe the leader of the leases' bucket). A command for the session
// sent through another host before the lease runs out fails at once with
// the error docs/CLUSTER.md promises: the holder does not answer, and the
// session moves once its lease runs out. It does not wait out the time a
// claim may take (10 s) for an answer that cannot come.
func TestOwnNATSHolderKilled(t *testing.T) {
	// The lease outlives the test's question by far: its answer is the
	// one for a holder dead and its lease still running.
	envs, procs, _ := startOwnNATSHosts(t, "--lease-ttl", "60s")
	ca := connect(t, procs["a"], envs["a"].token(t), "ca")
	session := "ahp-session:/killed"
	chat := protocol.DefaultChatURI(session)
	ca.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script", "workingDirectories": []string{"file://" + envs["a"].work},
	})
	ca.Subscribe(session)
	ca.Subscribe(chat)
	send(t, ca, chat, "t1", "say one")
	cb := connect(t, procs["b"], envs["b"].token(t), "cb")
	if st, on := statusOf(t, cb, session); st != "active" || on != "a" {
		t.Fatalf("status through b = %s on %q, want active on a", st, on)
	}
	procs["a"].signal(syscall.SIGKILL)
	procs["a"].wait(exitTimeout)
	start := time.Now()
	_, rerr := cb.Call("fetchTurns", map[string]any{"channel": chat})
	took := time.Since(start)
	t.Logf("the command through b after a was killed failed in %v: %v", took.Round(10*time.Millisecond), rerr)
	if rerr == nil || !strings.Contains(rerr.Message, "host a, which runs the session, does not answer") ||
		!strings.Contains(rerr.Message, "once its lease runs out") {
		t.Fatalf("fetchTurns through b after a was killed: %v, want that host a does not answer and the session moves once its lease runs out", rerr)
	}
	// Half the time a claim may take: the answer does not wait for it.
	if limit := 5 * time.Second; took > limit {
		t.Errorf("the answer took %v, over %v", took, limit)
	}
}
