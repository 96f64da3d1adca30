package host_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

func TestProtocolErrors(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")

	for _, tc := range []struct {
		name   string
		method string
		params any
		code   int64
		says   string
	}{
		{"unknown method", "nope/nothing", map[string]any{"channel": protocol.RootURI}, -32601, `"nope/nothing"`},
		{"missing field", "createSession", map[string]any{"provider": "script"}, -32602, "channel"},
		{"wrong type", "subscribe", map[string]any{"channel": 42}, -32602, "channel: expected string"},
		{"unknown provider", "createSession", map[string]any{"channel": "ahp-session:/x", "provider": "gpt-9"}, -32002, "gpt-9"},
		{"bad session URI", "createSession", map[string]any{"channel": "not a uri", "provider": "script"}, -32602, "not a uri"},
		{"missing directory", "createSession", map[string]any{"channel": "ahp-session:/y", "provider": "script",
			"workingDirectories": []string{"file:///no/such/dir"}}, -32602, "workingDirectories[0]"},
		{"unknown session", "subscribe", map[string]any{"channel": "ahp-session:/ghost"}, -32001, "ghost"},
		{"foreign cursor", "listSessions", map[string]any{"channel": protocol.RootURI, "cursor": "abc"}, -32602, "cursor"},
		{"zero limit", "listSessions", map[string]any{"channel": protocol.RootURI, "limit": 0}, -32602, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Call(tc.method, tc.params)
			if err == nil {
				t.Fatalf("%s succeeded", tc.method)
			}
			if err.Code != tc.code || !strings.Contains(err.Message, tc.says) {
				t.Errorf("got %d %q, want %d mentioning %s", err.Code, err.Message, tc.code, tc.says)
			}
		})
	}

	// The same URI twice.
	th.newSession(c, "dup", nil)
	_, err := c.Call("createSession", map[string]any{"channel": "ahp-session:/dup", "provider": "script"})
	if err == nil || err.Code != -32003 {
		t.Errorf("second createSession: %v, want -32003", err)
	}
}

func TestMalformedJSONKeepsTheConnection(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	if err := c.SendRaw([]byte(`{"jsonrpc":"2.0","id":99,"method":`)); err != nil {
		t.Fatal(err)
	}
	c.MustCall("ping", map[string]any{"channel": protocol.RootURI})
	orphans := c.Orphans()
	if len(orphans) != 1 || orphans[0].Code != -32700 {
		t.Errorf("errors without a request: %+v, want one -32700", orphans)
	}
}

