package session

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestViewOf: the turns and cursor a view of n turns is given, by how
// many the chat holds and where its own cursor stands; view.turns past
// 50 is taken as 50.
func TestViewOf(t *testing.T) {
	t.Parallel()
	chat := func(held, from int) *protocol.ChatState {
		cs := &protocol.ChatState{}
		for i := range held {
			cs.Turns = append(cs.Turns, protocol.Turn{ID: fmt.Sprintf("t%d", from+i)})
		}
		if from > 0 {
			cs.TurnsNextCursor = new(TurnCursor(from))
		}
		return cs
	}
	for _, tc := range []struct {
		held, from int   // turns the chat holds, and the index of its oldest
		turns      int64 // view.turns
		first      string
		cursor     string
	}{
		{held: 10, turns: 3, first: "t7", cursor: "before:7"},
		{held: 10, turns: 10, first: "t0"},
		{held: 10, from: 190, turns: 1, first: "t199", cursor: "before:199"},
		{held: 4, from: 6, turns: 5, first: "t6", cursor: "before:6"},
		{held: 80, turns: 1000, first: "t30", cursor: "before:30"},
	} {
		n, err := ViewTurns(&protocol.SubscribeView{Turns: &tc.turns})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := ViewOf(chat(tc.held, tc.from), n)
		cursor := ""
		if got.TurnsNextCursor != nil {
			cursor = *got.TurnsNextCursor
		}
		if got.Turns[0].ID != tc.first || cursor != tc.cursor || len(got.Turns) > maxViewTurns {
			t.Errorf("%d held from %d, view of %d: %d turns from %s, cursor %q; want from %s, cursor %q",
				tc.held, tc.from, tc.turns, len(got.Turns), got.Turns[0].ID, cursor, tc.first, tc.cursor)
		}
		own := chat(tc.held, tc.from)
		if len(got.Turns) == tc.held {
			if !reflect.DeepEqual(got, own) {
				t.Errorf("a view of all the chat holds is not the chat's state")
			}
			continue
		}
		// Its cursor pages in what the chat holds before it, with the
		// chat's own cursor.
		page, ok := viewPage(own, cursor)
		if !ok || len(page.Turns)+len(got.Turns) != tc.held || heldFrom(&protocol.ChatState{TurnsNextCursor: page.TurnsNextCursor}) != tc.from {
			t.Errorf("the page before %s: %d turns, %v", cursor, len(page.Turns), ok)
		}
	}
	for _, turns := range []int64{0, -1} {
		if _, err := ViewTurns(&protocol.SubscribeView{Turns: &turns}); err == nil {
			t.Errorf("view.turns %d taken", turns)
		}
	}
}
