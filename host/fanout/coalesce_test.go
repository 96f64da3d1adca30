package fanout_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/protocol"
)

const other = "ahp-chat://default/b3RoZXI"

// coalescing is a subscriber that holds its frames back as a connection
// does, with a delay per channel, on a fake clock; tick sends what is due.
type coalescing struct {
	clk   *clock.Fake
	delay map[string]time.Duration
	c     fanout.Coalescer
	out   []*fanout.Frame
}

func (s *coalescing) Send(f *fanout.Frame) {
	first, then := s.c.Offer(f, s.delay[f.Channel()], s.clk.Now())
	for _, f := range []*fanout.Frame{first, then} {
		if f != nil {
			s.out = append(s.out, f)
		}
	}
}
func (s *coalescing) Hold(string, string)            {}
func (s *coalescing) Wants(protocol.ActionType) bool { return true }

func (s *coalescing) tick() {
	if f := s.c.Due(s.clk.Now()); f != nil {
		s.out = append(s.out, f)
	}
}

// sent decodes what s was sent.
func sent(t *testing.T, frames []*fanout.Frame) []protocol.ActionEnvelope {
	t.Helper()
	var out []protocol.ActionEnvelope
	for _, f := range frames {
		var m struct {
			Params protocol.ActionEnvelope `json:"params"`
		}
		if err := json.Unmarshal(f.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Params)
	}
	return out
}

// describe writes envelopes as "seq:text" for deltas and "seq:type"
// otherwise.
func describe(envs []protocol.ActionEnvelope) string {
	var parts []string
	for _, e := range envs {
		switch a := e.Action.(type) {
		case *protocol.ChatDeltaAction:
			parts = append(parts, fmt.Sprintf("%d:%s", e.ServerSeq, a.Content))
		default:
			parts = append(parts, fmt.Sprintf("%d:%s", e.ServerSeq, e.Action.Type()))
		}
	}
	return strings.Join(parts, " ")
}

func part(p, text string) protocol.Action {
	return &protocol.ChatDeltaAction{TurnID: "t1", PartID: p, Content: text}
}

var turnEnd = &protocol.ChatTurnCompleteAction{TurnID: "t1"}

