package script_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

// TestPermissions runs a write and a command under each mode and list,
// and checks what asked a person, what the policy allowed or denied (and
// said so in the turn), and what was done.
func TestPermissions(t *testing.T) {
	perm := func(v string) protocol.Object { return protocol.Object{"permissions": jsontext.Value(v)} }
	const (
		asked  = "asked"
		denied = "denied"
	)
	for _, tc := range []struct {
		name   string
		config protocol.Object
		step   string
		want   string // asked, denied, or the rule that allowed it
		rule   string // the rule that denied it
	}{
		{"no config asks to write", nil, "write src/a.txt x", asked, ""},
		{"no config asks to run", nil, "run echo hi", asked, ""},
		{"ask asks to write", perm(`{"mode":"ask"}`), "write src/a.txt x", asked, ""},
		{"ask asks to run", perm(`{"mode":"ask"}`), "run echo hi", asked, ""},
		{"acceptEdits writes", perm(`{"mode":"acceptEdits"}`), "write src/a.txt x", "mode acceptEdits", ""},
		{"acceptEdits asks to run", perm(`{"mode":"acceptEdits"}`), "run echo hi", asked, ""},
		{"bypass writes", perm(`{"mode":"bypass"}`), "write src/a.txt x", "mode bypass", ""},
		{"bypass runs", perm(`{"mode":"bypass"}`), "run echo hi", "mode bypass", ""},
		{"deny wins over bypass", perm(`{"mode":"bypass","deny":["run"]}`), "run echo hi", denied, `deny "run"`},
		{"deny a kind", perm(`{"mode":"bypass","deny":["execute"]}`), "run echo hi", denied, `deny "execute"`},
		{"deny passes another tool", perm(`{"mode":"bypass","deny":["execute"]}`), "write src/a.txt x", "mode bypass", ""},
		{"deny a glob over acceptEdits", perm(`{"mode":"acceptEdits","deny":["edit(secrets/**)"]}`), "write secrets/key x", denied, `deny "edit(secrets/**)"`},
		{"deny a glob passes another path", perm(`{"mode":"acceptEdits","deny":["edit(secrets/**)"]}`), "write src/a.txt x", "mode acceptEdits", ""},
		{"allow a command", perm(`{"allow":["execute"]}`), "run echo hi", `allow "execute"`, ""},
		{"allow a command leaves writes asking", perm(`{"allow":["execute"]}`), "write src/a.txt x", asked, ""},
		{"allow a glob", perm(`{"allow":["write(docs/**)"]}`), "write docs/a.md x", `allow "write(docs/**)"`, ""},
		{"allow a glob asks elsewhere", perm(`{"allow":["write(docs/**)"]}`), "write src/a.txt x", asked, ""},
		{"deny wins over allow", perm(`{"allow":["*"],"deny":["write(docs/**)"]}`), "write docs/a.md x", denied, `deny "write(docs/**)"`},
		{"old autoApprove allow writes", protocol.Object{"autoApprove": jsontext.Value(`"allow"`)}, "write src/a.txt x", "mode bypass", ""},
		{"old autoApprove allow runs", protocol.Object{"autoApprove": jsontext.Value(`"allow"`)}, "run echo hi", "mode bypass", ""},
		{"autoApprove true runs", protocol.Object{"autoApprove": jsontext.Value(`true`)}, "run echo hi", "mode bypass", ""},
		{"autoApprove keeps deny", protocol.Object{"autoApprove": jsontext.Value(`true`), "permissions": jsontext.Value(`{"deny":["run"]}`)}, "run echo hi", denied, `deny "run"`},
		{"autoApprove default asks", protocol.Object{"autoApprove": jsontext.Value(`"default"`)}, "run echo hi", asked, ""},
		{"a malformed value asks", perm(`{"mode":"bypass","denny":["run"]}`), "run echo hi", asked, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			a, err := f.backend.Start(context.Background(), plugins.StartOptions{Conversation: f.conv, Config: tc.config})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			turn := pluginstest.NewTurn("")
			turn.Confirms <- true // for what asks
			if err := prompt(t, a, tc.step+"\nsay next", turn); err != nil {
				t.Fatal(err)
			}
			want := "next\n\n"
			if tc.want == denied && strings.HasPrefix(tc.step, "write ") {
				// A denied write says so (a denied command leaves the
				// cancelled call alone).
				want = "Skipped writing `" + strings.Fields(tc.step)[1] + "`: the session's permissions deny it (" + tc.rule + ").\n\n" + want
			}
			if turn.Response() != want {
				t.Errorf("the turn did not go on: %q, want %q", turn.Response(), want)
			}
			confirms, decided := turn.Of("confirm"), turn.Of("decided")
			done := len(turn.Of("toolDone")) == 1
			switch tc.want {
			case asked:
				if len(confirms) != 1 || len(decided) != 0 || !done {
					t.Errorf("events %v, want the call asked and run", turn.Kinds())
				}
			case denied:
				if len(confirms) != 0 || len(decided) != 1 || decided[0].Decision.Verdict != plugins.Deny || decided[0].Decision.Rule != tc.rule || done {
					t.Errorf("events %v (%+v), want the call denied by %s", turn.Kinds(), decided, tc.rule)
				}
			default:
				if len(confirms) != 0 || len(decided) != 1 || decided[0].Decision.Verdict != plugins.Allow || decided[0].Decision.Rule != tc.want || !done {
					t.Errorf("events %v (%+v), want the call allowed by %s", turn.Kinds(), decided, tc.want)
				}
			}
			if _, err := os.Stat(f.path("secrets/key")); tc.want == denied && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a denied write wrote: %v", err)
			}
			// What the host shows is what the transcript keeps.
			turns, err := f.backend.Turns(context.Background(), f.conv)
			if err != nil || len(turns) != 1 {
				t.Fatalf("turns read back: %d, %v", len(turns), err)
			}
			tp := turns[0].ResponseParts[0].(*protocol.ToolCallResponsePart)
			switch s := tp.ToolCall.(type) {
			case *protocol.ToolCallCompletedState:
				want := protocol.ToolCallConfirmationReasonSetting
				if tc.want == asked {
					want = protocol.ToolCallConfirmationReasonUserAction
				}
				if s.Confirmed != want {
					t.Errorf("read back confirmed %q, want %q", s.Confirmed, want)
				}
			case *protocol.ToolCallCancelledState:
				if tc.want != denied || s.Reason != protocol.ToolCallCancellationReasonDenied || s.ReasonMessage == nil ||
					s.ReasonMessage.Text != "Denied by the session's permissions ("+tc.rule+")." {
					t.Errorf("read back cancelled %+v", s)
				}
			default:
				t.Errorf("read back %T", s)
			}
		})
	}
}

// TestPermissionsChange has a running agent take new permissions for the
// next step, as a session's config change gives them.
func TestPermissionsChange(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	turn.Confirms <- true
	if err := prompt(t, a, "run true", turn); err != nil || len(turn.Of("confirm")) != 1 {
		t.Fatalf("before: %v, %v", err, turn.Kinds())
	}
	a.(plugins.Reconfigurer).SetConfig(protocol.Object{"permissions": jsontext.Value(`{"mode":"bypass"}`)})
	turn = pluginstest.NewTurn("")
	if err := prompt(t, a, "run true", turn); err != nil || len(turn.Of("decided")) != 1 {
		t.Fatalf("after: %v, %v", err, turn.Kinds())
	}
}
