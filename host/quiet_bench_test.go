package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// BenchmarkQuietSession measures what one session's clients wait for
// while 50 other sessions stream as fast as they go (the script backend
// saying 2,000 deltas each, as BenchmarkJournalStreaming's load=flood):
// a client of a quiet session renames it, again and again, and another
// client watching that session notes when each title reaches it. With the
// journal on, the quiet session's action is written down before it is
// sent, as every other; what it must not do is wait for the other
// sessions' writes (docs/JOURNAL.md, "Sessions apart").
//
//   - ms/p50-seen, ms/p99-seen, ms/max-seen: from the rename's dispatch to
//     the other client's frame;
//   - renames: how many were timed (one every 10 ms) while the others
//     streamed.
func BenchmarkQuietSession(b *testing.B) {
	for _, journaled := range []bool{false, true} {
		b.Run(fmt.Sprintf("journal=%v", journaled), func(b *testing.B) {
			benchQuiet(b, 50, 2000, journaled)
		})
	}
}

func benchQuiet(b *testing.B, sessions, deltas int, journaled bool) {
	st := newStamps(sessions, deltas*3)
	state := b.TempDir()
	var opts []hostOption
	var j *journal.Journal
	if journaled {
		j = benchJournal(b, state)
		opts = append(opts, withJournal(j))
	}
	opts = append(opts, withStamps(state, st))
	th := startBenchHostIn(b, state, opts...)
	clients := make([]*streamClient, sessions)
	for i := range clients {
		c := &streamClient{benchClient: dialBench(b, th.url), st: st, session: i}
		c.chat = c.newSession(b, fmt.Sprintf("ahp-session:/j%02d", i), th.work)
		clients[i] = c
	}
	const quiet = "ahp-session:/quiet"
	renamer, watcher := dialBench(b, th.url), dialBench(b, th.url)
	quietChat := renamer.newSession(b, quiet, th.work)
	renamer.startTurn(b, quietChat, "first", "say hello") // a provisional session is its creator's alone
	renamer.waitTurn(b, "first")
	watcher.must(b, "subscribe", map[string]any{"channel": quiet})
	go func() { // the renamer's echoes, read so its queue never fills
		for {
			if _, _, err := renamer.ws.Read(context.Background()); err != nil {
				return
			}
		}
	}()

	var seen []int64
	for turn := 0; b.Loop(); turn++ {
		st.reset()
		for _, c := range clients {
			c.startTurn(b, c.chat, fmt.Sprintf("t%d", turn), "say "+stampedWords(c.session, deltas*3))
		}
		var done atomic.Bool
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() { c.stream(b, fmt.Sprintf("t%d", turn)) })
		}
		var streamed sync.WaitGroup
		streamed.Go(func() { wg.Wait(); done.Store(true) })
		// A rename every 10 ms, whatever the last one's wait: a stall is
		// counted for every rename it holds, as a user typing would feel
		// it. The watcher reads as they come, until the last one.
		prefix := fmt.Sprintf("quiet %d.", turn)
		arrived := make(chan []time.Time, 1)
		go func() {
			at, err := watcher.titles(prefix, maxRenames)
			if err != nil {
				b.Error(err)
			}
			arrived <- at
		}()
		var sent []time.Time
		for k := 0; !done.Load() && k < maxRenames-1; k++ {
			sent = append(sent, time.Now())
			if err := renamer.rename(quiet, fmt.Sprintf("%s%06d", prefix, k)); err != nil {
				b.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // the pace of the load, not a wait for anything
		}
		// The last: the watcher stops once it has it, and so every one
		// before it, in order.
		if err := renamer.rename(quiet, fmt.Sprintf("%s%06d", prefix, maxRenames-1)); err != nil {
			b.Fatal(err)
		}
		got := <-arrived
		for k := range sent {
			if got[k].IsZero() {
				b.Fatalf("rename %d never reached the watcher", k)
			}
			seen = append(seen, int64(got[k].Sub(sent[k])))
		}
		streamed.Wait()
		for _, c := range clients {
			c.waits = c.waits[:0]
		}
	}
	if len(seen) == 0 {
		b.Fatal("no rename was timed while the sessions streamed")
	}
	slices.Sort(seen)
	ms := func(q float64) float64 {
		return float64(seen[min(len(seen)-1, int(q*float64(len(seen))))]) / 1e6
	}
	b.ReportMetric(ms(0.5), "ms/p50-seen")
	b.ReportMetric(ms(0.99), "ms/p99-seen")
	b.ReportMetric(ms(1), "ms/max-seen")
	b.ReportMetric(float64(len(seen))/float64(b.N), "renames")
}

// rename dispatches session/titleChanged, not waiting for its echo.
func (c *benchClient) rename(session, title string) error {
	c.clientSeq++
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "dispatchAction", "params": map[string]any{
		"channel": session, "clientSeq": c.clientSeq,
		"action": &protocol.SessionTitleChangedAction{Title: title},
	}})
	return c.ws.Write(context.Background(), websocket.MessageText, msg)
}

// maxRenames bounds the renames of one turn of BenchmarkQuietSession.
const maxRenames = 100000

// titles reads frames until it has seen the title prefix followed by the
// six digits of n-1, and returns when each title numbered below n
// arrived.
func (c *benchClient) titles(prefix string, n int) ([]time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	at := make([]time.Time, n)
	want := []byte(`"title":"` + prefix)
	for at[n-1].IsZero() {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("waiting for titles: %w", err)
		}
		now := time.Now()
		for rest := data; ; {
			i := bytes.Index(rest, want)
			if i < 0 || len(rest) < i+len(want)+6 {
				break
			}
			rest = rest[i+len(want):]
			k, err := strconv.Atoi(string(rest[:6]))
			if err == nil && k < n && at[k].IsZero() {
				at[k] = now
			}
		}
	}
	return at, nil
}
