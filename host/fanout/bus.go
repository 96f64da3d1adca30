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
// A batch of actions can be numbered first and sent later (Reserve,
// Release), so the host can write them down before any client sees them:
// the bus sends everything in serverSeq order, holding back what follows a
// batch not yet released, so a client never sees serverSeq go backwards
// and never misses a change it could be replayed.
//
// A connection whose subscription lets the host delay its frames
// (delivery.maxLatencyMs) holds its streamed text back in a Coalescer, to
// send a burst of deltas as one (coalesce.go).
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
	seq  int64 // the last serverSeq given out
	sent int64 // every serverSeq up to it has been sent
	held []*Batch
	ring []protocol.ActionEnvelope // the last len(ring) envelopes sent, by seq
	next int                       // where the next envelope goes in ring
	cut  int64                     // the newest envelope forgotten before its turn: replays start after it
	subs map[string]*watchers

	refused func(origin *protocol.ActionOrigin) // OnRefused's
}

// watchers are a channel's subscribers, each with the serverSeq it
// subscribed at: what it is sent is after it. A slice, for every action
// sent walks it; the index finds one to replace or remove.
type watchers struct {
	list  []watcher
	index map[Subscriber]int
}

type watcher struct {
	s    Subscriber
	from int64
}

// A Batch is what the bus sends in one go, in its place in serverSeq
// order: actions numbered by Reserve, or a notification or an echo queued
// behind a batch held.
type Batch struct {
	envs     []protocol.ActionEnvelope
	only     func(Subscriber) bool // when set, the subscribers it goes to; not kept for replay
	send     func(b *Bus)          // a notification or an echo, instead of envs
	released bool
}

// Envelopes returns the batch's actions as numbered, to be written down
// before Release. They must not be changed.
func (bt *Batch) Envelopes() []protocol.ActionEnvelope { return bt.envs }

// New returns a bus that keeps replay changes for reconnecting clients,
// whose first change is numbered after seq.
func New(replay int, seq int64) *Bus {
	return &Bus{
		mu:   lockcheck.Mutex{Class: "bus"},
		seq:  seq,
		sent: seq,
		ring: make([]protocol.ActionEnvelope, replay),
		subs: map[string]*watchers{},
	}
}

// Publish sequences an action that changed a channel's state and sends it
// to the channel's subscribers. The actions of one channel must be
// published in the order they changed it.
func (b *Bus) Publish(channel string, a protocol.Action, origin *protocol.ActionOrigin) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publishLocked(Item{Channel: channel, Action: a, Origin: origin})
	return b.seq
}

// PublishAll publishes items in order, taking the bus's lock once.
func (b *Bus) PublishAll(items iter.Seq[Item]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for it := range items {
		b.publishLocked(it)
	}
}

// publishLocked numbers an action and sends it, at once when nothing is
// held (the usual case, which allocates no batch), else behind what is.
func (b *Bus) publishLocked(it Item) {
	b.seq++
	env := protocol.ActionEnvelope{Channel: it.Channel, Action: it.Action, ServerSeq: b.seq, Origin: it.Origin}
	if len(b.held) == 0 {
		b.sendLocked(&env, nil)
		return
	}
	b.held = append(b.held, &Batch{envs: []protocol.ActionEnvelope{env}, released: true})
}

// Reserve numbers items, in order, and holds them and everything after
// them until Release: the caller writes them down in between. Every batch
// reserved must be released, or nothing after it is ever sent.
func (b *Bus) Reserve(items iter.Seq[Item]) *Batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserveLocked(items)
}

// Release lets a reserved batch go: it is sent, with every batch after it
// already released, once every batch before it has been.
func (b *Bus) Release(bt *Batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked(bt)
}

// Discard lets a reserved batch go unsent, as a host that stops before
// its journal took the batch does: what follows it goes on, and no replay
// from the ring spans it.
func (b *Bus) Discard(bt *Batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(bt.envs); n > 0 {
		b.cut = max(b.cut, bt.envs[n-1].ServerSeq)
	}
	bt.envs = nil
	b.releaseLocked(bt)
}

