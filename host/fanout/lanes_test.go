package fanout_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host/fanout"
)

// byPrefix puts channels named "<lane>/..." in lane <lane>.
func byPrefix(ch string) string { l, _, _ := strings.Cut(ch, "/"); return l }

func reserve(b *fanout.Bus, channel string, n int) *fanout.Batch {
	return b.Reserve(func(yield func(fanout.Item) bool) {
		for i := range n {
			if !yield(fanout.Item{Channel: channel, Action: delta(fmt.Sprint(i))}) {
				return
			}
		}
	})
}

// TestLanesHoldOnlyTheirOwn: a batch held back in one lane holds back
// what is sent after it to that lane's subscribers only; one watching
// both lanes is sent the other lane's change after the batch, in order.
func TestLanesHoldOnlyTheirOwn(t *testing.T) {
	b := fanout.New(64, 0)
	b.SetLanes(byPrefix)
	onlyA, onlyB, both := &sub{}, &sub{}, &sub{}
	b.Subscribe(onlyA, "a/chat", "r")
	b.Subscribe(onlyB, "b/session", "r")
	b.Subscribe(both, "a/session", "r")
	b.Subscribe(both, "b/session", "r")
	held := reserve(b, "a/chat", 2)         // 1, 2
	b.Publish("b/session", delta("x"), nil) // 3
	b.Echo(both, "b/session", delta("e"), nil, "refused")
	b.Publish("a/session", delta("y"), nil) // 4: behind the batch of its lane
	if got := onlyB.seqs(t); !slices.Equal(got, []int64{3}) {
		t.Errorf("lane b's subscriber got %v while lane a holds a batch, want 3", got)
	}
	if len(onlyA.frames)+len(both.frames) != 0 {
		t.Fatalf("lane a's subscribers got %d and %d frames past its batch", len(onlyA.frames), len(both.frames))
	}
	b.Release(held)
	if got := onlyA.seqs(t); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("lane a's chat got %v, want 1 2", got)
	}
	// Its echo carries the serverSeq numbered before it: 3.
	if got := both.seqs(t); !slices.Equal(got, []int64{3, 3, 4}) {
		t.Errorf("the subscriber of both lanes got %v, want 3, the echo at 3, then 4", got)
	}
}

// TestAttachWaitsForItsLanes: a reconnect attached while its lane holds a
// batch waits for it, and one of another lane does not.
func TestAttachWaitsForItsLanes(t *testing.T) {
	b := fanout.New(64, 0)
	b.SetLanes(byPrefix)
	b.Publish("a/chat", delta("0"), nil) // 1
	held := reserve(b, "a/chat", 3)      // 2..4
	b.Publish("b/chat", delta("x"), nil) // 5

	other := &sub{}
	upTo, ready := b.Attach(other, []string{"b/chat"}, "r")
	select {
	case <-ready:
	default:
		t.Fatal("a reconnect of lane b waits for lane a's batch")
	}
	if got, ok := b.Missed(other, 0, upTo, []string{"b/chat"}); !ok || len(got) != 1 || got[0].ServerSeq != 5 {
		t.Errorf("lane b missed %v %+v, want 5", ok, got)
	}

	back := &sub{}
	upTo, ready = b.Attach(back, []string{"a/chat"}, "r")
	b.Publish("a/chat", delta("live"), nil) // 6: after upTo, sent live behind the batch
	select {
	case <-ready:
		t.Fatal("ready while lane a holds a batch numbered before the attach")
	default:
	}
	b.Release(held)
	<-ready
	got, ok := b.Missed(back, 0, upTo, []string{"a/chat"})
	var seqs []int64
	for _, env := range got {
		seqs = append(seqs, env.ServerSeq)
	}
	if !ok || !slices.Equal(seqs, []int64{1, 2, 3, 4}) {
		t.Errorf("lane a missed %v %v, want 1 to 4", ok, seqs)
	}
	if live := back.seqs(t); !slices.Equal(live, []int64{6}) {
		t.Errorf("sent live %v, want 6", live)
	}
}

