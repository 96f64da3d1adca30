package client_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// wireLog keeps what the Received and Sent hooks are shown.
type wireLog struct {
	mu             sync.Mutex
	received, sent []string
}

func (w *wireLog) options() *client.Options {
	return &client.Options{
		Token: token,
		Received: func(data []byte) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.received = append(w.received, string(data))
		},
		Sent: func(data []byte) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.sent = append(w.sent, string(data))
		},
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
