package session

import (
	"encoding/json"
	"errors"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// Writing sessions to the store.
//
// A client is never told of a session a restart would lose. A provisional
// session is stored when its first turn is on its way, before anything is
// made for it (its worktree, its checkpoint, its agent, the backend's
// transcript): a write that fails there fails the turn, leaves the session
// provisional and unannounced, and leaves nothing on disk; the next
// message tries again. A session is announced only once stored. Commands
// that add to a stored session (createChat, moveChat into a new session)
// write before they tell anyone, and fail with -32603 when they cannot.
//
// Any other write that fails (a turn's end, a title, marks) cannot be
// taken back: the change has been told. The session goes on, its clients
// are told through its _meta (storeErrorMeta), and the next write that
// succeeds, which writes the whole record, catches the store up and takes
// the mark away.

// storeErrorMeta is the _meta key, on a session's state and its catalogue
// row, that says its latest changes are not stored: an ErrorInfo.
const storeErrorMeta = "ahpd.storeError"

// StoreError is a write to the session store that failed.
type StoreError struct{ Err error }

// Error says what a client is told: the cause alone, without the store's
// paths (the host's business) or the session's URI (the client's own
// string), which the log has.
func (e *StoreError) Error() string {
	return "could not store the session: " + rootCause(e.Err).Error()
}

func (e *StoreError) Unwrap() error { return e.Err }

// encodeLocked brings the session's record up to date with its state and
// encodes it. Every encoding is a newer generation of the record: a write's
// result is taken only if no newer one has been asked for since.
func (s *Session) encodeLocked() ([]byte, uint64, error) {
	rec := &s.rec
	rec.Title = s.state.Title
	rec.Read = s.state.Status&protocol.StatusIsRead != 0
	rec.Archived = s.state.Status&protocol.StatusIsArchived != 0
	rec.Lifecycle = string(s.state.Lifecycle)
	rec.CreationError = ""
	// A session that started after all keeps no creation error: the
	// protocol's session/ready leaves it in the state, but a restart would
	// bring it back as a failure to start.
	if s.state.CreationError != nil && s.state.Lifecycle == protocol.SessionLifecycleFailed {
		rec.CreationError = s.state.CreationError.Message
	}
	if s.state.Config != nil {
		rec.Config = s.state.Config.Values
	}
	if s.summary.ModifiedAt > rec.ModifiedAt {
		rec.ModifiedAt = s.summary.ModifiedAt
	}
	for _, cr := range rec.Chats {
		if e := s.chats[cr.URI]; e != nil {
			cr.ModifiedAt = e.chat.State().ModifiedAt
		}
	}
	s.saveGen++
	if !s.h.KeepsRecords {
		return nil, s.saveGen, nil
	}
	data, err := EncodeRecord(rec)
	return data, s.saveGen, err
}

// StoreNow writes the record as it is now and waits for the write, for a
// change that must be kept before anyone is told of it. It takes s.mu to
// encode the record and to note the result, and holds nothing while the
// disk works. A write that succeeds catches up on any that failed before.
func (s *Session) StoreNow() error {
	s.mu.Lock()
	data, gen, err := s.encodeLocked()
	s.unlock()
	if err == nil && s.h.KeepsRecords {
		err = s.h.WriteRecord(s.id, data)
	}
	s.mu.Lock()
	defer s.unlock()
	if err != nil {
		s.h.Log.Error("could not store a session", "session", s.uri, "err", err)
		return &StoreError{Err: err}
	}
	s.stored = true // this record, or a newer one queued meanwhile, is the store's
	s.writtenLocked(gen)
	return nil
}

// writtenLocked takes note that generation gen of the record is stored.
func (s *Session) writtenLocked(gen uint64) {
	if gen != s.saveGen {
		return // a newer one is on its way, and says how it went
	}
	s.stored = true
	if s.storeFailing {
		s.storeFailing = false
		s.setStoreMetaLocked(nil)
		s.h.Log.Info("the session is stored again", "session", s.uri)
	}
}

// persistLocked writes what the store keeps of the session after a change
// that has been told. A provisional session nobody sent a turn in is not
// kept: nothing announced it, and a restart forgets it. A write that fails
// is marked on the session for its clients, until one succeeds.
func (s *Session) persistLocked() {
	if s.disposed || (s.provisional && !s.stored) {
		return
	}
	data, gen, err := s.encodeLocked()
	switch {
	case err != nil:
		s.failedLocked(gen, err)
		return
	case !s.h.KeepsRecords:
		s.writtenLocked(gen)
		return
	}
	s.out.Later(func() {
		s.h.QueueRecord(s.id, data, func(err error) {
			s.mu.Lock()
			defer s.unlock()
			if err != nil {
				s.failedLocked(gen, err)
				return
			}
			if !s.disposed {
				s.writtenLocked(gen)
			}
		})
	})
}

// failedLocked marks a write of generation gen that failed on the
// session, for its clients, until one succeeds.
func (s *Session) failedLocked(gen uint64, err error) {
	if gen != s.saveGen || s.disposed {
		return
	}
	s.h.Log.Error("could not store a session", "session", s.uri, "err", err)
	if s.storeFailing {
		return
	}
	err = &StoreError{Err: err}
	s.storeFailing = true
	msg := err.Error() + "; the session's latest changes are lost if ahpd restarts before a write succeeds"
	info, jerr := json.Marshal(protocol.ErrorInfo{ErrorType: "storeFailed", Message: msg})
	if jerr != nil {
		return
	}
	s.setStoreMetaLocked(jsontext.Value(info))
}

// setStoreMetaLocked sets the session's storeErrorMeta to v, or takes it
// away when v is nil, keeping its other _meta keys.
func (s *Session) setStoreMetaLocked(v jsontext.Value) {
	meta := protocol.Object{}
	for k, x := range s.state.Meta {
		if k != storeErrorMeta {
			meta[k] = x
		}
	}
	if v != nil {
		meta[storeErrorMeta] = v
	}
	if len(meta) == 0 {
		meta = nil
	}
	s.emitSessionLocked(&protocol.SessionMetaChangedAction{Meta: meta}, nil)
}

// storeFirst stores a provisional session as its first turn sets out,
// before anything is made for it. When the write fails, nothing of the
// session is left in the store: a write can fail after its rename
// (syncing the folder), so the record is taken away again.
func (s *Session) storeFirst() error {
	s.mu.Lock()
	need := s.provisional && !s.stored && !s.disposed
	s.unlock()
	if !need {
		return nil
	}
	err := s.StoreNow()
	if err == nil {
		return nil
	}
	if rerr := s.h.RemoveRecord(s.id); rerr != nil {
		s.h.Log.Error("could not take away the record of a session that is not kept", "session", s.uri, "err", rerr)
	}
	return err
}

// commitLocked makes a provisional session the host's own, once it is
// stored (storeFirst): it is announced. It leaves the session provisional
// when it is not stored.
func (s *Session) commitLocked() error {
	if !s.provisional {
		return nil
	}
	if !s.stored {
		return &StoreError{Err: errors.New("the session is not stored")}
	}
	s.provisional = false
	s.announceLocked()
	return nil
}

// isStoreError reports whether err is a failed write to the store.
func isStoreError(err error) bool {
	var se *StoreError
	return errors.As(err, &se)
}

// StoreFailed is the error a command answers with when what it made
// cannot be kept.
func StoreFailed(err error) error {
	return protocol.Errorf(protocol.CodeInternalError, "%v", err)
}

// rootCause follows err's wrapping down to the error it started from (the
// first, where several were joined): for a failed file operation, the
// system's reason.
func rootCause(err error) error {
	for {
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			if next := x.Unwrap(); next != nil {
				err = next
				continue
			}
		case interface{ Unwrap() []error }:
			if list := x.Unwrap(); len(list) > 0 && list[0] != nil {
				err = list[0]
				continue
			}
		}
		return err
	}
}
