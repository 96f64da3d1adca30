package host_test

import (
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestCreateSentAgainIsAnsweredAsTheFirst: a createSession or createChat
// sent again, as by a client that lost its connection before the answer,
// is answered as the first was, also after a restart, and makes nothing
// twice: the chat's first message is one turn. Another request for the
// same URI is still "already exists".
func TestCreateSentAgainIsAnsweredAsTheFirst(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	state := t.TempDir()
	th := startHost(t, state, withJournal(j))
	c := th.client("c")
	session := "ahp-session:/again"
	create := map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + th.work}, "_meta": map[string]any{"ahpd.keep": true},
		"progressToken": "first"}
	c.MustCall("createSession", create)
	create["progressToken"] = "second" // how a send is tracked is not what it asks for
	c.MustCall("createSession", create)

	chat := protocol.ChatURIFor(session, "second")
	open := map[string]any{"channel": session, "chat": chat,
		"initialMessage": protocol.Message{Text: "say once", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}}
	c.MustCall("createChat", open)
	c.Subscribe(chat)
	c.WaitState(chat, "its first turn ended", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) == 1
	})
	c.MustCall("createChat", open)

	other := map[string]any{"channel": session, "provider": "script"} // the default folder: not the same request
	if _, err := c.Call("createSession", other); err == nil || err.Code != int64(protocol.CodeSessionAlreadyExists) {
		t.Errorf("another createSession for the URI: %v, want -32003", err)
	}
	if _, err := c.Call("createChat", map[string]any{"channel": session, "chat": chat}); err == nil || err.Code != int64(protocol.CodeAlreadyExists) {
		t.Errorf("another createChat for the URI: %v, want -32010", err)
	}

	th.leave(c, "c")
	th.stop()
	th = startHost(t, state, withJournal(j))
	c = th.client("c2")
	c.MustCall("createSession", create)
	c.MustCall("createChat", open)
	fresh := th.client("watcher")
	st := fresh.Subscribe(chat)
	if cs := st.State.(*protocol.ChatState); len(cs.Turns) != 1 {
		t.Errorf("the chat has %d turns, want its one first message", len(cs.Turns))
	}
	ss := fresh.Subscribe(session).State.(*protocol.SessionState)
	if len(ss.Chats) != 2 {
		t.Errorf("the session has %d chats, want 2", len(ss.Chats))
	}
}
