package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/journal"
)

// clusterConfig names this host among others on the same NATS
// (docs/CLUSTER.md). Only joining the host registry is built: the host
// announces itself, with its labels, for as long as it runs.
type clusterConfig struct {
	// HostID names the host in the cluster; "" joins none.
	HostID string `yaml:"hostId"`
	// Labels describe it, for placement (repos=/a,/b) and people.
	Labels map[string]string `yaml:"labels"`
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
	if cfg.NATS.URL == "" {
		return errors.New("--host-id needs --nats: the NATS embedded in one daemon has no other hosts")
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

// joinCluster announces the host in the cluster's registry when the
// config names it, and returns how to leave; addr is where it listens.
func joinCluster(ctx context.Context, cfg *config, jc journal.Config, addr string, log *slog.Logger) (leave func(), err error) {
	if cfg.Cluster.HostID == "" {
		return func() {}, nil
	}
	nc, err := cluster.Dial(ctx, jc, "ahpd "+cfg.Cluster.HostID)
	if err != nil {
		return nil, err
	}
	m, err := cluster.Join(ctx, nc, cluster.Config{
		HostID: cfg.Cluster.HostID, Labels: cfg.Cluster.Labels, Addr: addr,
		Logger: log.With("part", "cluster"),
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("joining the cluster as %s: %w", cfg.Cluster.HostID, err)
	}
	log.Info("joined the cluster", "hostId", cfg.Cluster.HostID, "labels", cfg.Cluster.Labels)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			log.Warn("left the cluster uncleanly", "err", err)
		}
		nc.Close()
	}, nil
}
