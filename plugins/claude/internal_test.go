package claude

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

func TestProjectDirName(t *testing.T) {
	// The expected names are what the CLI's own function gives (run in
	// node on the CLI's code): every UTF-16 code unit that is not an
	// ASCII letter or digit becomes '-', and a long name is cut at 200
	// with a hash of the path added.
	long := "/home/user/" + strings.Repeat("very-long-directory-name/", 10) + "projekt-ü-😀"
	for path, want := range map[string]string{
		"/tmp/a b/ü😀.x": "-tmp-a-b-----x",
		"/work/main":    "-work-main",
		long:            "-home-user-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-dire-5xowkt",
	} {
		if got := projectDirName(path); got != want {
			t.Errorf("projectDirName(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestSessionID(t *testing.T) {
	const id = "0F6C2E5A-1B2C-4D3E-8F40-123456789ABC"
	if got := SessionID(id); got != strings.ToLower(id) {
		t.Errorf("SessionID(%q) = %q", id, got)
	}
	derived := SessionID("conv-1")
	if !isUUID(derived) || derived[14] != '5' || !strings.ContainsRune("89ab", rune(derived[19])) {
		t.Errorf("SessionID(conv-1) = %q, not a version 5 UUID", derived)
	}
	if SessionID("conv-1") != derived || SessionID("conv-2") == derived {
		t.Error("derived session ids are not stable and distinct")
	}
	for _, s := range []string{"", "not-a-uuid", "0f6c2e5a-1b2c-4d3e-8f40-123456789abg", "0f6c2e5a11b2c-4d3e-8f40-123456789abc"} {
		if isUUID(s) {
			t.Errorf("isUUID(%q) = true", s)
		}
	}
}

func TestConfigArgs(t *testing.T) {
	for _, c := range []struct {
		config protocol.Object
		want   []string
	}{
		{nil, nil},
		{protocol.Object{ConfigModel: jsontext.Value(`"default"`), ConfigPermissionMode: jsontext.Value(`"default"`)}, nil},
		// The model is no restart's business: the agent switches it.
		{protocol.Object{ConfigModel: jsontext.Value(`"sonnet"`)}, nil},
		{protocol.Object{ConfigPermissionMode: jsontext.Value(`"plan"`)}, []string{"--permission-mode", "plan"}},
		// An unknown mode must not grant more than the default.
		{protocol.Object{ConfigPermissionMode: jsontext.Value(`"yolo"`)}, nil},
		{protocol.Object{
			ConfigAllowedTools:    jsontext.Value(`["Bash(git log:*)", "", "--evil", "Edit"]`),
			ConfigDisallowedTools: jsontext.Value(`["WebFetch"]`),
		}, []string{"--allowedTools", "Bash(git log:*)", "Edit", "--disallowedTools", "WebFetch"}},
		{protocol.Object{ConfigAllowedTools: jsontext.Value(`"Bash"`)}, nil},
	} {
		if got := configArgs(c.config); !slices.Equal(got, c.want) {
			t.Errorf("configArgs(%v) = %q, want %q", c.config, got, c.want)
		}
	}
}

func TestDescribeTool(t *testing.T) {
	for _, c := range []struct {
		name, input string
		want        toolText
	}{
		{"Write", `{"file_path":"/w/dir/a.txt","content":"x"}`, toolText{"Write file", "Write `a.txt`", "Wrote `a.txt`"}},
		{"Edit", `{"file_path":"/elsewhere/b.go"}`, toolText{"Edit file", "Edit `/elsewhere/b.go`", "Edited `/elsewhere/b.go`"}},
		{"Bash", `{"command":"echo ` + "`hi`" + `\nls"}`, toolText{"Run command", "Run ``echo `hi`…``", "Ran ``echo `hi`…``"}},
		{"Write", ``, toolText{"Write file", "Write a file", "Wrote a file"}},
		{"mcp__github__create_issue", `{}`, toolText{"github: create_issue", "Use `github: create_issue`", "Used `github: create_issue`"}},
	} {
		if got := describeTool(c.name, jsontext.Value(c.input), "/w/dir"); got != c.want {
			t.Errorf("describeTool(%s, %s) = %+v, want %+v", c.name, c.input, got, c.want)
		}
	}
}

func TestCLIArgsOfPermissions(t *testing.T) {
	perm := func(v string) protocol.Object { return protocol.Object{"permissions": jsontext.Value(v)} }
	for _, c := range []struct {
		config protocol.Object
		want   []string
	}{
		// The modes are ahpd's: the CLI stays in its own default.
		{perm(`{"mode":"bypass"}`), nil},
		{perm(`{"mode":"acceptEdits","allow":["Bash"]}`), nil},
		// "Read" is the kind read too, as the policy matches it.
		{perm(`{"deny":["execute","Read","mcp__github__delete_repo","some.tool"]}`),
			[]string{"--disallowedTools", "Bash", "BashOutput", "KillBash", "KillShell", "LS", "NotebookRead", "Read", "mcp__github__delete_repo"}},
		{perm(`{"deny":["fetch","webfetch"]}`), []string{"--disallowedTools", "WebFetch", "WebSearch"}},
		// A glob on reading is the CLI's Read rule on that path, both ways
		// the folder is named; one on editing is the policy's alone.
		{perm(`{"deny":["read(secrets/**)","edit(src/**)"]}`), []string{"--disallowedTools", "Read(//w/link/secrets/**)", "Read(//w/real/secrets/**)"}},
		// The backend's own list and the rules make one.
		{protocol.Object{ConfigDisallowedTools: jsontext.Value(`["WebFetch"]`), "permissions": jsontext.Value(`{"deny":["Bash"]}`)},
			[]string{"--disallowedTools", "WebFetch", "Bash"}},
		// A value that cannot be read denies nothing here, and the policy
		// asks for everything.
		{perm(`{"deny":["Bash"],"bad":1}`), nil},
	} {
		a := &Agent{config: c.config, conv: plugins.Conversation{Dir: "/w/link"}, realDir: "/w/real"}
		if got := a.cliArgs(); !slices.Equal(got, c.want) {
			t.Errorf("cliArgs(%v) = %q, want %q", c.config, got, c.want)
		}
	}
}

func TestToolKind(t *testing.T) {
	for _, c := range []struct {
		name, input string
		kind        string
		paths       []string
	}{
		{"Write", `{"file_path":"/w/a.txt","content":"x"}`, plugins.KindEdit, []string{"/w/a.txt"}},
		{"NotebookEdit", `{"notebook_path":"n.ipynb"}`, plugins.KindEdit, []string{"n.ipynb"}},
		{"Read", `{"file_path":"/w/b"}`, plugins.KindRead, []string{"/w/b"}},
		{"Grep", `{"pattern":"x"}`, plugins.KindSearch, []string{"."}},
		{"Glob", `{"pattern":"*.go","path":"/w/src"}`, plugins.KindSearch, []string{"/w/src"}},
		{"Bash", `{"command":"ls"}`, plugins.KindExecute, nil},
		{"WebFetch", `{"url":"https://x"}`, plugins.KindFetch, nil},
		{"Write", ``, plugins.KindEdit, nil},
		{"mcp__github__create_issue", `{}`, plugins.KindOther, nil},
	} {
		kind, paths := toolKind(c.name, jsontext.Value(c.input))
		if kind != c.kind || !slices.Equal(paths, c.paths) {
			t.Errorf("toolKind(%s, %s) = %s %q, want %s %q", c.name, c.input, kind, paths, c.kind, c.paths)
		}
	}
}
