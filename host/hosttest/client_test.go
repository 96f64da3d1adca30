package hosttest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/host/hosttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder keeps the errors a client reports instead of failing the test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// badHost answers a ping, then says what a host must not: each of the
// lines, as they are.
func badHost(t *testing.T, lines ...string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := context.Background()
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(data, &req)
			if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{}}`)); err != nil {
				return
			}
			for _, line := range lines {
				if err := ws.Write(ctx, websocket.MessageText, []byte(line)); err != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

const lastAction = `{"jsonrpc":"2.0","method":"action","params":{"channel":"ahp-session:/x","serverSeq":6,"action":{"type":"session/titleChanged","title":"c"}}}`

// TestChecksWhatTheHostSays: each kind of message a host must not send is
// reported when the client closes; an error answering no request is an
// orphan; notifications are kept in order.
func TestChecksWhatTheHostSays(t *testing.T) {
	url := badHost(t,
		`{"jsonrpc":"2.0","method":"nope/nothing","params":{}}`,
		`{"jsonrpc":"2.0","id":999,"result":{}}`,
		`{"jsonrpc":"2.0","method":"action","params":{"channel":"ahp-session:/x","serverSeq":5,"action":{"type":"session/titleChanged","title":"a"}}}`,
		`{"jsonrpc":"2.0",`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
		`{"jsonrpc":"2.0","method":"action","params":{"channel":"ahp-session:/x","serverSeq":3,"action":{"type":"session/titleChanged","title":"b"}}}`,
		lastAction,
	)
	r := &recorder{TB: t}
	c := hosttest.Dial(r, url)
	c.MustCall("ping", map[string]any{})
	c.Wait("the last action", func(msgs []hosttest.Message) bool {
		return len(msgs) > 0 && msgs[len(msgs)-1].Envelope != nil && msgs[len(msgs)-1].Envelope.ServerSeq == 6
	})
	if msgs := c.Messages(); len(msgs) != 3 || msgs[0].Envelope.ServerSeq != 5 || msgs[1].Envelope.ServerSeq != 3 {
		t.Errorf("kept %d messages, want the three actions in order", len(msgs))
	}
	if o := c.Orphans(); len(o) != 1 || o[0].Code != -32700 {
		t.Errorf("orphans %+v, want the parse error", o)
	}
	c.Close()
	all := strings.Join(r.errs, "\n")
	for _, want := range []string{"an unknown notification", "a response to no request", "not JSON", "serverSeq went back", "which this client does not watch"} {
		if !strings.Contains(all, want) {
			t.Errorf("no report of %q among:\n%s", want, all)
		}
	}
	if n := strings.Count(all, "which this client does not watch"); n != 3 {
		t.Errorf("%d actions on a channel not watched reported, want 3", n)
	}
}

// TestLightChecksNothing: a light client keeps no messages and reports
// nothing.
func TestLightChecksNothing(t *testing.T) {
	url := badHost(t, `{"jsonrpc":"2.0","method":"nope/nothing","params":{}}`, `{"jsonrpc":"2.0",`, lastAction)
	r := &recorder{TB: t}
	c := hosttest.Dial(r, url).Light()
	c.MustCall("ping", map[string]any{})
	// Answered behind what the host said after the first.
	c.MustCall("ping", map[string]any{})
	c.Close()
	if len(c.Messages()) != 0 || len(r.errs) != 0 {
		t.Errorf("a light client kept %d messages and reported %q", len(c.Messages()), r.errs)
	}
}
