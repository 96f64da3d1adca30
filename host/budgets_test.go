package host_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/internal/testwait"
)

// TestConnectionsBudgeted: one person holds at most ConnectionsPerPerson
// WebSocket connections; the next is refused with 429 and Retry-After
// before the upgrade, others are not held to mo's count, root is not
// counted, and a connection that closes gives its slot back.
func TestConnectionsBudgeted(t *testing.T) {
	t.Parallel()
	const budget = 3
	th, tokens := usersHost(t, t.TempDir(), func(o *host.Options) { o.ConnectionsPerPerson = budget })
	dial := func(token string) (*websocket.Conn, *http.Response, error) {
		ctx := testwait.Context(t)
		c, resp, err := websocket.Dial(ctx, th.url+"?tkn="+token, nil)
		if c != nil {
			t.Cleanup(func() { _ = c.CloseNow() })
		}
		return c, resp, err
	}
	var mine []*websocket.Conn
	for range budget {
		c, _, err := dial(tokens["mo"])
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, c)
	}
	_, resp, err := dial(tokens["mo"])
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("mo's connection past the budget: %v %+v, want 429 with Retry-After", err, resp)
	}
	for who, n := range map[string]int{"mia": budget, "root": budget + 2} {
		for range n {
			if _, _, err := dial(tokens[who]); err != nil {
				t.Fatalf("%s's connection while mo holds the budget: %v", who, err)
			}
		}
	}
	if err := mine[0].Close(websocket.StatusNormalClosure, ""); err != nil && !strings.Contains(err.Error(), "close") {
		t.Fatal(err)
	}
	testwait.Until(t, "mo's closed connection to give its slot back", func() bool {
		c, _, err := dial(tokens["mo"])
		if err == nil {
			_ = c.Close(websocket.StatusNormalClosure, "")
		}
		return err == nil
	})
}
