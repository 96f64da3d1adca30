package session

import (
	"github.com/ahpd/ahpd/protocol"
)

// Marks: a session's read and archived bits are its own, and so are each
// chat's; the protocol keeps them apart. The default chat is the session
// as a person sees it, so its marks and the session's move together:
// reading or archiving either is reading or archiving both (the protocol
// calls archiving the default chat the same as archiving the session).
// New activity in the default chat (a turn starting, a question asked)
// marks both unread. A client of 0.9, which has no chat marks, sees the
// session's.

// markFlags are the bits that are marks, not activity.
const markFlags = protocol.StatusIsRead | protocol.StatusIsArchived

// defaultChatLocked returns the session's default chat, or nil.
func (s *Session) defaultChatLocked() *ChatEntry {
	if s.state.DefaultChat == nil {
		return nil
	}
	return s.chats[*s.state.DefaultChat]
}

// markChatFromSessionLocked gives the default chat the session's marks,
// after the session's changed. Called with s.mu held.
func (s *Session) markChatFromSessionLocked() {
	e := s.defaultChatLocked()
	if e == nil {
		return
	}
	want, have := s.state.Status&markFlags, e.chat.State().Status&markFlags
	if want&protocol.StatusIsRead != have&protocol.StatusIsRead {
		s.emitChatLocked(e.chat, &protocol.ChatIsReadChangedAction{IsRead: want&protocol.StatusIsRead != 0}, nil)
	}
	if want&protocol.StatusIsArchived != have&protocol.StatusIsArchived {
		s.emitChatLocked(e.chat, &protocol.ChatIsArchivedChangedAction{IsArchived: want&protocol.StatusIsArchived != 0}, nil)
	}
}

// keepMarks writes a chat's marks to its record. Called with s.mu held.
func (e *ChatEntry) keepMarks() {
	st := e.chat.State().Status
	e.rec.Read, e.rec.Archived = st&protocol.StatusIsRead != 0, st&protocol.StatusIsArchived != 0
}
