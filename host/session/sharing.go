package session

import (
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/protocol"
)

// KeySharing is the config key of who besides its owner may use the
// session (grants.Sharing): offered to people on a host with users, and
// changed only by the owner or an administrator (session:share).
const KeySharing = "sharing"

// Target is the session as the grants check it: its owner and sharing.
func (s *Session) Target() grants.Target {
	s.mu.Lock()
	defer s.unlock()
	return s.targetLocked()
}

func (s *Session) targetLocked() grants.Target {
	owner, _ := grants.Parse(s.rec.Owner)
	return grants.Session(owner, StringValue(s.configValuesLocked()[KeySharing]))
}

// Readers is which of the root's subscribers are told of the session (see
// readersLocked).
func (s *Session) Readers() func(fanout.Subscriber) bool {
	s.mu.Lock()
	defer s.unlock()
	return s.readersLocked()
}

// sharingChangedLocked follows a change of who may read the session,
// once the change is out: whoever may no longer read it loses their
// subscriptions to it and is told on the root channel it is gone; whoever
// may now and could not before is told it is there.
func (s *Session) sharingChangedLocked(before, after grants.Target) {
	channels := append([]string{s.uri}, s.order...)
	uri, sum, announced := s.uri, s.summary, s.announced
	h := s.h
	s.out.Later(func() {
		h.KeepOut(channels, after)
		if !announced {
			return
		}
		reads := func(t grants.Target) func(fanout.Subscriber) bool {
			return func(sub fanout.Subscriber) bool {
				c, ok := sub.(*conn.Conn)
				return ok && h.MayRead(c, t)
			}
		}
		was, is := reads(before), reads(after)
		h.Bus.Notify(protocol.RootURI, "root/sessionRemoved", &protocol.SessionRemovedParams{Channel: protocol.RootURI, Session: uri},
			func(sub fanout.Subscriber) bool { return was(sub) && !is(sub) })
		h.Bus.Notify(protocol.RootURI, "root/sessionAdded", &protocol.SessionAddedParams{Channel: protocol.RootURI, Summary: sum},
			func(sub fanout.Subscriber) bool { return !was(sub) && is(sub) })
	})
}

// readersLocked is which of the root's subscribers are told of the
// session: nil for all of them, unless its sharing keeps it from some.
func (s *Session) readersLocked() func(fanout.Subscriber) bool {
	t := s.targetLocked()
	if t.Owner.IsZero() || t.Sharing != grants.SharePrivate {
		return nil
	}
	may := s.h.MayRead
	return func(sub fanout.Subscriber) bool {
		c, ok := sub.(*conn.Conn)
		return ok && may(c, t)
	}
}
