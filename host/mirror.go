package host

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
// actions after), then kept up to date by following the journal as the
// holder appends to it. Each action followed is published on this host's
// bus under its channel, numbered here, so the client's serverSeqs stay
// this host's and its subscriptions to local and mirrored channels mix
// freely. Its own actions, forwarded to the holder, come back this way
// too, with their origin. A mirror lives while a client here watches one
// of its channels; when this host takes the session, its copy is built
// from the same journal and the mirror goes.

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
	h   *Host
	id  string // the session's id
	uri string // the session's URI: its journal's name

	mu     lockcheck.Mutex
	states map[string]protocol.ChannelState // by channel: the session's and its chats'
	last   uint64                           // the journal sequence of the last entry applied
	dupes  dupes                            // what a retried append wrote twice, passed over
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
func (h *Host) mirrorOf(ctx context.Context, id, uri string) (*mirror, error) {
	h.mirrors.mu.Lock()
	m := h.mirrors.by[id]
	h.mirrors.mu.Unlock()
	if m != nil {
		return m, nil
	}
	m, err := h.openMirror(ctx, id, uri)
	if err != nil {
		return nil, err
	}
	h.mirrors.mu.Lock()
	defer h.mirrors.mu.Unlock()
	if old := h.mirrors.by[id]; old != nil {
		go m.close()
		return old, nil
	}
	h.mirrors.by[id] = m
	return m, nil
}

// openMirror rebuilds a session's state from its journal and follows it.
func (h *Host) openMirror(ctx context.Context, id, uri string) (*mirror, error) {
	if h.opts.Journal == nil {
		return nil, errors.New("this host keeps no journal to watch the session from")
	}
	var after uint64
	if mk, ok := h.restartPoint(ctx, uri); ok {
		after = mk.Seq - 1
	}
	r := newReplayer(uri)
	r.resolve = h.turnsResolver(ctx, uri)
	done, err := h.replay(ctx, r, after, -1, maxRecoverEntries)
	if err != nil {
		return nil, fmt.Errorf("reading the session's journal: %w", err)
	}
	if !done {
		return nil, errors.New("the session's journal is too long to read back")
	}
	if _, ok := r.states[uri].(*protocol.SessionState); !ok {
		return nil, errors.New("the session's journal holds no state of it yet")
	}
	r.fillAll() // its clients are shown every turn
	fctx, stop := context.WithCancel(h.ctx)
	m := &mirror{
		h: h, id: id, uri: uri, mu: lockcheck.Mutex{Class: "mirror"},
		states: r.states, last: r.last, dupes: r.dupes, stop: stop, done: make(chan struct{}), moved: make(chan struct{}),
	}
	f, err := h.opts.Journal.Follow(fctx, uri, m.last)
	if err != nil {
		stop()
		return nil, fmt.Errorf("following the session's journal: %w", err)
	}
	h.log.Debug("watching a session another host runs, from its journal", "session", uri, "from", m.last)
	h.wg.Add(1)
	go m.follow(fctx, f)
	return m, nil
}

