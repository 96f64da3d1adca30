package shared

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Watching a session another host runs (docs/CLUSTER.md). A client
// subscribing here to a session held elsewhere is served from a mirror:
// the session's state rebuilt from its journal (its restart point and the
// actions after: Core.Replicate), then kept up to date by following the
// journal as the holder appends to it. Each action followed is published
// on this host's bus under its channel, numbered here, so the client's
// serverSeqs stay this host's and its subscriptions to local and mirrored
// channels mix freely. Its own actions, forwarded to the holder, come back
// this way too, with their origin. A mirror lives while a client here
// watches one of its channels; when this host takes the session, its copy
// is built from the same journal and the mirror goes.

func init() {
	// A mirror publishes under its lock, as a session does, so that a
	// snapshot and the subscription after it see each change exactly once.
	lockcheck.Allow("mirror", "bus")
	lockcheck.Allow("mirror", "conn") // the bus's subscribe holds the connection's frames
}

// chatArrival bounds the wait for a channel of a mirrored session that the
// journal has not brought yet.
const chatArrival = 2 * time.Second

// mirror is one session another host runs, as this host shows it.
type mirror struct {
	p   *Part
	id  string // the session's id
	uri string // the session's URI: its journal's name

	mu     lockcheck.Mutex
	rep    Replica // the session's channels, under mu
	last   uint64  // the journal sequence of the last entry applied
	closed bool
	pins   int           // reconnects resuming its channels: it stays while they do
	moved  chan struct{} // closed and made again at each entry applied

	stop context.CancelFunc
	done chan struct{} // closed when its follower has ended
}

// mirrors are the mirrors a host keeps, by session id.
type mirrors struct {
	mu lockcheck.Mutex
	by map[string]*mirror
}

// mirrorOf returns the mirror of a session held elsewhere, opening it.
func (p *Part) mirrorOf(ctx context.Context, id, uri string) (*mirror, error) {
	p.mirrors.mu.Lock()
	m := p.mirrors.by[id]
	p.mirrors.mu.Unlock()
	if m != nil {
		return m, nil
	}
	m, err := p.openMirror(ctx, id, uri)
	if err != nil {
		return nil, err
	}
	p.mirrors.mu.Lock()
	defer p.mirrors.mu.Unlock()
	if old := p.mirrors.by[id]; old != nil {
		go m.close()
		return old, nil
	}
	p.mirrors.by[id] = m
	return m, nil
}

// openMirror rebuilds a session's state from its journal and follows it.
func (p *Part) openMirror(ctx context.Context, id, uri string) (*mirror, error) {
	rep, err := p.core.Replicate(ctx, uri)
	if err != nil {
		return nil, err
	}
	fctx, stop := context.WithCancel(p.core.Context())
	m := &mirror{
		p: p, id: id, uri: uri, mu: lockcheck.Mutex{Class: "mirror"},
		rep: rep, last: rep.Last(), stop: stop, done: make(chan struct{}), moved: make(chan struct{}),
	}
	f, err := p.core.Follow(fctx, uri, m.last)
	if err != nil {
		stop()
		return nil, fmt.Errorf("following the session's journal: %w", err)
	}
	p.log.Debug("watching a session another host runs, from its journal", "session", uri, "from", m.last)
	p.core.Go(func() { m.follow(fctx, f) })
	return m, nil
}