// TestResubscribeDropsWhatItsSnapshotHolds: a change held back for a
// subscriber that subscribes to its channel again is in the snapshot it
// is given, so it is not sent too; its echo still is.
func TestResubscribeDropsWhatItsSnapshotHolds(t *testing.T) {
	b := fanout.New(64, 0)
	b.SetLanes(byPrefix)
	s := &sub{}
	b.Subscribe(s, "a/chat", "r")
	b.Subscribe(s, "b/chat", "r")
	held := reserve(b, "a/chat", 1)      // 1
	b.Publish("b/chat", delta("x"), nil) // 2: held back behind 1
	b.Echo(s, "b/chat", delta("e"), nil, "refused")
	if from := b.Subscribe(s, "b/chat", "r2"); from != 2 {
		t.Fatalf("subscribed again at %d", from)
	}
	b.Release(held)
	if got := s.seqs(t); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("got %v, want 1 and the echo at 2 (change 2 is in the snapshot)", got)
	}
}

// behind is a subscriber that notes being told it fell behind.
type behind struct {
	sub
	fell int
}

func (s *behind) FellBehind(frames int) { s.fell = frames }

// TestBacklogIsBounded: a subscriber whose lane's batch stays held while
// another lane it watches sends more than a backlog holds is dropped and
// told, and the others go on.
func TestBacklogIsBounded(t *testing.T) {
	b := fanout.New(0, 0)
	b.SetLanes(byPrefix)
	s, other := &behind{}, &sub{}
	b.Subscribe(s, "a/chat", "r")
	b.Subscribe(s, "b/chat", "r")
	b.Subscribe(other, "b/chat", "r")
	held := reserve(b, "a/chat", 1)
	for i := 0; s.fell == 0 && i < 1<<17; i++ {
		b.Publish("b/chat", delta("x"), nil)
	}
	if s.fell == 0 || b.Subscribers("a/chat") != 0 || b.Subscribers("b/chat") != 1 {
		t.Fatalf("told %d, subscribers %d and %d", s.fell, b.Subscribers("a/chat"), b.Subscribers("b/chat"))
	}
	b.Release(held)
	if len(s.frames) != 0 {
		t.Errorf("a subscriber dropped was sent %d frames", len(s.frames))
	}
	if len(other.frames) == 0 {
		t.Error("lane b's other subscriber was held back")
	}
}

// TestLanesKeepEachSubscribersOrder drives the bus at random: batches
// reserved in three lanes and released in any order, changes published
// between them, subscribers of random channels coming and going. Each
// subscriber must be sent serverSeqs only rising, and, of the channels it
// watched throughout, every change numbered after it subscribed, once.
func TestLanesKeepEachSubscribersOrder(t *testing.T) {
	channels := []string{"a/session", "a/chat", "b/session", "b/chat", "root"}
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 7))
		b := fanout.New(1024, 0)
		b.SetLanes(byPrefix)
		type watch struct {
			s     *sub
			chans []string
			from  int64
		}
		var subs []*watch
		for range 4 {
			w := &watch{s: &sub{}}
			for _, ch := range channels {
				if r.IntN(2) == 0 {
					w.chans = append(w.chans, ch)
					w.from = b.Subscribe(w.s, ch, "r")
				}
			}
			subs = append(subs, w)
		}
		numbered := map[int64]string{} // serverSeq: channel
		var held []*fanout.Batch
		for range 300 {
			ch := channels[r.IntN(len(channels))]
			switch op := r.IntN(10); {
			case op < 4:
				bt := reserve(b, ch, 1+r.IntN(3))
				for _, env := range bt.Envelopes() {
					numbered[env.ServerSeq] = ch
				}
				held = append(held, bt)
			case op < 8 && len(held) > 0:
				i := r.IntN(len(held))
				b.Release(held[i])
				held = slices.Delete(held, i, i+1)
			default:
				numbered[b.Publish(ch, delta("p"), nil)] = ch
			}
		}
		for _, bt := range held {
			b.Release(bt)
		}
		for i, w := range subs {
			got := w.s.seqs(t)
			if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Fatalf("seed %d, subscriber %d: sent %v, not rising", seed, i, got)
			}
			var want []int64
			for seq, ch := range numbered {
				if seq > w.from && slices.Contains(w.chans, ch) {
					want = append(want, seq)
				}
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, subscriber %d of %v from %d: sent %v, want %v", seed, i, w.chans, w.from, got, want)
			}
		}
	}
}
