package acp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

// startWith starts the test agent with the session's permissions; it is
// closed when the test ends.
func (f *fixture) startWith(t *testing.T, permissions string) plugins.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	config := protocol.Object{"permissions": jsontext.Value(permissions)}
	a, err := f.b.Start(ctx, plugins.StartOptions{Conversation: f.conv("perm"), Config: config})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// TestPermissions has the session's permissions answer the agent's
// session/request_permission: the agent's allow-once or reject option is
// chosen with no person asked, and the turn shows the decision; what they
// leave open is asked.
func TestPermissions(t *testing.T) {
	f := newFixture(t, nil)
	if err := os.MkdirAll(filepath.Join(f.dir, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()

	t.Run("acceptEdits", func(t *testing.T) {
		a := f.startWith(t, `{"mode":"acceptEdits"}`)
		// An edit inside the folder is allowed without a prompt.
		turn := mustPrompt(t, a, "request edit e1 src/a.txt")
		if got := turn.About("e1"); len(turn.Of("confirm")) != 0 || len(got) < 2 || got[0] != "toolStart" || got[1] != "decided" {
			t.Fatalf("e1 events = %v", got)
		}
		if d := turn.Of("decided")[0]; d.Decision.Verdict != plugins.Allow || d.Decision.Rule != "mode acceptEdits" ||
			d.Call.Kind != "edit" || len(d.Call.Paths) != 1 || d.Call.Paths[0] != f.path("src/a.txt") {
			t.Errorf("decided %+v", d)
		}
		if turn.Response() != "allow e1. " {
			t.Errorf("the agent said %q", turn.Response())
		}
		// A shell command prompts; so does an edit outside the folder.
		for _, step := range []string{"request execute x1", "request edit e2 " + filepath.Join(outside, "a.txt")} {
			turn = pluginstest.NewTurn("")
			turn.Confirms <- true
			if err := prompt(t, a, step, turn); err != nil {
				t.Fatal(err)
			}
			if len(turn.Of("confirm")) != 1 || len(turn.Of("decided")) != 0 {
				t.Errorf("%s: events %v, want a prompt", step, turn.Kinds())
			}
		}
	})

	t.Run("deny wins", func(t *testing.T) {
		a := f.startWith(t, `{"mode":"bypass","allow":["edit"],"deny":["edit(secrets/**)"]}`)
		turn := mustPrompt(t, a, "request edit e3 secrets/key\nrequest edit e4 src/b.txt")
		decided := turn.Of("decided")
		if len(turn.Of("confirm")) != 0 || len(decided) != 2 {
			t.Fatalf("events %v", turn.Kinds())
		}
		if d := decided[0].Decision; d.Verdict != plugins.Deny || d.Rule != `deny "edit(secrets/**)"` {
			t.Errorf("e3: %+v", d)
		}
		if d := decided[1].Decision; d.Verdict != plugins.Allow || d.Rule != "mode bypass" {
			t.Errorf("e4: %+v", d)
		}
		// The agent was told no, and its failed update does not show over
		// the denial.
		if turn.Response() != "rejected e3. allow e4. " {
			t.Errorf("the agent said %q", turn.Response())
		}
		if got := turn.About("e3"); len(got) != 2 || got[1] != "decided" {
			t.Errorf("e3 events %v", got)
		}
	})

	t.Run("bypass", func(t *testing.T) {
		a := f.startWith(t, `{"mode":"bypass"}`)
		turn := mustPrompt(t, a, "request execute x2\nrequest delete d1 "+filepath.Join(outside, "b"))
		if len(turn.Of("confirm")) != 0 || len(turn.Of("decided")) != 2 || turn.Response() != "allow x2. allow d1. " {
			t.Errorf("events %v, said %q", turn.Kinds(), turn.Response())
		}
		// An agent that offers only "always" to allow gets a person's
		// answer: the policy grants nothing that lasts.
		turn = pluginstest.NewTurn("")
		turn.Confirms <- true
		if err := prompt(t, a, "request-lasting execute x3", turn); err != nil {
			t.Fatal(err)
		}
		if len(turn.Of("confirm")) != 1 || turn.Response() != "always x3. " {
			t.Errorf("lasting: events %v, said %q", turn.Kinds(), turn.Response())
		}
	})

	t.Run("deny holds for what the agent does unasked", func(t *testing.T) {
		a := f.startWith(t, `{"mode":"bypass","deny":["edit(secrets/**)","read(secrets/**)","execute"]}`)
		turn := mustPrompt(t, a, "write secrets/planted x\nread secrets/planted\nwrite ok.txt fine\nrun echo hi")
		got := turn.Response()
		for _, want := range []string{
			`write failed: `, `read failed: `, "wrote ok.txt", `terminal failed: `, `Denied by the session's permissions (deny \"execute\")`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the agent said %q, want %q in it", got, want)
			}
		}
		if _, err := os.Stat(f.path("secrets/planted")); !os.IsNotExist(err) {
			t.Errorf("a denied write was done: %v", err)
		}
		if data, err := os.ReadFile(f.path("ok.txt")); err != nil || string(data) != "fine" {
			t.Errorf("ok.txt = %q, %v", data, err)
		}
	})

	t.Run("a change applies to the next request", func(t *testing.T) {
		a := f.startWith(t, `{"mode":"ask"}`)
		a.(plugins.Reconfigurer).SetConfig(protocol.Object{"permissions": jsontext.Value(`{"allow":["execute"]}`)})
		turn := mustPrompt(t, a, "request execute x4")
		if d := turn.Of("decided"); len(d) != 1 || d[0].Decision.Rule != `allow "execute"` {
			t.Errorf("events %v", turn.Kinds())
		}
	})
}
