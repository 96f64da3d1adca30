package conn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// discard is a transport that drops what it is sent, as fast as it can.
type discard struct {
	frames atomic.Int64
	block  chan struct{} // when set, writes wait on it: a client that stopped reading
	// ended, when set, is closed at the first frame ending a turn.
	ended     chan struct{}
	endedOnce sync.Once
	wrote     chan struct{} // told after each frame, for waitDelivered
}

func (d *discard) Read(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (d *discard) Write(ctx context.Context, msg []byte) error {
	if d.block != nil {
		select {
		case <-d.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.frames.Add(1)
	select {
	case d.wrote <- struct{}{}:
	default: // one told and not yet heard wakes the waiter all the same
	}
	if d.ended != nil && bytes.Contains(msg, []byte(`"chat/turnComplete"`)) {
		d.endedOnce.Do(func() { close(d.ended) })
	}
	return nil
}

func (d *discard) Close(CloseCode, string) error { return nil }

// testBus is a bus with subscribers of their own, counting the cuts
// they are told of.
type testBus struct {
	*fanout.Bus
	cuts map[string]*atomic.Int64
}

func newTestBus() *testBus {
	b := &testBus{Bus: fanout.New(0, 0), cuts: map[string]*atomic.Int64{}}
	for _, r := range CutReasons {
		b.cuts[r] = new(atomic.Int64)
	}
	return b
}

func (b *testBus) cut(reason string) { b.cuts[reason].Add(1) }

// subscribers connects n connections to channel; each ends with the test.
func subscribers(tb testing.TB, bus *testBus, channel string, n int) ([]*Conn, []*discard) {
	tb.Helper()
	conns := make([]*Conn, n)
	ts := make([]*discard, n)
	for i := range n {
		ts[i] = &discard{wrote: make(chan struct{}, 1)}
		c := New(context.Background(), Config{ID: int64(i + 1), Transport: ts[i], OnCut: bus.cut})
		tb.Cleanup(func() {
			c.Abort(CloseNormal, "the test is over")
			<-c.Done()
		})
		if err := c.SetClient(fmt.Sprintf("c%d", i), protocol.ProtocolVersion); err != nil {
			tb.Fatal(err)
		}
		bus.Subscribe(c, channel, "")
		conns[i] = c
	}
	return conns, ts
}

// BenchmarkFanout publishes chat/delta actions to a chat with 1, 10 and
// 100 subscribers. An envelope is encoded once however many subscribers
// there are; each subscriber's queue then costs about one allocation a
// delta (its frame, or the merge into the one waiting).
func BenchmarkFanout(b *testing.B) {
	const channel = "ahp-chat://default/YWhwLXNlc3Npb246L3M"
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			h := newTestBus()
			_, ts := subscribers(b, h, channel, n)
			for _, d := range ts {
				d.ended = make(chan struct{})
			}
			a := &protocol.ChatDeltaAction{TurnID: "t1", PartID: "p1", Content: "a token "}
			b.ReportAllocs()
			for b.Loop() {
				h.Publish(channel, a, nil)
			}
			// Deltas to one part merge for a subscriber that is behind, so
			// the frames are fewer than the deltas: the turn's end, which
			// merges with nothing, comes after all of them.
			h.Publish(channel, &protocol.ChatTurnCompleteAction{TurnID: "t1"}, nil)
			b.StopTimer()
			for _, d := range ts {
				select {
				case <-d.ended:
				case <-time.After(testwait.Hang):
					b.Fatalf("a subscriber got %d frames and not the turn's end", d.frames.Load())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
		})
	}
}

// waitDelivered waits, frame by frame, for each of ts to have been written
// want frames.
func waitDelivered(tb testing.TB, ts []*discard, want int64) {
	tb.Helper()
	timeout := time.After(testwait.Hang)
	for _, d := range ts {
		for d.frames.Load() < want {
			select {
			case <-d.wrote:
			case <-timeout:
				tb.Fatalf("a subscriber got %d of %d frames", d.frames.Load(), want)
			}
		}
	}
}

// TestSlowSubscriber checks that a client that stops reading neither slows
// the others nor holds more than its bounded queue: it is dropped.
func TestSlowSubscriber(t *testing.T) {
	const channel = "ahp-chat://default/YWhwLXNlc3Npb246L3M"
	h := newTestBus()
	conns, ts := subscribers(t, h, channel, 3)
	ts[0].block = make(chan struct{}) // never reads
	// Not streamed text, which a client that is behind gets merged.
	a := &protocol.ChatUsageAction{TurnID: "t1", Usage: protocol.UsageInfo{InputTokens: new(int64(1))}}
	// The stuck writer may have taken a batch into its buffer before it
	// blocked, so the queue overflows somewhere after DefaultQueuedMessages more:
	// publish until it does, with a bound far past it.
	var n int64
	for dropped := false; !dropped; {
		if n > 4*DefaultQueuedMessages {
			t.Fatalf("the stuck subscriber was not dropped after %d frames", n)
		}
		h.Publish(channel, a, nil)
		n++
		select {
		case <-conns[0].Done():
			dropped = true
		default:
		}
	}
	waitDelivered(t, ts[1:], n)
	queued := conns[0].Stats().QueuedMessages
	code, why, _ := conns[0].Ended()
	if queued != 0 || code != ClosePolicy || !strings.HasPrefix(why, "too_far_behind: client too slow") {
		t.Errorf("the stuck subscriber holds %d frames (closed with %d: %q)", queued, code, why)
	}
	if h.cuts[CutSlow].Load() != 1 {
		t.Errorf("cut for being slow: %d, want 1", h.cuts[CutSlow].Load())
	}
	close(ts[0].block)
}

// TestStuckSubscriberGetsTextMerged checks streamed text to a client that
// stops reading is merged into the frame at the end of its queue, one per
// part, holding every byte.
func TestStuckSubscriberGetsTextMerged(t *testing.T) {
	const channel = "ahp-chat://default/YWhwLXNlc3Npb246L3M"
	h := newTestBus()
	conns, ts := subscribers(t, h, channel, 1)
	ts[0].block = make(chan struct{})
	defer close(ts[0].block)
	for i := range 3 * DefaultQueuedMessages {
		part := "p1"
		if i >= 2*DefaultQueuedMessages {
			part = "p2"
		}
		h.Publish(channel, &protocol.ChatDeltaAction{TurnID: "t1", PartID: part, Content: "tok "}, nil)
	}
	seq := h.Current()
	c := conns[0]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		t.Fatalf("the subscriber was dropped: %s", c.closeWhy)
	}
	// The writer may hold a first frame it took before it blocked; the
	// rest merged into one frame a part.
	if n := len(c.queue); n < 1 || n > 3 {
		t.Fatalf("%d frames queued", n)
	}
	last := c.queue[len(c.queue)-1]
	if last.Len() != 4*DefaultQueuedMessages {
		t.Errorf("the last frame holds %d bytes of text, want %d", last.Len(), 4*DefaultQueuedMessages)
	}
	var env protocol.ActionEnvelope
	if err := json.Unmarshal(last.Bytes(), &struct {
		Params *protocol.ActionEnvelope `json:"params"`
	}{&env}); err != nil {
		t.Fatal(err)
	}
	if d, ok := env.Action.(*protocol.ChatDeltaAction); !ok || d.PartID != "p2" || len(d.Content) != 4*DefaultQueuedMessages || env.ServerSeq != seq {
		t.Errorf("the merged frame decodes as %+v at %d", env.Action, env.ServerSeq)
	}
}
