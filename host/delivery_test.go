package host_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// subscribeDelayed subscribes c to channel with delivery.maxLatencyMs ms.
func subscribeDelayed(t *testing.T, c *hosttest.Client, channel string, ms int64) {
	t.Helper()
	if _, err := c.Call("subscribe", map[string]any{"channel": channel, "delivery": map[string]any{"maxLatencyMs": ms}}); err != nil {
		t.Fatalf("subscribing with maxLatencyMs %d: %v", ms, err)
	}
}

// warm runs a first turn: until it has one, a session is its creator's
// alone.
func warm(t *testing.T, c *hosttest.Client, chat string, clk *clock.Fake) {
	t.Helper()
	startTakenAt(t, c, chat, "warm", "say warm", clk.Now())
	waitTurnEnd(t, c, chat, "warm")
}

// words returns n words, each naming its line and place.
func words(line, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("l%dw%d", line, i)
	}
	return strings.Join(w, " ")
}

// deltas counts the chat/delta frames c was sent of a turn.
func deltas(c *hosttest.Client, chat, turnID string) int {
	n := 0
	for _, m := range c.Messages() {
		if e := m.Envelope; e != nil && e.Channel == chat {
			if d, ok := e.Action.(*protocol.ChatDeltaAction); ok && d.TurnID == turnID {
				n++
			}
		}
	}
	return n
}

// lastText returns the markdown of the last turn, or of the active one, in
// c's state of chat.
func lastText(c *hosttest.Client, chat string) string {
	cs, _ := c.State(chat).(*protocol.ChatState)
	switch {
	case cs == nil:
		return ""
	case cs.ActiveTurn != nil:
		return text(cs.ActiveTurn.ResponseParts)
	case len(cs.Turns) > 0:
		return text(cs.Turns[len(cs.Turns)-1].ResponseParts)
	}
	return ""
}

// TestDeliveryMaxLatencyCoalesces: a client that subscribed to a chat with
// maxLatencyMs 200 is sent a reply streamed in bursts in far fewer frames
// than a client without it, and ends with the same state. The host's clock
// does not move, so no held text goes out on its timer: the turn's end
// sends it, before itself, and is not delayed.
func TestDeliveryMaxLatencyCoalesces(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", func(o *host.Options) { o.Clock = clk })
	slow := th.client("slow")
	_, chat := th.newSession(slow, "s1", nil)
	subscribeDelayed(t, slow, chat, 200)
	warm(t, slow, chat, clk)
	plain := th.client("plain")
	plain.Subscribe(chat)

	// Bursts of deltas with pauses between, so the client without the
	// option has caught up each time and is sent each burst as it comes.
	var lines []string
	for i := range 10 {
		lines = append(lines, "say "+words(i, 30), "wait 20ms")
	}
	startTakenAt(t, plain, chat, "t1", strings.Join(lines, "\n"), clk.Now())
	want := waitTurnEnd(t, plain, chat, "t1")
	got := waitTurnEnd(t, slow, chat, "t1")
	sameState(t, got, want)
	sameState(t, got, th.client("fresh").Subscribe(chat).State)
	if reply := text(got.Turns[1].ResponseParts); !strings.Contains(reply, "l9w29") || reply != text(want.Turns[1].ResponseParts) {
		t.Errorf("the coalesced reply is %q", reply)
	}
	held, sent := deltas(slow, chat, "t1"), deltas(plain, chat, "t1")
	t.Logf("deltas sent: %d with maxLatencyMs 200, %d without", held, sent)
	if held > 2 || sent < 5*held {
		t.Errorf("%d deltas with maxLatencyMs 200, %d without: want far fewer", held, sent)
	}
}

