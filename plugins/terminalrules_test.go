package plugins

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

func TestSplitCommands(t *testing.T) {
	for _, tc := range []struct {
		line  string
		want  []string
		clear bool
	}{
		{"npm test", []string{"npm test"}, true},
		{"cd src && go test ./... ; ls", []string{"cd src", "go test ./...", "ls"}, true},
		{"git log | head -3 || true", []string{"git log", "head -3", "true"}, true},
		{"echo 'a && b' \"c; d\"", []string{"echo 'a && b' \"c; d\""}, true},
		{"go test 2>&1 | tee", []string{"go test 2>&1", "tee"}, true},
		{"make >/dev/null", []string{"make >/dev/null"}, true},
		{"sleep 1 & echo hi\nls", []string{"sleep 1", "echo hi", "ls"}, true},
		{"echo hi > a.md", nil, false},
		{"echo hi >> a.md", nil, false},
		{"echo $(rm -rf /)", nil, false},
		{"echo `id`", nil, false},
		{"echo \"$(id)\"", nil, false},
		{"diff <(ls a) <(ls b)", nil, false},
		{"echo 'unclosed", nil, false},
		{"echo '$(not run)'", []string{"echo '$(not run)'"}, true},
	} {
		got, clear := SplitCommands(tc.line)
		if clear != tc.clear || !slices.Equal(got, tc.want) {
			t.Errorf("SplitCommands(%q) = %q, %v; want %q, %v", tc.line, got, clear, tc.want, tc.clear)
		}
	}
}

