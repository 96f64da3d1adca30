package host

import (
	"iter"
	"sync/atomic"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/protocol"
)

// The outbox: how a state's owner tells the rest of the host without
// holding its lock while it does.
//
// A session (and root) changes its state holding its one lock, and what
// the change means for others (frames to publish, the root count to move,
// the record to write, the catalogue order to update) is queued in its
// outbox, in order. When the lock is let go (session.unlock), the
// goroutine letting it go hands the queue on, with no lock held, while
// later changes keep queuing behind it; only one goroutine hands on a
// given outbox at a time, so everything leaves in the order it happened.
// The bus, the writer and the catalogue are then entered holding nothing
// of the session's, and nothing of theirs waits on a session.

// effect is one thing a change asks of the rest of the host: an action to
// publish on a channel, or, when do is set, anything else.
type effect struct {
	item fanout.Item
	do   func()
}

// items yields the actions of a run of effects with no do.
func items(batch []effect) iter.Seq[fanout.Item] {
	return func(yield func(fanout.Item) bool) {
		for i := range batch {
			if !yield(batch[i].item) {
				return
			}
		}
	}
}

// outbox is a state's effects not yet handed on. It is guarded by the
// state's lock.
type outbox struct {
	journal  string // the journal its actions are written to first, or "" (journal.go)
	queue    []effect
	spare    []effect // the last batch handed on, reused
	handling bool     // a goroutine is handing the queue on
	// room, when set, is closed once the queue is taken to be handed on:
	// what waits for a full queue to have room again (awaitRoom).
	room chan struct{}
	// drained, when set, is closed once nothing is queued or being
	// handed on (emptyLocked).
	drained chan struct{}
	// written counts the bytes of its actions written to its journal,
	// by whichever goroutine hands it on (restart.go).
	written atomic.Int64
}

func (o *outbox) publish(channel string, a protocol.Action, origin *protocol.ActionOrigin) {
	o.queue = append(o.queue, effect{item: fanout.Item{Channel: channel, Action: a, Origin: origin}})
}

func (o *outbox) later(fn func()) {
	o.queue = append(o.queue, effect{do: fn})
}

// take returns the effects for the goroutine about to let the lock go to
// hand on, or nil when there are none or another goroutine is handing
// them on (and will hand these on too). done is the batch it handed on
// last, given back for reuse.
func (o *outbox) take(done []effect) []effect {
	if done != nil {
		clear(done)
		o.spare = done[:0]
	}
	if len(o.queue) == 0 {
		if done != nil {
			o.handling = false
		}
		if !o.handling && o.drained != nil {
			close(o.drained)
			o.drained = nil
		}
		return nil
	}
	if o.handling && done == nil {
		return nil
	}
	o.handling = true
	batch := o.queue
	o.queue = o.spare
	o.spare = nil
	if o.room != nil {
		close(o.room)
		o.room = nil
	}
	return batch
}

// emptyLocked returns, while the outbox holds effects or hands some on, a
// channel closed once it is empty; nil when it is empty now.
func (o *outbox) emptyLocked() chan struct{} {
	if len(o.queue) == 0 && !o.handling {
		return nil
	}
	if o.drained == nil {
		o.drained = make(chan struct{})
	}
	return o.drained
}

// maxBacklog is how many effects a session's outbox queues, behind the
// batch being handed on, before the agents and clients adding to it wait:
// a journal that is slow holds a session's stream back, not its memory.
const maxBacklog = 4096

// fullLocked returns, when the queue is full, a channel closed once it
// has room again; nil when it has room now.
func (o *outbox) fullLocked() chan struct{} {
	if len(o.queue) < maxBacklog {
		return nil
	}
	if o.room == nil {
		o.room = make(chan struct{})
	}
	return o.room
}

// handOn hands a batch of effects on: the actions to the bus in one go,
// written down first in the journal named, the rest in their place among
// them.
func (h *Host) handOn(o *outbox, batch []effect) {
	for len(batch) > 0 {
		i := 0
		for i < len(batch) && batch[i].do == nil {
			i++
		}
		if i > 0 {
			o.written.Add(h.publish(o.journal, batch[:i]))
			batch = batch[i:]
			continue
		}
		batch[0].do()
		batch = batch[1:]
	}
}

// awaitRoom waits, holding no lock, until the session's outbox has room
// for more of its agent's or a client's changes: their backpressure when
// the journal falls behind (journal.go).
func (s *session) awaitRoom() {
	s.lockWithRoom()
	s.mu.Unlock() // nothing queued: nothing to hand on
}

// lockWithRoom takes the session's lock once its outbox has room.
func (s *session) lockWithRoom() {
	s.mu.Lock()
	for room := s.out.fullLocked(); room != nil; room = s.out.fullLocked() {
		s.mu.Unlock()
		s.h.metrics.journalWaits.Add(1)
		s.h.health.waiting.Add(1)
		<-room
		s.h.health.waiting.Add(-1)
		s.mu.Lock()
	}
}

// unlock lets the session's lock go and hands on what its changes queued.
func (s *session) unlock() { s.h.release(&s.mu, &s.out) }

// unlockRoot lets root's lock go and hands on what its changes queued.
func (h *Host) unlockRoot() { h.release(&h.rootMu, &h.rootOut) }

// release lets mu go and hands on what o, which it guards, holds: the
// batch queued so far, its caller's changes among them. What others queue
// meanwhile is handed on by a goroutine of its own, so a goroutine that
// lets a busy session's lock go (a client's request, with more behind it
// on its connection) is not kept handing on a stream it did not make.
func (h *Host) release(mu *lockcheck.Mutex, o *outbox) {
	batch := o.take(nil)
	mu.Unlock()
	if batch == nil {
		return
	}
	h.handOn(o, batch)
	mu.Lock()
	more := o.take(batch)
	mu.Unlock()
	if more != nil {
		h.wg.Add(1) // Close waits for it: a record write may be among them
		go h.handOnAll(mu, o, more)
	}
}

// handOnAll hands on batch and what follows it until o is empty.
func (h *Host) handOnAll(mu *lockcheck.Mutex, o *outbox, batch []effect) {
	defer h.wg.Done()
	for batch != nil {
		h.handOn(o, batch)
		mu.Lock()
		batch = o.take(batch)
		mu.Unlock()
	}
}

// echoLocked queues the echo of a client's action that changed nothing
// (bus.echo), in its place among the session's changes.
func (s *session) echoLocked(c *conn.Conn, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	s.out.later(func() { s.h.bus.Echo(c, channel, a, origin, reason) })
}

// subscribeLocked queues c's subscription to channel right behind the
// changes made so far, which a snapshot taken now holds. The function it
// returns, called once the lock is let go, waits for the subscription and
// returns the serverSeq the snapshot is at.
func (s *session) subscribeLocked(c *conn.Conn, channel, requestID string) func() int64 {
	seq := make(chan int64, 1)
	s.out.later(func() { seq <- s.h.bus.Subscribe(c, channel, requestID) })
	return func() int64 { return <-seq }
}
