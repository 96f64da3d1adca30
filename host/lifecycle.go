package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// newSession makes a provisional session of c's: there for the client
// that made it, announced to everyone when its first turn reaches the
// backend.
func (h *Host) newSession(c *conn.Conn, spec session.Spec) *session.Session {
	spec.By = session.Creator{ClientID: c.Client(), Principal: c.Principal()}
	return session.New(h.env, spec)
}

// restore makes a session of a stored record and, when there is one, of
// its journal's tail (rc, restart.go). It comes back asleep: its agents
// start again on its next turn.
func (h *Host) restore(rec *session.Record, rc *session.Recovered) (*session.Session, error) {
	su, err := protocol.ParseSessionURI(rec.URI)
	if err != nil {
		return nil, err
	}
	if len(rec.WorkingDirectories) == 0 || len(rec.Chats) == 0 {
		return nil, errors.New("the record has no working directory or no chat")
	}
	backend, _ := h.opts.Backends.Get(rec.Provider)
	s := session.Restore(h.env, su.ID, rec, rc, backend, func(r *session.Record) protocol.SessionConfigState {
		owner, _ := grants.Parse(r.Owner)
		config, _ := h.resolveConfig(backend, r.Config, owner, r.Dir())
		return config
	})
	if h.loadingOwn != nil {
		// Loading: noted all at once after (loadSessions), for each
		// noting copies the whole set.
		*h.loadingOwn = append(*h.loadingOwn, s.OwnKeysUnshared()...)
	} else {
		h.ext.NoteOwn(s.OwnKeysUnshared())
	}
	return s, nil
}

// dispose ends the session: its turns stop, its agents go, the backend's
// copy of its conversations is deleted, its record is dropped and every
// client is told.
func (h *Host) dispose(ctx context.Context, s *session.Session) error {
	s.Pin(false) // not while it falls asleep
	defer s.Unpin()
	done, list, gone := s.CancelChats()
	if gone {
		return nil
	}
	for _, d := range done {
		<-d
	}
	announced := s.NoteDisposed()

	var errs []error
	for _, e := range list {
		if err := e.Chat().Close(); err != nil {
			errs = append(errs, err)
		}
		if s.Backend() != nil && e.Record().Started {
			conv := plugins.Conversation{ID: e.Record().Conversation, Dir: s.WorkDir()}
			if err := s.Backend().Delete(ctx, conv); err != nil {
				errs = append(errs, fmt.Errorf("deleting the backend's copy of %s: %w", e.Record().URI, err))
			}
		}
	}
	if err := s.CleanUpGit(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := h.removeRecord(s.ID()); err != nil {
		errs = append(errs, fmt.Errorf("removing the stored session: %w", err))
	}
	if err := h.forgetJournal(ctx, s.URI()); err != nil {
		errs = append(errs, fmt.Errorf("deleting the session's journal: %w", err))
	}
	h.mu.Lock()
	delete(h.sessions, s.ID())
	h.mu.Unlock()
	h.order.Remove(s)
	if h.cluster != nil {
		h.cluster.LetGo(s.ID())
	}
	s.ForgetOwn()
	for _, e := range list {
		h.unsubscribeAll(e.Record().URI)
		h.forgetChatHome(e.Record().URI)
	}
	h.unsubscribeAll(s.URI())
	s.EndRunning()
	if announced {
		h.bus.Notify(protocol.RootURI, "root/sessionRemoved", &protocol.SessionRemovedParams{Channel: protocol.RootURI, Session: s.URI()}, nil)
	}
	return errors.Join(errs...)
}

// unsubscribeAll drops every subscription of a channel that is gone.
func (h *Host) unsubscribeAll(channel string) {
	for _, sub := range h.bus.Drop(channel) {
		sub.(*conn.Conn).Forget(channel)
	}
}

// checkSessionID refuses ids a backend cannot file a conversation under.
func checkSessionID(id string) error {
	switch {
	case strings.HasPrefix(id, "."):
		return fmt.Errorf("session id %s starts with a dot", protocol.Quote(id))
	case strings.ContainsAny(id, "\\\x00"):
		return fmt.Errorf("session id %s has a character a file name cannot hold", protocol.Quote(id))
	case len(id) > 200:
		return fmt.Errorf("session id is longer than 200 characters")
	}
	return nil
}
