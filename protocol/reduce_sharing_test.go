package protocol_test

import (
	"fmt"
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
