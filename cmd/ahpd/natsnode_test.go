package main

import (
	"context"
	"syscall"
	"time"

	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahpd/ahpd/protocol"
)

// freeAddr asks the kernel for a free loopback port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestDaemonsRunTheirOwnNATS: three daemons, each running a NATS node of
// its own that routes to the others', form a cluster with nothing else
// installed: a session made through one is watched through another, and
// when the first stops (its NATS node with it), the next message wakes the
// session on another host, every turn there.
func TestDaemonsRunTheirOwnNATS(t *testing.T) {
	ids := []string{"a", "b", "c"}
	clients, routes := map[string]string{}, map[string]string{}
	for _, id := range ids {
		clients[id], routes[id] = freeAddr(t), freeAddr(t)
	}
	shared := t.TempDir()
	envs, procs := map[string]*env{}, map[string]*proc{}
	for _, id := range ids {
		var others []string
		for _, o := range ids {
			if o != id {
				others = append(others, "nats://"+routes[o])
			}
		}
		e := newEnv(t)
		cfg := writeConfig(t, e, "nats: {user: ahpd, password: node-test-pass}\ncluster: {replicas: 3}\n")
		envs[id] = e
		procs[id] = launch(t, e, 0, "--listen", "127.0.0.1:0", "--state-dir", e.state, "--config", cfg,
			"--nats-listen", clients[id], "--nats-cluster", routes[id], "--nats-routes", strings.Join(others, ","),
			"--host-id", id, "--lease-ttl", "1s")
	}
	for _, id := range ids {
		procs[id].awaitListening()
	}
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

// awaitStreams waits until the NATS node at addr makes a consumer of the
// journal's stream again: after a node of the cluster went, its streams
// elect new leaders.
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
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := js.Stream(ctx, "AHPD_JOURNAL")
		if err == nil {
			var cons jetstream.Consumer
			if cons, err = st.CreateConsumer(ctx, jetstream.ConsumerConfig{MemoryStorage: true, AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Second}); err == nil {
				_ = st.DeleteConsumer(ctx, cons.CachedInfo().Name)
			}
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the NATS cluster did not answer again in a minute: %v", err)
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
