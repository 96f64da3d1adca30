package session

import (
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/protocol"
)

// awaitRoom waits, holding no lock, until the session's outbox has room
// for more of its agent's or a client's changes: their backpressure when
// the journal falls behind (journal.go).
func (s *Session) awaitRoom() {
	s.lockWithRoom()
	s.mu.Unlock() // nothing queued: nothing to hand on
}

// lockWithRoom takes the session's lock once its outbox has room.
func (s *Session) lockWithRoom() {
	s.mu.Lock()
	for room := s.out.FullLocked(); room != nil; room = s.out.FullLocked() {
		s.mu.Unlock()
		s.h.WaitBegins()
		<-room
		s.h.WaitEnds()
		s.mu.Lock()
	}
}

// unlock lets the session's lock go and hands on what its changes queued,
// its listing row first made anew if what it lists changed.
func (s *Session) unlock() {
	s.relistLocked()
	outbox.Release(&s.mu, s.out, s.h.Sink)
}

// unlockForClient is unlock for a client's action: its changes are
// handed on in the background (outbox.ReleaseAsync).
func (s *Session) unlockForClient() { outbox.ReleaseAsync(&s.mu, s.out, s.h.Sink) }

// echoLocked queues the echo of a client's action that changed nothing
// (bus.echo), in its place among the session's changes.
func (s *Session) echoLocked(c *conn.Conn, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	s.out.Later(func() { s.h.Bus.Echo(c, channel, a, origin, reason) })
}

// subscribeLocked queues c's subscription to channel right behind the
// changes made so far, which a snapshot taken now holds. The function it
// returns, called once the lock is let go, waits for the subscription and
// returns the serverSeq the snapshot is at.
func (s *Session) subscribeLocked(c *conn.Conn, channel, requestID string) func() int64 {
	seq := make(chan int64, 1)
	s.out.Later(func() { seq <- s.h.Bus.Subscribe(c, channel, requestID) })
	return func() int64 { return <-seq }
}
