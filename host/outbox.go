package host

import (
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/protocol"
)

// outboxes is the host as the sink of its outboxes (package outbox): a
// type of its own, so that Host's exported methods stay the host's API.
type outboxes Host

func (h *Host) outboxes() *outboxes { return (*outboxes)(h) }

// Publish sends a run of actions to the bus, written down first in the
// journal named (journal.go).
func (o *outboxes) Publish(journal string, run []outbox.Effect) int64 {
	return (*Host)(o).publish(journal, run)
}

// Go runs fn on a goroutine Close waits for.
func (o *outboxes) Go(fn func()) { o.wg.Go(fn) }

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
	for room := s.out.FullLocked(); room != nil; room = s.out.FullLocked() {
		s.mu.Unlock()
		s.h.metrics.journalWaits.Add(1)
		s.h.health.waiting.Add(1)
		<-room
		s.h.health.waiting.Add(-1)
		s.mu.Lock()
	}
}

// unlock lets the session's lock go and hands on what its changes queued.
func (s *session) unlock() { outbox.Release(&s.mu, s.out, s.h.outboxes()) }

// unlockRoot lets root's lock go and hands on what its changes queued.
func (h *Host) unlockRoot() { outbox.Release(&h.rootMu, h.rootOut, h.outboxes()) }

// echoLocked queues the echo of a client's action that changed nothing
// (bus.echo), in its place among the session's changes.
func (s *session) echoLocked(c *conn.Conn, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	s.out.Later(func() { s.h.bus.Echo(c, channel, a, origin, reason) })
}

// subscribeLocked queues c's subscription to channel right behind the
// changes made so far, which a snapshot taken now holds. The function it
// returns, called once the lock is let go, waits for the subscription and
// returns the serverSeq the snapshot is at.
func (s *session) subscribeLocked(c *conn.Conn, channel, requestID string) func() int64 {
	seq := make(chan int64, 1)
	s.out.Later(func() { seq <- s.h.bus.Subscribe(c, channel, requestID) })
	return func() int64 { return <-seq }
}