func (b *Bus) reserveLocked(items iter.Seq[Item]) *Batch {
	bt := &Batch{}
	for it := range items {
		b.seq++
		bt.envs = append(bt.envs, protocol.ActionEnvelope{Channel: it.Channel, Action: it.Action, ServerSeq: b.seq, Origin: it.Origin})
	}
	b.held = append(b.held, bt)
	return bt
}

// queueLocked sends a batch now when nothing is held, else behind what is.
func (b *Bus) queueLocked(bt *Batch) {
	if len(b.held) == 0 {
		bt.send(b)
		return
	}
	bt.released = true
	b.held = append(b.held, bt)
}

func (b *Bus) releaseLocked(bt *Batch) {
	bt.released = true
	b.flushLocked()
}

// flushLocked sends the released batches at the head of the queue.
func (b *Bus) flushLocked() {
	for len(b.held) > 0 && b.held[0].released {
		bt := b.held[0]
		b.held[0] = nil
		b.held = b.held[1:]
		if bt.send != nil {
			bt.send(b)
			continue
		}
		for i := range bt.envs {
			b.sendLocked(&bt.envs[i], bt.only)
		}
	}
	if len(b.held) == 0 {
		b.held = nil
	}
}

// sendLocked sends an envelope to its channel's subscribers that
// subscribed before it, keeping it for replay unless it is some
// subscribers' only.
func (b *Bus) sendLocked(env *protocol.ActionEnvelope, only func(Subscriber) bool) {
	b.sent = env.ServerSeq
	if only != nil {
		b.cut = env.ServerSeq
	} else if len(b.ring) > 0 {
		b.ring[b.next] = *env
		b.next = (b.next + 1) % len(b.ring)
	}
	w := b.subs[env.Channel]
	if w == nil {
		return
	}
	var f *Frame
	for i := range w.list {
		sub := &w.list[i]
		if env.ServerSeq <= sub.from || (only != nil && !only(sub.s)) {
			continue
		}
		if f == nil {
			f = ActionFrame(env)
		}
		sub.s.Send(f)
	}
}

// PublishTo sequences an action and sends it to those of the channel's
// subscribers only accepts. Such an envelope is not kept for replay (a
// replay could not tell whose it is): a client that missed one
// reconnects with snapshots instead.
func (b *Bus) PublishTo(channel string, a protocol.Action, only func(Subscriber) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bt := b.reserveLocked(func(yield func(Item) bool) { yield(Item{Channel: channel, Action: a}) })
	bt.only = only
	b.releaseLocked(bt)
}

// Echo sends an envelope to one subscriber without changing any state: a
// refused action (with rejectionReason), or an accepted one that changed
// nothing. It carries the serverSeq of the last change sent before it,
// which does not advance.
func (b *Bus) Echo(s Subscriber, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	if reason != "" && origin != nil && b.refused != nil {
		b.refused(origin)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queueLocked(&Batch{send: func(b *Bus) {
		env := protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: b.sent, Origin: origin}
		if reason != "" {
			env.RejectionReason = &reason
		}
		f := ActionFrame(&env)
		f.action = "" // the client sent it, so its version knows it
		s.Send(f)
	}})
}

// OnRefused has fn told of every client action refused (echoed with a
// rejectionReason), by its origin, as the refusal is queued and holding
// none of the bus's locks: the host lets go of its claim on the action's
// clientSeq. Set before the bus is used.
func (b *Bus) OnRefused(fn func(origin *protocol.ActionOrigin)) { b.refused = fn }

