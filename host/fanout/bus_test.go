package fanout_test

import (
	"encoding/json"
	"testing"

	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/protocol"
)

// sub is a subscriber that keeps what it is sent.
type sub struct {
	frames []*fanout.Frame
	holds  []string
	old    bool // speaks a version without chat/turnsLoaded
}

func (s *sub) Send(f *fanout.Frame)           { s.frames = append(s.frames, f) }
func (s *sub) Hold(channel, requestID string) { s.holds = append(s.holds, channel+" "+requestID) }
func (s *sub) Wants(t protocol.ActionType) bool {
	return !s.old || t != protocol.ActionChatTurnsLoaded
}

// seqs decodes the serverSeq of each action frame sent.
func (s *sub) seqs(t *testing.T) []int64 {
	var out []int64
	for _, f := range s.frames {
		var m struct {
			Params protocol.ActionEnvelope `json:"params"`
		}
		if err := json.Unmarshal(f.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Params.ServerSeq)
	}
	return out
}

const chat = "ahp-chat://default/YWhwLXNlc3Npb246L3M"

func delta(text string) protocol.Action {
	return &protocol.ChatDeltaAction{TurnID: "t1", PartID: "p1", Content: text}
}

func TestPublishSequencesAndFansOut(t *testing.T) {
	b := fanout.New(16, 100)
	a, other := &sub{}, &sub{}
	if seq := b.Subscribe(a, chat, "r1"); seq != 100 {
		t.Fatalf("subscribed at %d, want 100", seq)
	}
	b.Subscribe(other, "ahp-chat://default/b3RoZXI", "r2")
	b.Publish(chat, delta("a"), nil)
	b.PublishAll(func(yield func(fanout.Item) bool) {
		_ = yield(fanout.Item{Channel: chat, Action: delta("b")}) && yield(fanout.Item{Channel: chat, Action: delta("c")})
	})
	b.Echo(a, chat, delta("x"), nil, "refused")
	if got := a.seqs(t); len(got) != 4 || got[0] != 101 || got[1] != 102 || got[2] != 103 || got[3] != 103 {
		t.Errorf("serverSeqs %v, want 101 102 103 and the echo at 103", got)
	}
	if len(other.frames) != 0 || b.Current() != 103 || b.Subscribers(chat) != 1 {
		t.Errorf("another channel's subscriber got %d frames; current %d", len(other.frames), b.Current())
	}
	if len(a.holds) != 1 || a.holds[0] != chat+" r1" {
		t.Errorf("holds %v", a.holds)
	}
}

func TestReplay(t *testing.T) {
	tests := []struct {
		name  string
		setup func(b *fanout.Bus)
		after int64
		old   bool
		want  int // actions replayed, or -1 for no replay
	}{
		{"everything since", func(b *fanout.Bus) {}, 2, false, 3},
		{"nothing missed", func(b *fanout.Bus) {}, 5, false, 0},
		{"past the ring", func(b *fanout.Bus) {}, 0, false, -1},
		{"forgotten channel", func(b *fanout.Bus) { b.Forget(map[string]bool{chat: true}) }, 2, false, -1},
		{"one owner's action", func(b *fanout.Bus) { b.PublishTo(chat, delta("y"), func(fanout.Subscriber) bool { return true }) }, 2, false, -1},
		{"a version that lacks a type", func(b *fanout.Bus) {
			b.Publish(chat, &protocol.ChatTurnsLoadedAction{Turns: []protocol.Turn{}}, nil)
		}, 2, true, 3},
		{"from the future", func(b *fanout.Bus) {}, 99, false, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := fanout.New(4, 0)
			for _, s := range []string{"a", "b", "c", "d", "e"} {
				b.Publish(chat, delta(s), nil)
			}
			tc.setup(b)
			s := &sub{old: tc.old}
			got, ok := replay(t, b, s, tc.after, chat)
			switch {
			case tc.want < 0 && ok:
				t.Fatalf("replayed %d actions, want snapshots", len(got))
			case tc.want >= 0 && (!ok || len(got) != tc.want):
				t.Fatalf("replay: %v, %d actions, want %d", ok, len(got), tc.want)
			}
			if ok && b.Subscribers(chat) != 1 {
				t.Error("a replay does not subscribe")
			}
			if ok {
				b.Publish(chat, delta("f"), nil)
				if len(s.frames) != 1 {
					t.Errorf("after the replay %d frames, want the next change", len(s.frames))
				}
			}
		})
	}
}

// replay attaches s to channels and returns what it missed after seq,
// as a reconnect is answered from the ring; nothing may be held.
func replay(t *testing.T, b *fanout.Bus, s *sub, seq int64, channels ...string) ([]protocol.ActionEnvelope, bool) {
	t.Helper()
	upTo, ready := b.Attach(s, channels, "r")
	select {
	case <-ready:
	default:
		t.Fatal("a batch is held")
	}
	return b.Missed(s, seq, upTo, channels)
}

