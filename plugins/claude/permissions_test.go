package claude_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

func permissions(v string) protocol.Object {
	return protocol.Object{"permissions": jsontext.Value(v)}
}

// TestPermissionsAcceptEdits: the CLI asks ahpd about a write and a
// command; the session's acceptEdits answers the write itself, which the
// turn shows as decided, and leaves the command to a person.
func TestPermissionsAcceptEdits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, permissions(`{"mode":"acceptEdits"}`))
	path := filepath.Join(f.dir, "notes.txt")
	made := filepath.Join(f.dir, "made-by-a-command")
	f.mock.Enqueue(
		claudetest.Write("toolu_w1", path, "accepted\n"),
		claudetest.ToolUse("", "toolu_b1", "Bash", map[string]string{"command": "touch " + made, "description": "make a file"}),
		claudetest.Text("done"),
	)
	turn := pluginstest.NewTurn("turn-1")
	turn.Confirms <- true // the command's
	if err := prompt(t, a, turn, "write, then run"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "accepted\n" {
		t.Errorf("the write: %q, %v", data, err)
	}
	if got, want := turn.About("toolu_w1"), []string{"toolStart", "decided", "toolDone"}; !slices.Equal(got, want) {
		t.Errorf("write events = %q, want %q", got, want)
	}
	if d := turn.Of("decided"); len(d) != 1 || d[0].Decision.Verdict != plugins.Allow || d[0].Decision.Rule != "mode acceptEdits" {
		t.Errorf("decided %+v", d)
	}
	confirms := turn.Of("confirm")
	if len(confirms) != 1 || confirms[0].Call.Name != "Bash" || confirms[0].Call.Kind != plugins.KindExecute {
		t.Fatalf("asked %+v, want the command alone", confirms)
	}
	if _, err := os.Stat(made); err != nil {
		t.Errorf("the command confirmed did not run: %v", err)
	}
}

// TestPermissionsDeny: a deny rule wins over bypass, and the model is
// told the session's permissions refused the call; what bypass allows
// runs without a prompt.
func TestPermissionsDeny(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A file not there yet: the CLI refuses to write over one it has not
	// read before it asks anyone.
	secret := filepath.Join(secretFile(t, f), "..", "new")
	a := f.start(t, f.backend, newID(), false, permissions(`{"mode":"bypass","deny":["edit(secrets/**)"]}`))
	ok := filepath.Join(f.dir, "ok.txt")
	f.mock.Enqueue(
		claudetest.Write("toolu_w2", secret, "planted\n"),
		claudetest.Write("toolu_w3", ok, "fine\n"),
		claudetest.Text("understood"),
	)
	turn := pluginstest.NewTurn("turn-1")
	if err := prompt(t, a, turn, "try the secrets"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if len(turn.Of("confirm")) != 0 {
		t.Errorf("a person was asked: %v", turn.Kinds())
	}
	if _, err := os.Stat(secret); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied write wrote: %v", err)
	}
	if data, err := os.ReadFile(ok); err != nil || string(data) != "fine\n" {
		t.Errorf("the allowed write: %q, %v", data, err)
	}
	// The denied call is ended by the host: no ToolDone.
	if got, want := turn.About("toolu_w2"), []string{"toolStart", "decided"}; !slices.Equal(got, want) {
		t.Errorf("denied write events = %q, want %q", got, want)
	}
	decided := turn.Of("decided")
	if len(decided) != 2 || decided[0].Decision.Verdict != plugins.Deny || decided[0].Decision.Rule != `deny "edit(secrets/**)"` ||
		decided[1].Decision.Verdict != plugins.Allow || decided[1].Decision.Rule != "mode bypass" {
		t.Errorf("decided %+v", decided)
	}
	var told []string
	for _, req := range f.mock.Requests() {
		for _, res := range req.ToolResults() {
			if res.IsError && !slices.Contains(told, res.Text) {
				told = append(told, res.Text)
			}
		}
	}
	if len(told) != 1 || told[0] != `Denied by the session's permissions (deny "edit(secrets/**)").` {
		t.Errorf("the model was told %q", told)
	}

	// Read back, the denied call is a denial, not a failure.
	turns, err := f.backend.Turns(t.Context(), f.conv(a.ID()))
	if err != nil || len(turns) != 1 {
		t.Fatalf("turns read back: %d, %v", len(turns), err)
	}
	for _, p := range turns[0].ResponseParts {
		if tp, ok := p.(*protocol.ToolCallResponsePart); ok {
			if c, ok := tp.ToolCall.(*protocol.ToolCallCancelledState); ok && c.ToolCallID == "toolu_w2" {
				return
			}
		}
	}
	t.Errorf("the denied write read back as %+v", turns[0].ResponseParts)
}

