package session

import (
	"strings"

	"github.com/ahpd/ahpd/protocol"
)

// Titles: a session is titled from its first message as soon as it is
// sent (whitespace collapsed, at most maxTitle characters), as VS Code's
// own host does, then by its agent when the agent names it (Claude's
// generated title). A title somebody set by hand stays.

const maxTitle = 200

// Where a session's title came from (record.TitleFrom).
const (
	titleFromMessage = "message"
	titleFromAgent   = "agent"
	titleFromClient  = "client"
)

// titleOf returns the title a message gives a session: its words on one
// line, cut to maxTitle characters.
func titleOf(text string) string {
	title := strings.Join(strings.Fields(text), " ")
	if r := []rune(title); len(r) > maxTitle {
		title = string(r[:maxTitle])
	}
	return title
}

// titleFromFirstMessageLocked titles a session that has no title yet from
// a message sent in it. Called with s.mu held.
func (s *Session) titleFromFirstMessageLocked(msg protocol.Message) {
	if s.rec.TitleFrom != "" {
		return
	}
	if title := titleOf(msg.Text); title != "" {
		s.setTitleLocked(title, titleFromMessage)
	}
}

// setTitleLocked sets the title unless a person set one by hand. Called
// with s.mu held.
func (s *Session) setTitleLocked(title, from string) {
	if s.rec.TitleFrom == titleFromClient && from != titleFromClient {
		return
	}
	s.rec.TitleFrom = from
	old := s.state.Title
	s.emitSessionLocked(&protocol.SessionTitleChangedAction{Title: title}, nil)
	s.followTitleLocked(old, title)
	s.persistLocked()
}

// followTitleLocked gives the default chat's record the session's new
// title while the chat has none of its own (the placeholder, or the
// session's title until now), as VS Code's own host seeds it: its chat
// header shows the chat's. A chat's title is fixed in its channel's state
// (AHP 1.0 has no action to change it), so it shows from the next time
// the session is loaded. Called with s.mu held.
func (s *Session) followTitleLocked(old, title string) {
	if e := s.chats[s.rec.DefaultChat]; e != nil && (e.rec.Title == defaultTitle || e.rec.Title == old) {
		e.rec.Title = title
	}
}
