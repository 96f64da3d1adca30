package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jsonEvents reads `ahpd run --json`'s lines.
func jsonEvents(t *testing.T, stdout string) []turnEvent {
	t.Helper()
	var out []turnEvent
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev turnEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

// cancelLeftWaiting cancels the turn a run that exited 3 left waiting,
// so that the daemon has no turn to wait for as it stops.
func cancelLeftWaiting(t *testing.T, e *env, r cliResult) {
	t.Helper()
	if m := sessionLine.FindStringSubmatch(r.stderr); m != nil && r.code == exitNeedsInput {
		t.Cleanup(func() { cli(t, e, "cancel", m[1]) })
	}
}

// TestCLIApprove: `ahpd run --approve` gives the session its permissions,
// which the host decides tool calls by, with no terminal to ask on: all
// runs a command, edits writes a file in the folder but stops for a
// command (exit 3, saying how not to), --deny refuses a call, and a
// mistake in a flag is a usage error naming it.
func TestCLIApprove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	run := func(args ...string) cliResult {
		t.Helper()
		r := cli(t, e, append([]string{"run", "--provider", "script"}, args...)...)
		cancelLeftWaiting(t, e, r)
		return r
	}

	if r := run("--approve", "all", "run true"); r.code != 0 {
		t.Errorf("--approve all, run true: exit %d: %s", r.code, r.stderr)
	}
	if r := run("--approve", "edits", "write edited.txt x"); r.code != 0 {
		t.Errorf("--approve edits, a write: exit %d: %s", r.code, r.stderr)
	} else if _, err := os.Stat(filepath.Join(e.work, "edited.txt")); err != nil {
		t.Errorf("--approve edits: the write did not run: %v", err)
	}
	r := run("--approve", "edits", "run true")
	if r.code != exitNeedsInput || !strings.Contains(r.stderr, "needs approval, and stdin is no terminal to ask on") ||
		!strings.Contains(r.stderr, "`ahpd run --approve all`") {
		t.Errorf("--approve edits, a command: exit %d, stderr %q; want 3 saying how to approve it", r.code, r.stderr)
	}
	// Without --approve the session has the daemon's default, ask.
	if r := run("write asked.txt x"); r.code != exitNeedsInput {
		t.Errorf("no --approve, a write: exit %d: %s", r.code, r.stderr)
	}

	// deny wins over bypass: the call is refused, shown as decided by the
	// rule, and the script goes on.
	r = run("--json", "--approve", "all", "--deny", "execute", "run touch denied.txt\nsay after")
	var denied, ended bool
	for _, ev := range jsonEvents(t, r.stdout) {
		switch {
		case ev.Event == "approval":
			denied = ev.Approved != nil && !*ev.Approved && ev.By == "permissions" && ev.Message == `deny "execute"`
		case ev.Event == "tool" && ev.State == "pending-confirmation":
			t.Errorf("a denied call waited for a person: %+v", ev)
		case ev.Event == "end":
			ended = ev.State == "complete"
		}
	}
	if !denied || !ended || r.code != 0 {
		t.Errorf("--deny execute: exit %d, denied shown %v, completed %v:\n%s%s", r.code, denied, ended, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(e.work, "denied.txt")); err == nil {
		t.Error("the denied command ran")
	}
	// The text view shows a denial, not what the permissions let run.
	r = run("--approve", "all", "--deny", "run", "write shown.txt x\nrun true")
	if !strings.Contains(r.stdout, `denied Run (permissions: deny "run")`) || strings.Contains(r.stdout, "approved") {
		t.Errorf("--deny run, as text: %q", r.stdout)
	}

	// --allow: a rule for commands lets them run in mode ask.
	if r := run("--allow", "execute", "run true"); r.code != 0 {
		t.Errorf("--allow execute: exit %d: %s", r.code, r.stderr)
	}
	// --auto-approve is --approve all.
	if r := run("--auto-approve", "run true"); r.code != 0 {
		t.Errorf("--auto-approve: exit %d: %s", r.code, r.stderr)
	}

	// --input-timeout reaches the session: a wait nobody answers ends the
	// turn (--wait follows it to its end instead of stopping for it).
	r = run("--wait", "--input-timeout", "1s", "run true")
	if r.code != exitFailed || !strings.Contains(r.stderr, "waited 1s for input (a tool call's confirmation) and nobody answered") {
		t.Errorf("--input-timeout 1s: exit %d, stderr %q", r.code, r.stderr)
	}

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--approve", "yes"}, `--approve "yes": want ask, edits or all`},
		{[]string{"--auto-approve", "--approve", "edits"}, "--auto-approve is --approve all"},
		{[]string{"--deny", "Bash(git *"}, `--deny "Bash(git *": a glob ends with ")"`},
		{[]string{"--allow", "edit(/etc/**)"}, `--allow "edit(/etc/**)": a glob is relative to the session's folder`},
		{[]string{"--input-timeout", "soon"}, `--input-timeout "soon": want a duration`},
		{[]string{"--input-timeout", "721h"}, `--input-timeout "721h": want a duration`},
	} {
		r := cli(t, e, append(append([]string{"run", "--provider", "script"}, tc.args...), "run true")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", tc.args, r.code, r.stderr, tc.says)
		}
	}
}

