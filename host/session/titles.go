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
	s.emitSessionLocked(&protocol.SessionTitleChangedAction{Title: title}, nil)
	s.persistLocked()
}
