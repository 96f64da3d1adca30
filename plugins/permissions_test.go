package plugins_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

func TestParsePermissions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the value encoded again, or the error's words
		ok   bool
	}{
		{`{}`, `{"mode":"ask"}`, true},
		{`{"mode":"acceptEdits"}`, `{"mode":"acceptEdits"}`, true},
		{`{"mode":"bypass","deny":["Bash"," execute "]}`, `{"mode":"bypass","deny":["Bash","execute"]}`, true},
		{`{"allow":["edit(src/**)","*(docs/*.md)","mcp__github__get_issue","read([a-c]?.txt)"]}`, `{"mode":"ask","allow":["edit(src/**)","*(docs/*.md)","mcp__github__get_issue","read([a-c]?.txt)"]}`, true},
		{`{"allow":["shell"]}`, `{"mode":"ask","allow":["shell"]}`, true}, // an unknown tool is no error
		{`[]`, "want an object", false},
		{`"bypass"`, "want an object", false},
		{`{"mode":"yolo"}`, `mode: "yolo" is not ask, acceptEdits or bypass`, false},
		{`{"mode":"ask","denny":["Bash"]}`, `member "denny": not one permissions have`, false},
		{`{"allow":"Bash"}`, `member "allow": not one permissions have (mode, allow, deny), or not of its type`, false},
		{`{"` + strings.Repeat("x", 5000) + `":1}`, "bytes)", false}, // cut short
		{`{"allow":[3]}`, "allow[0]: want a string", false},
		{`{"deny":[""]}`, `deny[0]: "": empty`, false},
		{`{"deny":["Bash(git *"]}`, `a glob ends with ")"`, false},
		{`{"deny":["Bash(git push *)"]}`, "Bash takes no path", false},
		{`{"allow":["execute(**)"]}`, "execute takes no path", false},
		{`{"deny":["(src/**)"]}`, "name a tool or a kind", false},
		{`{"deny":["Bash git"]}`, "cannot be part of a tool name", false},
		{`{"allow":["edit(/etc/**)"]}`, "leave out the leading /", false},
		{`{"allow":["edit(../x)"]}`, `"." and ".."`, false},
		{`{"allow":["edit(./src)"]}`, `"." and ".."`, false},
		{`{"allow":["edit(src//a)"]}`, "empty segment", false},
		{`{"allow":["edit(src/)"]}`, `"src/**" for what is under a folder`, false},
		{`{"allow":["edit(src**)"]}`, "whole segment", false},
		{`{"allow":["edit([a-)"]}`, "syntax error in pattern", false},
		{`{"allow":["edit()"]}`, "empty glob", false},
		{`{"allow":["edit\u0000"]}`, "control character", false},
		{`{"allow":["` + strings.Repeat("a", 600) + `"]}`, "longer than 512 bytes", false},
	} {
		p, err := plugins.ParsePermissions(jsontext.Value(tc.in))
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.ok && string(p.Encode()) != tc.want:
			t.Errorf("%s: read as %s, want %s", tc.in, p.Encode(), tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want one saying %q", tc.in, err, tc.want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: an error of %d bytes", tc.in, len(err.Error()))
		}
	}
}

func TestPermissionsOf(t *testing.T) {
	for _, tc := range []struct {
		config protocol.Object
		want   string
	}{
		{nil, `{"mode":"ask"}`},
		{protocol.Object{"permissions": jsontext.Value(`{"mode":"acceptEdits","deny":["Bash"]}`)}, `{"mode":"acceptEdits","deny":["Bash"]}`},
		// A value that cannot be read asks.
		{protocol.Object{"permissions": jsontext.Value(`{"mode":"bypass","denny":["Bash"]}`)}, `{"mode":"ask"}`},
		// The older key raises the mode to bypass, keeping the lists.
		{protocol.Object{"permissions": jsontext.Value(`{"deny":["Bash"]}`), "autoApprove": jsontext.Value(`"allow"`)}, `{"mode":"bypass","deny":["Bash"]}`},
		{protocol.Object{"autoApprove": jsontext.Value(`true`)}, `{"mode":"bypass"}`},
		{protocol.Object{"autoApprove": jsontext.Value(`"autoApprove"`)}, `{"mode":"bypass"}`},
		{protocol.Object{"autoApprove": jsontext.Value(`"default"`)}, `{"mode":"ask"}`},
		{protocol.Object{"autoApprove": jsontext.Value(`false`)}, `{"mode":"ask"}`},
		{protocol.Object{"autoApprove": jsontext.Value(`"assisted"`)}, `{"mode":"ask"}`},
	} {
		if got := string(plugins.PermissionsOf(tc.config).Encode()); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.config, got, tc.want)
		}
	}
}

