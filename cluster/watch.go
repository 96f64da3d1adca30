package cluster

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Freed tells the sessions whose leases end, by a release or by an
// expiry (their holder died or was cut off), from the moment it is called
// until ctx ends; the channel is closed then. It is how a host learns that
// a session needs a new holder without asking for every session: the
// caller places the session and acquires it, and whoever loses that race
// gets ErrHeld. Sessions freed while nobody watched are not told: a host
// that starts watching should also look at the sessions it expects held
// (Holder).
//
// The channel is buffered; a watcher that does not keep up holds back its
// own deliveries, not other hosts.
func (m *Member) Freed(ctx context.Context) (<-chan string, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	w, err := m.leasesKV.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("cluster: watching leases: %w", err)
	}
	out := make(chan string, 256)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || e.Operation() == jetstream.KeyValuePut {
					continue
				}
				name, err := base64.RawURLEncoding.DecodeString(e.Key())
				if err != nil {
					continue // not a key this package wrote
				}
				select {
				case out <- string(name):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
