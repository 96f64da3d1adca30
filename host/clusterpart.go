package host

import (
	"context"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// The hooks a part sharing sessions with other hosts plugs into
// (docs/CLUSTER.md; package host/shared implements them, and reaches the
// host through clusterCore). With Options.Cluster the host has one
// (Host.cluster); without, it has none, nil, and each call site below
// checks that once.

// clusterPart is the cluster part as the host sees it.
type clusterPart interface {
	router
	upkeeper
	clusterLifecycle
	sessionHooks
}

// router decides where a request runs: here, or on the host holding its
// session.
type router interface {
	// Route runs before a method's handler (rpc.go), and reports whether
	// it answered the request itself, with what.
	Route(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (bool, any, error)
	// AttachRouted attaches c to a channel named outside subscribe, when
	// the session is held elsewhere (from its mirror); false leaves it to
	// the host's attach.
	AttachRouted(ctx context.Context, c *conn.Conn, channel, requestID string) (protocol.Snapshot, bool, error)
	// HoldMirrors keeps what a reconnect replays from the bus open while
	// it does, and reports whether it may replay (rpc_connection.go).
	HoldMirrors(channels []string) (release func(), ok bool)
	// Status answers ahpd/sessionStatus across the cluster, with _meta
	// naming the holder.
	Status(ctx context.Context, c *conn.Conn, uri string) (string, protocol.Object, error)
	// ConnClosed is told of each connection that ended.
	ConnClosed(c *conn.Conn)
}

// upkeeper is the part's periodic task, run at each residency check
// (residency.go).
type upkeeper interface {
	Upkeep(now time.Time)
}

// clusterLifecycle is when the part starts and stops, in the host's start
// and Close (host.go).
type clusterLifecycle interface {
	// Follow watches the cluster's records, before the host loads them;
	// KeepScheduling takes the automations' schedules if nobody runs
	// them, before their first pass; Join serves the other hosts, once
	// the host is ready to.
	Follow() error
	KeepScheduling()
	Join() error
	// LetGoAll gives up the host's leases; CloseRelays ends what serves
	// the other hosts' connections; CloseMirrors ends the watches of
	// sessions held elsewhere.
	LetGoAll()
	CloseRelays()
	CloseMirrors()
}

// sessionHooks are what the host asks the part about one session.
type sessionHooks interface {
	// LetGo is told when a session falls asleep or is disposed here;
	// Fenced when the journal refused its append, as another host claimed
	// it (fenced.go).
	LetGo(id string)
	Fenced(id string)
	// Holds reports whether this host holds the session: only then does
	// it number its actions (replay.go).
	Holds(id string) bool
	// Scheduling reports whether this host runs the automations'
	// schedules now (automations.go).
	Scheduling() bool
}

// recordStore is a store of records kept outside the host (the cluster's
// bucket: shared.Records), as the host's store.
type recordStore interface {
	Load() ([]*session.Record, error)
	Save(id string, data []byte) error
	Remove(id string) error
}

type storeOf struct{ r recordStore }

func (s storeOf) load() ([]*session.Record, error)  { return s.r.Load() }
func (s storeOf) save(id string, data []byte) error { return s.r.Save(id, data) }
func (s storeOf) remove(id string) error            { return s.r.Remove(id) }

// attachRouted is attach for a channel named outside subscribe (a
// connection's initial subscriptions, a reconnect's snapshots): with a
// cluster, a channel of a session another host holds is served from its
// mirror, and one nobody holds is taken here first, as subscribe does.
func (h *Host) attachRouted(ctx context.Context, c *conn.Conn, channel, requestID string) (protocol.Snapshot, error) {
	if h.cluster != nil {
		if snap, done, err := h.cluster.AttachRouted(ctx, c, channel, requestID); done {
			return snap, err
		}
	}
	return h.attach(ctx, c, channel, requestID, 0)
}

// holdMirrors is HoldMirrors on a host that may have none.
func (h *Host) holdMirrors(channels []string) (release func(), ok bool) {
	if h.cluster == nil {
		return func() {}, true
	}
	return h.cluster.HoldMirrors(channels)
}
