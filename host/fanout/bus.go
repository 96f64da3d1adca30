// Package fanout orders everything the host sends and hands it to the
// connections that watch its channel. It knows channels, actions and
// frames; it knows nothing of sessions, chats or what a connection is
// beyond Subscriber.
//
// A message is encoded once, however many subscribers receive it. Sending
// never blocks: a Subscriber queues what it is sent and drops itself when
// it falls too far behind, so a slow client never stalls a session or
// another client.
//
// The Bus's lock is its own; the one lock taken under it is each
// subscriber's queue (Send and Hold), and nothing is taken under that.
package fanout

import (
	"iter"

	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/protocol"
)

// A Subscriber is a connection as the bus sees it.
type Subscriber interface {
	// Send queues a frame of a channel it watches. It must not block or
	// call back into the bus.
	Send(f *Frame)
	// Hold holds back channel's frames until the response to requestID,
	// which carries the channel's snapshot, has been sent.
	Hold(channel, requestID string)
	// Wants reports whether the subscriber's protocol version knows an
	// action type; a replay leaves out those it does not.
	Wants(t protocol.ActionType) bool
}

func init() { lockcheck.Allow("bus", "conn") }

// Item is an action to publish on a channel.
type Item struct {
	Channel string
	Action  protocol.Action
	Origin  *protocol.ActionOrigin
}

// Bus assigns each state change a host-wide serverSeq, keeps the last
// changes for reconnecting clients, and hands each to the subscribers of
// its channel.
type Bus struct {
	mu   lockcheck.Mutex
	seq  int64
	ring []protocol.ActionEnvelope // the last len(ring) envelopes, by seq
	next int                       // where the next envelope goes in ring
	cut  int64                     // the newest envelope forgotten before its turn: replays start after it
	subs map[string]map[Subscriber]struct{}
}

// New returns a bus that keeps replay changes for reconnecting clients,
// whose first change is numbered after seq.
func New(replay int, seq int64) *Bus {
	return &Bus{
		mu:   lockcheck.Mutex{Class: "bus"},
		seq:  seq,
		ring: make([]protocol.ActionEnvelope, replay),
		subs: map[string]map[Subscriber]struct{}{},
	}
}

// Publish sequences an action that changed a channel's state and sends it
// to the channel's subscribers. The actions of one channel must be
// published in the order they changed it.
func (b *Bus) Publish(channel string, a protocol.Action, origin *protocol.ActionOrigin) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.publishLocked(channel, a, origin)
}

// PublishAll publishes items in order, taking the bus's lock once.
func (b *Bus) PublishAll(items iter.Seq[Item]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for it := range items {
		b.publishLocked(it.Channel, it.Action, it.Origin)
	}
}

func (b *Bus) publishLocked(channel string, a protocol.Action, origin *protocol.ActionOrigin) int64 {
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
	f := ActionFrame(&env)
	for s := range subs {
		s.Send(f)
	}
	return b.seq
}

// PublishTo sequences an action and sends it to those of the channel's
// subscribers only accepts. Such an envelope is not kept for replay (a
// replay could not tell whose it is): a client that missed one reconnects
// with snapshots instead.
func (b *Bus) PublishTo(channel string, a protocol.Action, only func(Subscriber) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	b.cut = b.seq
	env := protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: b.seq}
	subs := b.subs[channel]
	if len(subs) == 0 {
		return
	}
	f := ActionFrame(&env)
	for s := range subs {
		if only(s) {
			s.Send(f)
		}
	}
}

// Echo sends an envelope to one subscriber without changing any state: a
// refused action (with rejectionReason), or an accepted one that changed
// nothing. It carries the current serverSeq, which does not advance.
func (b *Bus) Echo(s Subscriber, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	env := protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: b.seq, Origin: origin}
	if reason != "" {
		env.RejectionReason = &reason
	}
	f := ActionFrame(&env)
	f.action = "" // the client sent it, so its version knows it
	s.Send(f)
}

// Notify sends a protocol notification (root/sessionAdded, ...) to the
// channel's subscribers, or, with only, to those it accepts.
// Notifications are not replayed.
func (b *Bus) Notify(channel, method string, params any, only func(Subscriber) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	subs := b.subs[channel]
	if len(subs) == 0 {
		return
	}
	f := NotificationFrame(method, params)
	for s := range subs {
		if only == nil || only(s) {
			s.Send(f)
		}
	}
}

// Forget drops the envelopes of channels whose state went to sleep: their
// actions (a turn's text, its tools' output) are the heap a sleeping
// session must not hold, and the ring would keep them for thousands of
// changes more. A client that reconnects having missed one of them is
// sent snapshots instead of a replay, as one that missed more than the
// ring holds.
func (b *Bus) Forget(channels map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.ring {
		if env := &b.ring[i]; env.Action != nil && channels[env.Channel] {
			b.cut = max(b.cut, env.ServerSeq)
			*env = protocol.ActionEnvelope{}
		}
	}
}

// Current returns the serverSeq of the last change.
func (b *Bus) Current() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Subscribe adds s to channel's subscribers and returns the serverSeq the
// caller's snapshot is taken at: the caller must have every change of the
// channel up to now published, and none after it. Until the response
// carrying the snapshot is sent, s holds back the channel's frames.
func (b *Bus) Subscribe(s Subscriber, channel, requestID string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addLocked(s, channel)
	s.Hold(channel, requestID)
	return b.seq
}

func (b *Bus) addLocked(s Subscriber, channel string) {
	subs := b.subs[channel]
	if subs == nil {
		subs = map[Subscriber]struct{}{}
		b.subs[channel] = subs
	}
	subs[s] = struct{}{}
}

// Unsubscribe removes s from channel's subscribers.
func (b *Bus) Unsubscribe(s Subscriber, channel string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if subs := b.subs[channel]; subs != nil {
		delete(subs, s)
		if len(subs) == 0 {
			delete(b.subs, channel)
		}
	}
}

// Subscribers reports how many subscribers watch channel.
func (b *Bus) Subscribers(channel string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[channel])
}

// Drop removes every subscription of channel, as its state goes away, and
// returns who had one.
func (b *Bus) Drop(channel string) []Subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Subscriber
	for s := range b.subs[channel] {
		out = append(out, s)
	}
	delete(b.subs, channel)
	return out
}

// Replay subscribes s to channels and returns what they missed after seq,
// in one step, so nothing is missed or sent twice. It fails when the
// changes are no longer held.
func (b *Bus) Replay(s Subscriber, seq int64, channels []string, requestID string) ([]protocol.ActionEnvelope, bool) {
	want := make(map[string]bool, len(channels))
	for _, ch := range channels {
		want[ch] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.replayableLocked(seq) {
		return nil, false
	}
	out := []protocol.ActionEnvelope{}
	missed := int(b.seq - seq)
	for i := 0; i < missed; i++ {
		at := (b.next - missed + i + len(b.ring)) % len(b.ring)
		env := b.ring[at]
		if env.Action != nil && want[env.Channel] && s.Wants(env.Action.Type()) {
			out = append(out, env)
		}
	}
	for _, ch := range channels {
		b.addLocked(s, ch)
		s.Hold(ch, requestID)
	}
	return out, true
}

// replayableLocked reports whether a client that has seen every change up
// to seq can be replayed the rest from the ring.
func (b *Bus) replayableLocked(seq int64) bool {
	return seq >= 0 && seq <= b.seq && b.seq-seq <= int64(len(b.ring)) && seq >= b.cut
}
