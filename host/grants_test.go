package host_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// command is one row of the grants table: a method with params that name
// the fixture's session and chat.
type command struct {
	name, method string
	params       func(f fixture) any
	// disposes marks a row that ends the fixture, so it gets its own.
	disposes bool
}

// fixture is a session with its default chat and a spare one, owned by
// the table's owner.
type fixture struct{ session, chat, spare string }

var commands = []command{
	{name: "initialize", method: "initialize", params: func(fixture) any {
		return map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{"1.0.0"}, "clientId": "actor"}
	}},
	{name: "ping", method: "ping", params: func(fixture) any { return map[string]any{} }},
	{name: "reconnect", method: "reconnect", params: func(fixture) any {
		return map[string]any{"channel": protocol.RootURI, "clientId": "actor", "lastSeenServerSeq": 0, "subscriptions": []string{}}
	}},
	{name: "subscribe root", method: "subscribe", params: func(fixture) any { return map[string]any{"channel": protocol.RootURI} }},
	{name: "subscribe session", method: "subscribe", params: func(f fixture) any { return map[string]any{"channel": f.session} }},
	{name: "subscribe chat", method: "subscribe", params: func(f fixture) any { return map[string]any{"channel": f.chat} }},
	{name: "subscribe terminal", method: "subscribe", params: func(fixture) any { return map[string]any{"channel": "ahp-terminal:/t1"} }},
	{name: "unsubscribe", method: "unsubscribe", params: func(f fixture) any { return map[string]any{"channel": f.chat} }},
	{name: "listSessions", method: "listSessions", params: func(fixture) any { return map[string]any{"channel": protocol.RootURI} }},
	{name: "createSession", method: "createSession", params: func(f fixture) any {
		return map[string]any{"channel": f.session + "-new", "provider": "script"}
	}},
	{name: "disposeSession", method: "disposeSession", disposes: true, params: func(f fixture) any { return map[string]any{"channel": f.session} }},
	{name: "createChat", method: "createChat", params: func(f fixture) any {
		return map[string]any{"channel": f.session, "chat": protocol.ChatURIFor(f.session, fmt.Sprintf("c%d", time.Now().UnixNano()))}
	}},
	{name: "disposeChat", method: "disposeChat", disposes: true, params: func(f fixture) any { return map[string]any{"channel": f.spare} }},
	{name: "fetchTurns", method: "fetchTurns", params: func(f fixture) any { return map[string]any{"channel": f.chat} }},
	{name: "moveChat", method: "moveChat", params: func(f fixture) any {
		return map[string]any{"channel": f.spare, "destination": map[string]any{"kind": "session", "session": f.session}}
	}},
	{name: "resolveSessionConfig", method: "resolveSessionConfig", params: func(fixture) any { return map[string]any{"channel": protocol.RootURI, "provider": "script"} }},
	{name: "sessionConfigCompletions", method: "sessionConfigCompletions", params: func(fixture) any {
		return map[string]any{"channel": protocol.RootURI, "provider": "script", "property": "autoApprove"}
	}},
	{name: "ahpd/sessionStatus", method: "ahpd/sessionStatus", params: func(f fixture) any { return map[string]any{"channel": f.session} }},
	{name: "ahpd/suspendSession", method: "ahpd/suspendSession", params: func(f fixture) any {
		return map[string]any{"channel": f.session, "ifIdle": true}
	}},
	{name: "ahpd/resumeSession", method: "ahpd/resumeSession", params: func(f fixture) any { return map[string]any{"channel": f.session} }},
	{name: "ahpd/setSessionMetadata", method: "ahpd/setSessionMetadata", params: func(f fixture) any {
		return map[string]any{"channel": f.session, "metadata": map[string]any{"ticket": "ENG-1"}}
	}},
	{name: "ahpd/sessionEvents", method: "ahpd/sessionEvents", params: func(f fixture) any { return map[string]any{"channel": f.session} }},
	{name: "ahpd/replaySession", method: "ahpd/replaySession", params: func(f fixture) any { return map[string]any{"channel": f.session} }},
	{name: "ahpd/sessionCheckpoints", method: "ahpd/sessionCheckpoints", params: func(f fixture) any { return map[string]any{"channel": f.session} }},
	{name: "ahpd/sessionDiff", method: "ahpd/sessionDiff", params: func(f fixture) any { return map[string]any{"channel": f.session} }},
	{name: "ahpd/sessionEventCounts", method: "ahpd/sessionEventCounts", params: func(f fixture) any { return map[string]any{"channels": []string{f.session}} }},
	{name: "ahpd/webhookLog", method: "ahpd/webhookLog", params: func(fixture) any { return map[string]any{"limit": 10} }},
	{name: "listAutomationTriggerDefinitions", method: "listAutomationTriggerDefinitions", params: func(fixture) any { return map[string]any{"channel": protocol.RootURI} }},
	{name: "fetchAutomationRuns", method: "fetchAutomationRuns", params: func(fixture) any {
		return map[string]any{"channel": "ahp-automations://", "automation": "ahp-automation:/none"}
	}},
	{name: "runAutomation", method: "runAutomation", params: func(fixture) any {
		return map[string]any{"channel": "ahp-automations://", "automation": "ahp-automation:/none", "requestId": "r"}
	}},
}

