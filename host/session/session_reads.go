package session

import (
	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// Reads of a session's state for the rest of the host, each under the
// session's lock, taken and let go here: nothing outside the package can
// take it (docs/ARCHITECTURE.md, "Lock rules").

// Owner is the principal the session's record names as its owner, as
// written ("" for none).
func (s *Session) Owner() string {
	s.mu.Lock()
	defer s.unlock()
	return s.rec.Owner
}

// Request is the digest of the createSession request that made the
// session ("" for one made otherwise).
func (s *Session) Request() string {
	s.mu.Lock()
	defer s.unlock()
	return s.rec.Request
}

// Folder is the session's folder: where its work is done.
func (s *Session) Folder() string {
	s.mu.Lock()
	defer s.unlock()
	return s.rec.Dir()
}

// CurrentSummary is the session's summary as it is now.
func (s *Session) CurrentSummary() protocol.SessionSummary {
	s.mu.Lock()
	defer s.unlock()
	return s.summary
}

// Unused reports whether nothing holds the session: asleep, unpinned,
// not falling asleep, stored and not disposed of (unusedLocked).
func (s *Session) Unused() bool {
	s.mu.Lock()
	defer s.unlock()
	return s.unusedLocked()
}

// Persist writes the session's record (persistLocked).
func (s *Session) Persist() {
	s.mu.Lock()
	defer s.unlock()
	s.persistLocked()
}

// ChatOf returns the session's chat of a URI, or nil.
func (s *Session) ChatOf(uri string) *ChatEntry {
	s.mu.Lock()
	defer s.unlock()
	return s.chatLocked(uri)
}

// URI is the session's URI, the one the client created it under.
func (s *Session) URI() string { return s.uri }

// ID is the session's id, which names its record, worktree and refs.
func (s *Session) ID() string { return s.id }

// Provider names the session's backend.
func (s *Session) Provider() string { return s.provider }

// Backend is the session's backend, nil when its provider is not
// available on this host.
func (s *Session) Backend() plugins.Backend { return s.backend }

// Chat is the chat's conversation.
func (e *ChatEntry) Chat() *chats.Chat { return e.chat }

// Record is the chat's record. Its fields are the session's: read them
// holding nothing only where nothing changes them (a chat on its way out).
func (e *ChatEntry) Record() *ChatRecord { return e.rec }

// Awake reports whether the session holds its chats' turns in memory: it
// is counted as resident.
func (s *Session) Awake() bool { return s.awake.Load() }

// SetRecordRev sets the cluster revision of the record the session was
// made from. Called before the session is shared.
func (s *Session) SetRecordRev(rev uint64) { s.recordRev = rev }

// NoteRestartPointSize records the bytes of the restart point just
// written, which the next one is weighed against.
func (s *Session) NoteRestartPointSize(size int64) { s.restarts.size.Store(size) }