func TestDecideCommand(t *testing.T) {
	rules, err := ParseTerminalRules(jsontext.Value(`{
		"npm test": true, "git status": true, "ls": true, "echo": true,
		"/^git (log|diff)\\b/": true, "rm": false, "/^GO /i": true,
		"git push --force": {"approve": true, "matchCommandLine": true},
		"/--dangerous/": {"approve": false, "matchCommandLine": true},
		"curl": null
	}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line, rule string
		ok         bool
	}{
		{"npm test", "npm test", true},
		{"npm test -- --watch", "npm test", true},
		{"npm testing", "", false},
		{"npm", "", false},
		{"git status && ls -la", "git status", true},
		{"git log --oneline | ls", "/^git (log|diff)\\b/", true},
		{"go build ./...", "/^GO /i", true},
		{"ls && rm -rf x", "", false},
		{"ls && cat x", "", false},
		{"echo hi > out.txt", "", false},
		{"git push --force", "git push --force", true},
		{"git push --force && rm x", "", false},
		{"ls --dangerous", "", false},
		{"curl example.com", "", false},
		{"", "", false},
		{strings.Repeat("ls;", maxCommandBytes), "", false},
	} {
		rule, ok := DecideCommand(rules, tc.line)
		if ok != tc.ok || rule != tc.rule {
			name := tc.line
			if len(name) > 40 {
				name = name[:40]
			}
			t.Errorf("DecideCommand(%q) = %q, %v; want %q, %v", name, rule, ok, tc.rule, tc.ok)
		}
	}
}

// TestUnrunnableRules: VS Code's own defaults hold expressions Go cannot
// run (look-aheads, back references); such a rule approves nothing, and
// one that keeps commands asking keeps asking every command it could
// have matched: those starting with its leading word, or all.
func TestUnrunnableRules(t *testing.T) {
	rules, err := ParseTerminalRules(jsontext.Value(`{
		"yarn": true, "sort": true, "sed": true, "ls": true, "git": true,
		"/^yarn\\s+audit\\b(?!.*\\bfix\\b)/": true,
		"/^sort\\b(?!-)/": false,
		"/^SED\\b.*s(.)x\\1/i": false,
		"/^git (?=push)/q": true
	}`))
	if err != nil {
		t.Fatal(err)
	}
	unrunnable := 0
	for _, r := range rules {
		if r.Unrunnable {
			unrunnable++
		}
	}
	if unrunnable != 4 {
		t.Errorf("%d rules unrunnable, want 4: %+v", unrunnable, rules)
	}
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"yarn audit", true}, // "yarn" approves; the unrunnable rule adds nothing
		{"sort -n x", false}, // kept asking by the sort rule it could be
		{"sed -n 1p", false}, // by the sed rule, case folded
		{"sedate", false},    // no rule approves it
		{"ls -la", true},
		{"git push", true},
	} {
		if _, ok := DecideCommand(rules, tc.line); ok != tc.ok {
			t.Errorf("DecideCommand(%q) = %v, want %v", tc.line, ok, tc.ok)
		}
	}
	rules, err = ParseTerminalRules(jsontext.Value(`{"ls": true, "/(?!x)/": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := DecideCommand(rules, "ls"); ok {
		t.Error("an unrunnable rule that keeps asking with no leading word let a command through")
	}
}

func TestParseTerminalRulesRefuses(t *testing.T) {
	for _, v := range []string{
		`[]`, `{"": true}`, `{"ls": "yes"}`, `{"ls": {"approve": true, "extra": 1}}`, `{"ls": {}}`,
		`{"ls": true, "ls": false}`,
		`{"` + strings.Repeat("x", maxTerminalRuleBytes+1) + `": true}`,
	} {
		if _, err := ParseTerminalRules(jsontext.Value(v)); err == nil {
			t.Errorf("ParseTerminalRules(%.60s) took it", v)
		} else if len(err.Error()) > 300 {
			t.Errorf("the error echoes too much: %d bytes", len(err.Error()))
		}
	}
}

// TestPolicyWithHostRules: the host's rules lie over the session's: its
// deny refuses whatever the session allows, its allow, allowAll and
// terminal rules run what the session leaves open, and a config without
// them decides as before.
func TestPolicyWithHostRules(t *testing.T) {
	dir := t.TempDir()
	session := protocol.Object{ConfigPermissions: jsontext.Value(`{"mode":"ask","allow":["read"]}`)}
	bash := func(cmd string) ToolCall {
		return ToolCall{Name: "Bash", Kind: KindExecute, Input: `{"command":` + protocol.Quote(cmd) + `}`}
	}
	read := ToolCall{Name: "Read", Kind: KindRead, Paths: []string{"a.txt"}}
	fetch := ToolCall{Name: "WebFetch", Kind: KindFetch}
	for _, tc := range []struct {
		name string
		host *HostRules
		call ToolCall
		want Verdict
		rule string
	}{
		{"none: the session's allow", nil, read, Allow, `allow "read"`},
		{"none: asks", nil, bash("npm test"), Ask, ""},
		{"host deny beats the session's allow", &HostRules{Deny: []string{"Read"}}, read, Deny, `host deny "Read"`},
		{"host allow", &HostRules{Allow: []string{"fetch"}}, fetch, Allow, `host allow "fetch"`},
		{"allowAll", &HostRules{AllowAll: true}, bash("rm -rf x"), Allow, "host allowAll"},
		{"allowAll under a host deny", &HostRules{AllowAll: true, Deny: []string{"execute"}}, bash("ls"), Deny, `host deny "execute"`},
		{"terminal approves", &HostRules{Terminal: jsontext.Value(`{"npm test": true}`)}, bash("npm test"), Allow, `host terminal "npm test"`},
		{"terminal leaves others", &HostRules{Terminal: jsontext.Value(`{"npm test": true}`)}, bash("npm publish"), Ask, ""},
		{"terminal only for commands", &HostRules{Terminal: jsontext.Value(`{"npm test": true}`)}, ToolCall{Name: "Write", Kind: KindEdit, Input: `{"command":"npm test"}`}, Ask, ""},
		{"a bad host deny grants nothing", &HostRules{Deny: []string{"Bash("}, AllowAll: true}, read, Ask, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := PolicyOf(WithHostRules(session, tc.host), dir).Decide(tc.call)
			if d.Verdict != tc.want || d.Rule != tc.rule {
				t.Errorf("decided %v %q; want %v %q", d.Verdict, d.Rule, tc.want, tc.rule)
			}
		})
	}
	if _, ok := session[ConfigHostRules]; ok {
		t.Error("WithHostRules changed the config it was given")
	}
	with := WithHostRules(session, &HostRules{AllowAll: true})
	if without := WithHostRules(with, nil); len(without) != len(session) {
		t.Errorf("WithHostRules(nil) left the host's rules in: %v", without)
	}
}