// follow applies the journal's entries as the holder appends them, until
// the mirror closes. A follower that fell behind is started again from the
// last entry applied.
func (m *mirror) follow(ctx context.Context, f *journal.Follower) {
	defer close(m.done)
	for {
		for e := range f.Entries() {
			m.apply(e)
		}
		err := f.Err()
		f.Close()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, journal.ErrFellBehind) {
			m.p.log.Warn("stopped following a session's journal", "session", m.uri, "err", err)
		}
		m.mu.Lock()
		last := m.last
		m.mu.Unlock()
		for {
			f, err = m.p.core.Follow(ctx, m.uri, last)
			if err == nil || ctx.Err() != nil {
				break
			}
			m.p.log.Warn("could not follow a session's journal again; retrying", "session", m.uri, "err", err)
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// apply brings the mirror up to date with one journal entry and publishes
// an action to this host's subscribers of its channel.
func (m *mirror) apply(e journal.Entry) {
	// What the entry needs from elsewhere in the journal is read before
	// the mirror is locked.
	applyEntry := m.rep.Prepare(e)
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Seq <= m.last || m.closed {
		return
	}
	m.last = e.Seq
	close(m.moved)
	m.moved = make(chan struct{})
	if env := applyEntry(); env != nil {
		m.p.core.Bus().Publish(env.Channel, env.Action, env.Origin)
	}
}

// attach subscribes c to one of the mirror's channels and returns its
// snapshot, a chat's with its last turns finished turns when turns > 0.
func (m *mirror) attach(c *conn.Conn, channel, requestID string, turns int) (protocol.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.rep.View(channel, turns)
	// A chat made a moment ago on the holder (a forwarded createChat
	// answered) may not have reached this host's follower yet.
	for wait := time.After(chatArrival); st == nil && !m.closed; st = m.rep.View(channel, turns) {
		moved := m.moved
		m.mu.Unlock()
		select {
		case <-moved:
		case <-wait:
			m.mu.Lock()
			return protocol.Snapshot{}, protocol.Errorf(protocol.CodeNotFound, "no channel %s", protocol.Quote(channel))
		}
		m.mu.Lock()
	}
	if st == nil {
		return protocol.Snapshot{}, protocol.Errorf(protocol.CodeNotFound, "no channel %s", protocol.Quote(channel))
	}
	seq := m.p.core.Bus().Subscribe(c, channel, requestID)
	return protocol.Snapshot{Resource: channel, State: st, FromSeq: seq}, nil
}

// watched reports whether a client here watches one of its channels.
func (m *mirror) watched() bool {
	m.mu.Lock()
	if m.pins > 0 {
		m.mu.Unlock()
		return true
	}
	channels := m.rep.Channels()
	m.mu.Unlock()
	for _, ch := range channels {
		if m.p.core.Bus().Subscribers(ch) > 0 {
			return true
		}
	}
	return false
}

func (m *mirror) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	<-m.done
}

// dropMirror closes a session's mirror, for a host that takes the session
// or whose clients stopped watching it.
func (p *Part) dropMirror(id string) {
	p.mirrors.mu.Lock()
	m := p.mirrors.by[id]
	delete(p.mirrors.by, id)
	p.mirrors.mu.Unlock()
	if m != nil {
		m.close()
	}
}

// DropUnwatchedMirrors closes the mirrors nobody here watches any more.
func (p *Part) DropUnwatchedMirrors() {
	p.mirrors.mu.Lock()
	list := make([]*mirror, 0, len(p.mirrors.by))
	for _, m := range p.mirrors.by {
		list = append(list, m)
	}
	p.mirrors.mu.Unlock()
	for _, m := range list {
		if !m.watched() {
			p.mirrors.mu.Lock()
			if p.mirrors.by[m.id] == m {
				delete(p.mirrors.by, m.id)
			}
			p.mirrors.mu.Unlock()
			m.close()
		}
	}
}

// CloseMirrors closes every mirror, for Close.
func (p *Part) CloseMirrors() {
	p.mirrors.mu.Lock()
	list := p.mirrors.by
	p.mirrors.by = map[string]*mirror{}
	p.mirrors.mu.Unlock()
	for _, m := range list {
		m.close()
	}
}

// subscribeRemote answers a subscribe to a channel of a session another
// host holds, from its mirror here.
func (p *Part) subscribeRemote(ctx context.Context, c *conn.Conn, holder, id, uri string, sp *protocol.SubscribeParams, requestID string) (any, error) {
	if err := p.mayWatch(ctx, c, holder, id, uri); err != nil {
		return nil, err
	}
	delay, err := conn.DeliveryDelay(sp.Delivery)
	if err != nil {
		return nil, err
	}
	turns, err := session.ViewTurns(sp.View)
	if err != nil {
		return nil, err
	}
	if err := c.RoomToWatch(sp.Channel); err != nil {
		return nil, err
	}
	m, err := p.mirrorOf(ctx, id, uri)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "could not watch session %s from this host: %v", uri, err)
	}
	snap, err := m.attach(c, sp.Channel, requestID, turns)
	if err != nil {
		return nil, err
	}
	c.SetReadOnly(sp.Channel, sp.Meta)
	c.SetDelay(sp.Channel, delay)
	return &protocol.SubscribeResult{Snapshot: &snap}, nil
}

