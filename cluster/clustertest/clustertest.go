// Package clustertest starts a NATS cluster of embedded servers on
// loopback for tests: each node with its own JetStream store directory,
// client and route ports chosen free, routes to every other node, and a
// user and password that clients must present. It is for tests only (the
// cluster's, the host's and the daemon's); everything it starts is shut
// down when the test ends.
//
// It owns the servers, not the connections made to them: Connect's are
// closed at cleanup too, but a caller's own connections are the caller's.
package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/journal"
)

// Credentials every node requires of clients.
const (
	User     = "ahpd"
	Password = "cluster-test-pass"
)

// readyTimeout bounds the wait for the nodes to route to each other and
// elect a JetStream meta leader, and a test's step on the cluster: a guard
// against a hang (testwait.Hang), not a budget.
const readyTimeout = testwait.Hang

// Cluster is a running cluster of embedded NATS servers.
type Cluster struct {
	t     testing.TB
	name  string
	nodes []*node
}

type node struct {
	name      string
	dir       string
	port      int // client port
	routePort int
	srv       *server.Server // nil while stopped
}

// Start starts n nodes (n ≥ 1; 3 for a JetStream cluster that survives
// losing one) and waits until they route to each other and JetStream has
// a meta leader. The cluster is shut down when t ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("clustertest: %d nodes", n)
	}
	c := &Cluster{t: t, name: "ahpd-test"}
	root := t.TempDir()
	for i := range n {
		c.nodes = append(c.nodes, &node{
			name:      fmt.Sprintf("n%d", i),
			dir:       filepath.Join(root, fmt.Sprintf("n%d", i)),
			port:      freePort(t),
			routePort: freePort(t),
		})
	}
	t.Cleanup(c.shutdown)
	for i := range c.nodes {
		c.startNode(i)
	}
	c.waitReady()
	return c
}

// freePort returns a loopback port nobody listens on, below the range the
// kernel hands out for outgoing connections: a port from that range (what
// listening on port 0 gives) can be taken, between the pick and the
// node's listen, as the source port of any test's outgoing connection,
// which once left a node unable to listen and a test waiting out its
// timeout on a loaded machine. Ports are tried at random from
// 20000-32767, each checked by listening on it.
func freePort(t testing.TB) int {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(32768-20000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		_ = l.Close()
		return port
	}
	t.Fatal("clustertest: no free port in 20000-32767 after 200 tries")
	return 0
}

// startNode starts node i on its ports and store, routing to the others.
func (c *Cluster) startNode(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	var routes []string
	for j, o := range c.nodes {
		if j != i {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", o.routePort))
		}
	}
	opts := &server.Options{
		ServerName: nd.name,
		Host:       "127.0.0.1",
		Port:       nd.port,
		Username:   User,
		Password:   Password,
		JetStream:  true,
		StoreDir:   nd.dir,
		NoSigs:     true,
		NoLog:      true,
	}
	if len(c.nodes) > 1 {
		opts.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: nd.routePort}
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		c.t.Fatalf("clustertest: node %s: %v", nd.name, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		c.t.Fatalf("clustertest: node %s not ready for connections", nd.name)
	}
	nd.srv = srv
}

// waitReady polls until every running node routes to every other running
// node and JetStream has a meta leader that every running node knows and
// that has every running node's stats.
func (c *Cluster) waitReady() {
	c.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.ready() {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("clustertest: cluster not ready within %v", readyTimeout)
		}
		<-tick.C
	}
}

func (c *Cluster) ready() bool {
	running := 0
	for _, nd := range c.nodes {
		if nd.srv != nil {
			running++
		}
	}
	leader := false
	for _, nd := range c.nodes {
		if nd.srv == nil {
			continue
		}
		if nd.srv.NumRoutes() < running-1 || !nd.srv.JetStreamEnabled() {
			return false
		}
		// The meta leader must have every node's stats, or it cannot
		// place a replicated stream yet ("no suitable peers").
		if running > 1 && nd.srv.JetStreamIsLeader() && len(nd.srv.JetStreamClusterPeers()) == running {
			leader = true
		}
		if running > 1 && !nd.srv.JetStreamIsCurrent() {
			return false
		}
	}
	return leader || running == 1
}

// Nodes is the number of nodes, running or stopped.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// URL is node i's client URL.
func (c *Cluster) URL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].port)
}

// Config is a journal config that reaches node i with the cluster's
// credentials (and only node i, so a test decides which node a client
// talks to).
func (c *Cluster) Config(i int) journal.Config {
	return journal.Config{URL: c.URL(i), User: User, Password: Password}
}

// Connect connects to node i with the journal's connect options and the
// cluster's credentials; the connection is closed when the test ends.
func (c *Cluster) Connect(i int, opts ...nats.Option) *nats.Conn {
	c.t.Helper()
	all := append(journal.ConnectOptions(c.Config(i)), opts...)
	nc, err := nats.Connect(c.URL(i), all...)
	if err != nil {
		c.t.Fatalf("clustertest: connecting to node %d: %v", i, err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// Stop shuts node i down hard (what a killed process would leave: its
// clients cut off, its store kept) and waits for it to be gone.
func (c *Cluster) Stop(i int) {
	nd := c.nodes[i]
	if nd.srv == nil {
		return
	}
	nd.srv.Shutdown()
	nd.srv.WaitForShutdown()
	nd.srv = nil
}

// Restart starts a stopped node i again on its ports and store, and waits
// for the cluster to be whole.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.nodes[i].srv != nil {
		return
	}
	c.startNode(i)
	c.waitReady()
}

// WaitInterest waits until node i knows of a subscriber to subject (on
// any node: interest crosses routes asynchronously), so that a request
// sent through node i finds it.
func (c *Cluster) WaitInterest(i int, subject string) {
	c.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !c.nodes[i].srv.GlobalAccount().SubscriptionInterest(subject) {
		if time.Now().After(deadline) {
			c.t.Fatalf("clustertest: node %d saw no subscriber to %s within %v", i, subject, readyTimeout)
		}
		<-tick.C
	}
}

// Server is node i's server (nil while stopped), for tests that inspect it.
func (c *Cluster) Server(i int) *server.Server { return c.nodes[i].srv }

func (c *Cluster) shutdown() {
	for i := range c.nodes {
		c.Stop(i)
	}
}

// WaitContext is a context for one step of a test on the cluster: long
// enough for a JetStream leader election (a few seconds), cancelled when
// the test ends.
func WaitContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	t.Cleanup(cancel)
	return ctx
}