// TestCoalesce: what a subscription that allows a delay is sent, step by
// step: publishing on chat (delay 200ms unless the case says) or other
// (no delay), and moving the clock.
func TestCoalesce(t *testing.T) {
	type step struct {
		channel string
		action  protocol.Action
		advance time.Duration // instead of publishing, move the clock, then send what is due
	}
	pub := func(a protocol.Action) step { return step{channel: chat, action: a} }
	wait := func(d time.Duration) step { return step{advance: d} }
	tests := []struct {
		name  string
		delay time.Duration
		steps []step
		want  string
	}{
		{"deltas merge until their time", 200 * time.Millisecond,
			[]step{pub(part("p1", "a")), wait(100 * time.Millisecond), pub(part("p1", "b")), pub(part("p1", "c")), wait(99 * time.Millisecond)},
			""},
		{"then go as one, under the last serverSeq", 200 * time.Millisecond,
			[]step{pub(part("p1", "a")), wait(100 * time.Millisecond), pub(part("p1", "b")), wait(100 * time.Millisecond), pub(part("p1", "c"))},
			"2:ab"},
		{"a turn's end sends the held text first", 200 * time.Millisecond,
			[]step{pub(part("p1", "a")), pub(part("p1", "b")), pub(turnEnd)},
			"2:ab 3:chat/turnComplete"},
		{"another part sends the held one and is held", 200 * time.Millisecond,
			[]step{pub(part("p1", "a")), pub(part("p2", "b")), pub(part("p2", "c")), wait(200 * time.Millisecond)},
			"1:a 3:bc"},
		{"a channel with no delay is not delayed", 200 * time.Millisecond,
			[]step{pub(part("p1", "a")), {channel: other, action: part("p1", "x")}, pub(part("p1", "b")), wait(time.Second)},
			"1:a 2:x 3:b"},
		{"no delay is immediate", 0,
			[]step{pub(part("p1", "a")), pub(part("p1", "b"))},
			"1:a 2:b"},
		{"more than a second is a second", time.Hour,
			[]step{pub(part("p1", "a")), wait(999 * time.Millisecond), pub(part("p1", "b")), wait(time.Millisecond)},
			"2:ab"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
			b := fanout.New(16, 0)
			s := &coalescing{clk: clk, delay: map[string]time.Duration{chat: tc.delay}}
			b.Subscribe(s, chat, "")
			b.Subscribe(s, other, "")
			for _, st := range tc.steps {
				if st.action == nil {
					clk.Advance(st.advance)
					s.tick()
					continue
				}
				b.Publish(st.channel, st.action, nil)
			}
			if got := describe(sent(t, s.out)); got != tc.want {
				t.Errorf("sent %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCoalescerBoundsAndFlushes(t *testing.T) {
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	frame := func(seq int64, ch, text string) *fanout.Frame {
		return fanout.ActionFrame(&protocol.ActionEnvelope{Channel: ch, ServerSeq: seq, Action: part("p1", text)})
	}
	var c fanout.Coalescer
	if first, then := c.Offer(frame(1, chat, "a"), time.Second, time.Time{}); first != nil || then == nil {
		t.Error("a frame offered without the time was held")
	}
	// Held text stops growing at 64 KiB: the next delta sends it.
	big := strings.Repeat("x", 40<<10)
	if _, then := c.Offer(frame(2, chat, big), time.Second, now); then != nil {
		t.Fatal("a delta allowed a delay was not held")
	}
	if c.Deadline() != now.Add(time.Second) {
		t.Errorf("deadline %v", c.Deadline())
	}
	first, then := c.Offer(frame(3, chat, big), time.Second, now)
	if first == nil || then != nil {
		t.Fatalf("past 64 KiB: sent %v, held the next %v", first != nil, then == nil)
	}
	if got := describe(sent(t, []*fanout.Frame{first})); got != "2:"+big {
		t.Errorf("sent %.20q, want the first 40 KiB at 2", got)
	}
	if f := c.FlushChannel(other); f != nil {
		t.Error("another channel's flush sent the held text")
	}
	if f := c.FlushChannel(chat); f == nil || !c.Deadline().IsZero() {
		t.Error("the channel's own flush did not send its text")
	}
	if f := c.Flush(); f != nil {
		t.Error("nothing held, yet something flushed")
	}
}

// TestCoalescedStateIsTheSame: a random mix of deltas on two channels, one
// with a delay, of parts and turn ends, with the clock moving, sends a
// subscriber that coalesces the same text of every part as one that does
// not, in fewer frames, with serverSeq never going back.
func TestCoalescedStateIsTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	b := fanout.New(16, 0)
	slow := &coalescing{clk: clk, delay: map[string]time.Duration{chat: 50 * time.Millisecond}}
	plain := &sub{}
	for _, ch := range []string{chat, other} {
		b.Subscribe(slow, ch, "")
		b.Subscribe(plain, ch, "")
	}
	for i := range 5000 {
		ch := chat
		if rng.IntN(10) == 0 {
			ch = other
		}
		switch r := rng.IntN(100); {
		case r < 90:
			b.Publish(ch, part(fmt.Sprintf("p%d", i/500), fmt.Sprintf("w%d ", i)), nil)
		case r < 92:
			b.Publish(ch, turnEnd, nil)
		default:
			clk.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
			slow.tick()
		}
	}
	clk.Advance(fanout.MaxLatency)
	slow.tick()
	text := func(envs []protocol.ActionEnvelope) map[string]string {
		out := map[string]string{}
		for _, e := range envs {
			if d, ok := e.Action.(*protocol.ChatDeltaAction); ok {
				out[e.Channel+" "+d.PartID] += d.Content
			}
		}
		return out
	}
	got, want := sent(t, slow.out), sent(t, plain.frames)
	if fmt.Sprint(text(got)) != fmt.Sprint(text(want)) {
		t.Error("the coalescing subscriber's text differs")
	}
	for i := 1; i < len(got); i++ {
		if got[i].ServerSeq < got[i-1].ServerSeq {
			t.Fatalf("serverSeq went back: %d after %d", got[i].ServerSeq, got[i-1].ServerSeq)
		}
	}
	if got[len(got)-1].ServerSeq != want[len(want)-1].ServerSeq {
		t.Errorf("the last serverSeq sent is %d, want %d", got[len(got)-1].ServerSeq, want[len(want)-1].ServerSeq)
	}
	if len(got)*3 > len(want) {
		t.Errorf("coalesced into %d frames of %d", len(got), len(want))
	}
	t.Logf("%d frames coalesced into %d", len(want), len(got))
}

// BenchmarkCoalesce publishes a reply streamed a delta a millisecond, with
// a turn's end every 1,000 deltas, to a subscriber allowing each delay,
// and reports the frames it is sent per 10,000 deltas and the time a
// delta takes to publish, hold and merge (the fake clock's included).
func BenchmarkCoalesce(b *testing.B) {
	for _, delay := range []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, time.Second} {
		b.Run(fmt.Sprintf("maxLatency=%s", delay), func(b *testing.B) {
			clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
			bus := fanout.New(0, 0)
			s := &coalescing{clk: clk, delay: map[string]time.Duration{chat: delay}}
			bus.Subscribe(s, chat, "")
			const deltas = 10000
			frames := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range deltas {
					bus.Publish(chat, part("p1", "some words "), nil)
					if i%1000 == 999 {
						bus.Publish(chat, turnEnd, nil)
					}
					clk.Advance(time.Millisecond)
					s.tick()
				}
				frames += len(s.out)
				clear(s.out)
				s.out = s.out[:0]
			}
			b.ReportMetric(float64(frames)/float64(b.N), "frames/10k-deltas")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*deltas), "ns/delta")
		})
	}
}
