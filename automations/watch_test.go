package automations

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

func eventDef(typ, ev string, config map[string]string) protocol.AutomationDefinition {
	cfg := protocol.Object{}
	for k, v := range config {
		b, _ := json.Marshal(v)
		cfg[k] = b
	}
	return protocol.AutomationDefinition{Title: typ, Message: protocol.Message{Text: "say changed"}, Enabled: true,
		Triggers: []protocol.AutomationTrigger{&protocol.AutomationEventTrigger{ID: "w", Type: typ,
			Events: []protocol.AutomationTriggerEventDefinition{{ID: ev}}, Config: cfg}}}
}

func TestFileChangedTrigger(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "notes")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{MaxActive: 1})
	h.runner.block = true // one run in progress: later events are skipped, so exactly one
	if _, err := h.e.Create("user:ann", "ahp-automation:/files", eventDef(TriggerFiles, EventFileChanged, map[string]string{"folder": dir, "pattern": "*.md"})); err != nil {
		t.Fatal(err)
	}
	// A file the pattern leaves out, then one it takes, in a subfolder.
	if err := os.WriteFile(filepath.Join(sub, "a.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "b.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for c := range h.changes {
		if c.Run != nil && c.Action == nil {
			o := c.Run.Origin.(*protocol.AutomationTriggeredRunOrigin)
			var p string
			_ = json.Unmarshal(o.Event["path"], &p)
			if p != filepath.Join(sub, "b.md") {
				t.Fatalf("run started by %q", p)
			}
			break
		}
	}
}

func TestGitRefTrigger(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "one")
	h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
	if _, err := h.e.Create("user:ann", "ahp-automation:/refs", eventDef(TriggerGitRef, EventRefUpdated, map[string]string{"repository": repo, "ref": "refs/heads/release*"})); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "--allow-empty", "-m", "two") // main moves: not watched
	git("branch", "release-1")                        // matches
	ended := h.waitEnded(1)
	o := ended[0].Origin.(*protocol.AutomationTriggeredRunOrigin)
	var ref string
	_ = json.Unmarshal(o.Event["ref"], &ref)
	if ref != "refs/heads/release-1" {
		t.Fatalf("run started by ref %q", ref)
	}
	if n := len(h.e.Entries("user:ann")[0].Runs); n != 1 {
		t.Fatalf("%d runs", n)
	}
}
