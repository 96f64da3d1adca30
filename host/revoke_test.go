package host_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestRevocationCutsConnections edits the users file under a running host:
// a connection whose token was revoked, or whose user was removed, is
// closed with the reason and its token refused from then on, while every
// other connection, a lowered role's included, stays open.
func TestRevocationCutsConnections(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.yaml")
	d := grants.NewDirectory()
	for _, u := range []struct {
		id   string
		role grants.Role
	}{{"mo", grants.Member}, {"mia", grants.Member}, {"zed", grants.Member}} {
		if err := d.Add(u.id, u.id, u.role); err != nil {
			t.Fatal(err)
		}
		if err := d.SetMemberships(u.id, []grants.Membership{{Team: "core", Project: "ahpd", Primary: true}}); err != nil {
			t.Fatal(err)
		}
	}
	issue := func(id, label string) string {
		tok, err := d.IssueToken(id, label)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	laptop, desk, mia, zed := issue("mo", "laptop"), issue("mo", "desk"), issue("mia", ""), issue("zed", "")
	save := func() {
		t.Helper()
		if err := d.Save(path); err != nil {
			t.Fatal(err)
		}
	}
	save()
	live, err := grants.Watch(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Close() })
	th := startHost(t, "", func(o *host.Options) {
		o.Auth = &grants.Authenticator{Host: "test", ConnectionToken: "root-token", Users: live}
	})
	conns := map[string]*hosttest.Client{}
	for name, tok := range map[string]string{"laptop": laptop, "desk": desk, "mia": mia, "zed": zed, "root": "root-token"} {
		conns[name] = dialAs(t, th, tok, name)
	}
	// cut waits for the host to close a connection and checks why.
	cut := func(name, why string) {
		t.Helper()
		c := conns[name]
		select {
		case <-c.Done():
		case <-time.After(hosttest.Timeout):
			t.Fatalf("%s's connection is still open", name)
		}
		var ce websocket.CloseError
		if !errors.As(c.Err(), &ce) || !strings.Contains(ce.Reason, why) {
			t.Errorf("%s's connection ended with %v, want a close saying %q", name, c.Err(), why)
		}
	}
	refused := func(name, tok string) {
		t.Helper()
		if c, err := hosttest.DialErr(t, th.url+"?tkn="+tok); err == nil || !strings.Contains(err.Error(), "401") {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s's token after the change: %v, want HTTP 401", name, err)
		}
	}

	if err := d.Revoke("mo", "laptop"); err != nil {
		t.Fatal(err)
	}
	save()
	cut("laptop", "user:mo: the connection's token was revoked")
	refused("laptop", laptop)

	// Removing a user and lowering another's role, in one change.
	if err := d.Remove("mia"); err != nil {
		t.Fatal(err)
	}
	if err := d.SetRole("mo", grants.Guest); err != nil {
		t.Fatal(err)
	}
	save()
	cut("mia", "user:mia: the connection's user was removed from the users directory")
	refused("mia", mia)

	// Changes are rechecked one after another: once zed's is cut, the
	// earlier ones are done with, and what stayed open stays.
	if err := d.RevokeAll("zed"); err != nil {
		t.Fatal(err)
	}
	save()
	cut("zed", "token was revoked")
	for _, name := range []string{"desk", "root"} {
		if _, err := conns[name].Call("ping", map[string]any{}); err != nil {
			t.Errorf("%s's connection after others were cut: %v", name, err)
		}
	}
	// mo's desk connection acts with the role mo has now.
	_, rpcErr := conns["desk"].Call("createSession", map[string]any{"channel": "ahp-session:/after", "provider": "script"})
	if rpcErr == nil || rpcErr.Code != -32009 {
		t.Errorf("createSession as mo, lowered to guest: %v, want -32009", rpcErr)
	}
	conns["desk"].Subscribe(protocol.RootURI)
}
