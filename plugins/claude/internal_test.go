package claude

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

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
		{protocol.Object{ConfigModel: jsontext.Value(`"sonnet"`)}, []string{"--model", "sonnet"}},
		{protocol.Object{ConfigModel: jsontext.Value(`42`)}, nil},
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