func TestMergeStreamedText(t *testing.T) {
	env := func(seq int64, part string, origin *protocol.ActionOrigin) *fanout.Frame {
		return fanout.ActionFrame(&protocol.ActionEnvelope{Channel: chat, ServerSeq: seq, Origin: origin,
			Action: &protocol.ChatDeltaAction{TurnID: "t1", PartID: part, Content: "tok "}})
	}
	first := env(1, "p1", nil)
	last := first
	for i := int64(2); i <= 4; i++ {
		n, ok := fanout.Mergeable(last, env(i, "p1", nil))
		if !ok || n != 4 {
			t.Fatalf("delta %d: mergeable %v, %d bytes", i, ok, n)
		}
		last = fanout.Merge(last, env(i, "p1", nil))
	}
	if last == first || first.Len() != len(first.Bytes()) {
		t.Error("merging changed the shared first frame")
	}
	var m struct {
		Params protocol.ActionEnvelope `json:"params"`
	}
	if err := json.Unmarshal(last.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if d := m.Params.Action.(*protocol.ChatDeltaAction); d.Content != "tok tok tok tok " || m.Params.ServerSeq != 4 {
		t.Errorf("merged: %q at %d", d.Content, m.Params.ServerSeq)
	}
	for _, f := range []*fanout.Frame{env(5, "p2", nil), env(5, "p1", &protocol.ActionOrigin{ClientID: "c", ClientSeq: 1}),
		fanout.NotificationFrame("root/sessionAdded", &protocol.SessionAddedParams{Channel: protocol.RootURI})} {
		if _, ok := fanout.Mergeable(last, f); ok {
			t.Errorf("%s merged", f.Bytes())
		}
	}
}

// TestReservedBatchesGoInOrder: a batch numbered first and let go later
// holds back what was numbered after it, so a client sees serverSeq only
// rise; an echo and a notification wait their turn too, and a subscriber
// that came after a change is not sent it.
func TestReservedBatchesGoInOrder(t *testing.T) {
	b := fanout.New(16, 0)
	a := &sub{}
	b.Subscribe(a, chat, "r")
	first := b.Reserve(func(yield func(fanout.Item) bool) {
		_ = yield(fanout.Item{Channel: chat, Action: delta("1")}) && yield(fanout.Item{Channel: chat, Action: delta("2")})
	})
	b.Publish(chat, delta("3"), nil)
	b.Echo(a, chat, delta("x"), nil, "refused")
	late := &sub{}
	if from := b.Subscribe(late, chat, "r2"); from != 3 {
		t.Fatalf("a subscription after three numbered changes is at %d", from)
	}
	if len(a.frames) != 0 {
		t.Fatalf("%d frames sent past a batch held", len(a.frames))
	}
	if got := first.Envelopes(); len(got) != 2 || got[0].ServerSeq != 1 || got[1].ServerSeq != 2 {
		t.Fatalf("reserved %+v", got)
	}
	// A client back is attached at the last change numbered, and waits
	// for what is held to be sent before it reads what it missed.
	back := &sub{}
	upTo, ready := b.Attach(back, []string{chat}, "r3")
	select {
	case <-ready:
		t.Fatal("ready while a batch of the channel is held")
	default:
	}
	b.Release(first)
	<-ready
	if got, ok := b.Missed(back, 0, upTo, []string{chat}); !ok || len(got) != 3 || got[2].ServerSeq != 3 {
		t.Errorf("missed after 0, up to %d: %v %+v", upTo, ok, got)
	}
	if len(back.frames) != 0 {
		t.Errorf("the client back was sent %d frames it is replayed", len(back.frames))
	}
	if got := a.seqs(t); len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 3 {
		t.Errorf("sent %v, want 1 2 3 then the echo at 3", got)
	}
	if len(late.frames) != 0 {
		t.Errorf("a subscriber at 3 was sent %d older changes", len(late.frames))
	}
	b.Publish(chat, delta("4"), nil)
	if got := late.seqs(t); len(got) != 1 || got[0] != 4 {
		t.Errorf("the late subscriber got %v, want 4", got)
	}
}

// TestAtLeast: the numbers jump past a floor, and a replay never spans the
// jump; one after it replays as usual.
func TestAtLeast(t *testing.T) {
	b := fanout.New(8, 0)
	b.Publish(chat, delta("a"), nil)
	b.Publish(chat, delta("b"), nil)
	b.AtLeast(1) // below: nothing changes
	if b.Current() != 2 {
		t.Fatalf("current %d after a floor below it", b.Current())
	}
	b.AtLeast(100)
	if seq := b.Publish(chat, delta("c"), nil); seq != 101 {
		t.Fatalf("numbered %d after the floor 100, want 101", seq)
	}
	if _, ok := replay(t, b, &sub{}, 1, chat); ok {
		t.Error("a replay spans the jump")
	}
	b.Publish(chat, delta("d"), nil)
	got, ok := replay(t, b, &sub{}, 101, chat)
	if !ok || len(got) != 1 || got[0].ServerSeq != 102 {
		t.Errorf("replay after the jump: %v %+v", ok, got)
	}
}
