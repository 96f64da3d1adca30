package session

import (
	"strings"

	"github.com/ahpd/ahpd/protocol"
)

// Titles: a session is titled from its first message as soon as it is
// sent (whitespace collapsed, at most maxTitle characters), as VS Code's
// own host does, then by its agent when the agent names it (Claude's
// generated title). A title somebody set by hand stays.
//
// The default chat carries the session's title: VS Code's chat header
// shows the default chat's, not the session's. It follows every change
// of the session's title while it still holds the session's title before
// the change (or defaultTitle, a chat never titled): a default chat
// titled on its own keeps its title.

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
	was := s.state.Title
	if s.emitSessionLocked(&protocol.SessionTitleChangedAction{Title: title}, nil) {
		s.defaultChatFollowsLocked(was)
	}
	s.persistLocked()
}

// defaultChatFollowsLocked gives the default chat the session's title,
// which was was before it changed, unless the chat has a title of its
// own. Called with s.mu held.
func (s *Session) defaultChatFollowsLocked(was string) {
	if s.state.DefaultChat == nil {
		return
	}
	e := s.chats[*s.state.DefaultChat]
	if e == nil {
		return
	}
	if t := e.chat.State().Title; t != was && t != defaultTitle {
		return
	}
	e.chat.SetTitle(s.state.Title)
	e.rec.Title = s.state.Title
	s.mirrorChatLocked(e.chat)
}
