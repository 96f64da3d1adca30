package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// ahpdUser runs `ahpd user args... --users file` and returns its stdout
// lines, failing the test unless it exits with want.
// moAndGus writes a users directory with mo, a member of core/ahpd, and
// gus, a guest, and returns its path and their tokens.
func moAndGus(t *testing.T, e *env) (users, mo, gus string) {
	t.Helper()
	users = filepath.Join(e.root, "users.yaml")
	ahpdUser(t, e, users, 0, "add", "mo", "--role", "member", "--scope", "core/ahpd")
	ahpdUser(t, e, users, 0, "add", "gus", "--role", "guest")
	return users, ahpdUser(t, e, users, 0, "token", "mo")[0], ahpdUser(t, e, users, 0, "token", "gus")[0]
}

func ahpdUser(t *testing.T, e *env, users string, want int, args ...string) []string {
	t.Helper()
	p := launch(t, e, 0, append(append([]string{"user"}, args...), "--users", users)...)
	if code := p.wait(exitTimeout); code != want {
		t.Fatalf("ahpd user %s: exit status %d, want %d; stderr:\n%s", strings.Join(args, " "), code, want, p.stderr.String())
	}
	return p.stdoutLines()
}

// TestUserCommands manages a users directory from the command line: the
// token is printed once and only its hash is kept.
func TestUserCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	users := filepath.Join(e.root, "users.yaml")
	ahpdUser(t, e, users, 0, "add", "ada", "--role", "admin", "--name", "Ada L", "--scope", "core/ahpd", "--scope", "core/docs")
	ahpdUser(t, e, users, 0, "add", "gus", "--role", "guest")
	out := ahpdUser(t, e, users, 0, "token", "ada", "--label", "laptop")
	if len(out) != 1 || !strings.HasPrefix(out[0], grants.TokenPrefix) {
		t.Fatalf("token printed %q, want one line with the token", out)
	}
	token := out[0]
	data, err := os.ReadFile(users)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), token) {
		t.Errorf("the users file holds the token itself:\n%s", data)
	}
	if fi, err := os.Stat(users); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("the users file is readable by others: %v %v", fi.Mode(), err)
	}

	list := strings.Join(ahpdUser(t, e, users, 0, "list"), "\n")
	for _, want := range []string{"ada", "admin", "Ada L", "core/ahpd (primary), core/docs", "gus", "guest"} {
		if !strings.Contains(list, want) {
			t.Errorf("list does not show %q:\n%s", want, list)
		}
	}
	tokens := ahpdUser(t, e, users, 0, "tokens", "ada")
	if len(tokens) != 2 || !strings.Contains(tokens[1], "laptop") || strings.Contains(tokens[1], token) {
		t.Fatalf("tokens = %q", tokens)
	}
	ahpdUser(t, e, users, 0, "role", "gus", "--role", "member")
	ahpdUser(t, e, users, 0, "revoke", "ada", strings.Fields(tokens[1])[0])
	if tokens := ahpdUser(t, e, users, 0, "tokens", "ada"); len(tokens) != 1 {
		t.Errorf("after revoke: %q", tokens)
	}
	ahpdUser(t, e, users, 0, "rm", "gus")
	list = strings.Join(ahpdUser(t, e, users, 0, "list"), "\n")
	if strings.Contains(list, "gus") {
		t.Errorf("gus is still listed:\n%s", list)
	}

	// Mistakes: usage errors exit 2, refusals 1, and the file is untouched.
	before, _ := os.ReadFile(users)
	ahpdUser(t, e, users, 2, "add", "bob", "--role", "boss")
	ahpdUser(t, e, users, 2, "add", "bob", "--role", "member", "--scope", "nope")
	ahpdUser(t, e, users, 2, "revoke", "ada")
	ahpdUser(t, e, users, 2, "frob", "ada")
	ahpdUser(t, e, users, 1, "add", "ada", "--role", "member")
	ahpdUser(t, e, users, 1, "add", "not an id", "--role", "member")
	ahpdUser(t, e, users, 1, "rm", "nobody")
	if after, _ := os.ReadFile(users); string(after) != string(before) {
		t.Errorf("a refused command changed the file")
	}
}

