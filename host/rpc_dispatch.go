package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/creachadair/jrpc2"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// dispatchParams are dispatchAction's params with the action kept whole, so
// an action that does not decode can still be echoed back refused.
type dispatchParams struct {
	Channel   string         `json:"channel"`
	ClientSeq int64          `json:"clientSeq"`
	Action    jsontext.Value `json:"action"`
}

// dispatchAction takes a client's action. An accepted action is applied
// and echoed to every subscriber with its origin; a refused one goes back
// to its sender alone with rejectionReason. An accepted action that
// changes nothing goes back to its sender alone, with the serverSeq
// unchanged.
func (h *Host) dispatchAction(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p dispatchParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil || p.Channel == "" || p.Action == nil {
		c.Log().Debug("dropping a malformed dispatchAction", "err", err)
		return nil, nil
	}
	if len(p.Channel) > protocol.MaxURIBytes() {
		// No channel has such a name: an action on a channel that does
		// not exist is ignored.
		c.Log().Debug("dropping a dispatchAction on an oversized channel", "bytes", len(p.Channel))
		return nil, nil
	}
	origin := &protocol.ActionOrigin{ClientID: c.Client(), ClientSeq: p.ClientSeq}
	a, err := protocol.UnmarshalAction(p.Action)
	if err != nil {
		h.refuse(c, p.Channel, echoable(p.Action), origin, "invalid action: "+err.Error())
		return nil, nil
	}
	// The grant is checked once the action is known to be a client's, and
	// before anything about the channel is said to somebody not allowed it.
	reason := checkType(a, c.Negotiated())
	if reason == "" {
		reason = h.checkAction(c, p.Channel, a)
	}
	if reason == "" && c.ReadOnlyFor(p.Channel) {
		reason = conn.ReadOnlyReason
	}
	if reason == "" && isAutomationChannel(p.Channel) {
		h.dispatchAutomation(c, p.Channel, a, origin) // automations.go
		return nil, nil
	}
	if reason == "" {
		reason = checkChannel(p.Channel, a)
	}
	if reason == "" {
		reason = h.actionRootsRefusal(c, a)
	}
	if reason != "" {
		h.refuse(c, p.Channel, a, origin, reason)
		return nil, nil
	}
	if ch, err := h.resolve(c, p.Channel); err == nil {
		ch.dispatch(c, a, origin)
	} // else a channel that does not exist: ignored, as the protocol says
	return nil, nil
}

// notOffered names the channels of actions this host does not take yet,
// with what a person would call them.
var notOffered = map[string]string{
	"canvas": "canvases",
}

// maxEchoedAction bounds the action a refusal carries back: a larger one
// is sent back as its type alone.
const maxEchoedAction = 64 << 10

