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
	"slices"

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
	seq  int64                     // the last serverSeq given out
	ring []protocol.ActionEnvelope // the changes sent, at their serverSeq modulo its length
	cut  int64                     // the newest change forgotten or never kept: replays start after it
	subs map[string]*watchers

	lanes   map[string]*lane                // the lanes with a batch not yet released
	laneOf  func(string) string             // a channel's lane (SetLanes)
	laneFor map[string]string               // laneOf's answers, kept
	subsOf  map[Subscriber]*member          // each subscriber's lanes and frames held back
	blocked map[string]map[*member]struct{} // the members whose backlogs wait for each lane
	dirty   []*member                       // members to flush (deliverLocked)
	waits   []*laneWait

	refused func(origin *protocol.ActionOrigin) // OnRefused's
}

// watchers are a channel's subscribers, each with the serverSeq it
// subscribed at: what it is sent is after it. A slice, for every action
// sent walks it; the index finds one to replace or remove.
type watchers struct {
	list  []watcher
	index map[*member]int
}

type watcher struct {
	m    *member
	from int64
}

// A Batch is a run of actions numbered by Reserve, sent once released.
type Batch struct {
	envs     []protocol.ActionEnvelope
	lanes    []string              // the lanes of its channels
	only     func(Subscriber) bool // when set, the subscribers it goes to; not kept for replay
	released bool
}

// Envelopes returns the batch's actions as numbered, to be written down
// before Release. They must not be changed.
func (bt *Batch) Envelopes() []protocol.ActionEnvelope { return bt.envs }

// New returns a bus that keeps replay changes for reconnecting clients,
// whose first change is numbered after seq.
func New(replay int, seq int64) *Bus {
	return &Bus{
		mu:      lockcheck.Mutex{Class: "bus"},
		seq:     seq,
		ring:    make([]protocol.ActionEnvelope, replay),
		subs:    map[string]*watchers{},
		lanes:   map[string]*lane{},
		laneOf:  func(ch string) string { return ch },
		laneFor: map[string]string{},
		subsOf:  map[Subscriber]*member{},
		blocked: map[string]map[*member]struct{}{},
	}
}

// SetLanes has channels grouped into lanes by laneOf (a session's channel
// and its chats' in one): a batch held back holds back only what its
// lanes' subscribers are sent after it. Without it every channel is a
// lane of its own, which is as correct and holds more. Set before the
// bus is used.
func (b *Bus) SetLanes(laneOf func(channel string) string) { b.laneOf = laneOf }

// Publish sequences an action that changed a channel's state and sends it
// to the channel's subscribers. The actions of one channel must be
// published in the order they changed it.
func (b *Bus) Publish(channel string, a protocol.Action, origin *protocol.ActionOrigin) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	env := protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: b.seq, Origin: origin}
	b.sendLocked(&env, nil)
	b.flushLocked()
	return b.seq
}

// PublishAll publishes items in order, taking the bus's lock once.
func (b *Bus) PublishAll(items iter.Seq[Item]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for it := range items {
		b.seq++
		env := protocol.ActionEnvelope{Channel: it.Channel, Action: it.Action, ServerSeq: b.seq, Origin: it.Origin}
		b.sendLocked(&env, nil)
	}
	b.flushLocked()
}

// Reserve numbers items, in order, and holds them, and what the
// subscribers of their lanes are sent after them, until Release: the
// caller writes them down in between. Every batch reserved must be
// released, or those subscribers are never sent anything again.
func (b *Bus) Reserve(items iter.Seq[Item]) *Batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserveLocked(items)
}

// Release lets a reserved batch go: it is sent to each subscriber once
// nothing numbered before it in the subscriber's lanes is held.
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
		if l := b.laneLocked(it.Channel); !slices.Contains(bt.lanes, l) {
			bt.lanes = append(bt.lanes, l)
		}
	}
	if len(bt.envs) > 0 {
		b.holdLocked(bt)
	}
	return bt
}

func (b *Bus) releaseLocked(bt *Batch) {
	if bt.released {
		return
	}
	bt.released = true
	// Out of its lanes first, so its changes are not held back behind
	// themselves; then what waited for it, once they are in place.
	moved := b.letGoLocked(bt)
	for i := range bt.envs {
		b.sendLocked(&bt.envs[i], bt.only)
	}
	for _, l := range moved {
		b.movedLocked(l)
	}
	b.flushLocked()
}

// sendLocked sends an envelope to its channel's subscribers that
// subscribed before it, each as soon as nothing numbered before it in
// the subscriber's lanes is held, and keeps it for replay unless it is
// some subscribers' only.
func (b *Bus) sendLocked(env *protocol.ActionEnvelope, only func(Subscriber) bool) {
	if only != nil {
		b.cut = max(b.cut, env.ServerSeq)
	} else if n := int64(len(b.ring)); n > 0 {
		b.ring[env.ServerSeq%n] = *env
	}
	w := b.subs[env.Channel]
	if w == nil {
		return
	}
	var f *Frame
	for i := range w.list {
		sub := &w.list[i]
		if env.ServerSeq <= sub.from || (only != nil && !only(sub.m.s)) {
			continue
		}
		if f == nil {
			f = ActionFrame(env)
		}
		b.deliverLocked(sub.m, 2*env.ServerSeq, f)
	}
}

// PublishTo sequences an action and sends it to those of the channel's
// subscribers only accepts. Such an envelope is not kept for replay (a
// replay could not tell whose it is): a client that missed one
// reconnects with snapshots instead.
func (b *Bus) PublishTo(channel string, a protocol.Action, only func(Subscriber) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	env := protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: b.seq}
	b.sendLocked(&env, only)
	b.flushLocked()
}

