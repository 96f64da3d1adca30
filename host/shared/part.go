package shared

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Core is the host as the cluster part sees it: what sharing sessions
// needs of the host it runs in. The host implements it (host's
// clustercore.go) on a type of its own, so that none of it is on the
// host's exported methods.
type Core interface {
	// Context ends when the host closes; Go runs f as the host's
	// background work, which Close waits for.
	Context() context.Context
	Go(f func())
	Logger() *slog.Logger
	Now() time.Time
	// Bus is the host's: what the part publishes and echoes is numbered
	// there, with the host's own changes.
	Bus() *fanout.Bus

	// Session returns the session of an id the host has, or nil.
	Session(id string) *session.Session
	// SessionOfChannel returns the id and URI of the session a channel
	// belongs to, or "" for a channel of no session.
	SessionOfChannel(channel string) (id, uri string)
	// Status is the host's own answer of ahpd/sessionStatus, as c may
	// know it.
	Status(c *conn.Conn, uri string) (string, error)
	// Sleep puts a session whose turns have ended to sleep, unloaded if it
	// may be, for a host that lost its lease.
	Sleep(s *session.Session)
	// Fence claims a session the host has just taken in the journal, so
	// that no append of a holder before it is taken from now on
	// (journal.Claim); Refresh then brings the copy of it the host has up
	// to date (another host may have run it since).
	Fence(ctx context.Context, id string) error
	Refresh(ctx context.Context, id string) error
	// Restore makes a session from a record another host wrote, shared
	// with nobody yet; Replace puts it in place of old (nil: none),
	// reporting false when old is no longer the host's; Forget removes a
	// session another host disposed of from the registry, returning it.
	Restore(rec *session.Record) (*session.Session, error)
	Replace(old, ns *session.Session) bool
	Forget(id string) *session.Session
	// UnsubscribeAll ends every subscription to a channel.
	UnsubscribeAll(channel string)
	// RefuseAction refuses the action of a dispatchAction's params to its
	// sender, as the host refuses one; params that do not decode are
	// passed over.
	RefuseAction(c *conn.Conn, channel string, params []byte, reason string)
	// DecodeParams decodes a request's params as the host's handlers do.
	DecodeParams(req *jrpc2.Request, v json.Unmarshaler) error
	// Connect opens a connection to the host standing for one of another
	// host's (from: its id).
	Connect(cred grants.Credential, from string) (io.ReadWriteCloser, error)
	// Conn returns the connection of an id, or nil when it is gone.
	Conn(id int64) *conn.Conn
	// Replicate rebuilds a session's channels from its journal, for a
	// mirror; Follow follows the journal after the entry numbered after.
	Replicate(ctx context.Context, uri string) (Replica, error)
	Follow(ctx context.Context, uri string, after uint64) (*journal.Follower, error)
}

// Replica is a session's channels as rebuilt from its journal: the host
// reads the entries, the mirror keeps it under its lock.
type Replica interface {
	// Last is the journal sequence of the last entry it holds.
	Last() uint64
	// Prepare reads what one entry needs from outside (a chat's turns
	// elsewhere in the journal), off the mirror's lock, and returns what
	// applies it under the lock: the action to publish, if any.
	Prepare(e journal.Entry) (apply func() *protocol.ActionEnvelope)
	// View is a channel's state as a client is shown it, a chat's with
	// its last turns finished turns when turns > 0; nil for none.
	View(channel string, turns int) protocol.ChannelState
	// Channels are the channels it holds.
	Channels() []string
}

// Options are what tests set of a Part.
type Options struct {
	// RelayClosed, when set, is told each time a relay of another host's
	// connection has closed.
	RelayClosed func()
	// RecordsHeld, when set, holds back the cluster's record changes from
	// the watch until it is closed.
	RecordsHeld <-chan struct{}
}

// Part is the cluster part of a host: what it holds as a host sharing
// sessions, and what it does as one.
type Part struct {
	core   Core
	member *cluster.Member
	opts   Options
	log    *slog.Logger

	leases    *leases
	scheduler atomic.Pointer[cluster.Lease] // held while this host runs the automations' schedules
	// schedulerAsked is when this host last asked for the schedules'
	// lease (unix ns, by its clock).
	schedulerAsked atomic.Int64
	relays         relays
	mirrors        mirrors // sessions held elsewhere that clients here watch

	// records is the watch of the records bucket, from Follow to Join.
	records <-chan cluster.RecordChange
}

// New returns the cluster part of the host core, a member of cluster m.
func New(core Core, m *cluster.Member, opts Options) *Part {
	return &Part{
		core: core, member: m, opts: opts, log: core.Logger(),
		leases:  newLeases(),
		relays:  relays{mu: lockcheck.Mutex{Class: "relays"}, by: map[relayKey]*relay{}},
		mirrors: mirrors{mu: lockcheck.Mutex{Class: "mirrors"}, by: map[string]*mirror{}},
	}
}

// hostID is this host's id in the cluster.
func (p *Part) hostID() string { return p.member.HostID() }

// Follow starts following the records other hosts write. The host calls
// it before it loads the records, so that no change between the listing
// and the watch is missed (one seen twice is applied twice, which changes
// nothing); Join applies them.
func (p *Part) Follow() error {
	ch, err := p.member.WatchRecords(p.core.Context())
	if err != nil {
		return fmt.Errorf("host: following the cluster's session records: %w", err)
	}
	p.records = ch
	return nil
}

// Join serves the requests and notes other hosts send this one, and
// applies the record changes Follow watches.
func (p *Part) Join() error {
	if err := p.member.Serve(p.serveForwarded); err != nil {
		return fmt.Errorf("host: serving the cluster: %w", err)
	}
	if err := p.member.ServeNotes(p.takeNote); err != nil {
		return fmt.Errorf("host: serving the cluster: %w", err)
	}
	if ch := p.records; ch != nil {
		p.core.Go(func() { p.takeRecords(ch) })
	}
	return nil
}

// Upkeep is the part's periodic work, at each residency check: the
// mirrors nobody watches, the relays of connections gone quiet, the
// leases of sessions nobody uses, and the schedules' lease.
func (p *Part) Upkeep(now time.Time) {
	p.DropUnwatchedMirrors()
	p.dropIdleRelays(now)
	p.releaseUnused(now)
	p.KeepScheduling()
}

// Relays is how many relays of other hosts' connections the part keeps,
// for tests.
func (p *Part) Relays() int {
	p.relays.mu.Lock()
	defer p.relays.mu.Unlock()
	return len(p.relays.by)
}
