package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/protocol"
)

// automationEntries is `ahpd automations ls --json`.
func automationEntries(t *testing.T, e *env) []protocol.AutomationEntry {
	t.Helper()
	r := cli(t, e, "automations", "ls", "--json")
	if r.code != 0 {
		t.Fatalf("automations ls --json: %d %s", r.code, r.stderr)
	}
	var entries []protocol.AutomationEntry
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil {
		t.Fatalf("automations ls --json printed %q: %v", r.stdout, err)
	}
	return entries
}

func entryOf(entries []protocol.AutomationEntry, uri string) *protocol.AutomationEntry {
	for i := range entries {
		if entries[i].Resource == uri {
			return &entries[i]
		}
	}
	return nil
}

// TestCLIAutomations: ls, add, run and rm against a daemon on the script
// backend, with one automation declared in its config file.
func TestCLIAutomations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	config := writeConfig(t, e, `
automations:
  - id: nightly
    title: Nightly from the file
    message: say from the file
    session: {provider: script, folder: `+e.work+`}
`)
	serveDaemon(t, e, "--config", config)

	ls := cli(t, e, "automations", "ls")
	if ls.code != 0 || !strings.Contains(ls.stdout, "nightly") || !strings.Contains(ls.stdout, "by hand") || !strings.Contains(ls.stdout, "Nightly from the file") {
		t.Fatalf("automations ls: %d %q %q", ls.code, ls.stdout, ls.stderr)
	}

	add := cli(t, e, "automations", "add", "--id", "greeter", "--title", "Greeter", "--message", "say hello",
		"--provider", "script", "--folder", e.work, "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin", "--misfire", "skip",
		"--on", "turn-completed", "--with", "automation=ahp-automation:/nightly", "--after-runs", "3")
	if add.code != 0 || strings.TrimSpace(add.stdout) != "ahp-automation:/greeter" {
		t.Fatalf("automations add: %d %q %q", add.code, add.stdout, add.stderr)
	}
	g := entryOf(automationEntries(t, e), "ahp-automation:/greeter")
	if g == nil || len(g.Definition.Triggers) != 2 || g.NextRunAt == nil || len(g.Definition.DisableConditions) != 1 {
		t.Fatalf("greeter as listed: %+v", g)
	}
	st, _ := g.Definition.Triggers[0].(*protocol.AutomationScheduleTrigger)
	et, _ := g.Definition.Triggers[1].(*protocol.AutomationEventTrigger)
	if st == nil || st.Schedule.TimeZone != "Europe/Berlin" || *st.MisfirePolicy != protocol.AutomationMisfirePolicySkip ||
		et == nil || et.Type != "ahpd.session" || et.Events[0].ID != "turnCompleted" || string(et.Config["automation"]) != `"ahp-automation:/nightly"` {
		t.Errorf("greeter's triggers: %+v %+v", st, et)
	}
	if s := g.Definition.Session; len(s.WorkingDirectories) != 1 || s.WorkingDirectories[0] != "file://"+e.work {
		t.Errorf("greeter's folders: %v", s.WorkingDirectories)
	}
	if m := cli(t, e, "automations", "add", "--message", "say x", "--title", "by hand only", "--id", "manual", "--provider", "script"); m.code != 0 {
		t.Fatalf("add without triggers: %d %s", m.code, m.stderr)
	}

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"declared run completes", []string{"run", "nightly"}, 0, "", "session "},
		{"by prefix, as JSON", []string{"run", "--json", "night"}, 0, `"status": "completed"`, "run "},
		{"no wait", []string{"run", "--no-wait", "greeter"}, 0, "ahp-automation-run:/", ""},
		{"unknown", []string{"run", "nope"}, 1, "", `no automation "nope": ` + "`ahpd automations ls`"},
		{"bad cron", []string{"add", "--provider", "script", "--message", "say x", "--cron", "0 25 * * *"}, 1, "", `cron expression "0 25 * * *"`},
		{"unknown event", []string{"add", "--provider", "script", "--message", "say x", "--on", "rain"}, 1, "", `--on "rain": the daemon offers turn-completed, session-failed, file-changed, ref-updated`},
		{"config for no event", []string{"add", "--provider", "script", "--message", "say x", "--on", "turn-completed", "--with", "folder=/tmp"}, 1, "", `--with "folder": no --on event takes it`},
		{"no message", []string{"add", "--title", "x"}, 1, "", "--message is required"},
		{"declared is not removed", []string{"rm", "nightly"}, 1, "", "declared in ahpd's config file: remove it there"},
		{"unknown verb", []string{"frob"}, 2, "", `unknown command "frob"`},
		{"two names", []string{"rm", "a", "b"}, 2, "", "name one automation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, e, append([]string{"automations"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d with %q / %q", r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}

	// A run whose turn fails exits 1 and says why.
	if r := cli(t, e, "automations", "add", "--id", "broken", "--message", "fail the disk is full", "--provider", "script", "--folder", e.work); r.code != 0 {
		t.Fatalf("add broken: %d %s", r.code, r.stderr)
	}
	if r := cli(t, e, "automations", "run", "broken"); r.code != 1 || !strings.Contains(r.stderr, "the run failed") || !strings.Contains(r.stderr, "the disk is full") {
		t.Errorf("run broken: %d %q", r.code, r.stderr)
	}

	if r := cli(t, e, "automations", "rm", "greeter"); r.code != 0 {
		t.Fatalf("rm greeter: %d %s", r.code, r.stderr)
	}
	entries := automationEntries(t, e)
	if entryOf(entries, "ahp-automation:/greeter") != nil {
		t.Error("greeter is listed after rm")
	}
	n := entryOf(entries, "ahp-automation:/nightly")
	if n == nil || len(n.Runs) < 2 || automations.StateOf(n.Runs[0].Lifecycle) != "completed" || n.Runs[0].PrimarySession == nil {
		t.Fatalf("nightly after two runs: %+v", n)
	}
	if r := cli(t, e, "show", *n.Runs[0].PrimarySession); r.code != 0 || !strings.Contains(r.stdout, "from the file") {
		t.Errorf("the run's session: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestCLIAutomationRunInterrupted: SIGINT cancels the run, and the
// command exits 130.
func TestCLIAutomationRunInterrupted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	if r := cli(t, e, "automations", "add", "--id", "slow", "--message", "say started\nwait 30s", "--provider", "script"); r.code != 0 {
		t.Fatalf("add: %d %s", r.code, r.stderr)
	}
	cmd := cliCmd(e, "automations", "run", "slow")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var said []string
	for sc.Scan() && !strings.Contains(sc.Text(), "run ") {
		said = append(said, sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		said = append(said, sc.Text())
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130; stderr %q", err, said)
	}
	if !strings.Contains(strings.Join(said, "\n"), "the run was cancelled") {
		t.Errorf("stderr %q does not say the run was cancelled", said)
	}
	s := entryOf(automationEntries(t, e), "ahp-automation:/slow")
	if s == nil || len(s.Runs) != 1 || automations.StateOf(s.Runs[0].Lifecycle) != "cancelled" {
		t.Fatalf("slow after the interrupt: %+v", s)
	}
}
