package clustertest

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A message published on one node reaches a subscriber on another, a
// replicated bucket written through one node is read through another, and
// it stays writable with one node of three stopped.
func TestThreeNodesShareMessagesAndJetStream(t *testing.T) {
	c := Start(t, 3)
	ctx := WaitContext(t)
	a, z := c.Connect(0), c.Connect(2)

	sub, err := z.SubscribeSync("probe")
	if err != nil {
		t.Fatal(err)
	}
	if err := z.Flush(); err != nil {
		t.Fatal(err)
	}
	// Interest crosses the routes asynchronously: publish until it arrives.
	got := make(chan *nats.Msg, 1)
	go func() {
		m, err := sub.NextMsg(10 * time.Second)
		if err == nil {
			got <- m
		}
		close(got)
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		if err := a.Publish("probe", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		select {
		case m, ok := <-got:
			if !ok || string(m.Data) != "hi" {
				t.Fatalf("node 2 got %v, %v", m, ok)
			}
			break wait
		case <-tick.C:
		}
	}

	jsA, _ := jetstream.New(a)
	jsZ, _ := jetstream.New(z)
	kv, err := jsA.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "PROBE", Replicas: 3})
	if err != nil {
		t.Fatalf("R3 bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	kvZ, err := jsZ.KeyValue(ctx, "PROBE")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kvZ.Get(ctx, "k"); err != nil || string(e.Value()) != "v1" {
		t.Fatalf("read through node 2: %v, %v", e, err)
	}

	c.Stop(1)
	if _, err := kvZ.Put(ctx, "k", []byte("v2")); err != nil {
		t.Fatalf("put with a node stopped: %v", err)
	}
	c.Restart(1)
	if c.Server(1) == nil {
		t.Fatal("node 1 not back")
	}
}

// Clients without the cluster's credentials are refused.
func TestClientsNeedCredentials(t *testing.T) {
	c := Start(t, 1)
	_, err := nats.Connect(c.URL(0), nats.UserInfo(User, "wrong"))
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: %v, want an authorization error", err)
	}
}

// BenchmarkStart measures how long a 3-node cluster takes to be ready
// (routes up, JetStream meta leader elected).
func BenchmarkStart(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		c := Start(b, 3)
		total += time.Since(start)
		c.shutdown() // now, not at the end: iterations must not pile up
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/start")
}
