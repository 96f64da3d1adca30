package grants

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	d, err := LoadFile(path)
	if err != nil {
		t.Fatalf("LoadFile(missing) = %v, want an empty directory", err)
	}
	if len(d.Users()) != 0 {
		t.Fatal("a missing file has users")
	}
	d = testDirectory(t)
	if err := d.SetMemberships("bob", []Membership{{Team: "platform", Project: "ahpd", Primary: true}, {Team: "web", Project: "site"}}); err != nil {
		t.Fatal(err)
	}
	tok, _ := d.IssueToken("bob", "laptop")
	d.IssueToken("bob", "")
	if err := d.Save(path); err != nil {
		t.Fatal(err)
	}

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), tok) {
		t.Error("the file holds a token")
	}
	if !strings.Contains(string(data), hashToken(tok)) {
		t.Errorf("the file lacks the token's hash:\n%s", data)
	}

	back, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Users(), d.Users()) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back.Users(), d.Users())
	}
	if p, ok := back.Authenticate(tok); !ok || p != UserPrincipal("bob") {
		t.Error("the token does not authenticate after a round trip")
	}
	again, _ := back.Encode()
	if string(again) != string(data) {
		t.Errorf("encoding is not stable:\n%s\n---\n%s", data, again)
	}
}

func TestSaveIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.yaml")
	// A file that was readable by all is replaced by one that is not,
	// and nothing is left beside it.
	if err := os.WriteFile(path, []byte("users: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	d := testDirectory(t)
	if err := d.Save(path); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if os.SameFile(before, after) {
		t.Error("Save wrote the file in place; want a new file renamed over it")
	}
	if after.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", after.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want only users.yaml", names)
	}
	// A failed save leaves the old file and no temporary one.
	if err := d.Save(filepath.Join(dir, "missing", "users.yaml")); err == nil {
		t.Error("Save into a missing directory succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a failed save left %d entries", len(entries))
	}
}

func TestDecode(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tests := []struct {
		name, file, wantErr string
	}{
		{"empty", "", ""},
		{"comments only", "# nobody yet\n", ""},
		{"no version", "users:\n  - id: bob\n    role: member\n", ""},
		{"full", `version: 1
users:
  - id: bob
    name: Bob
    role: member
    memberships:
      - {team: t, project: p, primary: true}
      - {team: t, project: q, primary: true}
    tokens:
      - sha256: ` + hash + `
        created: 2025-06-01T09:30:00Z
        label: laptop
`, ""},
		{"newer version", "version: 2\nusers: []\n", "version 2"},
		{"unknown key", "users:\n  - id: bob\n    role: member\n    rol: admin\n", "field rol not found"},
		{"bad id", "users:\n  - id: Bob\n    role: member\n", "only a-z"},
		{"duplicate id", "users:\n  - {id: bob, role: member}\n  - {id: bob, role: guest}\n", "listed twice"},
		{"bad role", "users:\n  - {id: bob, role: boss}\n", "want admin, member or guest"},
		{"no role", "users:\n  - {id: bob}\n", "want admin, member or guest"},
		{"bad hash", "users:\n  - {id: bob, role: member, tokens: [{sha256: abc}]}\n", "64 lower-case hex"},
		{"upper-case hash", "users:\n  - {id: bob, role: member, tokens: [{sha256: " + strings.ToUpper(hash) + "}]}\n", "64 lower-case hex"},
		{"shared hash", "users:\n  - {id: bob, role: member, tokens: [{sha256: " + hash + "}]}\n  - {id: eve, role: member, tokens: [{sha256: " + hash + "}]}\n", "listed twice"},
		{"bad membership", "users:\n  - {id: bob, role: member, memberships: [{team: '', project: p}]}\n", "team"},
		{"not yaml", "users: [\n", "yaml"},
		{"two documents", "users: []\n---\nusers: []\n", "one YAML document"},
		{"wrong shape", "users: {bob: member}\n", "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.file))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Decode = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Decode = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadFileNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	os.WriteFile(path, []byte("users: [\n"), 0o600)
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadFile(malformed) = %v, want an error naming %s", err, path)
	}
	if _, err := LoadFile(t.TempDir()); err == nil {
		t.Error("LoadFile(a directory) succeeded")
	}
}