// echoable is what a refusal of an action that does not decode carries.
func echoable(raw jsontext.Value) *protocol.Unknown {
	if len(raw) <= maxEchoedAction {
		return &protocol.Unknown{Raw: raw}
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = jsonUnmarshal(raw, &head)
	if len(head.Type) > 256 {
		head.Type = ""
	}
	stub, _ := json.Marshal(head)
	return &protocol.Unknown{Kind: head.Type, Raw: stub}
}

// checkType refuses actions no client may send, and those the protocol
// version the connection speaks does not have.
func checkType(a protocol.Action, version string) string {
	t := a.Type()
	if _, known := t.IntroducedIn(); !known {
		return fmt.Sprintf("unknown action type %s", protocol.Quote(string(t)))
	}
	if !t.ClientDispatchable() {
		return fmt.Sprintf("%s is the host's to send, not a client's", t)
	}
	if version != "" && !t.KnownTo(version) {
		since, _ := t.IntroducedIn()
		return fmt.Sprintf("%s came with protocol %s; this connection speaks %s", t, since, version)
	}
	if what, ok := notOffered[t.Channel()]; ok {
		return fmt.Sprintf("this host does not offer %s", what)
	}
	return ""
}

// checkChannel refuses an action sent on a channel it does not belong on.
func checkChannel(channel string, a protocol.Action) string {
	t := a.Type()
	kind, err := protocol.ClassifyChannel(channel)
	if err != nil {
		return err.Error()
	}
	if kind == protocol.ChannelTerminal {
		return "this host does not offer terminals"
	}
	want := map[protocol.ChannelKind]string{
		protocol.ChannelRoot: "root", protocol.ChannelSession: "session", protocol.ChannelChat: "chat",
	}[kind]
	if want == "" || t.Channel() != want {
		return fmt.Sprintf("%s does not belong on channel %s", t, channel)
	}
	return ""
}

func (h *Host) refuse(c *conn.Conn, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	reason = boundedMessage(reason)
	c.Log().Debug("refused a client action", "channel", channel, "reason", reason)
	h.bus.Echo(c, channel, a, origin, reason)
}

func (h *Host) dispatchRoot(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	h.rootMu.Lock()
	if cc, ok := a.(*protocol.RootConfigChangedAction); ok {
		kept, reason := h.rootConfigChange(cc)
		if reason != "" {
			h.unlockRoot()
			h.bus.Echo(c, protocol.RootURI, a, origin, reason)
			return
		}
		a = kept
	}
	changed := h.applyRootLocked(a, origin)
	h.unlockRoot()
	if !changed {
		h.bus.Echo(c, protocol.RootURI, a, origin, "")
		return
	}
	h.modeChanged()
}

// dispatch takes a client's session action.
func (s *session) dispatch(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	s.awaitRoom()
	s.pin(false)
	defer s.unpin()
	if _, ok := a.(*protocol.SessionConfigChangedAction); !ok {
		s.wake() // a config change is kept without waking the session
	}
	s.mu.Lock()
	configure := s.dispatchLocked(c, a, origin)
	s.unlock()
	for _, e := range configure {
		e.chat.Configure(func() protocol.Object { return e.start.Load().config })
	}
}

// dispatchLocked applies a client's session action and returns the chats
// whose agents are to be told of changed config.
func (s *session) dispatchLocked(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) []*chatEntry {
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
		if !sameJSON(config, a.Config) {
			changed := *a
			changed.Config = config
			if !s.emitSessionLocked(&changed, origin) {
				s.echoLocked(c, s.uri, a, origin, "")
				return nil
			}
			return s.afterSessionActionLocked(&changed)
		}
	case *protocol.SessionWorkingDirectorySetAction:
		if _, err := dirOf(a.Directory); err != nil {
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
	if !s.emitSessionLocked(a, origin) {
		s.echoLocked(c, s.uri, a, origin, "")
		return nil
	}
	if _, ok := a.(*protocol.SessionTitleChangedAction); ok {
		s.rec.TitleFrom = titleFromClient
	}
	return s.afterSessionActionLocked(a)
}

// replaceableLocked says why a client may not replace a working directory
// so, or "". The primary directory is where the agents run and the
// session's config was resolved: it moves only with the session's own
// worktree.
func (s *session) replaceableLocked(a *protocol.SessionWorkingDirectoryReplacedAction) string {
	dirs := s.state.WorkingDirectories
	i := slices.Index(dirs, a.Directory)
	switch {
	case i < 0:
		return fmt.Sprintf("%s is not a working directory of this session", protocol.Quote(a.Directory))
	case i == 0:
		return "the first working directory is the session's root: a client cannot replace it"
	}
	if _, err := dirOf(a.Replacement); err != nil {
		return err.Error()
	}
	return ""
}

// afterSessionActionLocked keeps what a client's session action changed,
// and returns the chats whose agents are to be told of changed config.
func (s *session) afterSessionActionLocked(a protocol.Action) []*chatEntry {
	s.persistLocked()
	if _, ok := a.(*protocol.SessionConfigChangedAction); !ok {
		return nil
	}
	values := s.configValuesLocked()
	out := make([]*chatEntry, 0, len(s.chats))
	for _, e := range s.chats {
		e.setStart(values, e.rec.Started, e.rec.Conversation)
		out = append(out, e)
	}
	return out
}

// dispatchChat takes a client's chat action.
func (s *session) dispatchChat(c *conn.Conn, e *chatEntry, a protocol.Action, origin *protocol.ActionOrigin) {
	switch a.(type) {
	case *protocol.ChatTurnStartedAction, *protocol.ChatTurnResumeAction, *protocol.ChatPendingMessageSetAction:
		// Each sets the agent to work, in the session's folder, and the
		// work must be recorded.
		reason := s.h.journalRefusal()
		if reason == "" {
			reason = s.h.workRefusal(c, s)
		}
		if reason != "" {
			s.h.bus.Echo(c, e.chat.URI(), a, origin, reason)
			return
		}
	}
	s.awaitRoom()
	s.pin(false)
	defer s.unpin()
	if _, ok := a.(*protocol.ChatDraftChangedAction); !ok {
		s.wake() // a draft is kept without waking the session
	}
	switch a.(type) {
	case *protocol.ChatTurnStartedAction, *protocol.ChatTurnResumeAction, *protocol.ChatPendingMessageSetAction, *protocol.ChatTruncatedAction:
		// Each changes the chat's turns, or may start one that builds on
		// them: have them in hand (turntrack.go).
		s.loadTurns(context.Background(), e)
	}
	s.mu.Lock()
	defer s.unlock()
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