// TestUsersInTheDaemon connects with personal tokens: the role decides,
// a revoked token is refused at the next handshake, and no token reaches
// the log.
func TestUsersInTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	users, mo, gus := moAndGus(t, e)
	p := serveDaemon(t, e, "--users", users, "--log-level", "debug")
	root := e.token(t)

	c := connect(t, p, mo, "mo")
	session, chat := newSession(t, c, e, "s1")
	send(t, c, chat, "t1", "say hi")
	raw := c.MustCall("listSessions", map[string]any{"channel": protocol.RootURI, "_meta": map[string]any{"ahpd.owner": "me"}})
	if !strings.Contains(string(raw), session) {
		t.Errorf("mo's own sessions: %s", raw)
	}
	g := connect(t, p, gus, "gus")
	if _, err := g.Call("createSession", map[string]any{"channel": "ahp-session:/s2", "provider": "script"}); err == nil || err.Code != -32009 {
		t.Errorf("a guest created a session: %v", err)
	}
	if _, err := g.Call("disposeSession", map[string]any{"channel": session}); err == nil || err.Code != -32009 {
		t.Errorf("a guest disposed of a session: %v", err)
	}
	g.Close()
	r := connect(t, p, root, "root")
	if raw := r.MustCall("listSessions", map[string]any{"channel": protocol.RootURI, "_meta": map[string]any{"ahpd.owner": "me"}}); strings.Contains(string(raw), session) {
		t.Errorf("root's own sessions list mo's: %s", raw)
	}
	r.Close()

	// Revoking gus's token: the daemon sees the file change and refuses it.
	ahpdUser(t, e, users, 0, "revoke", "gus", "--all")
	deadline := time.Now().Add(startTimeout)
	for handshake(t, p.url(gus), nil) != 401 {
		if time.Now().After(deadline) {
			t.Fatal("the revoked token still opens a connection")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := handshake(t, "ws://"+p.addr, bearer(mo)); code != 101 {
		t.Errorf("mo's token, as a bearer token: HTTP %d", code)
	}
	c.MustCall("ping", map[string]any{})
	c.Close()

	p.terminate()
	p.wait(exitTimeout)
	logs := p.stderr.String()
	if !strings.Contains(logs, "principal=user:mo") {
		t.Errorf("the log does not name the principal:\n%s", logs)
	}
	// The root token is said once on stderr, on purpose, for the person
	// who started ahpd; it is in no log record.
	for _, line := range strings.Split(logs, "\n") {
		if strings.HasPrefix(line, "ahpd: connect with") {
			continue
		}
		for name, tok := range map[string]string{"mo": mo, "gus": gus, "root": root} {
			if strings.Contains(line, tok) || strings.Contains(line, tok[len(tok)/2:]) {
				t.Errorf("%s's token is in the log: %s", name, line)
			}
		}
	}
}

// TestRevokeCutsOpenConnections revokes a member's token with the command
// line while the member is connected: the daemon closes that connection
// saying why, refuses the token from then on, and leaves another user's
// connection open.
func TestRevokeCutsOpenConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	users := filepath.Join(e.root, "users.yaml")
	ahpdUser(t, e, users, 0, "add", "mo", "--role", "member", "--scope", "core/ahpd")
	ahpdUser(t, e, users, 0, "add", "gus", "--role", "guest")
	mo := ahpdUser(t, e, users, 0, "token", "mo", "--label", "laptop")[0]
	gus := ahpdUser(t, e, users, 0, "token", "gus")[0]
	p := serveDaemon(t, e, "--users", users)

	c := connect(t, p, mo, "mo")
	_, chat := newSessionWith(t, c, e, "s1", map[string]any{"sharing": "read"}) // the guest watches it
	send(t, c, chat, "t1", "say hi")
	g := connect(t, p, gus, "gus")

	ahpdUser(t, e, users, 0, "revoke", "mo", "laptop")
	select {
	case <-c.Done():
	case <-time.After(hosttest.Timeout):
		t.Fatal("the revoked token's connection is still open")
	}
	var ce websocket.CloseError
	if !errors.As(c.Err(), &ce) || ce.Reason != "user:mo: the connection's token was revoked" {
		t.Errorf("the connection ended with %v, want a close saying the token was revoked", c.Err())
	}
	// The connection was cut once the daemon had the new directory.
	if code := handshake(t, p.url(mo), nil); code != http.StatusUnauthorized {
		t.Errorf("the revoked token: HTTP %d, want 401", code)
	}
	g.MustCall("ping", map[string]any{})
	g.Subscribe(chat)
}