// readOnly are the rows a guest may send: the read group and the commands
// that touch no session.
var readOnly = []string{
	"initialize", "ping", "reconnect", "unsubscribe", "listSessions", "fetchTurns", "ahpd/sessionStatus", "ahpd/sessionEvents", "ahpd/replaySession", "ahpd/sessionCheckpoints", "ahpd/sessionDiff", "ahpd/sessionEventCounts",
	"listAutomationTriggerDefinitions", "fetchAutomationRuns",
	"subscribe root", "subscribe session", "subscribe chat", "subscribe terminal",
}

// aboutTheSession are the commands that name the fixture's session or one
// of its chats: what a session kept from its actor refuses.
var aboutTheSession = []string{
	"subscribe session", "subscribe chat", "disposeSession", "createChat", "disposeChat", "fetchTurns", "moveChat",
	"ahpd/sessionStatus", "ahpd/suspendSession", "ahpd/resumeSession", "ahpd/setSessionMetadata",
	"ahpd/sessionEvents", "ahpd/replaySession", "ahpd/sessionCheckpoints", "ahpd/sessionDiff",
}

// actionSamples holds an action of every type a client may dispatch. A
// type added to the protocol without a sample fails the table test.
var actionSamples = map[protocol.ActionType]string{
	"root/configChanged":                   `{"config":{}}`,
	"session/titleChanged":                 `{"title":"renamed"}`,
	"session/activeClientSet":              `{"activeClient":{"clientId":"actor","tools":[]}}`,
	"session/activeClientRemoved":          `{"clientId":"actor"}`,
	"session/workingDirectorySet":          `{"directory":"file:///tmp"}`,
	"session/workingDirectoryRemoved":      `{"directory":"file:///tmp"}`,
	"session/customizationToggled":         `{"id":"x","enablement":[{"kind":"global","enabled":true}]}`,
	"session/workingDirectoryReplaced":     `{"directory":"file:///tmp","replacement":"file:///var/tmp"}`,
	"session/mcpServerBackgroundRequested": `{"id":"x"}`,
	"chat/turnResume":                      `{"turnId":"t1"}`,
	"chat/isReadChanged":                   `{"isRead":true}`,
	"chat/isArchivedChanged":               `{"isArchived":false}`,
	"automation/createRequested":           `{"resource":"ahp-automation:/a1","definition":{"title":"t","message":{"text":"say hi","origin":{"kind":"user"}},"session":{},"enabled":true,"triggers":[]}}`,
	"automation/updateRequested":           `{"resource":"ahp-automation:/a1","changes":{}}`,
	"automation/removed":                   `{"resource":"ahp-automation:/a1"}`,
	"automationRun/cancelRequested":        `{}`,
	"session/mcpServerStartRequested":      `{"id":"x"}`,
	"session/mcpServerStopRequested":       `{"id":"x"}`,
	"session/isReadChanged":                `{"isRead":true}`,
	"session/isArchivedChanged":            `{"isArchived":false}`,
	"session/configChanged":                `{"config":{}}`,
	"chat/turnStarted":                     `{"turnId":"t9","startedAt":"2026-11-29T00:00:00Z","message":{"text":"say ok","origin":{"kind":"user"}}}`,
	"chat/toolCallConfirmed":               `{"turnId":"t9","toolCallId":"x","approved":true,"confirmed":"user-action"}`,
	"chat/toolCallComplete":                `{"turnId":"t9","toolCallId":"x","result":{"success":true,"pastTenseMessage":"did"}}`,
	"chat/toolCallResultConfirmed":         `{"turnId":"t9","toolCallId":"x","approved":true}`,
	"chat/toolCallContentChanged":          `{"turnId":"t9","toolCallId":"x","content":[]}`,
	"chat/turnCancelled":                   `{"turnId":"t9","duration":1}`,
	"chat/workingDirectorySet":             `{"directory":"file:///tmp"}`,
	"chat/workingDirectoryRemoved":         `{"directory":"file:///tmp"}`,
	"chat/pendingMessageSet":               `{"kind":"queued","id":"q1","message":{"text":"later","origin":{"kind":"user"}}}`,
	"chat/pendingMessageRemoved":           `{"kind":"queued","id":"q1"}`,
	"chat/queuedMessagesReordered":         `{"order":[]}`,
	"chat/draftChanged":                    `{}`,
	"chat/inputAnswerChanged":              `{"requestId":"r1","questionId":"q1"}`,
	"chat/inputCompleted":                  `{"requestId":"r1","response":"cancel"}`,
	"chat/truncated":                       `{}`,
	"changeset/filesReviewChanged":         `{"files":[],"reviewed":true}`,
	"annotations/set":                      `{"annotation":{"id":"a1","origin":{"session":"script:/s"},"resource":"file:///tmp/x","resolved":false,"entries":[{"id":"e1","text":"hm"}]}}`,
	"annotations/updated":                  `{"annotationId":"a1"}`,
	"annotations/removed":                  `{"annotationId":"a1"}`,
	"annotations/entrySet":                 `{"annotationId":"a1","entry":{"id":"e1","text":"hm"}}`,
	"annotations/entryRemoved":             `{"annotationId":"a1","entryId":"e1"}`,
	"terminal/input":                       `{"data":"ls\n"}`,
	"terminal/resized":                     `{"cols":80,"rows":24}`,
	"terminal/claimed":                     `{"claim":{"kind":"client","clientId":"actor"}}`,
	"terminal/titleChanged":                `{"title":"sh"}`,
	"terminal/cleared":                     `{}`,
}

