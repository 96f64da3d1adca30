package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Host is a live host's record, as it last announced it.
type Host struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels,omitempty"`
	// Load is the number of sessions the host held at its last heartbeat.
	Load int    `json:"load"`
	Addr string `json:"addr,omitempty"`
	// StartedAt is when the host joined, RenewedAt its last heartbeat
	// (both on its own clock).
	StartedAt time.Time `json:"startedAt"`
	RenewedAt time.Time `json:"renewedAt"`
}

// record is this host's record as of now.
func (m *Member) record() ([]byte, error) {
	m.mu.Lock()
	load, addr := len(m.leases), m.cfg.Addr
	m.mu.Unlock()
	return json.Marshal(Host{
		ID: m.cfg.HostID, Labels: maps.Clone(m.cfg.Labels), Load: load, Addr: addr,
		StartedAt: m.started.UTC(), RenewedAt: m.clk.Now().UTC(),
	})
}

// announce writes the host's first record, refusing when a live host
// already has its id.
func (m *Member) announce(ctx context.Context) error {
	rec, err := m.record()
	if err != nil {
		return err
	}
	var rev uint64 // 0: the key must not exist
	for range 3 {
		_, err = m.publishTTL(ctx, m.hosts.Bucket(), m.cfg.HostID, rec, m.cfg.HostTTL, &rev)
		if !conflict(err) && !busy(err) {
			break
		}
		// The key exists: a live record, or the marker its removal left.
		cur, lerr := m.last(ctx, m.hosts.Bucket(), m.cfg.HostID)
		if lerr != nil {
			return lerr
		}
		if cur.live {
			return fmt.Errorf("%w: %s", ErrHostIDInUse, m.cfg.HostID)
		}
		rev = cur.rev
	}
	if err != nil {
		return fmt.Errorf("cluster: announcing host %s: %w", m.cfg.HostID, err)
	}
	return nil
}

// Self is this host as its record describes it (its load left out).
func (m *Member) Self() Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Host{ID: m.cfg.HostID, Labels: maps.Clone(m.cfg.Labels), Addr: m.cfg.Addr, StartedAt: m.started.UTC()}
}

// SetAddr changes the address the host's record gives (a host joins
// before it listens) and writes the record at once.
func (m *Member) SetAddr(ctx context.Context, addr string) error {
	if err := m.check(); err != nil {
		return err
	}
	m.mu.Lock()
	m.cfg.Addr = addr
	m.mu.Unlock()
	return m.putHost(ctx)
}

// putHost renews the host's record (and its TTL) with the current load.
func (m *Member) putHost(ctx context.Context) error {
	rec, err := m.record()
	if err != nil {
		return err
	}
	if _, err := m.publishTTL(ctx, m.hosts.Bucket(), m.cfg.HostID, rec, m.cfg.HostTTL, nil); err != nil {
		return fmt.Errorf("cluster: renewing host record: %w", err)
	}
	return nil
}

// Hosts lists the live hosts, this one included, by id. A host is live
// while its record is: a host that stops its heartbeat drops out within
// HostTTL (the server's TTL, rounded up to its next expiry check).
func (m *Member) Hosts(ctx context.Context) ([]Host, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	w, err := m.hosts.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("cluster: listing hosts: %w", err)
	}
	defer w.Stop()
	var hosts []Host
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: listing hosts: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("cluster: listing hosts: watcher closed")
			}
			if e == nil { // every live record has been delivered
				slices.SortFunc(hosts, func(a, b Host) int { return strings.Compare(a.ID, b.ID) })
				return hosts, nil
			}
			var h Host
			if err := json.Unmarshal(e.Value(), &h); err != nil || h.ID != e.Key() {
				m.log.Warn("cluster: skipping a malformed host record", "key", e.Key())
				continue
			}
			hosts = append(hosts, h)
		}
	}
}
