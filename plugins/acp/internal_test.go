package acp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

func TestLineRange(t *testing.T) {
	const content = "a\nb\nc\n"
	for _, tt := range []struct {
		line, limit *int
		want        string
	}{
		{nil, nil, content},
		{new(2), nil, "b\nc\n"},
		{new(2), new(1), "b\n"},
		{nil, new(2), "a\nb\n"},
		{new(4), nil, ""},
		{new(1), new(0), ""},
	} {
		got, err := lineRange(content, tt.line, tt.limit)
		if err != nil || got != tt.want {
			t.Errorf("lineRange(%v, %v) = %q, %v; want %q", tt.line, tt.limit, got, err, tt.want)
		}
	}
	if _, err := lineRange(content, new(0), nil); err == nil {
		t.Error("line 0 was accepted")
	}
	if got, _ := lineRange("no newline", new(1), new(1)); got != "no newline" {
		t.Errorf("last line without newline: %q", got)
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "in"))
	c, err := newClient(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.root.Close()
	for path, want := range map[string]string{
		filepath.Join(dir, "a.txt"):           "a.txt",
		"rel/b.txt":                           filepath.Join("rel", "b.txt"),
		filepath.Join(dir, "in", "c.txt"):     filepath.Join("sub", "c.txt"),
		filepath.Join(dir, "new", "dir", "d"): filepath.Join("new", "dir", "d"),
		dir:                                   ".",
	} {
		if got, err := c.resolve(path); err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	for _, path := range []string{
		filepath.Join(dir, "..", "x"),
		"../x",
		filepath.Join(outside, "x"),
		filepath.Join(dir, "out", "x"),
		"/",
		"",
	} {
		if got, err := c.resolve(path); err == nil {
			t.Errorf("resolve(%q) = %q, want it refused", path, got)
		} else if re, ok := err.(*sdk.RequestError); !ok || re.Code != -32602 {
			t.Errorf("resolve(%q): %v, want an invalid params error", path, err)
		}
	}
}

func TestUpdateKindOfUnknownKind(t *testing.T) {
	var u sdk.SessionUpdate
	raw := `{"sessionUpdate":"mystery_kind","content":{"type":"text","text":"x"}}`
	if err := json.Unmarshal([]byte(raw), &u); err != nil {
		t.Fatal(err)
	}
	if got := updateKind(u); got != "mystery_kind" {
		t.Errorf("updateKind = %q", got)
	}
}

func TestPickOption(t *testing.T) {
	opts := []sdk.PermissionOption{
		{Kind: sdk.PermissionOptionKindRejectAlways, OptionId: "never"},
		{Kind: sdk.PermissionOptionKindAllowAlways, OptionId: "always"},
	}
	if id, ok := pickOption(opts, true); !ok || id != "always" {
		t.Errorf("allow: %q, %v", id, ok)
	}
	if id, ok := pickOption(opts, false); !ok || id != "never" {
		t.Errorf("reject: %q, %v", id, ok)
	}
	if _, ok := pickOption(opts[:1], true); ok {
		t.Error("an allow option was found among rejections")
	}
}
