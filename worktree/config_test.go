package worktree

import (
	"encoding/json"
	"reflect"
	"testing"
)

type rawJSON []byte // stands for another library's raw JSON type

func TestPatterns(t *testing.T) {
	cases := []struct {
		in   any
		want []string
		ok   bool
	}{
		{nil, nil, true},
		{".env", []string{".env"}, true},
		{".env\n*.local\r\n\n  \n!keep.local", []string{".env", "*.local", "!keep.local"}, true},
		{"a,b", []string{"a,b"}, true},
		{"", nil, true},
		{[]string{".env", "", "node_modules/"}, []string{".env", "node_modules/"}, true},
		{[]any{".env", "x"}, []string{".env", "x"}, true},
		{[]any{".env", 3.0}, nil, false},
		{[]any{}, nil, true},
		{true, nil, false},
		{map[string]any{"a": "b"}, nil, false},
		{json.RawMessage(`[".env","x"]`), []string{".env", "x"}, true},
		{json.RawMessage(`".env"`), []string{".env"}, true},
		{rawJSON(`[".env"]`), []string{".env"}, true},
		{[]byte(`{"a":1}`), nil, false},
		{[]byte(`not json`), nil, false},
	}
	for _, c := range cases {
		got, ok := Patterns(c.in)
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Patterns(%#v) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestSpecFromConfig(t *testing.T) {
	var cfg map[string]any
	if err := json.Unmarshal([]byte(`{
		"branch": "dev",
		"worktreeBranchPrefix": "agents/",
		"worktreeCreateNewBranch": "false",
		"worktreeBranchTrack": true,
		"worktreeIncludeFiles": ".env\n*.local",
		"worktreeSymlinkFolders": ["node_modules", 7]
	}`), &cfg); err != nil {
		t.Fatal(err)
	}
	got := SpecFromConfig("/repo", "sid", cfg)
	want := Spec{Dir: "/repo", Name: "sid", Branch: "dev", BranchPrefix: "agents/", CheckoutBranch: true, Track: true,
		IncludeFiles: []string{".env", "*.local"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SpecFromConfig = %+v\nwant %+v", got, want)
	}

	// Wrong shapes leave the defaults.
	got = SpecFromConfig("/repo", "sid", map[string]any{"branch": 3, "worktreeCreateNewBranch": "yes", "worktreeBranchTrack": 1})
	if want := (Spec{Dir: "/repo", Name: "sid"}); !reflect.DeepEqual(got, want) {
		t.Errorf("wrong shapes: %+v", got)
	}
}