// AttachRouted is the host's attach for a channel named outside subscribe
// (a connection's initial subscriptions, a reconnect's snapshots): a
// channel of a session another host holds is served from its mirror, and
// one nobody holds is taken here first, as subscribe does (route.go). It
// reports false, attaching nothing, for a channel the host attaches
// itself.
func (p *Part) AttachRouted(ctx context.Context, c *conn.Conn, channel, requestID string) (protocol.Snapshot, bool, error) {
	id, uri := p.core.SessionOfChannel(channel)
	if id == "" {
		return protocol.Snapshot{}, false, nil
	}
	holder, _, err := p.where(ctx, c, "subscribe", id, channelParam{Channel: channel}, nil)
	if err != nil {
		return protocol.Snapshot{}, true, err
	}
	if holder == "" || holder == p.hostID() {
		return protocol.Snapshot{}, false, nil
	}
	if err := c.RoomToWatch(channel); err != nil {
		return protocol.Snapshot{}, true, err
	}
	if err := p.mayWatch(ctx, c, holder, id, uri); err != nil {
		return protocol.Snapshot{}, true, err
	}
	m, err := p.mirrorOf(ctx, id, uri)
	if err != nil {
		return protocol.Snapshot{}, true, err
	}
	snap, err := m.attach(c, channel, requestID, 0)
	return snap, true, err
}

// HoldMirrors keeps the mirrors of the channels a reconnect resumes open
// while it replays them from this host's buffer, and reports whether it
// may: a channel of a session held elsewhere whose mirror closed since
// (nobody here watched it) missed what happened meanwhile, and is sent a
// snapshot instead. release ends the hold.
func (p *Part) HoldMirrors(channels []string) (release func(), ok bool) {
	var held []*mirror
	release = func() {
		for _, m := range held {
			m.mu.Lock()
			m.pins--
			m.mu.Unlock()
		}
	}
	for _, ch := range channels {
		id, _ := p.core.SessionOfChannel(ch)
		if id == "" || p.leases.holds(id) {
			continue
		}
		p.mirrors.mu.Lock()
		m := p.mirrors.by[id]
		p.mirrors.mu.Unlock()
		if m == nil {
			return release, false
		}
		m.mu.Lock()
		closed := m.closed
		if !closed {
			m.pins++
			held = append(held, m)
		}
		m.mu.Unlock()
		if closed {
			return release, false
		}
	}
	return release, true
}

// mayWatch checks that c may see a session another host holds. For one
// this host has a record of, the grants checked before routing have said
// so; one it has none of (just made elsewhere, not yet stored, and seen by
// its creator alone) is the holder's to say: it is asked the session's
// status as c.
func (p *Part) mayWatch(ctx context.Context, c *conn.Conn, holder, id, uri string) error {
	if p.core.Session(id) != nil {
		return nil
	}
	params, err := json.Marshal(map[string]string{"channel": uri})
	if err != nil {
		return err
	}
	_, err = p.forwardCall(ctx, c, holder, "ahpd/sessionStatus", params)
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeProviderNotFound {
		// The probe's "unknown"; a subscribe says it as it does here.
		return protocol.Errorf(protocol.CodeSessionNotFound, "no session %s", uri)
	}
	return err
}