// TestCLIApproveSession: `ahpd run --session ID --approve` changes the
// session's permissions (session/configChanged) before its turn, and
// they stay the session's.
func TestCLIApproveSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	r := cli(t, e, "run", "--provider", "script", "say one")
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("the first run: exit %d: %s", r.code, r.stderr)
	}
	id := m[1]
	r = cli(t, e, "run", "--session", id, "run true")
	if r.code != exitNeedsInput {
		t.Fatalf("a command in a session that asks: exit %d: %s", r.code, r.stderr)
	}
	if c := cli(t, e, "cancel", id); c.code != 0 {
		t.Fatalf("cancel: %d %s", c.code, c.stderr)
	}
	if r := cli(t, e, "run", "--session", id, "--approve", "all", "run true"); r.code != 0 {
		t.Fatalf("--session --approve all: exit %d: %s", r.code, r.stderr)
	}
	if r := cli(t, e, "run", "--session", id, "run true"); r.code != 0 {
		t.Errorf("the session's next turn, without --approve: exit %d: %s", r.code, r.stderr)
	}
	if r := cli(t, e, "run", "--session", id, "--approve", "ask", "--input-timeout", "0", "run true"); r.code != exitNeedsInput {
		t.Errorf("--session --approve ask: exit %d: %s", r.code, r.stderr)
	}
	cli(t, e, "cancel", id)
}

// TestDaemonPermissions: the config file's permissions are the sessions'
// default, and a bad one stops the start naming it.
func TestDaemonPermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	config := writeConfig(t, e, "permissions: {mode: acceptEdits, allow: [execute], deny: [\"edit(secret*)\"]}\ninputTimeout: 30m\n")
	serveDaemon(t, e, "--config", config)
	r := cli(t, e, "run", "--provider", "script", "--json", "write notes.txt x\nrun true\nwrite secret.txt x")
	var kinds []string
	for _, ev := range jsonEvents(t, r.stdout) {
		if ev.Event == "approval" {
			kinds = append(kinds, ev.Message)
		}
	}
	if r.code != 0 || strings.Join(kinds, ", ") != `mode acceptEdits, allow "execute", deny "edit(secret*)"` {
		t.Errorf("under the file's permissions: exit %d, decisions %q: %s", r.code, kinds, r.stderr)
	}
	// A session's own permissions replace the file's.
	if r := cli(t, e, "run", "--provider", "script", "--approve", "ask", "write other.txt x"); r.code != exitNeedsInput {
		t.Errorf("--approve ask over the file's acceptEdits: exit %d: %s", r.code, r.stderr)
	} else {
		cancelLeftWaiting(t, e, r)
	}

	bad := newEnv(t)
	config = writeConfig(t, bad, "permissions: {mode: ask, deny: [\"Bash(git push *)\"]}\n")
	p := launch(t, bad, 0, "--config", config, "--state-dir", bad.state)
	if code := p.wait(exitTimeout); code != 2 {
		t.Errorf("a bad permissions: exit status %d, want 2", code)
	}
	if s := p.stderr.String(); !strings.Contains(s, `ahpd: config file: permissions: deny[0]: "Bash(git push *)": Bash takes no path`) {
		t.Errorf("a bad permissions: stderr %q", s)
	}
}

// TestCLIAutomationsApprove: `ahpd automations add --approve all` makes a
// template whose sessions run commands unasked, so its run completes with
// nobody there; the flags land in the template's config.
func TestCLIAutomationsApprove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	add := cli(t, e, "automations", "add", "--id", "tests", "--message", "run true", "--provider", "script", "--folder", e.work,
		"--approve", "all", "--deny", "fetch", "--input-timeout", "30m")
	if add.code != 0 {
		t.Fatalf("automations add: %d %s", add.code, add.stderr)
	}
	a := entryOf(automationEntries(t, e), "ahp-automation:/tests")
	if a == nil {
		t.Fatal("the automation is not listed")
	}
	c := a.Definition.Session.Config
	var perms bytes.Buffer
	if err := json.Compact(&perms, c["permissions"]); err != nil || perms.String() != `{"mode":"bypass","deny":["fetch"]}` || string(c["inputTimeout"]) != `"30m"` {
		t.Errorf("the template's config: %s %s", c["permissions"], c["inputTimeout"])
	}
	// A run whose turn waits on a person goes on waiting: the guard ends
	// the command rather than the test's whole budget.
	cmd := cliCmd(e, "automations", "run", "tests")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("automations run: %v: %s", err, errb.String())
		}
	case <-time.After(2 * startTimeout): // a hang guard only
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the run did not end: it waits on a person: %s", errb.String())
	}
	if r := cli(t, e, "automations", "add", "--message", "run true", "--provider", "script", "--approve", "most"); r.code == 0 || !strings.Contains(r.stderr, `--approve "most": want ask, edits or all`) {
		t.Errorf("add --approve most: exit %d, stderr %q", r.code, r.stderr)
	}
}
