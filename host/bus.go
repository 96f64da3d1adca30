package host

import (
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// bus orders everything the host sends. It assigns each state change a
// host-wide serverSeq, keeps the last changes for reconnecting clients, and
// hands each message to the connections subscribed to its channel.
//
// A message is encoded once, however many connections receive it. Sending
// never blocks: a connection's queue is bounded, and a connection that
// falls behind is dropped (see conn.enqueue), so a slow client never stalls
// a session or another client.
//
// The fan-out's one nesting: bus.mu, then a connection's queue lock.
type bus struct {
	mu   lockcheck.Mutex
	seq  int64
	ring []protocol.ActionEnvelope // the last len(ring) envelopes, by seq
	next int                       // where the next envelope goes in ring
	cut  int64                     // the newest envelope forgotten before its turn: replays start after it
	subs map[string]map[*conn]struct{}
}

func init() { lockcheck.Allow("bus", "conn") }

func newBus(replay int) *bus {
	return &bus{
		mu:   lockcheck.Mutex{Class: "bus"},
		ring: make([]protocol.ActionEnvelope, replay),
		subs: map[string]map[*conn]struct{}{},
	}
}

// publish sequences an action that changed a channel's state and sends it
// to the channel's subscribers. The caller holds the lock of the state the
// action changed, so envelopes of one channel leave in state order.
func (b *bus) publish(channel string, a protocol.Action, origin *protocol.ActionOrigin) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.publishLocked(channel, a, origin)
}

// publishAll publishes a session's actions in order, taking the bus's
// lock once.
func (b *bus) publishAll(batch []effect) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range batch {
		b.publishLocked(e.channel, e.action, e.origin)
	}
}

func (b *bus) publishLocked(channel string, a protocol.Action, origin *protocol.ActionOrigin) int64 {
	b.seq++
	env := protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: b.seq, Origin: origin}
	if len(b.ring) > 0 {
		b.ring[b.next] = env
		b.next = (b.next + 1) % len(b.ring)
	}
	subs := b.subs[channel]
	if len(subs) == 0 {
		return b.seq
	}
	f := actionFrame(&env)
	for c := range subs {
		c.send(f)
	}
	return b.seq
}

// echo sends an envelope to one connection without changing any state: a
// refused action (with rejectionReason), or an accepted one that changed
// nothing. It carries the current serverSeq, which does not advance.
func (b *bus) echo(c *conn, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	env := protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: b.seq, Origin: origin}
	if reason != "" {
		env.RejectionReason = &reason
	}
	f := actionFrame(&env)
	f.action = "" // the client sent it, so its version knows it
	c.send(f)
}

// notify sends a protocol notification (root/sessionAdded, ...) to the
// channel's subscribers, or, with only, to those it accepts. Notifications
// are not replayed.
func (b *bus) notify(channel, method string, params any, only func(*conn) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	subs := b.subs[channel]
	if len(subs) == 0 {
		return
	}
	f := notificationFrame(method, params)
	for c := range subs {
		if only == nil || only(c) {
			c.send(f)
		}
	}
}

// forget drops the envelopes of channels whose state went to sleep: their
// actions (a turn's text, its tools' output) are the heap a sleeping
// session must not hold, and the ring would keep them for thousands of
// changes more. A client that reconnects having missed one of them is
// sent snapshots instead of a replay, as one that missed more than the
// ring holds.
func (b *bus) forget(channels map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.ring {
		if env := &b.ring[i]; env.Action != nil && channels[env.Channel] {
			b.cut = max(b.cut, env.ServerSeq)
			*env = protocol.ActionEnvelope{}
		}
	}
}

// replayableLocked reports whether a client that has seen every change up to
// seq can be replayed the rest from the ring. The caller holds b.mu.
func (b *bus) replayableLocked(seq int64) bool {
	return seq >= 0 && seq <= b.seq && b.seq-seq <= int64(len(b.ring)) && seq >= b.cut
}

// current returns the serverSeq of the last change.
func (b *bus) current() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// subscribe adds c to channel's subscribers and returns the serverSeq the
// caller's snapshot is taken at. The caller holds the lock of the channel's
// state, so no change slips between the snapshot and the subscription.
// Until the response carrying the snapshot is sent, c holds back the
// channel's messages (conn.hold).
func (b *bus) subscribe(c *conn, channel, requestID string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	subs := b.subs[channel]
	if subs == nil {
		subs = map[*conn]struct{}{}
		b.subs[channel] = subs
	}
	subs[c] = struct{}{}
	c.hold(channel, requestID)
	return b.seq
}

func (b *bus) unsubscribe(c *conn, channel string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if subs := b.subs[channel]; subs != nil {
		delete(subs, c)
		if len(subs) == 0 {
			delete(b.subs, channel)
		}
	}
}

// subscribers reports how many connections watch channel.
func (b *bus) subscribers(channel string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[channel])
}

// drop removes every subscription of channel, as its state goes away.
func (b *bus) drop(channel string) []*conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*conn
	for c := range b.subs[channel] {
		out = append(out, c)
	}
	delete(b.subs, channel)
	return out
}
