package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/journal"
)

// clusterConfig names this host among others sharing sessions on the
// same NATS (docs/CLUSTER.md).
type clusterConfig struct {
	// HostID names the host in the cluster; "" joins none.
	HostID string `yaml:"hostId"`
	// Labels describe it, for placement (repos=/a,/b) and people. A host
	// with no repos label reaches every folder (repos=/).
	Labels map[string]string `yaml:"labels"`
	// LeaseTTL is how long a session's lease, and the host's record, live
	// without a renewal: how soon a dead host's sessions move (default
	// 15s; whole seconds).
	LeaseTTL time.Duration `yaml:"leaseTTL"`
	// Replicas is how many copies of the journal and the cluster's
	// buckets the NATS cluster keeps (default 1; 3 on a cluster of three
	// or more nodes, to survive losing one).
	Replicas int `yaml:"replicas"`
}

// checkCluster refuses cluster settings that cannot work, before anything
// starts.
func checkCluster(cfg *config) error {
	c := &cfg.Cluster
	if c.HostID == "" {
		if len(c.Labels) > 0 {
			return errors.New("config file: cluster: labels without a hostId")
		}
		return nil
	}
	if cfg.NATS.URL == "" && cfg.NATS.Node.Listen == "" {
		return errors.New("--host-id needs --nats (or --nats-listen): the NATS embedded in one daemon has no other hosts")
	}
	if c.LeaseTTL != 0 && (c.LeaseTTL < time.Second || c.LeaseTTL%time.Second != 0) {
		return errors.New("--lease-ttl: whole seconds, at least 1s")
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return errors.New("config file: cluster: replicas is 1 to 5")
	}
	if cfg.Sessions == "memory" {
		return errors.New("--host-id: a host sharing sessions keeps them in the cluster; --sessions memory keeps none")
	}
	return nil
}

// parseLabels reads --labels: key=value pairs, comma-separated. A piece
// without '=' continues the value before it: repos=/a,/b is one label.
func parseLabels(v string) (map[string]string, error) {
	out := map[string]string{}
	last := ""
	for _, piece := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(piece, "=")
		switch {
		case ok && k != "":
			out[k], last = val, k
		case !ok && last != "":
			out[last] += "," + piece
		case piece != "":
			return nil, fmt.Errorf("--labels: %q is not key=value", limitText(piece, 100))
		}
	}
	return out, nil
}

// joinCluster makes the host a member of the cluster when the config
// names it: it shares sessions with the other hosts from then on. It
// returns the membership (nil for none) and how to leave, after the host
// has closed. The address is fixed once the host listens (SetAddr).
func joinCluster(ctx context.Context, cfg *config, jc journal.Config, log *slog.Logger) (*cluster.Member, func(), error) {
	if cfg.Cluster.HostID == "" {
		return nil, func() {}, nil
	}
	nc, err := cluster.Dial(ctx, jc, "ahpd "+cfg.Cluster.HostID)
	if err != nil {
		return nil, nil, err
	}
	labels := maps.Clone(cfg.Cluster.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if _, ok := labels[cluster.LabelRepos]; !ok {
		labels[cluster.LabelRepos] = "/"
	}
	m, err := cluster.Join(ctx, nc, cluster.Config{
		HostID: cfg.Cluster.HostID, Labels: labels, Addr: cfg.Listen,
		HostTTL: cfg.Cluster.LeaseTTL, LeaseTTL: cfg.Cluster.LeaseTTL, Replicas: cfg.Cluster.Replicas,
		Logger: log.With("part", "cluster"),
	})
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("joining the cluster as %s: %w", cfg.Cluster.HostID, err)
	}
	log.Info("joined the cluster", "hostId", cfg.Cluster.HostID, "labels", labels)
	return m, func() {
		// A cluster that cannot answer (the last node going, with no
		// quorum) is not waited for long: Close asks it once, for a
		// second, and the records and leases expire on their own.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			// The error says what was left undone, and when it expires.
			log.Warn("left the cluster uncleanly; nothing is lost, but other hosts wait for what this one could not undo to expire", "err", err)
		}
		nc.Close()
	}, nil
}
