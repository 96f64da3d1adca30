package grants

import (
	"slices"
	"strings"
	"testing"
)

func TestScope(t *testing.T) {
	d := testDirectory(t)
	set := func(id string, ms ...Membership) {
		t.Helper()
		if err := d.SetMemberships(id, ms); err != nil {
			t.Fatal(err)
		}
	}
	set("ada", Membership{Team: "platform", Project: "ahpd", Primary: true}, Membership{Team: "web", Project: "site"})
	set("bob") // none
	set("carol", Membership{Team: "a", Project: "x"}, Membership{Team: "b", Project: "y"})
	set("gina", Membership{Team: "a", Project: "x", Primary: true}, Membership{Team: "b", Project: "y", Primary: true})

	tests := []struct {
		p         Principal
		requested string
		want      string
		wantErr   string
	}{
		{UserPrincipal("ada"), "", "platform/ahpd", ""},
		{UserPrincipal("ada"), "web/site", "web/site", ""},
		{UserPrincipal("ada"), "platform/ahpd", "platform/ahpd", ""},
		{UserPrincipal("ada"), "web/other", "", "user:ada is not a member of web/other"},
		{UserPrincipal("ada"), "web", "", "want team/project"},
		{UserPrincipal("ada"), "a/b/c", "", "only letters"},
		{UserPrincipal("bob"), "", "", "user:bob belongs to no team or project"},
		{UserPrincipal("bob"), "a/x", "", "user:bob is not a member of a/x"},
		{UserPrincipal("carol"), "", "", "user:carol has no primary membership"},
		{UserPrincipal("carol"), "b/y", "b/y", ""},
		{UserPrincipal("gina"), "", "", "user:gina has 2 primary memberships (a/x, b/y)"},
		{UserPrincipal("gina"), "a/x", "a/x", ""},
		{UserPrincipal("zed"), "", "", "user:zed is not in the users directory"},
		{RootPrincipal("h"), "platform/ahpd", "", ""},
		{PluginPrincipal("cron"), "", "", ""},
		{Principal{}, "", "", ""},
	}
	for _, tt := range tests {
		got, err := d.Scope(tt.p, tt.requested)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Scope(%s, %q) = %v", tt.p, tt.requested, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("Scope(%s, %q) = %v, want an error containing %q", tt.p, tt.requested, err, tt.wantErr)
		case got.String() != tt.want:
			t.Errorf("Scope(%s, %q) = %q, want %q", tt.p, tt.requested, got, tt.want)
		}
	}

	var none *Directory
	if s, err := none.Scope(UserPrincipal("ada"), "web/site"); err != nil || !s.IsZero() {
		t.Errorf("no directory: Scope = %v, %v; want nothing charged", s, err)
	}

	if got := d.Memberships(UserPrincipal("ada")); !slices.Equal(got, []Scope{{"platform", "ahpd"}, {"web", "site"}}) {
		t.Errorf("Memberships(ada) = %v", got)
	}
	if got := d.Memberships(UserPrincipal("gina")); len(got) != 2 {
		t.Errorf("Memberships(gina) = %v", got)
	}
	for _, p := range []Principal{RootPrincipal("h"), UserPrincipal("zed"), {}} {
		if got := d.Memberships(p); got != nil {
			t.Errorf("Memberships(%s) = %v, want none", p, got)
		}
	}
	if got := none.Memberships(UserPrincipal("ada")); got != nil {
		t.Errorf("no directory: Memberships = %v", got)
	}
}

func TestParseScope(t *testing.T) {
	for _, s := range []string{"", "t/p", "Team-1/proj.x_y"} {
		got, err := ParseScope(s)
		if err != nil || got.String() != s {
			t.Errorf("ParseScope(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"t", "/p", "t/", "t/p/q", "t p/q", "t/" + strings.Repeat("p", 65)} {
		if got, err := ParseScope(s); err == nil {
			t.Errorf("ParseScope(%q) = %v, want an error", s, got)
		}
	}
}
