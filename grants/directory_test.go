package grants

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestTokenLifecycle(t *testing.T) {
	d := testDirectory(t)
	tok, err := d.IssueToken("bob", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+43 {
		t.Errorf("token %q: want %s and 43 base64url characters", tok, TokenPrefix)
	}
	if p, ok := d.Authenticate(tok); !ok || p != UserPrincipal("bob") {
		t.Fatalf("Authenticate(new token) = %s, %v; want user:bob", p, ok)
	}
	second, err := d.IssueToken("bob", "")
	if err != nil {
		t.Fatal(err)
	}
	if second == tok {
		t.Fatal("two tokens are the same")
	}
	for _, bad := range []string{"", TokenPrefix, tok + "x", strings.ToUpper(tok), tok[:len(tok)-1]} {
		if p, ok := d.Authenticate(bad); ok {
			t.Errorf("Authenticate(altered token) = %s, want refused", p)
		}
	}

	// Revoke by label: that token goes, the other stays.
	if err := d.Revoke("bob", "laptop"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Authenticate(tok); ok {
		t.Error("a revoked token is accepted")
	}
	if _, ok := d.Authenticate(second); !ok {
		t.Error("revoking one token revoked the other")
	}
	// Revoke by id, as Users lists it.
	u, _ := d.Lookup("bob")
	if len(u.Tokens) != 1 {
		t.Fatalf("bob has %d tokens, want 1", len(u.Tokens))
	}
	if err := d.Revoke("bob", u.Tokens[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Authenticate(second); ok {
		t.Error("a token revoked by id is accepted")
	}
	if err := d.Revoke("bob", u.Tokens[0].ID); !errors.Is(err, ErrNoToken) {
		t.Errorf("revoking twice: %v, want ErrNoToken", err)
	}

	// Revoke by the token itself, and RevokeAll.
	third, _ := d.IssueToken("bob", "")
	if err := d.Revoke("bob", third); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Authenticate(third); ok {
		t.Error("a token revoked by itself is accepted")
	}
	fourth, _ := d.IssueToken("bob", "")
	if err := d.RevokeAll("bob"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Authenticate(fourth); ok {
		t.Error("a token is accepted after RevokeAll")
	}

	// Remove takes the user's tokens with them.
	fifth, _ := d.IssueToken("carol", "")
	if err := d.Remove("carol"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Authenticate(fifth); ok {
		t.Error("a removed user's token is accepted")
	}
	if err := d.Remove("carol"); !errors.Is(err, ErrNoUser) {
		t.Errorf("removing twice: %v, want ErrNoUser", err)
	}
	if _, err := d.IssueToken("carol", ""); !errors.Is(err, ErrNoUser) {
		t.Errorf("IssueToken(removed) = %v, want ErrNoUser", err)
	}
	var none *Directory
	if _, ok := none.Authenticate(fifth); ok {
		t.Error("a nil directory authenticated somebody")
	}
}

func TestRevokeAmbiguousLabel(t *testing.T) {
	d := testDirectory(t)
	d.IssueToken("bob", "ci")
	d.IssueToken("bob", "ci")
	if err := d.Revoke("bob", "ci"); err == nil || !strings.Contains(err.Error(), "several") {
		t.Errorf("Revoke(ambiguous label) = %v, want an error saying so", err)
	}
	if err := d.Revoke("bob", ""); !errors.Is(err, ErrNoToken) {
		t.Errorf(`Revoke("") = %v, want ErrNoToken`, err)
	}
}

func TestAddValidates(t *testing.T) {
	d := NewDirectory()
	if err := d.Add("bob", "Bob", Member); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id, name string
		role     Role
		want     string
	}{
		{"bob", "", Member, "already exists"},
		{"", "", Member, "1 to 64"},
		{strings.Repeat("a", 65), "", Member, "1 to 64"},
		{"Bob", "", Member, "only a-z"},
		{"bob smith", "", Member, "only a-z"},
		{"bob/x", "", Member, "only a-z"},
		{"alice", "", "owner", "want admin, member or guest"},
		{"alice", "", "", "want admin, member or guest"},
		{"alice", "line\nbreak", Member, "control characters"},
	}
	for _, tt := range tests {
		err := d.Add(tt.id, tt.name, tt.role)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Add(%q, %q, %q) = %v, want an error containing %q", tt.id, tt.name, tt.role, err, tt.want)
		}
	}
	for _, id := range []string{"a", "a.b-c_d", strings.Repeat("z", 64), "0"} {
		if err := d.Add(id, "", Guest); err != nil {
			t.Errorf("Add(%q) = %v", id, err)
		}
	}
	if err := d.SetMemberships("bob", []Membership{{Team: "t", Project: "p"}, {Team: "t", Project: "p"}}); err == nil {
		t.Error("a membership listed twice was accepted")
	}
	if err := d.SetMemberships("bob", []Membership{{Team: "t/x", Project: "p"}}); err == nil {
		t.Error("a team with a slash was accepted")
	}
	if err := d.SetRole("bob", "root"); err == nil {
		t.Error("SetRole(root) was accepted")
	}
}

func TestUsersHidesHashes(t *testing.T) {
	d := testDirectory(t)
	tok, _ := d.IssueToken("bob", "laptop")
	full := hashToken(tok)
	users := d.Users()
	var ids []string
	for _, u := range users {
		ids = append(ids, u.ID)
	}
	if got := strings.Join(ids, ","); got != "ada,bob,carol,gina" {
		t.Errorf("Users() ids = %s, want sorted", got)
	}
	printed := fmt.Sprintf("%+v %#v", users, users)
	if strings.Contains(printed, full) || strings.Contains(printed, tok) {
		t.Errorf("printing Users() shows a token or its whole hash: %s", printed)
	}
	u, _ := d.Lookup("bob")
	if len(u.Tokens) != 1 || u.Tokens[0].Label != "laptop" || u.Tokens[0].Created.IsZero() || !strings.HasPrefix(full, u.Tokens[0].ID) {
		t.Errorf("bob's tokens = %+v", u.Tokens)
	}
	// A copy: changing it changes nothing.
	u.Memberships = append(u.Memberships, Membership{Team: "x", Project: "y"})
	if again, _ := d.Lookup("bob"); len(again.Memberships) != 0 {
		t.Error("Lookup returned the directory's own slices")
	}
}

func TestRoleAllows(t *testing.T) {
	for _, op := range Operations() {
		if !Admin.Allows(op) || !Member.Allows(op) {
			t.Errorf("admin or member lacks %s", op)
		}
		if got, want := Guest.Allows(op), op.Group() == GroupRead; got != want {
			t.Errorf("Guest.Allows(%s) = %v, want %v", op, got, want)
		}
		if Role("root").Allows(op) {
			t.Errorf("an unknown role is granted %s", op)
		}
	}
	if Member.Allows(HostConfigure) || Guest.Allows(HostConfigure) || !Admin.Allows(HostConfigure) {
		t.Error("HostConfigure must be admin's only")
	}
	if Admin.Allows("") {
		t.Error("admin is granted the zero operation")
	}
}
