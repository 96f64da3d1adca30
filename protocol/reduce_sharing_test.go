package protocol_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ahpd/ahpd/protocol"
)

// longChat returns a chat with n finished turns and an active turn
// streaming into one markdown part.
func longChat(n int) *protocol.ChatState {
	s := &protocol.ChatState{Resource: "ahp-chat://default/x", Title: "t", Status: protocol.StatusInProgress}
	for i := range n {
		s.Turns = append(s.Turns, protocol.Turn{
			ID:      fmt.Sprintf("turn-%d", i),
			Message: protocol.Message{Text: "question", Origin: protocol.MessageOrigin{}},
			ResponseParts: []protocol.ResponsePart{
				&protocol.MarkdownResponsePart{ID: "md", Content: "an answer of some length"},
			},
			State: protocol.TurnStateComplete,
		})
	}
	s.ActiveTurn = &protocol.ActiveTurn{
		ID:            "active",
		ResponseParts: []protocol.ResponsePart{&protocol.MarkdownResponsePart{ID: "md", Content: ""}},
	}
	return s
}

// TestDeltaSharesFinishedTurns checks that a delta leaves the finished
// turns where they are: the new state points at the same array.
func TestDeltaSharesFinishedTurns(t *testing.T) {
	s := longChat(1000)
	next := protocol.ReduceChat(s, &protocol.ChatDeltaAction{TurnID: "active", PartID: "md", Content: "x"})
	if next == s {
		t.Fatal("delta changed nothing")
	}
	if unsafe.SliceData(next.Turns) != unsafe.SliceData(s.Turns) {
		t.Error("delta copied the finished turns")
	}
	if got := next.ActiveTurn.ResponseParts[0].(*protocol.MarkdownResponsePart).Content; got != "x" {
		t.Errorf("content = %q, want %q", got, "x")
	}
	if got := s.ActiveTurn.ResponseParts[0].(*protocol.MarkdownResponsePart).Content; got != "" {
		t.Errorf("delta modified the old state: content = %q", got)
	}
}

// TestNoOpReturnsSameState checks that an action changing nothing returns
// the state it was given, which is how the host knows not to advance
// serverSeq.
func TestNoOpReturnsSameState(t *testing.T) {
	s := longChat(3)
	for _, a := range []protocol.Action{
		&protocol.ChatDeltaAction{TurnID: "other", PartID: "md", Content: "x"},
		&protocol.ChatDeltaAction{TurnID: "active", PartID: "missing", Content: "x"},
		&protocol.ChatTurnCompleteAction{TurnID: "other"},
		&protocol.ChatWorkingDirectoryRemovedAction{Directory: "file:///nowhere"},
		&protocol.SessionTitleChangedAction{Title: "not a chat action"},
		&protocol.Unknown{Kind: "chat/fromTheFuture", Raw: []byte(`{"type":"chat/fromTheFuture"}`)},
	} {
		if next := protocol.ReduceChat(s, a); next != s {
			t.Errorf("%s: got a new state for a no-op", a.Type())
		}
	}
}

// BenchmarkDeltaOnLongChat measures one chat/delta on chats of 10 and 1,000
// finished turns. The cost must not grow with the turns.
func BenchmarkDeltaOnLongChat(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("turns=%d", n), func(b *testing.B) {
			s := longChat(n)
			a := &protocol.ChatDeltaAction{TurnID: "active", PartID: "md", Content: "tok "}
			b.ReportAllocs()
			for b.Loop() {
				// Always from the same state, so the part does not grow.
				if protocol.ReduceChat(s, a) == s {
					b.Fatal("no-op")
				}
			}
		})
	}
}

// TestSettersToTheSameValueAreNoOps checks the client actions people
// repeat (a draft synced as they type, a session marked read again).
func TestSettersToTheSameValueAreNoOps(t *testing.T) {
	draft := &protocol.Message{Text: "half a thought", Origin: protocol.MessageOrigin{}}
	chat := &protocol.ChatState{Resource: "ahp-chat://default/x", Draft: draft}
	same := &protocol.ChatDraftChangedAction{Draft: &protocol.Message{Text: "half a thought", Origin: protocol.MessageOrigin{}}}
	if protocol.ReduceChat(chat, same) != chat {
		t.Error("an unchanged draft changed the chat")
	}
	if protocol.ReduceChat(chat, &protocol.ChatDraftChangedAction{}) == chat {
		t.Error("clearing the draft changed nothing")
	}
	s := &protocol.SessionState{Title: "t", Status: protocol.StatusIdle | protocol.StatusIsRead}
	for _, a := range []protocol.Action{
		&protocol.SessionTitleChangedAction{Title: "t"},
		&protocol.SessionIsReadChangedAction{IsRead: true},
		&protocol.SessionIsArchivedChangedAction{IsArchived: false},
		&protocol.SessionActivityChangedAction{},
	} {
		if protocol.ReduceSession(s, a) != s {
			t.Errorf("%s to the same value changed the session", a.Type())
		}
	}
	if protocol.ReduceSession(s, &protocol.SessionIsReadChangedAction{IsRead: false}) == s {
		t.Error("marking unread changed nothing")
	}
}