// TestDeliveryHeldTextGoesAtItsTime: text held for a client goes out when
// the host's clock reaches its time, though nothing follows it; a
// subscription again without the option delivers at once.
func TestDeliveryHeldTextGoesAtItsTime(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", func(o *host.Options) { o.Clock = clk })
	slow := th.client("slow")
	_, chat := th.newSession(slow, "s1", nil)
	subscribeDelayed(t, slow, chat, 200)
	warm(t, slow, chat, clk)
	// plain subscribed after slow, so the host hands each delta to slow
	// first: once plain has the last word, slow's copy is held.
	plain := th.client("plain")
	plain.Subscribe(chat)

	startTakenAt(t, plain, chat, "t1", "say "+words(0, 40)+"\nwait 1h", clk.Now())
	plain.Wait("the reply", func([]hosttest.Message) bool { return strings.Contains(lastText(plain, chat), "l0w39") })
	if strings.Contains(lastText(slow, chat), "l0w39") {
		t.Error("the held text went out before its time")
	}
	clk.Advance(200 * time.Millisecond)
	slow.Wait("the held text", func([]hosttest.Message) bool { return strings.Contains(lastText(slow, chat), "l0w39") })
	plain.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t1", Duration: 1})
	waitTurnEnd(t, slow, chat, "t1")

	// Subscribed again without the option, the client is sent text at
	// once, the clock still.
	slow.Subscribe(chat)
	startTakenAt(t, plain, chat, "t2", "say "+words(1, 40)+"\nwait 1h", clk.Now())
	slow.Wait("the reply at once", func([]hosttest.Message) bool { return strings.Contains(lastText(slow, chat), "l1w39") })
	plain.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t2", Duration: 1})
	waitTurnEnd(t, slow, chat, "t2")
}

// TestDeliveryMaxLatencyBounds: a negative maxLatencyMs is refused with
// invalid params; more than a second is taken as a
// second.
func TestDeliveryMaxLatencyBounds(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	c.MustCall("unsubscribe", map[string]any{"channel": chat})
	_, err := c.Call("subscribe", map[string]any{"channel": chat, "delivery": map[string]any{"maxLatencyMs": -1}})
	if err == nil || err.Code != -32602 || !strings.Contains(err.Message, "maxLatencyMs") {
		t.Fatalf("a negative maxLatencyMs: %v", err)
	}
	subscribeDelayed(t, c, chat, 1<<40)
	send(t, c, chat, "t1", "say clamped")
	if got := lastText(c, chat); !strings.Contains(got, "clamped") {
		t.Errorf("the reply is %q", got)
	}
}

// TestDeliveryHeldTextAtTheEnd: unsubscribing sends what is held of the
// channel at once; a connection that ends with text held ends (its
// writer, which keeps the timer, with it: goleak checks that nothing
// runs on) while the others' turn goes on.
func TestDeliveryHeldTextAtTheEnd(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", func(o *host.Options) { o.Clock = clk })
	slow := th.client("slow")
	_, chat := th.newSession(slow, "s1", nil)
	subscribeDelayed(t, slow, chat, 1000)
	warm(t, slow, chat, clk)
	plain := th.client("plain")
	plain.Subscribe(chat)

	startTakenAt(t, plain, chat, "t1", "say "+words(0, 40)+"\nwait 1h", clk.Now())
	plain.Wait("the reply", func([]hosttest.Message) bool { return strings.Contains(lastText(plain, chat), "l0w39") })
	slow.MustCall("unsubscribe", map[string]any{"channel": chat})
	if !strings.Contains(lastText(slow, chat), "l0w39") {
		t.Error("the text held was not sent before the unsubscribe's answer")
	}

	subscribeDelayed(t, slow, chat, 1000)
	plain.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t1", Duration: 1})
	waitTurnEnd(t, slow, chat, "t1")
	startTakenAt(t, plain, chat, "t2", "say "+words(1, 40)+"\nwait 1h", clk.Now())
	plain.Wait("the reply", func([]hosttest.Message) bool { return strings.Contains(lastText(plain, chat), "l1w39") })
	if strings.Contains(lastText(slow, chat), "l1w39") {
		t.Error("the held text went out before its time")
	}
	leaving := th.h.Leaving("slow")
	slow.Close()
	for _, done := range leaving {
		<-done
	}
	clk.Advance(time.Second) // the held text's time, with no connection left to send it
	plain.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t2", Duration: 1})
	waitTurnEnd(t, plain, chat, "t2")
}
