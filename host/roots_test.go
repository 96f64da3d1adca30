package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rootsFixture lays out, in a fresh directory with no symlink above it:
//
//	root/                the allowed root
//	root/sub/
//	root/in-link      -> root/sub
//	root/out-link     -> outside/inner
//	root/dangling     -> nowhere
//	rootc/               a sibling whose name starts with the root's
//	outside/inner/
//	root-link         -> root
//	file                 a plain file
func rootsFixture(t *testing.T) string {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"root/sub", "rootc", "outside/inner"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"root/in-link":  filepath.Join(base, "root/sub"),
		"root/out-link": filepath.Join(base, "outside/inner"),
		"root/dangling": filepath.Join(base, "nowhere"),
		"root-link":     filepath.Join(base, "root"),
	} {
		if err := os.Symlink(target, filepath.Join(base, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return base
}

func TestInRoots(t *testing.T) {
	t.Parallel()
	base := rootsFixture(t)
	// Given through a symlink, the root is its target.
	roots, err := ResolveRoots([]string{filepath.Join(base, "root-link")})
	if err != nil {
		t.Fatal(err)
	}
	at := func(rel string) string { return base + "/" + rel }
	tests := []struct {
		name, path string
		in         bool
		err        string // a part of the error, when there is one
	}{
		{name: "the root itself", path: at("root"), in: true},
		{name: "the root with a trailing slash", path: at("root/"), in: true},
		{name: "inside", path: at("root/sub"), in: true},
		{name: "through the symlinked root", path: at("root-link/sub"), in: true},
		{name: "a symlink that stays inside", path: at("root/in-link"), in: true},
		{name: "not made yet, inside", path: at("root/new/deeper"), in: true},
		{name: "up and down again", path: at("root/sub/../sub"), in: true},
		{name: "outside", path: at("outside"), in: false},
		{name: "the parent of the root", path: base, in: false},
		{name: "the filesystem root", path: "/", in: false},
		{name: "a sibling sharing the root's prefix", path: at("rootc"), in: false},
		{name: "not made yet, in that sibling", path: at("rootc/new"), in: false},
		{name: "a symlink escaping", path: at("root/out-link"), in: false},
		{name: "not made yet, behind an escaping symlink", path: at("root/out-link/new"), in: false},
		{name: "dot-dot out", path: at("root/../outside"), in: false},
		{name: "dot-dot out from a path not made yet", path: at("root/new/../../outside"), in: false},
		// The system takes ".." from the symlink's target: outside/inner/..
		// is outside, though lexically it would be root.
		{name: "dot-dot after an escaping symlink", path: at("root/out-link/.."), in: false},
		{name: "dot-dot after an escaping symlink, not made yet", path: at("root/out-link/../new"), in: false},
		{name: "a symlink to nothing", path: at("root/dangling"), err: "does not exist"},
		{name: "relative", path: "root/sub", err: "not an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, in, err := inRoots(roots, tt.path)
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("inRoots(%s) = %v, %v; want an error saying %q", tt.path, in, err, tt.err)
			case tt.err == "" && err != nil:
				t.Errorf("inRoots(%s): %v", tt.path, err)
			case tt.err == "" && in != tt.in:
				t.Errorf("inRoots(%s) = %v, want %v", tt.path, in, tt.in)
			}
			if err != nil && strings.Contains(err.Error(), base) {
				t.Errorf("the error repeats the path: %v", err)
			}
		})
	}
	if !within("/", "/etc") {
		t.Error("/ as a root does not hold /etc")
	}
}

func TestResolveRoots(t *testing.T) {
	t.Parallel()
	base := rootsFixture(t)
	root := filepath.Join(base, "root")
	tests := []struct {
		name  string
		given []string
		want  []string
		err   string
	}{
		{name: "none", given: nil, want: nil},
		{name: "resolved and without repeats", given: []string{filepath.Join(base, "root-link"), root, filepath.Join(base, "rootc")},
			want: []string{root, filepath.Join(base, "rootc")}},
		{name: "relative", given: []string{"root"}, err: `allowed root "root" is not an absolute path`},
		{name: "missing", given: []string{filepath.Join(base, "nope")}, err: "does not exist"},
		{name: "a file", given: []string{filepath.Join(base, "file")}, err: "is not a directory"},
		{name: "a symlink to nothing", given: []string{filepath.Join(base, "root/dangling")}, err: "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveRoots(tt.given)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("ResolveRoots(%q) = %q, %v; want an error saying %q", tt.given, got, err, tt.err)
				}
				return
			}
			if err != nil || strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("ResolveRoots(%q) = %q, %v; want %q", tt.given, got, err, tt.want)
			}
		})
	}
}
