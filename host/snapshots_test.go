package host

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// TestSnapshotPages: a chat whose turns do not fit in one journal entry
// is written as its newest turns and pages of older ones, each entry
// within a page's size (a turn alone may be larger), and replays to the
// chat it was, for chats of every size around the page.
func TestSnapshotPages(t *testing.T) {
	t.Parallel()
	const chat = "ahp-chat:/s1/default"
	for _, tc := range []struct {
		turns, size int // how many turns, of about how many bytes
		entries     int // the snapshot's entries
	}{
		{0, 0, 1},
		{3, 1000, 1},
		{100, 10 << 10, 4}, // 25 turns to a page
		{4, session.SnapshotPage - 500, 4},
		{2, 2 * session.SnapshotPage, 2}, // each turn past a page: one per entry
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.turns, tc.size), func(t *testing.T) {
			cs := &protocol.ChatState{Resource: chat, Title: "t", Turns: []protocol.Turn{}, TurnsNextCursor: new("before:7")}
			for i := range tc.turns {
				cs.Turns = append(cs.Turns, protocol.Turn{
					ID: fmt.Sprintf("t%d", i), State: protocol.TurnStateComplete,
					Message:       protocol.Message{Text: strings.Repeat("x", tc.size)},
					ResponseParts: []protocol.ResponsePart{},
				})
			}
			entries, err := session.SnapshotEntries(42, chat, cs)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != tc.entries {
				t.Errorf("%d entries, want %d", len(entries), tc.entries)
			}
			r := newReplayer("ahp-session:/s1")
			for _, data := range entries {
				if len(data) > session.SnapshotPage+200 && tc.size < session.SnapshotPage {
					t.Errorf("an entry of %d bytes", len(data))
				}
				je, err := decodeEntry(data)
				if err != nil || je.snap == nil || je.seq != 42 {
					t.Fatalf("entry %s: %v", data[:min(len(data), 80)], err)
				}
				r.apply(je)
			}
			want, _ := json.Marshal(cs)
			got, _ := json.Marshal(r.states[chat])
			if string(got) != string(want) {
				t.Errorf("replayed %d bytes, not the chat's %d", len(got), len(want))
			}
		})
	}
}

// TestDecodeEntry: each kind of entry is told apart, whether or not an
// action's content names the other kinds' keys.
func TestDecodeEntry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data string
		kind       string // "action", "snapshot" or "residency"
	}{
		{"action", `{"channel":"c","serverSeq":5,"action":{"type":"chat/delta","turnId":"t","partId":"p","content":"hi"}}`, "action"},
		{"key in a string", `{"channel":"c","serverSeq":5,"action":{"type":"chat/delta","turnId":"t","partId":"p","content":"a \"snapshot\": b \"residency\": c"}}`, "action"},
		{"key in an object", `{"channel":"c","serverSeq":5,"action":{"type":"session/metaChanged","_meta":{"snapshot":1,"residency":"x"}}}`, "action"},
		{"snapshot", `{"serverSeq":5,"snapshot":{"channel":"c","state":{}}}`, "snapshot"},
		{"residency", `{"residency":"sleep","serverSeq":5}`, "residency"},
	} {
		je, err := decodeEntry([]byte(tc.data))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		kind := "action"
		switch {
		case je.snap != nil:
			kind = "snapshot"
		case je.residency != "":
			kind = "residency"
		case je.env == nil:
			kind = "none"
		}
		if kind != tc.kind || je.seq != 5 {
			t.Errorf("%s: decoded as %s at %d", tc.name, kind, je.seq)
		}
	}
}
