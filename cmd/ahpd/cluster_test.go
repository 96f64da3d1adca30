package main

import (
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/cluster/clustertest"
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
