package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// usersFile makes a users directory with the member ada.
func usersFile(t *testing.T, e *env) string {
	t.Helper()
	path := filepath.Join(e.root, "users.yaml")
	if code := run(context.Background(), []string{"user", "add", "ada", "--role", "member", "--users", path}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
		t.Fatalf("ahpd user add: status %d", code)
	}
	return path
}

// TestConfigAutomations reads the automations: key: what the file says
// becomes the definition the engine is given.
func TestConfigAutomations(t *testing.T) {
	e := newEnv(t)
	users := usersFile(t, e)
	config := writeConfig(t, e, `
users: `+users+`
automations:
  - id: nightly-tests
    title: Nightly tests
    message: run go test ./...
    session:
      provider: script
      folders: [`+e.work+`]
      config:
        isolation: worktree
        permissions: {mode: bypass, deny: [WebFetch]}
        inputTimeout: 30m
    triggers:
      - id: night
        schedule: {cron: "0 2 * * 1-5", timeZone: Europe/Berlin, misfire: skip}
    disable: {afterRuns: 30, afterDate: "2031-01-01T00:00:00Z"}
  - resource: ahp-automation:/review
    owner: ada
    enabled: false
    title: Review
    message: say reviewing
    triggers:
      - event: {type: ahpd.session, events: [turnCompleted], config: {automation: "ahp-automation:/nightly-tests"}}
`)
	cfg, err := parseConfig([]string{"--config", config, "--state-dir", e.state}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	auth := &grants.Authenticator{Host: "box"}
	decl := declaredAutomations(cfg, auth)
	if len(decl) != 2 {
		t.Fatalf("declared %d automations, want 2", len(decl))
	}
	n, r := decl[0], decl[1]
	if n.Owner != "root:box" || n.Resource != "ahp-automation:/nightly-tests" || !n.Definition.Enabled {
		t.Errorf("nightly: owner %q resource %q enabled %v", n.Owner, n.Resource, n.Definition.Enabled)
	}
	s := n.Definition.Session
	if s.Provider == nil || *s.Provider != "script" || len(s.WorkingDirectories) != 1 || s.WorkingDirectories[0] != "file://"+e.work ||
		string(s.Config["isolation"]) != `"worktree"` ||
		string(s.Config["permissions"]) != `{"deny":["WebFetch"],"mode":"bypass"}` || string(s.Config["inputTimeout"]) != `"30m"` {
		t.Errorf("nightly's session template: %+v", s)
	}
	st, ok := n.Definition.Triggers[0].(*protocol.AutomationScheduleTrigger)
	if !ok || st.ID != "night" || st.Schedule.Expression != "0 2 * * 1-5" || st.Schedule.TimeZone != "Europe/Berlin" ||
		st.MisfirePolicy == nil || *st.MisfirePolicy != protocol.AutomationMisfirePolicySkip {
		t.Errorf("nightly's trigger: %+v", n.Definition.Triggers[0])
	}
	if len(n.Definition.DisableConditions) != 2 {
		t.Errorf("nightly's disable conditions: %+v", n.Definition.DisableConditions)
	}
	if r.Owner != "user:ada" || r.Resource != "ahp-automation:/review" || r.Definition.Enabled {
		t.Errorf("review: owner %q resource %q enabled %v", r.Owner, r.Resource, r.Definition.Enabled)
	}
	if et, ok := r.Definition.Triggers[0].(*protocol.AutomationEventTrigger); !ok || et.ID != "event-0" || et.Events[0].ID != "turnCompleted" {
		t.Errorf("review's trigger: %+v", r.Definition.Triggers[0])
	}

	// Without a users directory, root's automations belong to nobody, as
	// the host names a root connection's owner.
	cfg.Users, cfg.declared = "", cfg.declared[:1]
	if d := declaredAutomations(cfg, auth); d[0].Owner != "" {
		t.Errorf("owner without a users directory = %q, want none", d[0].Owner)
	}
}

// TestConfigAutomationErrors: a mistake names the automation and the
// field, as the file spells it.
func TestConfigAutomationErrors(t *testing.T) {
	e := newEnv(t)
	users := usersFile(t, e)
	const ok = "  - id: fine\n    title: Fine\n    message: say fine\n"
	for _, tc := range []struct {
		name, yaml, users, want string
	}{
		{"bad cron", ok + "  - id: x\n    title: X\n    message: say x\n    triggers:\n      - schedule: {cron: \"0 25 * * *\", timeZone: UTC}\n",
			"", `automations[1].triggers[0].schedule: trigger "schedule-0": cron expression "0 25 * * *"`},
		{"no time zone", "  - id: x\n    title: X\n    message: say x\n    triggers:\n      - schedule: {cron: \"0 2 * * *\"}\n",
			"", `automations[0].triggers[0].schedule: trigger "schedule-0": schedule has no time zone`},
		{"misfire", "  - id: x\n    title: X\n    message: say x\n    triggers:\n      - schedule: {cron: \"0 2 * * *\", timeZone: UTC, misfire: later}\n",
			"", `automations[0].triggers[0].schedule.misfire: trigger "schedule-0": misfire policy "later"`},
		{"event type", "  - id: x\n    title: X\n    message: say x\n    triggers:\n      - event: {type: ahpd.weather, events: [rain]}\n",
			"", `automations[0].triggers[0].event: trigger "event-0": unknown event trigger type "ahpd.weather"`},
		{"event folder", "  - id: x\n    title: X\n    message: say x\n    triggers:\n      - event: {type: ahpd.fileChanged, events: [fileChanged], config: {folder: src}}\n",
			"", `automations[0].triggers[0].event: trigger "event-0": config: folder "src" is not an absolute path`},
		{"both kinds", "  - id: x\n    title: X\n    message: say x\n    triggers:\n      - schedule: {cron: \"0 2 * * *\", timeZone: UTC}\n        event: {type: ahpd.session, events: [turnCompleted]}\n",
			"", `automations[0].triggers[0]: give one of schedule or event`},
		{"same trigger id", "  - id: x\n    title: X\n    message: say x\n    triggers:\n      - {id: a, schedule: {cron: \"0 2 * * *\", timeZone: UTC}}\n      - {id: a, schedule: {cron: \"0 3 * * *\", timeZone: UTC}}\n",
			"", `automations[0].triggers[1].id: two triggers have the id "a"`},
		{"no id", "  - title: X\n    message: say x\n", "", `automations[0].id: give the automation an id`},
		{"bad resource", "  - resource: ahp-session:/x\n    title: X\n    message: say x\n", "", `automations[0].resource: resource "ahp-session:/x" is not an ahp-automation:/<id> URI`},
		{"no title", "  - id: x\n    message: say x\n", "", `automations[0].title: title must be 1 to`},
		{"no message", "  - id: x\n    title: X\n", "", `automations[0].message: the message is empty`},
		{"relative folder", "  - id: x\n    title: X\n    message: say x\n    session: {folders: [src]}\n", "", `automations[0].session.folders[0]: "src" is not an absolute path`},
		{"afterRuns zero", "  - id: x\n    title: X\n    message: say x\n    disable: {afterDate: \"2031-01-01T00:00:00Z\", afterRuns: 0}\n",
			"", `automations[0].disable.afterRuns: disable condition afterRuns: max is 0`},
		{"afterDate", "  - id: x\n    title: X\n    message: say x\n    disable: {afterDate: tomorrow}\n",
			"", `automations[0].disable.afterDate: disable condition afterDate: "tomorrow" is not an ISO 8601`},
		{"twice", ok + ok, "", `automations[1].id: ahp-automation:/fine is declared twice (also automations[0])`},
		{"unknown owner", "  - id: x\n    owner: bob\n    title: X\n    message: say x\n", users, `automations[0].owner: no user "bob" in the users directory`},
		{"owner without users", "  - id: x\n    owner: ada\n    title: X\n    message: say x\n", "", `automations[0].owner: ahpd has no users directory`},
		{"permissions", "  - id: x\n    title: X\n    message: say x\n    session: {config: {permissions: {mode: all}}}\n",
			"", `automations[0].session.config.permissions: mode: "all" is not ask, acceptEdits or bypass`},
		{"permissions rule", "  - id: x\n    title: X\n    message: say x\n    session: {config: {permissions: {deny: [\"Bash(git push *)\"]}}}\n",
			"", `automations[0].session.config.permissions: deny[0]: "Bash(git push *)": Bash takes no path`},
		{"inputTimeout", "  - id: x\n    title: X\n    message: say x\n    session: {config: {inputTimeout: forever}}\n",
			"", `automations[0].session.config.inputTimeout: "forever": want a duration from 1s to 720h`},
		{"unknown key", "  - id: x\n    title: X\n    message: say x\n    cron: \"* * * * *\"\n", "", `unknown key "cron"; the keys allowed there are`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := ""
			if tc.users != "" {
				head = "users: " + tc.users + "\n"
			}
			config := writeConfig(t, e, head+"automations:\n"+tc.yaml)
			_, err := parseConfig([]string{"--config", config, "--state-dir", e.state}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant one saying %s", err, tc.want)
			}
		})
	}
}
