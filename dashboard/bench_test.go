package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// BenchmarkSessionsPage measures the server's time to draw the sessions
// page listing 1,000 sessions (their listing and each one's residency
// and owner, through the person's AHP connection, and the HTML).
func BenchmarkSessionsPage(b *testing.B) {
	const n = 1000
	e := newEnv(b, envOptions{})
	root := e.conn("root")
	makeSessions(b, root, n)
	br := e.signIn("mo")
	cookies := br.hc.Jar.Cookies(mustURLb(b, e.srv.URL+"/ui/"))
	req := httptest.NewRequest("GET", "/ui/?limit=1000", nil)
	req.Host = strings.TrimPrefix(e.srv.URL, "http://")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		e.ui.ServeHTTP(rec, req)
		return rec
	}
	if rec := serve(); rec.Code != http.StatusOK || strings.Count(rec.Body.String(), "<tr data-session=") != n {
		b.Fatalf("the page: %d with %d rows", rec.Code, strings.Count(rec.Body.String(), "<tr data-session="))
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		serve()
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
}

// makeSessions makes n script sessions, each with one finished turn.
func makeSessions(b *testing.B, c *client.Client, n int) {
	b.Helper()
	ctx := context.Background()
	provider := "script"
	chats := make([]string, n)
	for i := range n {
		uri := fmt.Sprintf("%s:/bench-%04d", protocol.SessionScheme, i)
		if err := c.Call(ctx, "createSession", protocol.CreateSessionParams{Channel: uri, Provider: &provider}, nil); err != nil {
			b.Fatal(err)
		}
		chats[i] = protocol.DefaultChatURI(uri)
		if _, err := c.Subscribe(ctx, chats[i]); err != nil {
			b.Fatal(err)
		}
		msg := protocol.Message{Text: "say hi", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
		if _, err := c.Dispatch(ctx, chats[i], &protocol.ChatTurnStartedAction{TurnID: "t", StartedAt: client.Now(), Message: msg}); err != nil {
			b.Fatal(err)
		}
	}
	for _, chat := range chats {
		waitChat(b, c, chat, idle)
		if err := c.Unsubscribe(ctx, chat); err != nil {
			b.Fatal(err)
		}
	}
}

func mustURLb(b *testing.B, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		b.Fatal(err)
	}
	return u
}
