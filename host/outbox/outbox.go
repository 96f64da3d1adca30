// Package outbox is how a state's owner tells the rest of the host what
// its changes mean without holding its lock while it does.
//
// A session (and root, and the external-session view) changes its state
// holding its one lock, and what the change means for others (frames to
// publish, the root count to move, the record to write, the catalogue
// order to update) is queued in its Outbox, in order. When the lock is let
// go ([Release]), the goroutine letting it go hands the queue on to a
// [Sink], with no lock held, while later changes keep queuing behind it;
// only one goroutine hands on a given outbox at a time, so everything
// leaves in the order it happened. The bus, the writer and the catalogue
// are then entered holding nothing of the owner's, and nothing of theirs
// waits on it.
//
// The package owns the queue and the hand-on; it knows nothing of what an
// effect does, of journals or of sessions.
package outbox

import (
	"iter"
	"sync/atomic"

	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/protocol"
)

// Effect is one thing a change asks of the rest of the host: an action to
// publish on a channel, or, when Do is set, anything else.
type Effect struct {
	Item fanout.Item
	Do   func()
}

// Items yields the actions of a run of effects with no Do.
func Items(batch []Effect) iter.Seq[fanout.Item] {
	return func(yield func(fanout.Item) bool) {
		for i := range batch {
			if !yield(batch[i].Item) {
				return
			}
		}
	}
}

// Sink is where outboxes hand their effects on.
type Sink interface {
	// Publish sends a run of actions, written down first in the named
	// journal ("" for none), and returns the bytes written to it.
	Publish(journal string, run []Effect) int64
	// Go runs fn on a goroutine of its own that the sink's owner waits for
	// before it stops: a record write may be among the effects.
	Go(fn func())
}

// MaxBacklog is how many effects an outbox queues, behind the batch being
// handed on, before the agents and clients adding to it wait: a journal
// that is slow holds a session's stream back, not its memory.
const MaxBacklog = 4096

// Outbox is a state's effects not yet handed on. It is guarded by the
// state's lock, except Written. The zero value is ready, with no journal.
type Outbox struct {
	journal  string // the journal its actions are written to first, or ""
	queue    []Effect
	spare    []Effect // the last batch handed on, reused
	handling bool     // a goroutine is handing the queue on
	// room, when set, is closed once the queue is taken to be handed on:
	// what waits for a full queue to have room again (FullLocked).
	room chan struct{}
	// drained, when set, is closed once nothing is queued or being
	// handed on (EmptyLocked).
	drained chan struct{}
	// written counts the bytes of its actions written to its journal, by
	// whichever goroutine hands it on.
	written atomic.Int64
}

// New returns an outbox whose actions are written to journal first ("":
// none).
func New(journal string) *Outbox { return &Outbox{journal: journal} }

// SetJournal names the journal its actions are written to first. Called
// before the outbox is used.
func (o *Outbox) SetJournal(journal string) { o.journal = journal }

// Publish queues an action to publish on channel.
func (o *Outbox) Publish(channel string, a protocol.Action, origin *protocol.ActionOrigin) {
	o.queue = append(o.queue, Effect{Item: fanout.Item{Channel: channel, Action: a, Origin: origin}})
}

// Later queues fn, to run in its place among the actions.
func (o *Outbox) Later(fn func()) {
	o.queue = append(o.queue, Effect{Do: fn})
}

// Len is how many effects are queued, not counting a batch being handed on.
func (o *Outbox) Len() int { return len(o.queue) }

// Written is the bytes of its actions written to its journal so far. It
// may be read holding nothing.
func (o *Outbox) Written() int64 { return o.written.Load() }

// take returns the effects for the goroutine about to let the lock go to
// hand on, or nil when there are none or another goroutine is handing
// them on (and will hand these on too). done is the batch it handed on
// last, given back for reuse.
func (o *Outbox) take(done []Effect) []Effect {
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

// EmptyLocked returns, while the outbox holds effects or hands some on, a
// channel closed once it is empty; nil when it is empty now.
func (o *Outbox) EmptyLocked() chan struct{} {
	if len(o.queue) == 0 && !o.handling {
		return nil
	}
	if o.drained == nil {
		o.drained = make(chan struct{})
	}
	return o.drained
}

// FullLocked returns, when the queue is full, a channel closed once it has
// room again; nil when it has room now.
func (o *Outbox) FullLocked() chan struct{} {
	if len(o.queue) < MaxBacklog {
		return nil
	}
	if o.room == nil {
		o.room = make(chan struct{})
	}
	return o.room
}

// handOn hands a batch of effects on: the actions to the sink in runs,
// the rest in their place among them.
func (o *Outbox) handOn(sink Sink, batch []Effect) {
	for len(batch) > 0 {
		i := 0
		for i < len(batch) && batch[i].Do == nil {
			i++
		}
		if i > 0 {
			o.written.Add(sink.Publish(o.journal, batch[:i]))
			batch = batch[i:]
			continue
		}
		batch[0].Do()
		batch = batch[1:]
	}
}

// Release lets mu go and hands on what o, which it guards, holds: the
// batch queued so far, its caller's changes among them. What others queue
// meanwhile is handed on by a goroutine of its own (Sink.Go), so a
// goroutine that lets a busy state's lock go (a client's request, with
// more behind it on its connection) is not kept handing on a stream it
// did not make.
func Release(mu *lockcheck.Mutex, o *Outbox, sink Sink) {
	batch := o.take(nil)
	mu.Unlock()
	if batch == nil {
		return
	}
	o.handOn(sink, batch)
	mu.Lock()
	more := o.take(batch)
	mu.Unlock()
	if more != nil {
		sink.Go(func() { handOnAll(mu, o, sink, more) })
	}
}

// ReleaseAsync is Release for a client's request: what o holds is handed
// on by a goroutine of its own, so the request does not wait for the
// journal to take its change, and the next message on its connection is
// read at once. A connection's requests are taken one at a time, so a
// client whose every action waited for the journal's ack would send no
// faster than the acks come back, and under load they come back slowly
// (docs/JOURNAL.md, "Sessions apart"). The changes still leave in order
// and are sent only once written. Without a journal nothing waits, and
// it is Release.
func ReleaseAsync(mu *lockcheck.Mutex, o *Outbox, sink Sink) {
	if o.journal == "" {
		Release(mu, o, sink)
		return
	}
	batch := o.take(nil)
	mu.Unlock()
	if batch != nil {
		sink.Go(func() { handOnAll(mu, o, sink, batch) })
	}
}

// handOnAll hands on batch and what follows it until o is empty.
func handOnAll(mu *lockcheck.Mutex, o *Outbox, sink Sink, batch []Effect) {
	for batch != nil {
		o.handOn(sink, batch)
		mu.Lock()
		batch = o.take(batch)
		mu.Unlock()
	}
}
