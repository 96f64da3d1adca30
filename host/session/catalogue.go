package session

import (
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// ExternalMeta is the _meta key that marks an external session.
const ExternalMeta = "vscode.external"

// OwnModifiedAt is when a session of ahpd's own was last modified; ok is
// false for a backend's own session, or a time that does not parse.
func (s *Session) OwnModifiedAt() (time.Time, bool) {
	s.mu.Lock()
	defer s.unlock()
	if s.rec.External {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s.summary.ModifiedAt)
	return t, err == nil
}

// ForgetOwn forgets the conversations of a session disposed of: their
// transcripts went with it.
func (s *Session) ForgetOwn() {
	s.mu.Lock()
	keys := []catalogue.Key{{Provider: s.provider, ID: s.id}}
	for _, cr := range s.rec.Chats {
		if cr.Conversation != "" {
			keys = append(keys, catalogue.Key{Provider: s.provider, ID: cr.Conversation})
		}
	}
	s.unlock()
	s.h.ForgetOwn(keys)
}

// noteOwnLocked queues noting the conversations of a session of the
// host's own, whose transcripts are then not external. The caller holds
// s.mu.
func (s *Session) noteOwnLocked() {
	if keys := s.ownKeysLocked(); keys != nil {
		s.out.Later(func() { s.h.NoteOwn(keys) })
	}
}

// OwnKeysUnshared lists the conversations of a session its caller just
// made (New, Restore) and has not shared yet, which no lock need guard:
// the host notes them as its own before anyone can reach the session.
func (s *Session) OwnKeysUnshared() []catalogue.Key { return s.ownKeysLocked() }

// ownKeysLocked lists the session's conversations, or nil for an external
// session. The caller holds s.mu.
func (s *Session) ownKeysLocked() []catalogue.Key {
	if s.rec.External {
		return nil
	}
	keys := []catalogue.Key{{Provider: s.provider, ID: s.id}}
	for _, cr := range s.rec.Chats {
		if cr.Conversation != "" {
			keys = append(keys, catalogue.Key{Provider: s.provider, ID: cr.Conversation})
		}
	}
	return keys
}

// adoptLocked makes an opened external session the host's own, once a
// person's turn has gone out in it: the mark goes, every listing shows it,
// and clients that were not shown it are told of it. The person whose turn
// it was becomes its owner, as the one who made it here. The caller holds
// s.mu.
func (s *Session) adoptLocked(by grants.Principal) {
	if !s.rec.External {
		return
	}
	s.rec.External = false
	if s.rec.Owner == "" {
		s.rec.Owner = PrincipalString(s.h.OwnerOf(by))
	}
	meta := protocol.Object{}
	for k, v := range s.state.Meta {
		if k != ExternalMeta {
			meta[k] = v
		}
	}
	if len(meta) == 0 {
		meta = nil
	}
	// Clients watching the session see the mark go too.
	s.emitSessionLocked(&protocol.SessionMetaChangedAction{Meta: meta}, nil)
	s.noteOwnLocked()
	h := s.h
	k := catalogue.Key{Provider: s.provider, ID: s.id}
	wasShown := h.Shown(k)
	s.summary.Meta = meta
	if wasShown {
		s.announced = true
		params := &protocol.SessionSummaryChangedParams{
			Channel: protocol.RootURI, Session: s.uri, Changes: protocol.PartialSessionSummary{Meta: protocol.Object{ExternalMeta: jsontext.Value("false")}},
		}
		readers := s.readersLocked()
		s.out.Later(func() { h.Bus.Notify(protocol.RootURI, "root/sessionSummaryChanged", params, readers) })
	} else {
		s.announceLocked()
	}
	s.persistLocked()
	h.Log.Info("adopted an external session", "session", s.uri)
}
