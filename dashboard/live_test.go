package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// sseStream is an open live stream of the dashboard's.
type sseStream struct {
	r      *bufio.Reader
	cancel context.CancelFunc
}

func (b *browser) stream(t *testing.T, path string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", b.e.srv.URL+path, nil)
	resp, err := b.hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseStream{r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	return s
}

// until reads events until one named name whose data's field has want.
func (s *sseStream) until(t *testing.T, name, field, want string) string {
	t.Helper()
	return s.untilAll(t, field, map[string]string{name: want})[name]
}

// untilAll reads events until, for each name in wants, one named so has
// its want in its data's field; it returns those fields.
func (s *sseStream) untilAll(t *testing.T, field string, wants map[string]string) map[string]string {
	t.Helper()
	got := map[string]string{}
	event := ""
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before events %v: %v", wants, err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: ") && wants[event] != "" && got[event] == "":
			var data map[string]string
			if err := json.Unmarshal([]byte(line[6:]), &data); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(data[field], wants[event]) {
				got[event] = data[field]
			}
			if len(got) == len(wants) {
				return got
			}
		}
	}
}

// TestLiveStreams follows the table's and a session's streams as a
// session starts and its turn runs.
func TestLiveStreams(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.signIn("mo")
	rows := b.stream(t, "/ui/events?status=idle")
	rows.until(t, "rows", "rows", "No sessions to show")
	mo := e.conn("mo")
	uri, chat := e.startSession(t, mo, "s1", "streamed", "say one")
	waitChat(t, mo, chat, idle)
	rows.until(t, "rows", "rows", `data-session="ahp-session:/s1"`)

	conv := b.stream(t, "/ui/session/events?"+url.Values{"uri": {uri}}.Encode())
	conv.until(t, "conversation", "html", "one")
	send(t, mo, chat, "t2", "say two *three*")
	// The timeline may come first: an update sends what changed.
	got := conv.untilAll(t, "html", map[string]string{"conversation": "<em>three</em>", "timeline": "say two"})
	if !strings.Contains(got["conversation"], `id="turn-t2"`) {
		t.Errorf("the conversation fragment: %s", got["conversation"])
	}
	waitChat(t, mo, chat, func(cs *protocol.ChatState) bool { return cs.ActiveTurn == nil && len(cs.Turns) == 2 })
}

// TestStreamsBounded checks that one login keeps at most 16 live streams.
func TestStreamsBounded(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.signIn("mo")
	for range 16 {
		b.stream(t, "/ui/events")
	}
	if r := b.get("/ui/events"); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("a 17th stream: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
}

// TestStreamsBoundedPerPerson checks that a person keeps at most so many
// live streams across all their logins, each login keeping its own 16,
// and that what one person holds takes none of another's.
func TestStreamsBoundedPerPerson(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       envOptions
		streams []int // the streams each of mo's logins opens, in turn
		refused int   // the login whose next stream is refused
		says    string
	}{
		{name: "32 by default", streams: []int{16, 16, 0}, refused: 2, says: "in this browser and others"},
		{name: "a login's own 16 first", streams: []int{16, 15}, refused: 0, says: "Too many live pages are open"},
		{name: "an option", o: envOptions{livePerPerson: 5}, streams: []int{3, 2}, refused: 0, says: "in this browser and others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.o)
			var mo []*browser
			for _, n := range tc.streams {
				b := e.signIn("mo")
				for range n {
					b.stream(t, "/ui/events")
				}
				mo = append(mo, b)
			}
			r := mo[tc.refused].get("/ui/session/events?uri=ahp-session:/none")
			if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, tc.says) {
				t.Fatalf("mo's next stream: %d, Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
			}
			e.signIn("gus").stream(t, "/ui/events")
		})
	}
}
