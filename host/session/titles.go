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
// The default chat's entry in the session's state carries the session's
// title while the chat has none of its own (its title is still
// defaultTitle): VS Code's chat header shows that entry's title when it
// has one, the session's otherwise. Only the entry follows: no chat
// action carries a title, so the chat's own state keeps the title it was
// made with, as every client subscribed to it has it.

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

// defaultChatFollowsLocked brings the default chat's entry up to date
// with the session's title, which was was before it changed. Called with
// s.mu held.
func (s *Session) defaultChatFollowsLocked(was string) {
	if was == s.state.Title || s.state.DefaultChat == nil {
		return
	}
	if e := s.chats[*s.state.DefaultChat]; e != nil {
		s.mirrorChatLocked(e.chat)
	}
}

// entryState returns the state of chat c that its entry in the session's
// state mirrors: its own, but for a default chat with no title of its
// own, which has the session's title. Called with s.mu held.
func (s *Session) entryState(cs *protocol.ChatState, isDefault bool) *protocol.ChatState {
	if !isDefault || cs.Title != defaultTitle || s.state.Title == "" || s.state.Title == cs.Title {
		return cs
	}
	titled := *cs
	titled.Title = s.state.Title
	return &titled
}