// role is one column of the table: who acts, and what they may do.
type role struct {
	name  string
	token string
	// denied says whether a row (a command's name or an action's type) is
	// refused, and with what message when that is fixed.
	denied func(row string) (bool, string)
}

// failsAnyway reports whether a row allowed by its grant still fails, for
// reasons of its own: a connection already initialized is not
// initialized or reconnected again, and this host has no terminals.
func (role) failsAnyway(row string) bool {
	return row == "initialize" || row == "reconnect" || row == "subscribe terminal" ||
		row == "fetchAutomationRuns" || row == "runAutomation" // of an automation that does not exist
}

// TestGrantsTable walks every command the host serves and every action a
// client may dispatch for each role, and checks each is allowed or
// refused with -32009 (a refused action comes back with a rejectionReason
// naming the operation). A method or an action type the table does not
// know fails the test.
func TestGrantsTable(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{"dispatchAction": true}
	for _, c := range commands {
		covered[c.method] = true
	}
	for _, m := range host.Methods() {
		if !covered[m] {
			t.Errorf("the host serves %s, which the grants table test has no row for", m)
		}
	}
	for _, at := range protocol.ActionTypes() {
		if _, ok := actionSamples[at]; at.ClientDispatchable() && !ok {
			t.Errorf("a client may dispatch %s, which the grants table test has no sample of", at)
		} else if ok {
			if _, err := sample(at); err != nil {
				t.Error(err)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	dir := grants.NewDirectory()
	tokens := map[string]string{}
	for _, u := range []struct {
		id   string
		role grants.Role
	}{{"ada", grants.Admin}, {"mo", grants.Member}, {"mia", grants.Member}, {"gus", grants.Guest}} {
		if err := dir.Add(u.id, u.id, u.role); err != nil {
			t.Fatal(err)
		}
		if err := dir.SetMemberships(u.id, []grants.Membership{{Team: "core", Project: "ahpd", Primary: true}}); err != nil {
			t.Fatal(err)
		}
		tok, err := dir.IssueToken(u.id, "test")
		if err != nil {
			t.Fatal(err)
		}
		tokens[u.id] = tok
	}
	withUsers := startHost(t, "", withJournal(openJournal(t)), func(o *host.Options) {
		o.Auth = &grants.Authenticator{Host: "test", ConnectionToken: "root-token", Users: dir}
	})
	noUsers := startHost(t, "", withJournal(openJournal(t)), func(o *host.Options) {
		o.Auth = &grants.Authenticator{Host: "test", ConnectionToken: "root-token"}
	})

	isRead := func(row string) bool { return slices.Contains(readOnly, row) }
	// A session not shared with its actor is theirs to do nothing to:
	// every row about it is refused, whatever their role.
	private := func(row string) bool {
		if slices.Contains(aboutTheSession, row) {
			return true
		}
		// Every action but the root's is sent on the session or its chat.
		at := protocol.ActionType(row)
		return at.ClientDispatchable() && at.Channel() != "root"
	}
	hostOnly := func(row string) bool { return row == "root/configChanged" || row == "ahpd/webhookLog" }
	allowed := func(string) (bool, string) { return false, "" }
	cases := []struct {
		th      *testHost
		owner   string
		sharing string
		role
	}{
		{withUsers, tokens["mo"], "", role{"admin", tokens["ada"], allowed}},
		{withUsers, tokens["mo"], "", role{"member who owns the session", tokens["mo"], func(row string) (bool, string) {
			return hostOnly(row), ""
		}}},
		{withUsers, tokens["mo"], "team", role{"member who does not, shared with the team", tokens["mia"], func(row string) (bool, string) {
			if row == "disposeSession" {
				return true, grants.OnlyOwnerMessage
			}
			return hostOnly(row), ""
		}}},
		{withUsers, tokens["mo"], "read", role{"member who does not, shared for reading", tokens["mia"], func(row string) (bool, string) {
			if row == "disposeSession" {
				return true, grants.OnlyOwnerMessage
			}
			return hostOnly(row) || !isRead(row) && private(row), ""
		}}},
		{withUsers, tokens["mo"], "", role{"member who does not, private", tokens["mia"], func(row string) (bool, string) {
			if row == "disposeSession" {
				return true, grants.OnlyOwnerMessage
			}
			return hostOnly(row) || private(row), ""
		}}},
		{withUsers, tokens["mo"], "team", role{"guest, shared with the team", tokens["gus"], func(row string) (bool, string) {
			return !isRead(row), ""
		}}},
		{withUsers, tokens["mo"], "", role{"guest, private", tokens["gus"], func(row string) (bool, string) {
			return !isRead(row) || private(row), ""
		}}},
		{noUsers, "root-token", "", role{"no users directory", "root-token", allowed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Client ids of their own: the last case's connections may
			// still be closing, and an id open for another principal is
			// refused.
			owner := dialAs(t, tc.th, tc.owner, "owner-"+tc.name)
			actor := dialAs(t, tc.th, tc.token, "actor-"+tc.name)
			n := 0
			fresh := func() fixture {
				n++
				return newFixture(t, tc.th, owner, fmt.Sprintf("%s-%d", strings.NewReplacer(" ", "-", ",", "").Replace(tc.name), n), tc.sharing)
			}
			shared := fresh()
			for _, row := range commands {
				f := shared
				if row.disposes {
					f = fresh()
				}
				_, err := actor.Call(row.method, row.params(f))
				checkCommand(t, tc.role, row.name, err)
			}
			shared = fresh()
			if denied, _ := tc.denied("subscribe session"); !denied {
				actor.Subscribe(shared.session)
				actor.Subscribe(shared.chat)
			}
			for _, at := range protocol.ActionTypes() {
				if !at.ClientDispatchable() {
					continue
				}
				checkAction(t, tc.role, actor, "actor-"+tc.name, shared, at)
			}
		})
	}
}

func dialAs(t *testing.T, th *testHost, token, clientID string) *hosttest.Client {
	t.Helper()
	c := hosttest.Dial(t, th.url+"?tkn="+token)
	t.Cleanup(c.Close)
	c.Initialize(clientID, protocol.RootURI)
	return c
}

// newFixture makes a session whose first turn has run, so every client
// that may can see it, shared as sharing says ("" for the default).
func newFixture(t *testing.T, th *testHost, owner *hosttest.Client, id, sharing string) fixture {
	t.Helper()
	var config map[string]any
	if sharing != "" {
		config = map[string]any{"sharing": sharing}
	}
	session, chat := th.newSession(owner, id, config)
	send(t, owner, chat, "t1", "say hi")
	owner.WaitState(session, "ready", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Lifecycle == protocol.SessionLifecycleReady
	})
	spare := protocol.ChatURIFor(session, "spare")
	owner.MustCall("createChat", map[string]any{"channel": session, "chat": spare})
	return fixture{session, chat, spare}
}

func checkCommand(t *testing.T, r role, row string, err *hosttest.RPCError) {
	t.Helper()
	deny, message := r.denied(row)
	switch {
	case deny && (err == nil || err.Code != -32009):
		t.Errorf("%s: %v, want -32009", row, err)
	case deny && message != "" && err.Message != message:
		t.Errorf("%s: refused with %q, want %q", row, err.Message, message)
	case deny && message == "" && !strings.Contains(err.Message, " may not "):
		t.Errorf("%s: refused with %q, which names no operation", row, err.Message)
	case !deny && err != nil && err.Code == -32009:
		t.Errorf("%s: refused %v", row, err)
	case !deny && err != nil && !r.failsAnyway(row):
		t.Errorf("%s: %v, want it to succeed", row, err)
	}
}

func checkAction(t *testing.T, r role, actor *hosttest.Client, actorID string, f fixture, at protocol.ActionType) {
	t.Helper()
	a, err := sample(at)
	if err != nil {
		t.Fatal(err)
	}
	channel := f.session
	switch at.Channel() {
	case "root":
		channel = protocol.RootURI
	case "chat":
		channel = f.chat
	}
	seq := actor.Dispatch(channel, a)
	var reason string
	actor.Wait(string(at)+" to come back", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientID == actorID && e.Origin.ClientSeq == seq {
				if e.RejectionReason != nil {
					reason = *e.RejectionReason
				}
				return true
			}
		}
		return false
	})
	op, inTable := grants.ForAction(string(at))
	if !inTable {
		// Not offered by this host: refused the same to everybody, before
		// any grant.
		if !strings.Contains(reason, "does not offer") {
			t.Errorf("%s: refused with %q, want it not offered", at, reason)
		}
		return
	}
	refusedByGrant := strings.Contains(reason, " may not "+string(op))
	if deny, _ := r.denied(string(at)); deny != refusedByGrant {
		t.Errorf("%s: refused by its grant %v (reason %q), want %v", at, refusedByGrant, reason, deny)
	}
}