// Echo sends an envelope to one subscriber without changing any state: a
// refused action (with rejectionReason), or an accepted one that changed
// nothing. It goes after every change numbered before it that the
// subscriber watches, and carries the serverSeq of the last change
// numbered, which does not advance.
func (b *Bus) Echo(s Subscriber, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	if reason != "" && origin != nil && b.refused != nil {
		b.refused(origin)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	env := protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: b.seq, Origin: origin}
	if reason != "" {
		env.RejectionReason = &reason
	}
	f := ActionFrame(&env)
	f.action = "" // the client sent it, so its version knows it
	if m := b.subsOf[s]; m != nil {
		b.deliverLocked(m, 2*b.seq+1, f)
		b.flushLocked()
		return
	}
	s.Send(f)
}

// OnRefused has fn told of every client action refused (echoed with a
// rejectionReason), by its origin, as the refusal is queued and holding
// none of the bus's locks: the host lets go of its claim on the action's
// clientSeq. Set before the bus is used.
func (b *Bus) OnRefused(fn func(origin *protocol.ActionOrigin)) { b.refused = fn }

// Notify sends a protocol notification (root/sessionAdded, ...) to the
// channel's subscribers, or, with only, to those it accepts, each after
// the changes numbered before it that it watches. Notifications are not
// replayed.
func (b *Bus) Notify(channel, method string, params any, only func(Subscriber) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.subs[channel]
	if w == nil {
		return
	}
	f := NotificationFrame(method, params)
	for _, sub := range w.list {
		if only == nil || only(sub.m.s) {
			b.deliverLocked(sub.m, 2*b.seq+1, f)
		}
	}
	b.flushLocked()
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

// addLocked adds s to channel's watchers from serverSeq from on: what it
// holds back of the channel up to from is in the state it is given.
func (b *Bus) addLocked(s Subscriber, channel string, from int64) {
	w := b.subs[channel]
	if w == nil {
		w = &watchers{index: map[*member]int{}}
		b.subs[channel] = w
	}
	m := b.memberLocked(s)
	if i, ok := w.index[m]; ok {
		w.list[i].from = from
		b.purgeLocked(m, channel, 2*from)
		return
	}
	w.index[m] = len(w.list)
	w.list = append(w.list, watcher{m, from})
	m.lanes[b.laneLocked(channel)]++
}

// Unsubscribe removes s from channel's subscribers.
func (b *Bus) Unsubscribe(s Subscriber, channel string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.subs[channel]
	m := b.subsOf[s]
	if w == nil || m == nil {
		return
	}
	if i, ok := w.index[m]; ok {
		w.remove(i)
		b.leftLocked(m, channel)
	}
	if len(w.list) == 0 {
		delete(b.subs, channel)
	}
}

// remove drops the i'th watcher, putting the last in its place.
func (w *watchers) remove(i int) {
	m := w.list[i].m
	last := len(w.list) - 1
	w.list[i] = w.list[last]
	w.index[w.list[i].m] = i
	w.list[last] = watcher{}
	w.list = w.list[:last]
	delete(w.index, m)
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
		m := w.list[i].m
		if !drop(m.s) {
			i++
			continue
		}
		out = append(out, m.s)
		w.remove(i)
		b.leftLocked(m, channel)
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
			out = append(out, sub.m.s)
			b.leftLocked(sub.m, channel)
		}
	}
	delete(b.subs, channel)
	delete(b.laneFor, channel)
	return out
}

// Attach subscribes s to channels from the last change numbered, upTo,
// for a reconnecting client whose missed changes the caller gives it
// (Missed, or the journal): s is sent live every change after upTo. The
// changes up to it may not all be sent yet (written down first): ready
// is closed once every one of the channels' is, and the caller reads
// them after. Until the response to requestID is sent, s holds back the
// channels' frames.
func (b *Bus) Attach(s Subscriber, channels []string, requestID string) (upTo int64, ready <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lanes := make([]string, 0, len(channels))
	for _, ch := range channels {
		b.addLocked(s, ch, b.seq)
		s.Hold(ch, requestID)
		if l := b.laneLocked(ch); !slices.Contains(lanes, l) {
			lanes = append(lanes, l)
		}
	}
	return b.seq, b.waitLocked(lanes, b.seq)
}

// Missed returns the changes of channels numbered after seq up to upTo
// (Attach's), from those the bus keeps; it fails when it does not keep
// them all: the client is replayed from the journal or sent snapshots.
// Call it once Attach's ready is closed.
func (b *Bus) Missed(s Subscriber, seq, upTo int64, channels []string) ([]protocol.ActionEnvelope, bool) {
	want := make(map[string]bool, len(channels))
	for _, ch := range channels {
		want[ch] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := int64(len(b.ring))
	// Each change since seq has its own place in the ring while fewer
	// than its length have been numbered since.
	if seq < 0 || seq > upTo || seq < b.cut || b.seq-seq > n {
		return nil, false
	}
	out := []protocol.ActionEnvelope{}
	for q := seq + 1; q <= upTo; q++ {
		// A place holding another change is one of a lane the client does
		// not watch, numbered and not yet sent.
		env := &b.ring[q%n]
		if env.ServerSeq == q && env.Action != nil && want[env.Channel] && s.Wants(env.Action.Type()) {
			out = append(out, *env)
		}
	}
	return out, true
}
