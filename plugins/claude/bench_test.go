package claude_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/plugins/pluginstest"
)

// BenchmarkTurnOverhead measures what a turn costs on top of the model:
// the time from Prompt to the first text the host is told of, less the
// mock model's own time to its first text. What remains is ahpd's work
// and the CLI's (request building, stream parsing, the pipes). relay-ms
// is the part after the model's first text left the mock: the CLI
// passing it on and ahpd reading it. The CLI runs warm, as it does for
// every turn after a chat's first.
func BenchmarkTurnOverhead(b *testing.B) {
	f := newFixture(b)
	a := f.start(b, f.backend, newID(), false, nil)
	if err := prompt(b, a, pluginstest.NewTurn(""), "warm up"); err != nil {
		b.Fatalf("Prompt: %v", err)
	}
	var overhead, model, relay time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.mock.Enqueue(claudetest.Text("pong"))
		turn := pluginstest.NewTurn("")
		start := time.Now()
		if err := prompt(b, a, turn, "ping"); err != nil {
			b.Fatalf("Prompt: %v", err)
		}
		texts := turn.Of("text")
		req := f.lastRequest(b)
		if len(texts) == 0 || req.FirstByte().IsZero() {
			b.Fatal("no text")
		}
		mock := req.FirstByte().Sub(req.Received)
		model += mock
		overhead += texts[0].At.Sub(start) - mock
		relay += texts[0].At.Sub(req.FirstByte())
	}
	b.StopTimer()
	b.ReportMetric(float64(overhead.Microseconds())/1000/float64(b.N), "overhead-ms/turn")
	b.ReportMetric(float64(model.Microseconds())/1000/float64(b.N), "mock-ms/turn")
	b.ReportMetric(float64(relay.Microseconds())/1000/float64(b.N), "relay-ms/turn")
}

// BenchmarkResidentChatMemory measures the Go heap one started chat
// holds in ahpd, the CLI process itself excluded: the agent, its process
// record, pipes and readers.
func BenchmarkResidentChatMemory(b *testing.B) {
	const chats = 4
	f := newFixture(b)
	var heap, stack float64
	for i := 0; i < b.N; i++ {
		before := memStats()
		agents := make([]*claude.Agent, chats)
		for j := range agents {
			a, err := f.backend.Start(context.Background(), pluginsStart(f, newID()))
			if err != nil {
				b.Fatalf("Start: %v", err)
			}
			agents[j] = a.(*claude.Agent)
		}
		after := memStats()
		heap += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / chats
		stack += float64(int64(after.StackInuse)-int64(before.StackInuse)) / chats
		b.StopTimer()
		for _, a := range agents {
			a.Close()
		}
		b.StartTimer()
	}
	b.ReportMetric(heap/float64(b.N), "heap-B/chat")
	b.ReportMetric(stack/float64(b.N), "stack-B/chat")
}

func pluginsStart(f *fixture, id string) plugins.StartOptions {
	return plugins.StartOptions{Conversation: f.conv(id)}
}

func memStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
