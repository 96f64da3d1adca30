package acp_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/plugins/pluginstest"
)

// floodSeconds is how long TestFlood streams at floodRate: a second by
// default, so the suite stays quick; -acp-flood-seconds=10 is the figure
// ahpd is held to.
var floodSeconds = flag.Float64("acp-flood-seconds", 1, "how many seconds TestFlood streams chunks at 20,000 a second")

const floodRate = 20_000

// inMemory has the test agent keep its sessions in memory only: one that
// writes them down writes every chunk of the conversation at the end of
// each turn, which is the agent's time, not ahpd's.
var inMemory = map[string]string{"TESTAGENT_STATE": ""}

// floodExpected is what a turn of "flood n RATE c#," says: every chunk
// numbered, in order.
func floodExpected(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("c")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(",")
	}
	return b.String()
}

// TestFlood has the agent stream numbered chunks at 20,000 a second, as a
// fast model can: the SDK's queue of 1,024 notifications once overflowed
// under such a stream and closed the connection. Every chunk must arrive,
// none twice, in order, and the turn complete.
func TestFlood(t *testing.T) {
	t.Parallel()
	n := int(*floodSeconds * floodRate)
	f := newFixture(t, inMemory)
	a := f.start(t, f.b, "conv", false)
	turn := pluginstest.NewTurn("")
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*floodSeconds*float64(time.Second))+time.Minute)
	defer cancel()
	start := time.Now()
	if err := a.Prompt(ctx, userMessage(fmt.Sprintf("flood %d %d c#,", n, floodRate)), turn); err != nil {
		t.Fatalf("the turn, after %v and %d bytes of its text: %v", time.Since(start).Round(time.Millisecond), len(turn.Response()), err)
	}
	elapsed := time.Since(start)
	got, want := turn.Response(), floodExpected(n)
	if got != want {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the turn said %d bytes, want %d; they differ from byte %d: %.40q, want %.40q",
			len(got), len(want), i, got[i:], want[i:])
	}
	t.Logf("%d chunks in %v: %.0f chunks/s (the agent paced at %d/s)", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), floodRate)
}

// BenchmarkFlood measures how many chunks a second a turn takes from an
// agent that streams as fast as it can.
func BenchmarkFlood(b *testing.B) {
	const n = 50_000
	f := newFixture(b, inMemory)
	a := f.start(b, f.b, "conv", false)
	want := floodExpected(n)
	var chunks int
	var spent time.Duration
	cpu := cpuTime()
	for b.Loop() {
		turn := pluginstest.NewTurn("")
		start := time.Now()
		if err := a.Prompt(context.Background(), userMessage(fmt.Sprintf("flood %d 1000000000 c#,", n)), turn); err != nil {
			b.Fatalf("the turn, after %v and %d bytes of its text: %v", time.Since(start).Round(time.Millisecond), len(turn.Response()), err)
		}
		spent += time.Since(start)
		chunks += n
		if got := turn.Response(); got != want {
			b.Fatalf("the turn said %d bytes, want %d", len(got), len(want))
		}
	}
	b.ReportMetric(float64(chunks)/spent.Seconds(), "chunks/s")
	// What ahpd's side costs, whatever else the machine runs: the test
	// process's CPU time, the agent's own not counted.
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(chunks), "cpu-µs/chunk")
}