func TestWorkingDirectoryReplaced(t *testing.T) {
	for _, tc := range []struct {
		dirs          []protocol.URI
		from, to      protocol.URI
		want          []protocol.URI
		wantUnchanged bool
	}{
		{[]protocol.URI{"a", "b"}, "a", "x", []protocol.URI{"x", "b"}, false},
		{[]protocol.URI{"a", "b", "x"}, "a", "x", []protocol.URI{"x", "b"}, false},
		{[]protocol.URI{"x", "a", "b"}, "a", "x", []protocol.URI{"x", "b"}, false},
		{[]protocol.URI{"a", "b"}, "c", "x", []protocol.URI{"a", "b"}, true},
		{[]protocol.URI{"a"}, "a", "a", []protocol.URI{"a"}, true},
	} {
		s := &protocol.SessionState{WorkingDirectories: tc.dirs}
		next := protocol.ReduceSession(s, &protocol.SessionWorkingDirectoryReplacedAction{Directory: tc.from, Replacement: tc.to})
		if (next == s) != tc.wantUnchanged || fmt.Sprint(next.WorkingDirectories) != fmt.Sprint(tc.want) {
			t.Errorf("%v replace %s with %s: %v (same state %v)", tc.dirs, tc.from, tc.to, next.WorkingDirectories, next == s)
		}
		if fmt.Sprint(s.WorkingDirectories) != fmt.Sprint(tc.dirs) {
			t.Errorf("the reducer changed its input: %v", s.WorkingDirectories)
		}
	}
}

// TestDeltaCostsItsOwnLength streams 800 KB in 50,000 deltas. Copying the
// reply so far at each delta would allocate some 20 GB; appending in place
// allocates a small multiple of the text.
func TestDeltaCostsItsOwnLength(t *testing.T) {
	s := longChat(0)
	delta := &protocol.ChatDeltaAction{TurnID: "active", PartID: "md", Content: "sixteen bytes!!\n"}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 50000 {
		s = protocol.ReduceChat(s, delta)
	}
	runtime.ReadMemStats(&after)
	got := s.ActiveTurn.ResponseParts[0].(*protocol.MarkdownResponsePart).Content
	if len(got) != 800000 || got[:16] != delta.Content {
		t.Fatalf("content of %d bytes", len(got))
	}
	// Each delta copies the active turn's part list and the part: a few
	// hundred bytes, whatever the text's length.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("800 KB streamed allocated %d MB", alloc>>20)
	}
}

// TestAppendKeepsEveryState checks appending in place leaves every earlier
// state as it was, and that a state reduced twice gives two texts.
func TestAppendKeepsEveryState(t *testing.T) {
	s0 := longChat(0)
	d := func(s string) protocol.Action {
		return &protocol.ChatDeltaAction{TurnID: "active", PartID: "md", Content: s}
	}
	content := func(s *protocol.ChatState) string {
		return s.ActiveTurn.ResponseParts[0].(*protocol.MarkdownResponsePart).Content
	}
	s1 := protocol.ReduceChat(s0, d("one "))
	s2 := protocol.ReduceChat(s1, d("two "))
	s3 := protocol.ReduceChat(s2, d("three"))
	branch := protocol.ReduceChat(s2, d("TWO AND A HALF"))
	s4 := protocol.ReduceChat(s3, d("!"))
	for _, tc := range []struct {
		s    *protocol.ChatState
		want string
	}{{s0, ""}, {s1, "one "}, {s2, "one two "}, {s3, "one two three"}, {branch, "one two TWO AND A HALF"}, {s4, "one two three!"}} {
		if got := content(tc.s); got != tc.want {
			t.Errorf("content = %q, want %q", got, tc.want)
		}
	}
	// A state decoded from JSON appends as well.
	raw, _ := json.Marshal(s4)
	var decoded protocol.ChatState
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	if got := content(protocol.ReduceChat(&decoded, d("?"))); got != "one two three!?" {
		t.Errorf("after a round trip: %q", got)
	}
}

// BenchmarkStreamText streams a reply of 200 and 800 KB in 16-byte deltas
// and reports the cost of a streamed byte, which must not grow with the
// reply.
func BenchmarkStreamText(b *testing.B) {
	for _, kb := range []int{200, 800} {
		b.Run(fmt.Sprintf("KB=%d", kb), func(b *testing.B) {
			delta := &protocol.ChatDeltaAction{TurnID: "active", PartID: "md", Content: "sixteen bytes!!\n"}
			n := kb * 1000 / 16
			b.ReportAllocs()
			for b.Loop() {
				s := longChat(0)
				for range n {
					s = protocol.ReduceChat(s, delta)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*kb*1000), "ns/byte")
		})
	}
}