// follow applies the journal's entries as the holder appends them, until
// the mirror closes. A follower that fell behind is started again from the
// last entry applied.
func (m *mirror) follow(ctx context.Context, f *journal.Follower) {
	defer m.h.wg.Done()
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
			m.h.log.Warn("stopped following a session's journal", "session", m.uri, "err", err)
		}
		m.mu.Lock()
		last := m.last
		m.mu.Unlock()
		for {
			f, err = m.h.opts.Journal.Follow(ctx, m.uri, last)
			if err == nil || ctx.Err() != nil {
				break
			}
			m.h.log.Warn("could not follow a session's journal again; retrying", "session", m.uri, "err", err)
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
	je, err := decodeEntry(e.Data)
	je.at = e.Seq
	// A chat's snapshot that points to its turns elsewhere in the journal
	// is shown with them, read before the mirror is locked.
	var turns []protocol.Turn
	var cursor *string
	filled := false
	if err == nil && je.snap != nil && je.snap.Bare && je.snap.TurnsAt != 0 {
		var ferr error
		turns, cursor, ferr = m.h.readTurnsAt(m.h.ctx, m.uri, je.snap.TurnsAt)
		filled = ferr == nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Seq <= m.last || m.closed {
		return
	}
	m.last = e.Seq
	close(m.moved)
	m.moved = make(chan struct{})
	if err != nil || m.dupes.seen(e.Data) {
		return
	}
	switch {
	case je.snap != nil:
		// The state as the holder has it: its own, or more of a chat's
		// turns paged in.
		r := &replayer{session: m.uri, states: m.states, turnsAt: map[string]uint64{}, bare: map[string]bool{}}
		r.apply(je)
		if cs, ok := m.states[je.snap.Channel].(*protocol.ChatState); ok && filled {
			full := *cs
			full.Turns, full.TurnsNextCursor = turns, cursor
			m.states[je.snap.Channel] = &full
		}
	case je.env != nil:
		st := m.states[je.env.Channel]
		if st == nil {
			return // a chat whose snapshot comes with its next action
		}
		m.states[je.env.Channel] = protocol.Apply(st, je.env.Action)
		m.h.bus.Publish(je.env.Channel, je.env.Action, je.env.Origin)
	}
}

// attach subscribes c to one of the mirror's channels and returns its
// snapshot, a chat's with its last turns finished turns when turns > 0.
func (m *mirror) attach(c *conn.Conn, channel, requestID string, turns int) (protocol.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.states[channel]
	// A chat made a moment ago on the holder (a forwarded createChat
	// answered) may not have reached this host's follower yet.
	for wait := time.After(chatArrival); st == nil && !m.closed; st = m.states[channel] {
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
	switch x := st.(type) {
	case *protocol.ChatState:
		if turns > 0 {
			st, _ = session.ViewOf(x, turns)
		}
	case *protocol.SessionState:
		st, _ = withActivity(x, m.states)
	}
	seq := m.h.bus.Subscribe(c, channel, requestID)
	return protocol.Snapshot{Resource: channel, State: st, FromSeq: seq}, nil
}

// watched reports whether a client here watches one of its channels.
func (m *mirror) watched() bool {
	m.mu.Lock()
	if m.pins > 0 {
		m.mu.Unlock()
		return true
	}
	channels := make([]string, 0, len(m.states))
	for ch := range m.states {
		channels = append(channels, ch)
	}
	m.mu.Unlock()
	for _, ch := range channels {
		if m.h.bus.Subscribers(ch) > 0 {
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
func (h *Host) dropMirror(id string) {
	h.mirrors.mu.Lock()
	m := h.mirrors.by[id]
	delete(h.mirrors.by, id)
	h.mirrors.mu.Unlock()
	if m != nil {
		m.close()
	}
}

// dropUnwatchedMirrors closes the mirrors nobody here watches any more.
func (h *Host) dropUnwatchedMirrors() {
	h.mirrors.mu.Lock()
	list := make([]*mirror, 0, len(h.mirrors.by))
	for _, m := range h.mirrors.by {
		list = append(list, m)
	}
	h.mirrors.mu.Unlock()
	for _, m := range list {
		if !m.watched() {
			h.mirrors.mu.Lock()
			if h.mirrors.by[m.id] == m {
				delete(h.mirrors.by, m.id)
			}
			h.mirrors.mu.Unlock()
			m.close()
		}
	}
}

// closeMirrors closes every mirror, for Close.
func (h *Host) closeMirrors() {
	h.mirrors.mu.Lock()
	list := h.mirrors.by
	h.mirrors.by = map[string]*mirror{}
	h.mirrors.mu.Unlock()
	for _, m := range list {
		m.close()
	}
}

// subscribeRemote answers a subscribe to a channel of a session another
// host holds, from its mirror here.
func (h *Host) subscribeRemote(ctx context.Context, c *conn.Conn, holder, id, uri string, p *protocol.SubscribeParams, requestID string) (any, error) {
	if err := h.mayWatch(ctx, c, holder, id, uri); err != nil {
		return nil, err
	}
	delay, err := conn.DeliveryDelay(p.Delivery)
	if err != nil {
		return nil, err
	}
	turns, err := session.ViewTurns(p.View)
	if err != nil {
		return nil, err
	}
	if err := c.RoomToWatch(p.Channel); err != nil {
		return nil, err
	}
	m, err := h.mirrorOf(ctx, id, uri)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "could not watch session %s from this host: %v", uri, err)
	}
	snap, err := m.attach(c, p.Channel, requestID, turns)
	if err != nil {
		return nil, err
	}
	c.SetReadOnly(p.Channel, p.Meta)
	c.SetDelay(p.Channel, delay)
	return &protocol.SubscribeResult{Snapshot: &snap}, nil
}

// attachRouted is attach for a channel named outside subscribe (a
// connection's initial subscriptions, a reconnect's snapshots): on a host
// sharing sessions, a channel of a session another host holds is served
// from its mirror, and one nobody holds is taken here first, as subscribe
// does (route.go).
func (h *Host) attachRouted(ctx context.Context, c *conn.Conn, channel, requestID string) (protocol.Snapshot, error) {
	if h.clustered() {
		if id, uri := h.sessionOfChannel(channel); id != "" {
			holder, _, err := h.where(ctx, c, "subscribe", id, channelParam{Channel: channel}, nil)
			if err != nil {
				return protocol.Snapshot{}, err
			}
			if holder != "" && holder != h.hostID() {
				if err := c.RoomToWatch(channel); err != nil {
					return protocol.Snapshot{}, err
				}
				if err := h.mayWatch(ctx, c, holder, id, uri); err != nil {
					return protocol.Snapshot{}, err
				}
				m, err := h.mirrorOf(ctx, id, uri)
				if err != nil {
					return protocol.Snapshot{}, err
				}
				return m.attach(c, channel, requestID, 0)
			}
		}
	}
	return h.attach(ctx, c, channel, requestID, 0)
}

// holdMirrors keeps the mirrors of the channels a reconnect resumes open
// while it replays them from this host's buffer, and reports whether it
// may: a channel of a session held elsewhere whose mirror closed since
// (nobody here watched it) missed what happened meanwhile, and is sent a
// snapshot instead. release ends the hold.
func (h *Host) holdMirrors(channels []string) (release func(), ok bool) {
	var held []*mirror
	release = func() {
		for _, m := range held {
			m.mu.Lock()
			m.pins--
			m.mu.Unlock()
		}
	}
	if !h.clustered() {
		return release, true
	}
	for _, ch := range channels {
		id, _ := h.sessionOfChannel(ch)
		if id == "" || h.numbersHere(id) {
			continue
		}
		h.mirrors.mu.Lock()
		m := h.mirrors.by[id]
		h.mirrors.mu.Unlock()
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
func (h *Host) mayWatch(ctx context.Context, c *conn.Conn, holder, id, uri string) error {
	if h.byID(id) != nil {
		return nil
	}
	params, err := json.Marshal(map[string]string{"channel": uri})
	if err != nil {
		return err
	}
	_, err = h.forwardCall(ctx, c, holder, "ahpd/sessionStatus", params)
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeProviderNotFound {
		// The probe's "unknown"; a subscribe says it as it does here.
		return protocol.Errorf(protocol.CodeSessionNotFound, "no session %s", uri)
	}
	return err
}
