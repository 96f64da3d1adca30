package session

import (
	"context"
	"fmt"
	"slices"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// Dispatch takes a client's session action.
func (s *Session) Dispatch(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	s.awaitRoom()
	s.Pin(false)
	defer s.Unpin()
	if _, ok := a.(*protocol.SessionConfigChangedAction); !ok {
		s.wake() // a config change is kept without waking the session
	}
	s.mu.Lock()
	configure := s.dispatchLocked(c, a, origin)
	s.unlockForClient()
	s.configureChats(configure)
}

// configureChats hands each chat's agent the config its entry starts
// with now (the values a config change left), with the host's rules.
// The caller holds no lock.
func (s *Session) configureChats(entries []*ChatEntry) {
	for _, e := range entries {
		e.chat.Configure(func() protocol.Object { return s.agentConfig(e.start.Load().config) })
	}
}

// dispatchLocked applies a client's session action and returns the chats
// whose agents are to be told of changed config.
func (s *Session) dispatchLocked(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) []*ChatEntry {
	if s.disposed {
		return nil
	}
	switch a := a.(type) {
	case *protocol.SessionConfigChangedAction:
		config, reason := configChange(s.state.Config, a, !s.provisional)
		if reason != "" {
			s.echoLocked(c, s.uri, a, origin, reason)
			return nil
		}
		before := s.targetLocked()
		defer func() {
			if after := s.targetLocked(); after != before {
				s.sharingChangedLocked(before, after)
			}
		}()
		if !SameJSON(config, a.Config) {
			changed := *a
			changed.Config = config
			if !s.emitSessionLocked(&changed, origin) {
				s.echoLocked(c, s.uri, a, origin, "")
				return nil
			}
			return s.afterSessionActionLocked(&changed)
		}
	case *protocol.SessionWorkingDirectorySetAction:
		if _, err := DirOf(a.Directory); err != nil {
			s.echoLocked(c, s.uri, a, origin, err.Error())
			return nil
		}
	case *protocol.SessionWorkingDirectoryRemovedAction:
		if len(s.state.WorkingDirectories) > 0 && s.state.WorkingDirectories[0] == a.Directory {
			s.echoLocked(c, s.uri, a, origin, "the first working directory is the session's root and cannot be removed")
			return nil
		}
	case *protocol.SessionWorkingDirectoryReplacedAction:
		if reason := s.replaceableLocked(a); reason != "" {
			s.echoLocked(c, s.uri, a, origin, reason)
			return nil
		}
	case *protocol.SessionMCPServerBackgroundRequestedAction:
		// The protocol lets a host refuse: ahpd starts no MCP server that
		// holds messages back, so there is never one to background.
		if protocol.ReduceSession(s.state, a) == s.state {
			s.echoLocked(c, s.uri, a, origin, fmt.Sprintf("no MCP server %s is starting and holding messages back in this session", protocol.Quote(a.ID)))
			return nil
		}
	}
	was := s.state.Title
	if !s.emitSessionLocked(a, origin) {
		s.echoLocked(c, s.uri, a, origin, "")
		return nil
	}
	if _, ok := a.(*protocol.SessionTitleChangedAction); ok {
		s.rec.TitleFrom = titleFromClient
		s.defaultChatFollowsLocked(was) // titles.go
	}
	return s.afterSessionActionLocked(a)
}

// replaceableLocked says why a client may not replace a working directory
// so, or "". The primary directory is where the agents run and the
// session's config was resolved: it moves only with the session's own
// worktree.
func (s *Session) replaceableLocked(a *protocol.SessionWorkingDirectoryReplacedAction) string {
	dirs := s.state.WorkingDirectories
	i := slices.Index(dirs, a.Directory)
	switch {
	case i < 0:
		return fmt.Sprintf("%s is not a working directory of this session", protocol.Quote(a.Directory))
	case i == 0:
		return "the first working directory is the session's root: a client cannot replace it"
	}
	if _, err := DirOf(a.Replacement); err != nil {
		return err.Error()
	}
	return ""
}

// afterSessionActionLocked keeps what a client's session action changed,
// and returns the chats whose agents are to be told of changed config.
func (s *Session) afterSessionActionLocked(a protocol.Action) []*ChatEntry {
	s.persistLocked()
	if _, ok := a.(*protocol.SessionConfigChangedAction); !ok {
		return nil
	}
	values := s.configValuesLocked()
	out := make([]*ChatEntry, 0, len(s.chats))
	for _, e := range s.chats {
		e.setStart(values, e.rec.Started, e.rec.Conversation)
		out = append(out, e)
	}
	return out
}

// DispatchChat takes a client's chat action.
func (s *Session) DispatchChat(c *conn.Conn, e *ChatEntry, a protocol.Action, origin *protocol.ActionOrigin) {
	switch a.(type) {
	case *protocol.ChatTurnStartedAction, *protocol.ChatTurnResumeAction, *protocol.ChatPendingMessageSetAction:
		// Each sets the agent to work, in the session's folder, and the
		// work must be recorded.
		reason := s.h.JournalRefusal()
		if reason == "" {
			reason = s.h.WorkRefusal(c, s)
		}
		if reason != "" {
			s.h.Bus.Echo(c, e.chat.URI(), a, origin, reason)
			return
		}
	}
	s.awaitRoom()
	s.Pin(false)
	defer s.Unpin()
	if _, ok := a.(*protocol.ChatDraftChangedAction); !ok {
		s.wake() // a draft is kept without waking the session
	}
	switch a.(type) {
	case *protocol.ChatTurnStartedAction, *protocol.ChatTurnResumeAction, *protocol.ChatPendingMessageSetAction, *protocol.ChatTruncatedAction:
		// Each changes the chat's turns, or may start one that builds on
		// them: have them in hand (turntrack.go).
		s.LoadTurns(context.Background(), e)
	}
	s.mu.Lock()
	defer s.unlockForClient()
	if s.disposed || s.chats[e.rec.URI] != e {
		return
	}
	ch := e.chat
	if reason := ch.Validate(a, origin.ClientID); reason != "" {
		s.echoLocked(c, ch.URI(), a, origin, reason)
		return
	}
	if s.backend == nil && startsTurn(a) {
		s.echoLocked(c, ch.URI(), a, origin, fmt.Sprintf("provider %s is not available on this host", protocol.Quote(s.provider)))
		return
	}
	if s.stopping && startsTurn(a) {
		s.echoLocked(c, ch.URI(), a, origin, "ahpd is shutting down")
		return
	}
	if !s.emitChatLocked(ch, a, origin) {
		s.echoLocked(c, ch.URI(), a, origin, chats.RejectUnchanged(a))
		return
	}
	if t, ok := a.(*protocol.ChatTurnStartedAction); ok {
		if e.rec.Senders == nil {
			e.rec.Senders = map[string]string{}
		}
		e.rec.Senders[t.TurnID] = origin.ClientID
		if t.Message.Origin.Kind == protocol.MessageKindUser {
			s.adoptLocked(c.Principal()) // a person's turn went out in it
		}
		s.titleFromFirstMessageLocked(t.Message)
	}
	switch a.(type) {
	case *protocol.ChatIsReadChangedAction, *protocol.ChatIsArchivedChangedAction:
		s.persistLocked()
	}
	ch.React(a)
}
