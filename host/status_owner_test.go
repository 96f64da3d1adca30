package host_test

import (
	"testing"

	"github.com/ahpd/ahpd/host/hosttest"
)

// TestSessionStatusOwner checks that ahpd/sessionStatus answers who owns
// a session, for anybody who may see it, and nothing on a host with no
// users, whose sessions nobody owns.
func TestSessionStatusOwner(t *testing.T) {
	t.Parallel()
	th, tokens := usersHost(t, t.TempDir())
	mo := dialAs(t, th, tokens["mo"], "mo")
	mia := dialAs(t, th, tokens["mia"], "mia")
	f := newFixture(t, th, mo, "owned", "team")
	for who, c := range map[string]*hosttest.Client{"mo": mo, "mia": mia} {
		if got := string(c.MustCall("ahpd/sessionStatus", map[string]any{"channel": f.session})); got != `{"status":"active","owner":"user:mo","sharing":"team"}` {
			t.Errorf("%s asks: %s", who, got)
		}
	}

	open := startHost(t, t.TempDir())
	c := dialAs(t, open, "", "any")
	g := newFixture(t, open, c, "nobodys", "")
	if got := string(c.MustCall("ahpd/sessionStatus", map[string]any{"channel": g.session})); got != `{"status":"active"}` {
		t.Errorf("on a host with no users: %s", got)
	}
}
