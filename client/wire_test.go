package client_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// wireLog keeps what the Received and Sent hooks are shown.
type wireLog struct {
	mu             sync.Mutex
	received, sent []string
	// versions is what the client said its version was as each message
	// it received was shown.
	versions []string
	c        atomic.Pointer[client.Client]
}

func (w *wireLog) options() *client.Options {
	return &client.Options{
		Token: token,
		Received: func(data []byte) {
			var version string
			if c := w.c.Load(); c != nil {
				version = c.Version()
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.received = append(w.received, string(data))
			w.versions = append(w.versions, version)
		},
		Sent: func(data []byte) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.sent = append(w.sent, string(data))
		},
	}
}

// versionAt returns the client's version as the answer to request id
// was shown to Received.
func (w *wireLog) versionAt(id int) (version string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, data := range w.received {
		var m struct {
			ID     *int   `json:"id"`
			Method string `json:"method"`
		}
		if json.Unmarshal([]byte(data), &m) == nil && m.Method == "" && m.ID != nil && *m.ID == id {
			return w.versions[i], true
		}
	}
	return "", false
}

// TestConnectLeavesTheHandshakeToTheCaller: a client Connect made sends
// nothing; the caller's own initialize and subscribe, sent with Call,
// are taken as the client's would be, and the Received hook sees each
// answer once it was.
func TestConnectLeavesTheHandshakeToTheCaller(t *testing.T) {
	d := startDaemon(t)
	var w wireLog
	c, err := client.Connect(testContext(t), d.url, w.options())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w.c.Store(c)
	if v := c.Version(); v != "" || c.State(protocol.RootURI) != nil {
		t.Fatalf("before initialize: version %q, root %v", v, c.State(protocol.RootURI))
	}
	ctx := testContext(t)
	var res protocol.InitializeResult
	err = c.Call(ctx, "initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{"0.9.0"}, "clientId": "own",
		"initialSubscriptions": []string{protocol.RootURI}, "_meta": map[string]any{"made": "by hand"}}, &res)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() != "0.9.0" || c.Initialized() == nil || c.Initialized().ProtocolVersion != "0.9.0" || c.State(protocol.RootURI) == nil {
		t.Fatalf("after initialize: version %q, root %v", c.Version(), c.State(protocol.RootURI))
	}
	if version, ok := w.versionAt(1); !ok || version != "0.9.0" {
		t.Errorf("the initialize answer was shown with the version %q (found: %v), want it taken first", version, ok)
	}

	session := "ahp-session:/by-hand"
	if err := c.Call(ctx, "createSession", protocol.CreateSessionParams{Channel: session, Provider: new("script"),
		WorkingDirectories: []string{"file://" + d.work}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "subscribe", map[string]any{"channel": session, "view": map[string]any{"turns": 1}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.State(session).(*protocol.SessionState); !ok {
		t.Fatalf("a subscribe sent with Call left %s unwatched", session)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sent) != 3 || len(w.received) < 3 {
		t.Fatalf("sent %d messages, received %d; want 3 and at least 3", len(w.sent), len(w.received))
	}
	var first struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]string `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(w.sent[0]), &first); err != nil || first.Method != "initialize" || first.Params.Meta["made"] != "by hand" {
		t.Errorf("the first message sent: %s", w.sent[0])
	}
}

// TestSendRawAndTheWire: a message sent as it is, malformed, is answered
// with an error answering no request, and the connection goes on; the
// hooks are shown both ways of the wire.
func TestSendRawAndTheWire(t *testing.T) {
	d := startDaemon(t)
	var w wireLog
	c, err := client.Dial(testContext(t), d.url, w.options())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testContext(t)
	if err := c.SendRaw(ctx, []byte(`{"jsonrpc":"2.0","id":99,"method":`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "ping", struct{}{}, nil); err != nil {
		t.Fatalf("ping after a malformed message: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sent) != 3 || !strings.Contains(w.sent[0], `"initialize"`) || w.sent[1] != `{"jsonrpc":"2.0","id":99,"method":` {
		t.Errorf("sent %q, want initialize, the raw message, ping", w.sent)
	}
	orphan := slices.ContainsFunc(w.received, func(data string) bool {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *client.Error   `json:"error"`
		}
		return json.Unmarshal([]byte(data), &m) == nil && (m.ID == nil || string(m.ID) == "null") &&
			m.Error != nil && m.Error.Code == protocol.CodeParseError
	})
	if !orphan {
		t.Errorf("no parse error answering no request among %q", w.received)
	}
}

// TestStartAwaitsEachAnswer: requests in flight together, each answered
// to its own Await.
func TestStartAwaitsEachAnswer(t *testing.T) {
	d := startDaemon(t)
	c := dial(t, d, nil)
	ctx := testContext(t)
	bad, err := c.Start(ctx, "subscribe", map[string]any{"channel": "ahp-session:/none"})
	if err != nil {
		t.Fatal(err)
	}
	good, err := c.Start(ctx, "ping", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Await(ctx, nil); err != nil {
		t.Errorf("ping: %v", err)
	}
	var rpcErr *client.Error
	if err := bad.Await(ctx, nil); !errors.As(err, &rpcErr) || rpcErr.Code != protocol.CodeSessionNotFound {
		t.Errorf("subscribe to no session: %v, want %d", err, protocol.CodeSessionNotFound)
	}
}

// TestAdoptCarriesOn: a new connection takes over an old one's states and
// reconnects as it; the host replays what it missed onto them.
func TestAdoptCarriesOn(t *testing.T) {
	d := startDaemon(t)
	a := dial(t, d, nil)
	_, chat := newSession(t, a, d, "s1")
	if err := a.DispatchWait(testContext(t), chat, turn("t1", "say one")); err != nil {
		t.Fatal(err)
	}
	ended(t, a, chat, "t1")
	a.Close()

	b := dial(t, d, nil)
	if _, err := b.Subscribe(testContext(t), chat); err != nil {
		t.Fatal(err)
	}
	if err := b.DispatchWait(testContext(t), chat, turn("t2", "say two")); err != nil {
		t.Fatal(err)
	}
	want := ended(t, b, chat, "t2")

	c, err := client.Connect(testContext(t), d.url, &client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Adopt(a)
	if c.Version() != a.Version() || c.LastSeq() != a.LastSeq() || len(c.Channels()) != len(a.Channels()) {
		t.Fatalf("adopted version %q, lastSeq %d, %d channels; want %q, %d, %d",
			c.Version(), c.LastSeq(), len(c.Channels()), a.Version(), a.LastSeq(), len(a.Channels()))
	}
	var raw json.RawMessage
	err = c.Call(testContext(t), "reconnect", protocol.ReconnectParams{ClientID: a.ClientID(),
		LastSeenServerSeq: a.LastSeq(), Subscriptions: a.Channels()}, &raw)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := protocol.UnmarshalReconnectResult(raw); err != nil {
		t.Fatal(err)
	} else if _, ok := r.(*protocol.ReconnectReplayResult); !ok {
		t.Fatalf("reconnect answered %T, want a replay", r)
	}
	got := ended(t, c, chat, "t2")
	if len(got.Turns) != 2 || text(got.Turns[1].ResponseParts) != text(want.Turns[1].ResponseParts) {
		t.Errorf("carried on with %d turns, the second %q; want %q", len(got.Turns), text(got.Turns[1].ResponseParts), text(want.Turns[1].ResponseParts))
	}
	if st := a.State(chat).(*protocol.ChatState); len(st.Turns) != 1 {
		t.Errorf("the old client's chat changed: %d turns", len(st.Turns))
	}
}
