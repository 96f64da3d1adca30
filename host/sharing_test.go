package host_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestSessionsAreTheirOwners: a member's session is private unless its
// owner shares it. Another member cannot see it (listing, root
// notifications, subscribe) or act in it (turn, rename, cancel, suspend,
// metadata); shared with the team they may, shared for reading they only
// read; only the owner changes the sharing; an admin does everything.
func TestSessionsAreTheirOwners(t *testing.T) {
	t.Parallel()
	dir := grants.NewDirectory()
	tokens := map[string]string{}
	for _, u := range []struct {
		id   string
		role grants.Role
	}{{"ada", grants.Admin}, {"mo", grants.Member}, {"bob", grants.Member}} {
		if err := dir.Add(u.id, u.id, u.role); err != nil {
			t.Fatal(err)
		}
		if err := dir.SetMemberships(u.id, []grants.Membership{{Team: "core", Project: "ahpd", Primary: true}}); err != nil {
			t.Fatal(err)
		}
		tok, err := dir.IssueToken(u.id, "")
		if err != nil {
			t.Fatal(err)
		}
		tokens[u.id] = tok
	}
	th := startHost(t, "", func(o *host.Options) {
		o.Auth = &grants.Authenticator{Host: "test", ConnectionToken: "root-token", Users: dir}
	})
	ada, mo, bob := dialAs(t, th, tokens["ada"], "ada"), dialAs(t, th, tokens["mo"], "mo"), dialAs(t, th, tokens["bob"], "bob")

	// The sharing key is offered to a person, private first.
	var resolved protocol.ResolveSessionConfigResult
	if err := json.Unmarshal(mo.MustCall("resolveSessionConfig", map[string]any{"channel": protocol.RootURI, "provider": "script"}), &resolved); err != nil {
		t.Fatal(err)
	}
	if prop, ok := resolved.Schema.Properties.Get("sharing"); !ok || string(prop.Default) != `"private"` || len(prop.Enum) != 3 {
		t.Fatalf("the sharing key offered: %+v %v", prop, ok)
	}

	private, privateChat := th.newSession(mo, "private", nil)
	send(t, mo, privateChat, "t1", "say hi")
	team, teamChat := th.newSession(mo, "team", map[string]any{"sharing": "team"})
	send(t, mo, teamChat, "t1", "say hi")

	// Told of the team's session, bob was told nothing of the other, sent
	// before it; ada, of both.
	added := func(c *hosttest.Client, session string) bool {
		for _, m := range c.Messages() {
			var p protocol.SessionAddedParams
			if m.Method == "root/sessionAdded" && json.Unmarshal(m.Params, &p) == nil && p.Summary.Resource == session {
				return true
			}
		}
		return false
	}
	bob.Wait("the team session announced", func([]hosttest.Message) bool { return added(bob, team) })
	ada.Wait("the team session announced", func([]hosttest.Message) bool { return added(ada, team) })
	if added(bob, private) || !added(ada, private) {
		t.Errorf("told of the private session: bob %v, ada %v; want only ada", added(bob, private), added(ada, private))
	}
	listed := func(c *hosttest.Client) []string {
		var r protocol.ListSessionsResult
		if err := json.Unmarshal(c.MustCall("listSessions", map[string]any{"channel": protocol.RootURI}), &r); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range r.Items {
			out = append(out, s.Resource)
		}
		slices.Sort(out)
		return out
	}
	if got := listed(bob); !slices.Equal(got, []string{team}) {
		t.Errorf("bob lists %v, want only %s", got, team)
	}
	if got := listed(ada); !slices.Equal(got, []string{private, team}) {
		t.Errorf("ada lists %v", got)
	}

	// What bob tries in mo's session, and what it says.
	turn := func(id string) protocol.Action {
		return &protocol.ChatTurnStartedAction{TurnID: id, StartedAt: protocol.FormatTime(time.Now()),
			Message: protocol.Message{Text: "say bob was here", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}}
	}
	tries := func(want string) {
		t.Helper()
		for name, a := range map[string]struct {
			channel string
			action  protocol.Action
		}{
			"a turn":   {privateChat, turn("bob-" + strings.ReplaceAll(want, " ", ""))},
			"a rename": {private, &protocol.SessionTitleChangedAction{Title: "bob's now"}},
			"a cancel": {privateChat, &protocol.ChatTurnCancelledAction{TurnID: "t1"}},
		} {
			got := rejection(t, bob, bob.Dispatch(a.channel, a.action))
			if want == "" && strings.Contains(got, " may not ") || want != "" && !strings.Contains(got, want) {
				t.Errorf("bob's %s in mo's session: rejected with %q, want %q", name, got, want)
			}
		}
		for _, call := range []struct {
			method string
			params map[string]any
		}{
			{"ahpd/suspendSession", map[string]any{"channel": private, "ifIdle": true}},
			{"ahpd/setSessionMetadata", map[string]any{"channel": private, "metadata": map[string]any{"ticket": "X-1"}}},
		} {
			_, err := bob.Call(call.method, call.params)
			if refused := err != nil && err.Code == -32009; refused != (want != "") || refused && !strings.Contains(err.Message, want) {
				t.Errorf("bob's %s in mo's session: %v, want refused %v with %q", call.method, err, want != "", want)
			}
		}
	}
	if _, err := bob.Call("subscribe", map[string]any{"channel": privateChat}); err == nil || err.Code != -32009 || !strings.Contains(err.Message, "the session is user:mo's and not shared") {
		t.Fatalf("bob subscribing to mo's private chat: %v", err)
	}
	tries("the session is user:mo's and not shared")

	// An admin works in it.
	ada.Subscribe(privateChat)
	send(t, ada, privateChat, "ada-1", "say from ada")

	// Only its owner shares it.
	share := func(c *hosttest.Client, sharing string) string {
		return rejection(t, c, c.Dispatch(private, &protocol.SessionConfigChangedAction{Config: protocol.Object{"sharing": jsontext.Value(`"` + sharing + `"`)}}))
	}
	if got := share(mo, "read"); got != "" {
		t.Fatalf("mo sharing for reading: %q", got)
	}
	bob.MustCall("fetchTurns", map[string]any{"channel": privateChat})
	bob.Subscribe(private)
	bob.Subscribe(privateChat)
	tries("shared for reading only")

	if got := share(mo, "team"); got != "" {
		t.Fatalf("mo sharing with the team: %q", got)
	}
	tries("")
	if got := share(bob, "private"); got != grants.OnlyOwnerShares {
		t.Errorf("bob making mo's session private: %q, want %q", got, grants.OnlyOwnerShares)
	}
	if got := listed(bob); !slices.Equal(got, []string{private, team}) {
		t.Errorf("bob lists %v once both are shared", got)
	}

	// Made private again while bob watches: he is told it is gone and
	// sees nothing more of it.
	if got := share(mo, "private"); got != "" {
		t.Fatalf("mo making it private again: %q", got)
	}
	bob.Wait("the session removed from bob's view", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			var p protocol.SessionRemovedParams
			if m.Method == "root/sessionRemoved" && json.Unmarshal(m.Params, &p) == nil && p.Session == private {
				return true
			}
		}
		return false
	})
	send(t, mo, privateChat, "t3", "say for mo only")
	mo.Subscribe(team)
	mo.Dispatch(team, &protocol.SessionTitleChangedAction{Title: "renamed after"})
	bob.Wait("the team session renamed", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if m.Method == "root/sessionSummaryChanged" && strings.Contains(string(m.Params), "renamed after") {
				return true
			}
		}
		return false
	})
	for _, m := range bob.Messages() {
		if e := m.Envelope; e != nil && e.Channel == privateChat {
			if a, ok := e.Action.(*protocol.ChatTurnStartedAction); ok && a.TurnID == "t3" {
				t.Fatal("bob was sent mo's turn in the session made private")
			}
		}
	}
	if got := listed(bob); !slices.Equal(got, []string{team}) {
		t.Errorf("bob lists %v once it is private again", got)
	}
}
