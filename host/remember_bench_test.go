package host_test

import (
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// BenchmarkReplayAfterRestart: a client 10,000 actions behind when the
// host stopped reconnects to the new host and is replayed them from the
// journal (found by search: the new host holds no mark of its own).
func BenchmarkReplayAfterRestart(b *testing.B) {
	j := openJournal(b)
	state := b.TempDir()
	th := startHost(b, state, withJournal(j))
	c := th.client("away")
	session, chat := th.newSession(c, "s1", nil)
	send(b, c, chat, "t1", "say hello")
	th.leave(c, "away")
	w := th.client("writer")
	w.Subscribe(session)
	w.Subscribe(chat)
	send(b, w, chat, "t2", "say "+strings.Repeat("word ", 30_000)) // about 10,000 deltas
	th.stop()
	th = startHost(b, state, withJournal(j))
	actions := 0
	b.ResetTimer()
	for b.Loop() {
		again := hosttest.Dial(b, th.url).Light()
		res := again.Resume(c, "away")
		replay, ok := res.(*protocol.ReconnectReplayResult)
		if !ok {
			b.Fatalf("got %T, want a replay", res)
		}
		actions = len(replay.Actions)
		again.Close()
	}
	b.ReportMetric(float64(actions), "actions/replay")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/replay")
}
