package httpapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// untilAction reads the stream's actions until one want takes, and
// returns it.
func (s *stream) untilAction(t *testing.T, what string, want func(a map[string]any) bool) map[string]any {
	t.Helper()
	for {
		ev := s.next(t)
		if ev.event != "action" {
			continue
		}
		if a, _ := ev.data["action"].(map[string]any); want(a) {
			return a
		}
		if a, _ := ev.data["action"].(map[string]any); a["type"] == "chat/turnComplete" || a["type"] == "chat/turnCancelled" {
			t.Fatalf("the turn ended before %s", what)
		}
	}
}

// toolReady matches the chat/toolCallReady of the first tool call whose
// invocation mentions word.
func toolReady(word string) func(a map[string]any) bool {
	return func(a map[string]any) bool {
		if a["type"] != "chat/toolCallReady" {
			return false
		}
		inv, _ := a["invocationMessage"].(string)
		if m, ok := a["invocationMessage"].(map[string]any); ok {
			inv, _ = m["markdown"].(string)
		}
		return strings.Contains(inv, word)
	}
}

// TestCreateWithPermissions: POST /v1/sessions's permissions are the
// session's: under acceptEdits a script's write inside the folder runs
// without asking and its run waits for a person; under bypass both run
// and the turn completes.
func TestCreateWithPermissions(t *testing.T) {
	e := newEnv(t)

	e.must(201, "mo", "POST", "/v1/sessions", map[string]any{"id": "edits", "folder": e.work, "provider": "script",
		"permissions": map[string]any{"mode": "acceptEdits"}, "inputTimeout": "30m"})
	events := e.events("mo", "/v1/sessions/edits/events")
	if ready := events.next(t); ready.event != "ready" {
		t.Fatalf("first event %v", ready)
	}
	e.must(202, "mo", "POST", "/v1/sessions/edits/turns", map[string]any{"input": "write edited.txt hi\nrun true", "id": "t1"})
	write := events.untilAction(t, "the write", toolReady("edited.txt"))
	if write["confirmed"] != "setting" {
		t.Fatalf("the write under acceptEdits: %v, want it confirmed by the setting", write)
	}
	if m, _ := write["_meta"].(map[string]any); m["ahpd.permission"] != "mode acceptEdits" {
		t.Errorf("the write's _meta %v, want the rule that decided", write["_meta"])
	}
	run := events.untilAction(t, "the run", toolReady("true"))
	if _, ok := run["confirmed"]; ok {
		t.Errorf("the run under acceptEdits: %v, want it asking", run)
	}
	events.until(t, "session/inputNeededSet")
	events.close()
	q := e.question(t, "edits", "confirmation")
	if !strings.Contains(q["text"].(string), "true") {
		t.Errorf("the session waits on %v, want the run", q)
	}
	if _, err := os.Stat(filepath.Join(e.work, "edited.txt")); err != nil {
		t.Errorf("the write did not run: %v", err)
	}
	e.must(202, "mo", "POST", "/v1/sessions/edits/cancel", nil)

	e.must(201, "mo", "POST", "/v1/sessions", map[string]any{"id": "all", "folder": e.work, "provider": "script",
		"permissions": map[string]any{"mode": "bypass"}})
	events = e.events("mo", "/v1/sessions/all/events")
	if ready := events.next(t); ready.event != "ready" {
		t.Fatalf("first event %v", ready)
	}
	e.must(202, "mo", "POST", "/v1/sessions/all/turns", map[string]any{"input": "write bypassed.txt hi\nrun echo ran", "id": "t1"})
	seen := events.until(t, "chat/turnComplete")
	for _, typ := range seen {
		if typ == "chat/toolCallConfirmed" {
			t.Errorf("a call was confirmed under bypass: %v", seen)
		}
	}
	events.close()
	got := e.must(200, "mo", "GET", "/v1/sessions/all", nil)
	turns, _ := got["turns"].([]any)
	if len(turns) != 1 || turns[0].(map[string]any)["state"] != "complete" {
		t.Fatalf("the bypass session's turns: %v", got["turns"])
	}
	if _, err := os.Stat(filepath.Join(e.work, "bypassed.txt")); err != nil {
		t.Errorf("the write did not run: %v", err)
	}
}

