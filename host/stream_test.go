package host_test

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// longSay is a script step saying about kb kilobytes.
func longSay(kb int) string {
	return "say " + strings.TrimSpace(strings.Repeat("word ", kb*1000/5))
}

// TestLongReplyStreamsInLinearCost streams an 800 KB reply to a client.
// Copying the reply so far at each of its ~53,000 deltas, as the host and
// the script backend once did, allocated tens of gigabytes; appending
// costs a small multiple of the text.
func TestLongReplyStreamsInLinearCost(t *testing.T) {
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "long", nil)
	send(t, c, chat, "warm", "say warm")
	c.MustCall("unsubscribe", map[string]any{"channel": chat})
	reader := dialRaw(t, th.url, chat) // reads without decoding: the host's cost alone
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	startTurn(c, chat, "t1", longSay(800))
	reader.waitFor(t, `"type":"chat/turnComplete","turnId":"t1"`)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<30 {
		t.Errorf("streaming 800 KB allocated %d MB", alloc>>20)
	}
	cs := th.client("c2").Subscribe(chat).State.(*protocol.ChatState)
	if got := len(text(cs.Turns[len(cs.Turns)-1].ResponseParts)); got < 790_000 {
		t.Fatalf("the reply has %d bytes", got)
	}
}

// TestCancelStopsALongReply cancels a long reply as it starts: the turn
// ends cancelled, and the script stops saying rather than stream the rest.
func TestCancelStopsALongReply(t *testing.T) {
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "long", nil)
	send(t, c, chat, "warm", "say warm")
	c.MustCall("unsubscribe", map[string]any{"channel": chat})
	reader := dialRaw(t, th.url, chat)
	startTurn(c, chat, "t1", longSay(4000))
	reader.waitFor(t, `"type":"chat/delta","turnId":"t1"`)
	c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t1", Duration: 1})
	reader.waitFor(t, `"type":"chat/turnCancelled","turnId":"t1"`)
	cs := th.client("c2").Subscribe(chat).State.(*protocol.ChatState)
	last := cs.Turns[len(cs.Turns)-1]
	if last.ID != "t1" || last.State != protocol.TurnStateCancelled {
		t.Fatalf("the turn ended %s", last.State)
	}
	// Whatever was streamed before the cancel went out; the rest, most of
	// 4 MB, did not.
	if n := len(text(last.ResponseParts)); n > 2_000_000 {
		t.Errorf("%d bytes streamed after a cancel at the start", n)
	}
}

// BenchmarkStreamCPU reports the host's CPU time per streamed kilobyte for
// replies of 200 and 800 KB to one subscriber that reads without decoding:
// linear streaming keeps the two close.
func BenchmarkStreamCPU(b *testing.B) {
	for _, kb := range []int{200, 800} {
		b.Run(fmt.Sprintf("KB=%d", kb), func(b *testing.B) {
			th := startBenchHost(b)
			c := hosttest.Dial(b, th.url)
			c.Initialize("driver", protocol.RootURI)
			session := "ahp-session:/bench"
			c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
				"workingDirectories": []string{"file://" + th.work}})
			chat := protocol.DefaultChatURI(session)
			c.Subscribe(chat)
			startTurn(c, chat, "warm", "say warm up") // announced: others may watch it
			c.WaitState(chat, "warm-up", func(s protocol.ChannelState) bool { return len(s.(*protocol.ChatState).Turns) == 1 })
			c.MustCall("unsubscribe", map[string]any{"channel": chat})
			reader := dialRaw(b, th.url, chat)
			var cpu time.Duration
			for i := 0; b.Loop(); i++ {
				turn := fmt.Sprintf("t%d", i)
				start := processCPU()
				startTurn(c, chat, turn, longSay(kb))
				reader.waitFor(b, `"type":"chat/turnComplete","turnId":"`+turn+`"`)
				cpu += processCPU() - start
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*kb), "cpu-µs/KB")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSlowClientGetsMergedText streams 800 KB to a client that decodes,
// validates and reduces every frame, and so falls behind: it gets the
// reply in fewer, longer deltas instead of being dropped, and ends with
// the host's state.
func TestSlowClientGetsMergedText(t *testing.T) {
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "long", nil)
	cs := send(t, c, chat, "t1", longSay(800))
	if got := len(text(cs.Turns[len(cs.Turns)-1].ResponseParts)); got < 790_000 {
		t.Fatalf("the reply has %d bytes", got)
	}
	deltas := 0
	for _, m := range c.Messages() {
		if e := m.Envelope; e != nil && e.Action.Type() == protocol.ActionChatDelta {
			deltas++
		}
	}
	t.Logf("%d deltas received for ~53,000 sent", deltas)
	agreeAll(t, th, c, chat)
}