func TestVersionNegotiation(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	for _, tc := range []struct {
		offered []string
		want    string
	}{
		{[]string{"1.0.0", "0.8.0"}, "1.0.0"},
		{[]string{"0.9.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1"}, "0.9.0"},
		{[]string{"0.9.0", "1.2.0"}, "1.2.0"},
	} {
		c := hosttest.Dial(t, th.url)
		raw := c.MustCall("initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": tc.offered, "clientId": "v"})
		var r protocol.InitializeResult
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.ProtocolVersion != tc.want {
			t.Errorf("offered %v: got %s, want %s", tc.offered, r.ProtocolVersion, tc.want)
		}
		c.Close()
	}

	// Nothing in common, 0.8 included: -32005 with what the host speaks,
	// then the host closes the connection.
	for _, offered := range [][]string{{"2.0.0", "0.4.0"}, {"0.8.0"}} {
		c := hosttest.Dial(t, th.url)
		_, err := c.Call("initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": offered, "clientId": "v"})
		if err == nil || err.Code != -32005 {
			t.Fatalf("offered %v: %v, want -32005", offered, err)
		}
		var data protocol.UnsupportedProtocolVersionErrorData
		if jerr := json.Unmarshal(err.Data, &data); jerr != nil || !slices.Equal(data.SupportedVersions, []string{"1.0.0", "0.9.0"}) {
			t.Errorf("error data %s, want the supported versions", err.Data)
		}
		select {
		case <-c.Done():
		case <-time.After(hosttest.Timeout):
			t.Fatalf("offered %v: the connection stayed open", offered)
		}
	}

	// A malformed entry spoils the offer, whatever else is in it.
	c := hosttest.Dial(t, th.url)
	_, err := c.Call("initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{"1.0.0", "1.0"}, "clientId": "v"})
	if err == nil || err.Code != -32602 || !strings.Contains(err.Message, `"1.0"`) {
		t.Fatalf("a malformed version: %v, want -32602 naming it", err)
	}
	// The connection is not initialized: a good offer may follow.
	c.MustCall("initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{"1.0.0"}, "clientId": "v"})
}

func TestCommandsNeedInitialize(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := hosttest.Dial(t, th.url)
	c.MustCall("ping", map[string]any{"channel": protocol.RootURI})
	_, err := c.Call("listSessions", map[string]any{"channel": protocol.RootURI})
	if err == nil || !strings.Contains(err.Message, "initialize") {
		t.Errorf("listSessions before initialize: %v", err)
	}
}

// TestDispatchRefusals checks that an action a client may not take comes
// back to that client alone, refused, and changes nothing.
func TestDispatchRefusals(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	other := th.client("c2")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t0", "say hi") // a session is others' to see once its first turn ran
	other.Subscribe(session)
	other.Subscribe(chat)

	for _, tc := range []struct {
		channel string
		action  protocol.Action
		says    string
	}{
		{chat, &protocol.ChatDeltaAction{TurnID: "t", PartID: "p", Content: "x"}, "host's to send"},
		{chat, &protocol.ChatTurnCancelledAction{TurnID: "t9"}, "no active turn"},
		{chat, &protocol.SessionTitleChangedAction{Title: "x"}, "does not belong"},
		{chat, &protocol.ChatToolCallConfirmedAction{TurnID: "t", ToolCallID: "nope", Approved: true,
			Confirmed: new(protocol.ToolCallConfirmationReasonUserAction)}, "not waiting"},
		{chat, &protocol.ChatToolCallConfirmedAction{TurnID: "t", ToolCallID: "nope", Approved: true}, "confirmed"},
		{chat, &protocol.ChatPendingMessageRemovedAction{Kind: protocol.PendingMessageKindQueued, ID: "nope"}, "no pending message"},
		{session, &protocol.SessionConfigChangedAction{Config: protocol.Object{"nope": []byte(`1`)}}, "unknown config key"},
		{chat, &protocol.Unknown{Kind: "chat/fromTheFuture", Raw: []byte(`{"type":"chat/fromTheFuture"}`)}, "unknown action type"},
	} {
		seq := c.Dispatch(tc.channel, tc.action)
		c.Wait("the refusal of "+string(tc.action.Type()), func(msgs []hosttest.Message) bool {
			for _, m := range msgs {
				if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq && e.RejectionReason != nil {
					if !strings.Contains(*e.RejectionReason, tc.says) {
						t.Errorf("%s refused with %q, want it to say %q", tc.action.Type(), *e.RejectionReason, tc.says)
					}
					return true
				}
			}
			return false
		})
	}
	// The title is set once for everyone; a second time changes nothing
	// and goes back to its sender alone.
	c.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "Named"})
	other.WaitState(session, "the title", func(s protocol.ChannelState) bool { return s.(*protocol.SessionState).Title == "Named" })
	seq := c.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "Named"})
	var echoed int64
	c.Wait("the no-op echo", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq {
				echoed = e.ServerSeq
				return e.RejectionReason == nil
			}
		}
		return false
	})
	// Nothing reached the other client: its last envelope is older.
	for _, m := range other.Messages() {
		if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientID == "c1" && e.Origin.ClientSeq == seq {
			t.Errorf("the other client got a no-op or a refusal: %+v", e)
		}
		if e := m.Envelope; e != nil && e.ServerSeq > echoed {
			t.Errorf("serverSeq advanced past the no-op echo (%d > %d)", e.ServerSeq, echoed)
		}
	}
}