// TestPermissionsDenyRead: the CLI reads inside its folder without
// asking, so a deny glob on reading goes to the CLI as its own rule,
// which refuses the read.
func TestPermissionsDenyRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	secret := secretFile(t, f)
	a := f.start(t, f.backend, newID(), false, permissions(`{"deny":["read(secrets/**)"]}`))
	f.mock.Enqueue(
		claudetest.ToolUse("", "toolu_r1", "Read", map[string]string{"file_path": secret}),
		claudetest.Text("understood"),
	)
	turn := pluginstest.NewTurn("turn-1")
	if err := prompt(t, a, turn, "read the secret"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	results := f.lastRequest(t).ToolResults()
	if len(results) != 1 || !results[0].IsError || strings.Contains(results[0].Text, "hunter2") {
		t.Errorf("the model was told %+v", results)
	}
	if len(turn.Of("confirm")) != 0 {
		t.Errorf("a person was asked: %v", turn.Kinds())
	}
}

// secretFile makes secrets/key in the fixture's folder.
func secretFile(t *testing.T, f *fixture) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(f.dir, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(f.dir, "secrets", "key")
	if err := os.WriteFile(secret, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestPermissionsDenyTool: a deny rule without a glob takes the tool from
// the CLI, which offers it to no model.
func TestPermissionsDenyTool(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, permissions(`{"mode":"bypass","deny":["execute"]}`))
	f.mock.Enqueue(claudetest.Text("no shell for me"))
	if err := prompt(t, a, pluginstest.NewTurn("turn-1"), "hello"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if tools := f.lastRequest(t).Tools; slices.Contains(tools, "Bash") || !slices.Contains(tools, "Write") {
		t.Errorf("the tools offered are %q", tools)
	}
}

// TestPermissionsAllowInSession: the rule a person's "allow in this
// session" adds for the CLI's Write (plugins.Policy.SessionRule), handed
// to the running agent as the session's changed config, decides the next
// Write, of another file, without asking anyone.
func TestPermissionsAllowInSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	config := permissions(`{"mode":"ask"}`)
	a := f.start(t, f.backend, newID(), false, config)
	f.mock.Enqueue(claudetest.Write("toolu_w1", filepath.Join(f.dir, "a.txt"), "one\n"), claudetest.Text("asked"))
	turn := pluginstest.NewTurn("turn-1")
	turn.Confirms <- true
	if err := prompt(t, a, turn, "write a"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	confirms := turn.Of("confirm")
	if len(confirms) != 1 {
		t.Fatalf("asked %+v, want the write", confirms)
	}
	rule := plugins.PolicyOf(config, f.dir).SessionRule(confirms[0].Call)
	if rule != "Write(**)" {
		t.Fatalf("the rule for %+v: %q", confirms[0].Call, rule)
	}
	grown, _ := plugins.PermissionsOf(config).WithAllow(rule)
	a.SetConfig(permissions(string(grown.Encode())))

	f.mock.Enqueue(claudetest.Write("toolu_w2", filepath.Join(f.dir, "b.txt"), "two\n"), claudetest.Text("allowed"))
	turn = pluginstest.NewTurn("turn-2")
	if err := prompt(t, a, turn, "write b"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if len(turn.Of("confirm")) != 0 {
		t.Errorf("a person was asked: %v", turn.Kinds())
	}
	if d := turn.Of("decided"); len(d) != 1 || d[0].Decision.Verdict != plugins.Allow || d[0].Decision.Rule != `allow "Write(**)"` {
		t.Errorf("decided %+v", d)
	}
	if data, err := os.ReadFile(filepath.Join(f.dir, "b.txt")); err != nil || string(data) != "two\n" {
		t.Errorf("b.txt: %q, %v", data, err)
	}
}