// Notify sends a protocol notification (root/sessionAdded, ...) to the
// channel's subscribers, or, with only, to those it accepts, in its place
// after the changes numbered before it. Notifications are not replayed.
func (b *Bus) Notify(channel, method string, params any, only func(Subscriber) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queueLocked(&Batch{send: func(b *Bus) {
		w := b.subs[channel]
		if w == nil {
			return
		}
		f := NotificationFrame(method, params)
		for _, sub := range w.list {
			if only == nil || only(sub.s) {
				sub.s.Send(f)
			}
		}
	}})
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

// AtLeast numbers the next change after seq, when it would not be
// already: a host taking a session another host ran numbers its changes
// after the other host's, so the session's serverSeqs keep rising. The
// numbers jump, so no replay from the ring spans the jump: a client that
// saw a change before it is replayed from elsewhere (the journal) or sent
// snapshots.
func (b *Bus) AtLeast(seq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq > b.seq {
		b.seq = seq
		b.cut = max(b.cut, seq)
	}
}

// Current returns the serverSeq of the last change numbered.
func (b *Bus) Current() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Subscribe adds s to channel's subscribers and returns the serverSeq the
// caller's snapshot is taken at: every change of the channel numbered so
// far is in the snapshot, and s is sent those numbered after it. Until the
// response carrying the snapshot is sent, s holds back the channel's
// frames.
func (b *Bus) Subscribe(s Subscriber, channel, requestID string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addLocked(s, channel, b.seq)
	s.Hold(channel, requestID)
	return b.seq
}

func (b *Bus) addLocked(s Subscriber, channel string, from int64) {
	w := b.subs[channel]
	if w == nil {
		w = &watchers{index: map[Subscriber]int{}}
		b.subs[channel] = w
	}
	if i, ok := w.index[s]; ok {
		w.list[i].from = from
		return
	}
	w.index[s] = len(w.list)
	w.list = append(w.list, watcher{s, from})
}

// Unsubscribe removes s from channel's subscribers.
func (b *Bus) Unsubscribe(s Subscriber, channel string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.subs[channel]
	if w == nil {
		return
	}
	if i, ok := w.index[s]; ok {
		w.remove(i)
	}
	if len(w.list) == 0 {
		delete(b.subs, channel)
	}
}

// remove drops the i'th watcher, putting the last in its place.
func (w *watchers) remove(i int) {
	s := w.list[i].s
	last := len(w.list) - 1
	w.list[i] = w.list[last]
	w.index[w.list[i].s] = i
	w.list[last] = watcher{}
	w.list = w.list[:last]
	delete(w.index, s)
}

// Subscribers reports how many subscribers watch channel.
func (b *Bus) Subscribers(channel string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.subs[channel]; w != nil {
		return len(w.list)
	}
	return 0
}

// DropWhere removes the subscriptions of channel whose subscriber drop
// picks, and returns them: who may no longer watch it.
func (b *Bus) DropWhere(channel string, drop func(Subscriber) bool) []Subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.subs[channel]
	if w == nil {
		return nil
	}
	var out []Subscriber
	for i := 0; i < len(w.list); {
		s := w.list[i].s
		if !drop(s) {
			i++
			continue
		}
		out = append(out, s)
		w.remove(i)
	}
	if len(w.list) == 0 {
		delete(b.subs, channel)
	}
	return out
}

// Drop removes every subscription of channel, as its state goes away, and
// returns who had one.
func (b *Bus) Drop(channel string) []Subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Subscriber
	if w := b.subs[channel]; w != nil {
		for _, sub := range w.list {
			out = append(out, sub.s)
		}
	}
	delete(b.subs, channel)
	return out
}

// Replay subscribes s to channels and returns what they missed after seq,
// in one step, so nothing is missed or sent twice: what was sent since seq
// is returned, and what is still held is sent when it goes. It fails when
// the changes are no longer kept.
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
	missed := int(b.sent - seq)
	for i := 0; i < missed; i++ {
		at := (b.next - missed + i + len(b.ring)) % len(b.ring)
		env := b.ring[at]
		if env.Action != nil && want[env.Channel] && s.Wants(env.Action.Type()) {
			out = append(out, env)
		}
	}
	for _, ch := range channels {
		b.addLocked(s, ch, b.sent)
		s.Hold(ch, requestID)
	}
	return out, true
}

// SubscribeSent subscribes s to channels from the last change sent, and
// returns its serverSeq: s is sent every change after it, and the caller
// gives s what it missed up to it from elsewhere (the journal). Until the
// response to requestID is sent, s holds back the channels' frames.
func (b *Bus) SubscribeSent(s Subscriber, channels []string, requestID string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range channels {
		b.addLocked(s, ch, b.sent)
		s.Hold(ch, requestID)
	}
	return b.sent
}

// replayableLocked reports whether a client that has seen every change up
// to seq can be replayed the rest from the ring: every change sent since
// is in it.
func (b *Bus) replayableLocked(seq int64) bool {
	return seq >= 0 && seq <= b.sent && b.sent-seq <= int64(len(b.ring)) && seq >= b.cut
}