// TestDecide checks each mode and rule on calls of each kind, paths
// resolved as the kernel resolves them.
func TestDecide(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	for _, d := range []string{"src/deep", "secrets", "docs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"out":          outside,                         // a folder inside that is outside
		"src/hidden":   filepath.Join(dir, "secrets"),   // a way into secrets by another name
		"src/up":       "../secrets",                    // the same, relative
		"docs/passwd":  "/etc/passwd",                   // a file outside
		"src/deep/dot": "..",                            // "dot/../x" is src/x, not src/deep/x
		"loop":         "loop",                          // never resolves
		"src/new.go":   filepath.Join(dir, "src/n2.go"), // to nothing yet, inside
	}
	for name, dest := range links {
		if err := os.Symlink(dest, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	inbound := filepath.Join(outside, "in")
	if err := os.Symlink(filepath.Join(dir, "src"), inbound); err != nil {
		t.Fatal(err)
	}

	edit := func(paths ...string) plugins.ToolCall {
		return plugins.ToolCall{Name: "Write", Kind: plugins.KindEdit, Paths: paths}
	}
	read := func(paths ...string) plugins.ToolCall {
		return plugins.ToolCall{Name: "Read", Kind: plugins.KindRead, Paths: paths}
	}
	bash := plugins.ToolCall{Name: "Bash", Kind: plugins.KindExecute}
	mcp := plugins.ToolCall{Name: "mcp__github__get_issue"}

	type verdict = plugins.Verdict
	const ask, allow, deny = plugins.Ask, plugins.Allow, plugins.Deny
	for _, tc := range []struct {
		name string
		perm plugins.Permissions
		call plugins.ToolCall
		want verdict
		rule string
	}{
		{"ask asks for an edit", plugins.Permissions{Mode: plugins.ModeAsk}, edit("src/a.go"), ask, ""},
		{"ask asks for a command", plugins.Permissions{}, bash, ask, ""},
		{"acceptEdits allows an edit inside", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit(filepath.Join(dir, "src/a.go")), allow, "mode acceptEdits"},
		{"acceptEdits allows an edit of a file not made yet", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit("src/new/dir/a.go"), allow, "mode acceptEdits"},
		{"acceptEdits asks for a command", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, bash, ask, ""},
		{"acceptEdits asks for a read", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, read("src/a.go"), ask, ""},
		{"acceptEdits asks for an edit with no path", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit(), ask, ""},
		{"acceptEdits asks for an edit outside", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit(filepath.Join(outside, "a")), ask, ""},
		{"acceptEdits asks for an edit through .. ", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit("src/../../x"), ask, ""},
		{"acceptEdits asks for an edit through a link out", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit("out/a.txt"), ask, ""},
		{"acceptEdits asks for an edit of a link to a file outside", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit("docs/passwd"), ask, ""},
		{"acceptEdits allows a path outside that lands inside", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit(filepath.Join(inbound, "a.go")), allow, "mode acceptEdits"},
		{"acceptEdits asks when one of two paths is outside", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit("src/a.go", filepath.Join(outside, "b")), ask, ""},
		{"acceptEdits asks for a path that never resolves", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, edit("loop/a"), ask, ""},
		{"acceptEdits asks for the folder itself", plugins.Permissions{Mode: plugins.ModeAcceptEdits}, plugins.ToolCall{Kind: plugins.KindDelete, Paths: []string{"."}}, ask, ""},
		{"bypass allows a command", plugins.Permissions{Mode: plugins.ModeBypass}, bash, allow, "mode bypass"},
		{"bypass allows an edit outside", plugins.Permissions{Mode: plugins.ModeBypass}, edit("/etc/x"), allow, "mode bypass"},
		{"deny wins over bypass", plugins.Permissions{Mode: plugins.ModeBypass, Deny: []string{"execute"}}, bash, deny, `deny "execute"`},
		{"deny wins over allow", plugins.Permissions{Allow: []string{"Bash"}, Deny: []string{"bash"}}, bash, deny, `deny "bash"`},
		{"deny by kind wins over acceptEdits", plugins.Permissions{Mode: plugins.ModeAcceptEdits, Deny: []string{"edit(secrets/**)"}}, edit("secrets/key"), deny, `deny "edit(secrets/**)"`},
		{"deny sees through a link", plugins.Permissions{Mode: plugins.ModeBypass, Deny: []string{"*(secrets/**)"}}, read("src/hidden/key"), deny, `deny "*(secrets/**)"`},
		{"deny sees through a relative link", plugins.Permissions{Mode: plugins.ModeBypass, Deny: []string{"*(secrets/**)"}}, read("src/up/key"), deny, `deny "*(secrets/**)"`},
		// "src/deep/dot/../x" is x to the kernel, src/deep/x cleaned first.
		{"deny takes .. after a link as the kernel does", plugins.Permissions{Mode: plugins.ModeBypass, Deny: []string{"edit(x)"}}, edit("src/deep/dot/../x"), deny, `deny "edit(x)"`},
		{"deny takes .. after a link as cleaned", plugins.Permissions{Mode: plugins.ModeBypass, Deny: []string{"edit(src/deep/x)"}}, edit("src/deep/dot/../x"), deny, `deny "edit(src/deep/x)"`},
		{"allow takes .. both ways", plugins.Permissions{Allow: []string{"edit(src/**)"}}, edit("src/deep/dot/../x"), ask, ""},
		{"allow takes .. both ways (2)", plugins.Permissions{Allow: []string{"edit(**)"}}, edit("src/deep/dot/../x"), allow, `allow "edit(**)"`},
		{"deny glob passes another path", plugins.Permissions{Mode: plugins.ModeBypass, Deny: []string{"edit(secrets/**)"}}, edit("src/a.go"), allow, "mode bypass"},
		{"a deny glob that cannot be checked asks", plugins.Permissions{Mode: plugins.ModeBypass, Deny: []string{"edit(secrets/**)"}}, edit("loop/x"), ask, ""},
		{"allow by name", plugins.Permissions{Allow: []string{"mcp__github__get_issue"}}, mcp, allow, `allow "mcp__github__get_issue"`},
		{"allow by kind, any case", plugins.Permissions{Allow: []string{"EXECUTE"}}, bash, allow, `allow "EXECUTE"`},
		{"allow a glob", plugins.Permissions{Allow: []string{"edit(src/**/*.go)"}}, edit("src/deep/a.go"), allow, `allow "edit(src/**/*.go)"`},
		{"** takes no segment too", plugins.Permissions{Allow: []string{"edit(src/**/*.go)"}}, edit("src/a.go"), allow, `allow "edit(src/**/*.go)"`},
		{"allow a glob: another file", plugins.Permissions{Allow: []string{"edit(src/**/*.go)"}}, edit("src/a.txt"), ask, ""},
		{"allow a glob: not through a link out", plugins.Permissions{Allow: []string{"*(**)"}}, edit("out/a"), ask, ""},
		{"allow a glob: a call with no path", plugins.Permissions{Allow: []string{"*(**)"}}, bash, ask, ""},
		{"allow a glob: every path must match", plugins.Permissions{Allow: []string{"read(docs/*)"}}, read("docs/a", "src/b"), ask, ""},
		{"allow a glob: a link to where it matches", plugins.Permissions{Allow: []string{"read(secrets/*)"}}, read("src/hidden/key"), allow, `allow "read(secrets/*)"`},
		{"the star names any tool", plugins.Permissions{Allow: []string{"*"}}, mcp, allow, `allow "*"`},
		{"an unknown tool in a list decides nothing", plugins.Permissions{Allow: []string{"shell"}}, bash, ask, ""},
		{"a rule that cannot be read keeps allow from allowing", plugins.Permissions{Mode: plugins.ModeBypass, Allow: []string{"Bash"}, Deny: []string{"edit("}}, bash, ask, ""},
	} {
		got := plugins.NewPolicy(tc.perm, dir).Decide(tc.call)
		if got.Verdict != tc.want || got.Rule != tc.rule {
			t.Errorf("%s: %+v, want %v %q", tc.name, got, tc.want, tc.rule)
		}
	}
	if d := (*plugins.Policy)(nil).Decide(bash); d.Verdict != plugins.Ask {
		t.Errorf("a nil policy: %+v", d)
	}
}

func TestInputTimeoutOf(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{`"10m"`, 10 * time.Minute, true},
		{`"1h30m"`, 90 * time.Minute, true},
		{`90`, 90 * time.Second, true},
		{`"0"`, 0, true},
		{`0`, 0, true},
		{`""`, 0, true},
		{`"500ms"`, 0, false},
		{`"-1m"`, 0, false},
		{`-5`, 0, false},
		{`"soon"`, 0, false},
		{`"9999h"`, 0, false},
		{`true`, 0, false},
	} {
		d, ok := plugins.InputTimeoutOf(jsontext.Value(tc.in))
		if d != tc.want || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.in, d, ok, tc.want, tc.ok)
		}
	}
	for d, want := range map[time.Duration]string{10 * time.Minute: "10m", 90 * time.Minute: "1h30m", 2 * time.Hour: "2h", 45 * time.Second: "45s", 90 * time.Second: "1m30s"} {
		if got := plugins.FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestSessionRule: the rule "allow in this session" adds for each
// backend's calls, and what the permissions grown by it allow next: the
// tool anywhere in the folder for a call that touches paths, the tool
// whole for one that touches none, and nothing for a call no rule could
// allow as the person saw it.
func TestSessionRule(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop", filepath.Join(dir, "loop")); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	call := func(name, kind string, paths ...string) plugins.ToolCall {
		return plugins.ToolCall{ID: "c", Name: name, Kind: kind, Paths: paths}
	}
	for _, tc := range []struct {
		name string
		perm plugins.Permissions
		call plugins.ToolCall
		rule string
		// next are calls the grown permissions allow; notNext, calls
		// they still ask about.
		next, notNext []plugins.ToolCall
	}{
		{"script write", plugins.Permissions{}, call("write", plugins.KindEdit, in("a.txt")), "write(**)",
			[]plugins.ToolCall{call("write", plugins.KindEdit, in("b/c.txt"))},
			[]plugins.ToolCall{call("write", plugins.KindEdit, filepath.Join(outside, "a.txt")), call("run", plugins.KindExecute)}},
		{"script run", plugins.Permissions{}, call("run", plugins.KindExecute), "run",
			[]plugins.ToolCall{call("run", plugins.KindExecute)}, []plugins.ToolCall{call("write", plugins.KindEdit, in("a.txt"))}},
		{"Claude's Write", plugins.Permissions{Mode: plugins.ModeAsk, Deny: []string{"edit(secrets/**)"}}, call("Write", plugins.KindEdit, in("a.txt")), "Write(**)",
			[]plugins.ToolCall{call("Write", plugins.KindEdit, "src/x.go")},
			[]plugins.ToolCall{call("Edit", plugins.KindEdit, in("a.txt")), call("Write", plugins.KindEdit, "out/x")}},
		{"Claude's Bash", plugins.Permissions{}, call("Bash", plugins.KindExecute), "Bash",
			[]plugins.ToolCall{call("Bash", plugins.KindExecute)}, []plugins.ToolCall{call("BashOutput", plugins.KindExecute)}},
		{"an MCP tool", plugins.Permissions{}, call("mcp__github__create_issue", plugins.KindOther), "mcp__github__create_issue", nil, nil},
		{"an ACP edit", plugins.Permissions{}, call("edit", "edit", "a.txt", "b.txt"), "edit(**)",
			[]plugins.ToolCall{call("edit", "edit", "c.txt")}, []plugins.ToolCall{call("edit", "edit")}},
		{"an ACP command", plugins.Permissions{}, call("execute", "execute"), "execute", nil, nil},
		{"a write outside the folder", plugins.Permissions{}, call("Write", plugins.KindEdit, filepath.Join(outside, "a")), "", nil, nil},
		{"a write through a link out", plugins.Permissions{}, call("Write", plugins.KindEdit, "out/a"), "", nil, nil},
		{"one of two paths outside", plugins.Permissions{}, call("edit", "edit", "a", filepath.Join(outside, "b")), "", nil, nil},
		{"an edit that names no path", plugins.Permissions{}, call("Edit", plugins.KindEdit), "", nil, nil},
		{"a read that names no path", plugins.Permissions{}, call("Read", plugins.KindRead), "", nil, nil},
		{"a name no rule can hold", plugins.Permissions{}, call("Write file", plugins.KindEdit, "a"), "", nil, nil},
		{"a deny glob that cannot be checked", plugins.Permissions{Deny: []string{"edit(secrets/**)"}}, call("Write", plugins.KindEdit, "loop/a"), "", nil, nil},
		{"a full allow list", plugins.Permissions{Allow: fullList()}, call("Bash", plugins.KindExecute), "", nil, nil},
	} {
		pol := plugins.NewPolicy(tc.perm, dir)
		rule := pol.SessionRule(tc.call)
		if rule != tc.rule {
			t.Errorf("%s: rule %q, want %q", tc.name, rule, tc.rule)
			continue
		}
		if rule == "" {
			continue
		}
		grown, ok := tc.perm.WithAllow(rule)
		if !ok || grown.Validate() != nil {
			t.Fatalf("%s: %q not added: %+v", tc.name, rule, grown)
		}
		g := plugins.NewPolicy(grown, dir)
		for _, c := range append([]plugins.ToolCall{tc.call}, tc.next...) {
			if d := g.Decide(c); d.Verdict != plugins.Allow || d.Rule != "allow "+protocol.Quote(rule) {
				t.Errorf("%s: %+v after the rule: %+v", tc.name, c, d)
			}
		}
		for _, c := range tc.notNext {
			if d := g.Decide(c); d.Verdict != plugins.Ask {
				t.Errorf("%s: %+v after the rule: %+v, want it asked", tc.name, c, d)
			}
		}
	}
	if r := (*plugins.Policy)(nil).SessionRule(call("Bash", plugins.KindExecute)); r != "" {
		t.Errorf("a nil policy: %q", r)
	}

	// WithAllow adds a rule once, and never to a full list or a bad one.
	p := plugins.Permissions{Mode: plugins.ModeAcceptEdits, Allow: []string{"Bash"}}
	if got, ok := p.WithAllow(" Write(**) "); !ok || string(got.Encode()) != `{"mode":"acceptEdits","allow":["Bash","Write(**)"]}` {
		t.Errorf("added: %s %v", got.Encode(), ok)
	}
	if len(p.Allow) != 1 {
		t.Errorf("WithAllow changed the list it was given: %q", p.Allow)
	}
	for _, r := range []string{"Bash", "Bash(x)", ""} {
		if got, ok := p.WithAllow(r); ok || len(got.Allow) != 1 {
			t.Errorf("%q added: %q", r, got.Allow)
		}
	}
	if _, ok := (plugins.Permissions{Allow: fullList()}).WithAllow("Bash"); ok {
		t.Error("added to a full list")
	}
}

func fullList() []string {
	list := make([]string, 256)
	for i := range list {
		list[i] = fmt.Sprintf("tool%d", i)
	}
	return list
}
