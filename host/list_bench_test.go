package host_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// storeSessions writes n session records into a state directory, as the
// file store keeps them, modified a minute apart from 2026-01-01.
func storeSessions(tb testing.TB, state, work string, n int) {
	storeSessionsAt(tb, state, work, n, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Minute)
}

// storeSessionsAt writes n session records modified step apart from base.
func storeSessionsAt(tb testing.TB, state, work string, n int, base time.Time, step time.Duration) {
	tb.Helper()
	dir := filepath.Join(state, "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("s%05d", i)
		data := sessionRecord(tb, id, work, base.Add(time.Duration(i)*step))
		if err := os.WriteFile(filepath.Join(dir, id+".json"), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// sessionRecord is the record, as the host keeps it, of a script session
// id working in work, made and modified at, whose default chat has had
// a turn.
func sessionRecord(tb testing.TB, id, work string, at time.Time) []byte {
	tb.Helper()
	uri := "ahp-session:/" + id
	when := protocol.FormatTime(at)
	rec := map[string]any{
		"ahpd": 1, "uri": uri, "provider": "script", "title": "Session " + id,
		"createdAt": when, "modifiedAt": when, "workingDirectories": []string{work},
		"lifecycle": "ready", "defaultChat": protocol.DefaultChatURI(uri),
		"chats": []map[string]any{{"uri": protocol.DefaultChatURI(uri), "title": "Session " + id,
			"modifiedAt": when, "conversation": id, "started": true}},
	}
	data, err := json.Marshal(rec)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// BenchmarkListSessions answers the first page of a catalogue of 10,000
// stored sessions, over a real WebSocket: a page of 500, and the whole
// first listing a client that does not page gets (1,000 rows).
func BenchmarkListSessions(b *testing.B) {
	state := b.TempDir()
	work := filepath.Join(state, "work")
	storeSessions(b, state, work, 10000)
	th := startBenchHostIn(b, state)
	c := dialRaw(b, th.url, protocol.RootURI)
	for _, tc := range []struct {
		name   string
		params map[string]any
		rows   int
	}{
		{"limit=500", map[string]any{"channel": protocol.RootURI, "limit": 500}, 500},
		{"nolimit", map[string]any{"channel": protocol.RootURI}, 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// One decoded and checked answer; the timed ones are only read,
			// so the figure is the host's.
			raw := c.roundTrip(b, "listSessions", tc.params)
			var r struct {
				Result protocol.ListSessionsResult `json:"result"`
			}
			if err := json.Unmarshal(raw, &r); err != nil || len(r.Result.Items) != tc.rows {
				b.Fatalf("%d rows, %v", len(r.Result.Items), err)
			}
			b.ResetTimer()
			for b.Loop() {
				c.roundTrip(b, "listSessions", tc.params)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/page")
		})
	}
}
