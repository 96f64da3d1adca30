package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/internal/testwait"
)

// Hosts lists every live host with what it announced; the load follows
// the leases it holds at its next heartbeat.
func TestHostsListsLiveHosts(t *testing.T) {
	c := clustertest.Start(t, 3)
	// Their clocks stand still, so nothing renews the records: a TTL of
	// a second let a loaded machine expire host-b's before it was listed.
	// The heartbeat's interval is the lease TTL's third, as before.
	const hostTTL = 30 * time.Second
	a := join(t, c, 0, "host-a", true, Config{Labels: map[string]string{LabelRepos: "/srv/repos"}, Addr: "10.0.0.1:7700", HostTTL: hostTTL})
	join(t, c, 2, "host-b", true, Config{HostTTL: hostTTL})

	hosts, err := a.Hosts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 2 || hosts[0].ID != "host-a" || hosts[1].ID != "host-b" {
		t.Fatalf("hosts = %+v, want host-a and host-b", hosts)
	}
	if h := hosts[0]; h.Labels[LabelRepos] != "/srv/repos" || h.Addr != "10.0.0.1:7700" || !h.StartedAt.Equal(t0) || h.Load != 0 {
		t.Errorf("host-a's record = %+v", h)
	}

	for _, s := range []string{"s1", "s2"} {
		if _, err := a.Acquire(ctx(t), s); err != nil {
			t.Fatal(err)
		}
	}
	w := watchKey(t, a.hosts, "host-a")
	waitPut(t, w) // the current record
	a.clk.Advance(a.interval())
	waitPut(t, w) // the heartbeat's
	hosts, err = a.Hosts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if hosts[0].Load != 2 || !hosts[0].RenewedAt.Equal(t0.Add(a.interval())) {
		t.Errorf("after a heartbeat host-a's record = %+v, want load 2 renewed at +%v", hosts[0], a.interval())
	}
}

// A host that stops its heartbeat drops out of the list within its TTL; a
// host that keeps it stays.
func TestSilentHostDisappears(t *testing.T) {
	c := clustertest.Start(t, 3)
	silent := join(t, c, 0, "silent", true, Config{}) // its clock never moves
	// A record that outlives any pause of its heartbeat's on a loaded
	// machine: what is tested is the silent one going, not this staying.
	alive := join(t, c, 1, "alive", false, Config{HostTTL: 30 * time.Second})
	w := watchKey(t, alive.hosts, "silent")
	took := waitGone(t, w)
	t.Logf("the silent host's record expired %v after the watch began (TTL %v)", took, testTTL)
	// The watch can see the expiry a moment before a new listing does (a
	// loaded machine, a replicated bucket): the listing follows.
	var hosts []Host
	for deadline := time.Now().Add(testwait.Hang); ; {
		var err error
		if hosts, err = alive.Hosts(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if len(hosts) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // nothing to wait on: the server's expiry has no second event
	}
	if len(hosts) != 1 || hosts[0].ID != "alive" {
		t.Fatalf("hosts = %+v, want only alive", hosts)
	}
	_ = silent
}

// A live host's id cannot be taken by another; once it closes, its id is
// free at once.
func TestHostIDIsUnique(t *testing.T) {
	c := clustertest.Start(t, 1)
	a := join(t, c, 0, "dup", false, Config{})
	_, err := Join(ctx(t), c.Connect(0), Config{HostID: "dup", HostTTL: testTTL, LeaseTTL: testTTL})
	if !errors.Is(err, ErrHostIDInUse) {
		t.Fatalf("second Join(dup) = %v, want ErrHostIDInUse", err)
	}
	if err := a.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	join(t, c, 0, "dup", false, Config{})
}

func TestJoinRefusesBadConfig(t *testing.T) {
	c := clustertest.Start(t, 1)
	nc := c.Connect(0)
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[string(rune('a'+i%26))+string(rune('a'+i/26))] = "x"
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"no host id", Config{}, ErrBadName},
		{"host id with a dot", Config{HostID: "a.b"}, ErrBadName},
		{"host id of 65 bytes", Config{HostID: string(make([]byte, 65))}, ErrBadName},
		{"prefix with a space", Config{HostID: "h", Prefix: "a b"}, ErrBadConfig},
		{"TTL under a second", Config{HostID: "h", LeaseTTL: 500 * time.Millisecond}, ErrBadConfig},
		{"TTL not whole seconds", Config{HostID: "h", HostTTL: 1500 * time.Millisecond}, ErrBadConfig},
		{"negative replicas", Config{HostID: "h", Replicas: -1}, ErrBadConfig},
		{"too many labels", Config{HostID: "h", Labels: many}, ErrBadConfig},
		{"huge label", Config{HostID: "h", Labels: map[string]string{"k": string(make([]byte, MaxLabelBytes))}}, ErrBadConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Join(ctx(t), nc, tc.cfg)
			if !errors.Is(err, tc.want) {
				if m != nil {
					_ = m.Close(ctx(t))
				}
				t.Fatalf("Join = %v, want %v", err, tc.want)
			}
			if len(err.Error()) > 200 {
				t.Errorf("error of %d bytes echoes the input", len(err.Error()))
			}
		})
	}
}

// Dial reaches the cluster with a journal config's credentials, and
// refuses to guess a server.
func TestDial(t *testing.T) {
	c := clustertest.Start(t, 1)
	nc, err := Dial(ctx(t), c.Config(0), "ahpd cluster test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m, err := Join(ctx(t), nc, Config{HostID: "h", HostTTL: testTTL, LeaseTTL: testTTL})
	if err != nil {
		t.Fatalf("Join over Dial's connection: %v", err)
	}
	if err := m.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	bad := c.Config(0)
	bad.Password = "wrong"
	if nc, err := Dial(ctx(t), bad, "x"); err == nil {
		nc.Close()
		t.Fatal("Dial with a wrong password succeeded")
	}
	bad.URL = ""
	if _, err := Dial(ctx(t), bad, "x"); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("Dial without a URL = %v, want ErrBadConfig", err)
	}
}

// Healthy says whether a member is in the cluster: joined, it is; with its
// connection gone it is not, nor once it has left.
func TestHealthy(t *testing.T) {
	c := clustertest.Start(t, 1)
	a := join(t, c, 0, "a", true, Config{})
	if err := a.Healthy(); err != nil {
		t.Fatalf("a member just joined: Healthy = %v", err)
	}
	b := join(t, c, 0, "b", true, Config{})
	b.nc.Close()
	if err := b.Healthy(); err == nil || !strings.Contains(err.Error(), "NATS") {
		t.Errorf("a member without its connection: Healthy = %v", err)
	}
	if err := a.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := a.Healthy(); err == nil || !strings.Contains(err.Error(), "left") {
		t.Errorf("a member that left: Healthy = %v", err)
	}
}