// sample decodes the sample action of type at.
func sample(at protocol.ActionType) (protocol.Action, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(actionSamples[at]), &obj); err != nil {
		return nil, fmt.Errorf("%s sample: %w", at, err)
	}
	obj["type"], _ = json.Marshal(at)
	raw, _ := json.Marshal(obj)
	a, err := protocol.UnmarshalAction(raw)
	if err != nil {
		return nil, fmt.Errorf("%s sample: %w", at, err)
	}
	return a, nil
}

// usersHost starts a host whose users directory has mo (member of
// core/ahpd, primary, and core/docs), mia (member of nothing) and the
// connection token "root-token"; it returns the host and the tokens.
func usersHost(t *testing.T, state string, opts ...hostOption) (*testHost, map[string]string) {
	t.Helper()
	dir := grants.NewDirectory()
	tokens := map[string]string{"root": "root-token"}
	for _, id := range []string{"mo", "mia"} {
		if err := dir.Add(id, id, grants.Member); err != nil {
			t.Fatal(err)
		}
		tok, err := dir.IssueToken(id, "")
		if err != nil {
			t.Fatal(err)
		}
		tokens[id] = tok
	}
	if err := dir.SetMemberships("mo", []grants.Membership{{Team: "core", Project: "ahpd", Primary: true}, {Team: "core", Project: "docs"}}); err != nil {
		t.Fatal(err)
	}
	th := startHost(t, state, append(opts, func(o *host.Options) {
		o.Auth = &grants.Authenticator{Host: "test", ConnectionToken: "root-token", Users: dir}
	})...)
	return th, tokens
}

