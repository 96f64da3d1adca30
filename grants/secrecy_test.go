package grants

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokensNeverShown runs everything that touches a token with a logger
// capturing all output, and checks that no token appears in the log or in
// any error, including errors about a file somebody pasted a token into.
func TestTokensNeverShown(t *testing.T) {
	log, logs := newLogger()
	path := filepath.Join(t.TempDir(), "users.yaml")
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	d := testDirectory(t)
	var tokens []string
	for _, id := range []string{"ada", "bob", "bob", "gina"} {
		tok, err := d.IssueToken(id, "")
		note(err)
		tokens = append(tokens, tok)
	}
	note(d.Save(path))
	live, err := Watch(path, log)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	a := &Authenticator{Host: "h", ConnectionToken: "conn-secret-0123456789abcdef", Users: live}
	for _, tok := range tokens {
		a.Authenticate(tok)
		a.Authenticate(tok + "x")
	}
	pasted := tokens[1]

	// Every way a token may be misplaced.
	_, err = d.IssueToken(pasted, "")
	note(err)
	note(d.Add(pasted, "", Member))
	note(d.Revoke("bob", pasted+"x"))
	note(d.Revoke(pasted, pasted))
	note(d.Remove(pasted))
	_, err = Parse("user:" + pasted)
	note(err)
	_, err = Parse(pasted)
	note(err)
	_, err = ParseRole(pasted)
	note(err)
	_, err = ParseScope(pasted)
	note(err)
	_, err = ParseScope("t/" + pasted)
	note(err)
	note(d.Check(UserPrincipal("bob"), Operation(pasted), Principal{}))
	note(d.SetMemberships("bob", []Membership{{Team: pasted, Project: "p"}}))

	bad := []string{
		"users:\n  - {id: bob, role: member, tokens: [{sha256: " + pasted + "}]}\n",
		"users:\n  - {id: bob, role: member, tokens: [{sha256: " + strings.Repeat("a", 64) + ", created: " + pasted + "}]}\n",
		"users:\n  - {id: bob, role: " + pasted + "}\n",
		"users:\n  - {id: " + pasted + ", role: member}\n",
		"users:\n  - {id: bob, role: member, " + pasted + ": 1}\n",
		"users:\n  - {id: bob, name: " + pasted + ", role: [member]}\n",
		"version: " + pasted + "\n",
		"users:\n  - {id: bob, role: member, memberships: [{team: " + pasted + "/, project: p}]}\n",
		pasted + "\n",
	}
	for i, file := range bad {
		_, err := Decode([]byte(file))
		if err == nil {
			t.Errorf("bad file %d decoded", i)
		}
		note(err)
		// The watcher logs why each file is refused.
		note(os.WriteFile(path, []byte(file), 0o600))
		eventually(t, live, logs, "the watcher logs the bad file", func() bool {
			return strings.Count(logs.String(), "keeping the last good directory") == i+1
		})
		note(live.Reload())
	}
	note(live.Close())

	if len(errs) < len(bad) {
		t.Fatalf("only %d errors collected", len(errs))
	}
	for _, tok := range append(tokens, "conn-secret-0123456789abcdef") {
		secret := tok[len(tok)-20:] // any sizeable piece of it
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log shows a token:\n%s", logs)
		}
		for _, err := range errs {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("an error shows a token: %v", err)
			}
		}
	}
}