// TestCreateConfigRefused: the session's config is taken as given or
// refused with 400 naming the member: permissions and inputTimeout at the
// top level and in config at once, an unknown config key (with the keys
// the session has), a value that does not fit, and mode.
func TestCreateConfigRefused(t *testing.T) {
	e := newEnv(t)
	base := func(extra map[string]any) map[string]any {
		b := map[string]any{"folder": e.work, "provider": "script"}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	for _, tt := range []struct {
		name  string
		body  map[string]any
		field string
		says  []string
	}{
		{"permissions twice", base(map[string]any{"permissions": map[string]any{"mode": "bypass"}, "config": map[string]any{"permissions": map[string]any{"mode": "ask"}}}),
			"permissions", []string{"permissions is given twice"}},
		{"inputTimeout twice", base(map[string]any{"inputTimeout": "1m", "config": map[string]any{"inputTimeout": "2m"}}),
			"inputTimeout", []string{"inputTimeout is given twice"}},
		{"unknown key", base(map[string]any{"config": map[string]any{"mode": "agent"}}),
			"config", []string{`config: unknown key "mode"`, "isolation", "permissions", "autoApprove", "inputTimeout"}},
		{"bad rule", base(map[string]any{"permissions": map[string]any{"deny": []string{"Bash(git *"}}}),
			"permissions", []string{`config.permissions: deny[0]: "Bash(git *": a glob ends with ")"`}},
		{"misspelt member", base(map[string]any{"permissions": map[string]any{"mode": "ask", "denny": []string{"Bash"}}}),
			"permissions", []string{`member "denny"`}},
		{"bad rule in config", base(map[string]any{"config": map[string]any{"permissions": map[string]any{"mode": "yolo"}}}),
			"permissions", []string{`mode: "yolo" is not ask, acceptEdits or bypass`}},
		{"bad inputTimeout", base(map[string]any{"inputTimeout": "soon"}),
			"inputTimeout", []string{"config.inputTimeout: want a duration"}},
		{"bad isolation", base(map[string]any{"config": map[string]any{"isolation": "elsewhere"}}),
			"config.isolation", []string{"config.isolation: "}},
		{"mode", base(map[string]any{"mode": "agent"}),
			"mode", []string{`{"permissions": {"mode": "acceptEdits"}}`}},
	} {
		status, out := e.call("mo", "POST", "/v1/sessions", tt.body)
		code, field := errCode(out)
		errObj, _ := out["error"].(map[string]any)
		msg, _ := errObj["message"].(string)
		if status != 400 || code != "invalid_request" || field != tt.field {
			t.Errorf("%s: %d %s field %q (%s), want 400 invalid_request field %q", tt.name, status, code, field, msg, tt.field)
		}
		for _, s := range tt.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: the message %q does not say %q", tt.name, msg, s)
			}
		}
	}
	// None of them made a session.
	if ss := e.must(200, "mo", "GET", "/v1/sessions", nil)["sessions"].([]any); len(ss) != 0 {
		t.Errorf("refused requests made sessions: %v", ss)
	}
}

// TestAutomationTemplatePermissions: an automation's session template
// takes config.permissions; one that does not parse is refused when the
// automation is made, not left to its runs to ask for everything.
func TestAutomationTemplatePermissions(t *testing.T) {
	e := newEnv(t)
	def := func(config map[string]any) map[string]any {
		return map[string]any{"definition": map[string]any{
			"title": "t", "message": map[string]any{"text": "say hi", "origin": map[string]any{"kind": "automation"}},
			"session": map[string]any{"provider": "script", "workingDirectories": []string{"file://" + e.work}, "config": config},
			"enabled": true, "triggers": []any{}}}
	}
	for _, tt := range []struct {
		config map[string]any
		field  string
	}{
		{map[string]any{"permissions": map[string]any{"mode": "all"}}, "definition.session.config.permissions"},
		{map[string]any{"inputTimeout": "later"}, "definition.session.config.inputTimeout"},
	} {
		status, out := e.call("mo", "POST", "/v1/automations", def(tt.config))
		if code, field := errCode(out); status != 400 || code != "invalid_request" || field != tt.field {
			t.Errorf("%v: %d %v, want 400 naming %s", tt.config, status, out, tt.field)
		}
	}
	made := e.must(201, "mo", "POST", "/v1/automations", def(map[string]any{"permissions": map[string]any{"mode": "bypass"}, "inputTimeout": "30m"}))
	cfg := made["definition"].(map[string]any)["session"].(map[string]any)["config"].(map[string]any)
	if p, _ := cfg["permissions"].(map[string]any); p["mode"] != "bypass" || cfg["inputTimeout"] != "30m" {
		t.Errorf("the template's config as kept: %v", cfg)
	}
}