// TestOwnerAndScope checks whose a session is and what it is charged to:
// both settled when it is made, kept in the store, and not changed by who
// sends a later turn.
func TestOwnerAndScope(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th, tokens := usersHost(t, state)
	mo := dialAs(t, th, tokens["mo"], "mo")
	mia := dialAs(t, th, tokens["mia"], "mia")
	root := dialAs(t, th, tokens["root"], "root")

	// The scope key is offered to a person, over their memberships.
	var resolved protocol.ResolveSessionConfigResult
	if err := json.Unmarshal(mo.MustCall("resolveSessionConfig", map[string]any{"channel": protocol.RootURI, "provider": "script"}), &resolved); err != nil {
		t.Fatal(err)
	}
	prop, ok := resolved.Schema.Properties.Get("scope")
	if !ok || len(prop.Enum) != 2 || string(prop.Enum[0]) != `"core/ahpd"` || string(prop.Default) != `"core/ahpd"` {
		t.Errorf("mo's scope key: %+v (offered %v)", prop, ok)
	}
	completions := string(mo.MustCall("sessionConfigCompletions", map[string]any{"channel": protocol.RootURI, "provider": "script", "property": "scope", "query": "doc"}))
	if !strings.Contains(completions, "core/docs") || strings.Contains(completions, "core/ahpd") {
		t.Errorf("completing scope over doc: %s", completions)
	}
	if err := json.Unmarshal(root.MustCall("resolveSessionConfig", map[string]any{"channel": protocol.RootURI, "provider": "script"}), &resolved); err != nil {
		t.Fatal(err)
	}
	if _, ok := resolved.Schema.Properties.Get("scope"); ok {
		t.Error("root is offered a scope")
	}

	// A scope that does not resolve says why.
	create := func(c *hosttest.Client, id string, config map[string]any) *hosttest.RPCError {
		_, err := c.Call("createSession", map[string]any{"channel": "ahp-session:/" + id, "provider": "script", "config": config})
		return err
	}
	if err := create(mia, "m1", nil); err == nil || err.Code != -32602 || !strings.Contains(err.Message, "user:mia belongs to no team or project") {
		t.Errorf("mia, with no membership: %v", err)
	}
	if err := create(mo, "m2", map[string]any{"scope": "core/elsewhere"}); err == nil || err.Code != -32602 || !strings.Contains(err.Message, "not a member of core/elsewhere") {
		t.Errorf("mo, asking for a scope not theirs: %v", err)
	}

	session, chat := th.newSession(mo, "s1", map[string]any{"scope": "core/docs", "sharing": "team"})
	send(t, mo, chat, "t1", "say hi")
	mia.Subscribe(chat)
	mia.Dispatch(chat, &protocol.ChatTurnStartedAction{
		TurnID: "t2", StartedAt: protocol.FormatTime(time.Now()),
		Message: protocol.Message{Text: "say mine now?", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
	waitTurnEnd(t, mia, chat, "t2")
	rootSession, rootChat := th.newSession(root, "r1", nil)
	send(t, root, rootChat, "t1", "say hi") // a session nobody sent a turn in is listed to nobody

	mine := func(c *hosttest.Client) []string {
		raw := c.MustCall("listSessions", map[string]any{"channel": protocol.RootURI, "_meta": map[string]any{"ahpd.owner": "me"}})
		var r protocol.ListSessionsResult
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range r.Items {
			out = append(out, s.Resource)
		}
		return out
	}
	if got := mine(mo); !slices.Equal(got, []string{session}) {
		t.Errorf("mo's own: %v", got)
	}
	if got := mine(mia); len(got) != 0 {
		t.Errorf("mia's own, after sending a turn in mo's: %v", got)
	}
	if got := mine(root); !slices.Equal(got, []string{rootSession}) {
		t.Errorf("root's own: %v", got)
	}
	if _, err := mo.Call("listSessions", map[string]any{"channel": protocol.RootURI, "_meta": map[string]any{"ahpd.owner": "you"}}); err == nil || err.Code != -32602 {
		t.Errorf("an owner filter other than me: %v", err)
	}

	// The store has both, and they come back after a restart.
	files, _ := filepath.Glob(filepath.Join(state, "sessions", "*"))
	var found bool
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), `"owner": "user:mo"`) && strings.Contains(string(data), `"scope": "core/docs"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no session record in %v has mo as owner and core/docs as scope", files)
	}
	mo.Close()
	mia.Close()
	root.Close()
	th.stop()
	th, tokens = usersHost(t, state)
	if got := mine(dialAs(t, th, tokens["mo"], "mo")); !slices.Equal(got, []string{session}) {
		t.Errorf("mo's own after a restart: %v", got)
	}
}
