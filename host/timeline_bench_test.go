package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// BenchmarkSessionEventsNewest asks for the newest page of a long
// session's timeline (a turn of 20,000 streamed words, then 30 short ones),
// what a dashboard's timeline draws first: the cost of a page is what a
// reader takes from the host's writers, and should follow the page, not
// the session. It reports the journal entries the session holds and the
// bytes allocated a page.
func BenchmarkSessionEventsNewest(b *testing.B) {
	j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(b.TempDir(), "journal")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = j.Close(context.Background()) })
	th := startBenchHostIn(b, b.TempDir(), withJournal(j))
	c := hosttest.Dial(b, th.url)
	c.Initialize("reader")
	session := "ahp-session:/long"
	c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + th.work}})
	chat := protocol.DefaultChatURI(session)
	c.Subscribe(session)
	c.Subscribe(chat)
	startTurn(c, chat, "t1", "say "+strings.Repeat("word ", 20_000))
	c.WaitState(chat, "the long turn", func(s protocol.ChannelState) bool { return len(s.(*protocol.ChatState).Turns) == 1 })
	const short = 30
	for i := range short {
		startTurn(c, chat, fmt.Sprint("s", i), "say the end")
		c.WaitState(chat, "a short turn", func(s protocol.ChannelState) bool { return len(s.(*protocol.ChatState).Turns) == 2+i })
	}
	entries, err := j.Read(context.Background(), session, 0, journal.MaxReadLimit)
	if err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		var res struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(c.MustCall("ahpd/sessionEvents", map[string]any{"channel": session, "limit": 50}), &res); err != nil || len(res.Events) != 50 {
			b.Fatalf("a page of %d events: %v", len(res.Events), err)
		}
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(len(entries)), "entries")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N), "host-B/page")
}
