package dashboard_test

import (
	"context"

	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// rowsOf reads the sessions table's rows: each row's title and status.
var rowRE = regexp.MustCompile(`(?s)<tr data-session="[^"]*">\s*<th scope="row"><a href="[^"]*">([^<]*)</a>.*?<span class="status s-[a-z-]+">([^<]*)</span>.*?<td data-label="Owner">([^<]*|<span class="muted">none</span>)</td>`)

func rowsOf(body string) map[string]string {
	out := map[string]string{}
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		owner := m[3]
		if strings.Contains(owner, "none") {
			owner = "none"
		}
		out[m[1]] = m[2] + "/" + owner
	}
	return out
}

// TestSessionsTable checks the table's statuses, owners and filters.
func TestSessionsTable(t *testing.T) {
	e := newEnv(t, envOptions{})
	mo, root := e.conn("mo"), e.conn("root")
	_, doneChat := e.startSession(t, mo, "done", "done", "say hi")
	_, askChat := e.startSession(t, mo, "asks", "asks", "ask Which file?")
	_, waitChat2 := e.startSession(t, root, "busy", "busy", "wait 30s")
	_, failChat := e.startSession(t, root, "broke", "broke", "fail it broke")
	waitChat(t, mo, doneChat, idle)
	waitChat(t, mo, askChat, func(cs *protocol.ChatState) bool { return cs.Status.Activity() == protocol.StatusInputNeeded })
	waitChat(t, root, waitChat2, func(cs *protocol.ChatState) bool { return cs.ActiveTurn != nil })
	waitChat(t, root, failChat, idle)

	b := e.signIn("mo")
	for _, tc := range []struct {
		query string
		want  map[string]string
	}{
		{"", map[string]string{"done": "idle/user:mo", "asks": "needs input/user:mo", "busy": "running/root:test", "broke": "failed/root:test"}},
		{"?status=running", map[string]string{"busy": "running/root:test"}},
		{"?status=needs+input", map[string]string{"asks": "needs input/user:mo"}},
		{"?status=failed", map[string]string{"broke": "failed/root:test"}},
		{"?mine=1", map[string]string{"done": "idle/user:mo", "asks": "needs input/user:mo"}},
		{"?mine=1&status=idle", map[string]string{"done": "idle/user:mo"}},
		{"?status=sleeping", map[string]string{}},
	} {
		r := b.get("/ui/" + tc.query)
		if r.status != http.StatusOK {
			t.Fatalf("GET /ui/%s: %d %s", tc.query, r.status, r.body)
		}
		got := rowsOf(r.body)
		if len(got) != len(tc.want) {
			t.Errorf("GET /ui/%s: rows %v, want %v", tc.query, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("GET /ui/%s: %s is %q, want %q", tc.query, k, got[k], v)
			}
		}
	}
	// Each row counts its session's journal entries.
	if n := regexp.MustCompile(`(?s)<tr data-session="ahp-session:/done">.*?<td data-label="Events">(\d+)</td>`).FindStringSubmatch(b.get("/ui/").body); n == nil || n[1] == "0" {
		t.Errorf("the done session's events: %v", n)
	}
	// A session put to sleep is shown sleeping.
	// (A session somebody watches stays in memory.)
	for _, ch := range []string{doneChat, "ahp-session:/done"} {
		if err := mo.Unsubscribe(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	}
	var res struct{ Status string }
	if err := mo.Call(t.Context(), "ahpd/suspendSession", map[string]any{"channel": "ahp-session:/done"}, &res); err != nil || res.Status != "inactive" {
		t.Fatalf("suspending: %v %v", res, err)
	}
	if r := b.get("/ui/?status=sleeping"); rowsOf(r.body)["done"] != "sleeping/user:mo" || len(rowsOf(r.body)) != 1 {
		t.Errorf("sleeping: %v: %v", rowsOf(r.body), rowsOf(b.get("/ui/").body))
	}
	// The filters' form keeps what was chosen, and the live stream asks
	// for the same.
	r := b.get("/ui/?status=running&mine=1")
	if !strings.Contains(r.body, `<option value="running" selected>`) || !strings.Contains(r.body, `name="mine" value="1" checked`) ||
		!strings.Contains(r.body, `data-live="/ui/events?mine=1&amp;status=running"`) {
		t.Errorf("the filters are not kept: %s", r.body)
	}
	cancel(t, root, waitChat2)
	cancel(t, mo, askChat)
}

// TestBadQueries checks that every bad parameter gets a 400 saying what
// is wrong, without echoing it.
func TestBadQueries(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.signIn("mo")
	huge := strings.Repeat("x", 2000)
	for _, tc := range []struct{ path, says string }{
		{"/ui/?status=bogus", "status is one of"},
		{"/ui/?limit=0", "limit is a whole number"},
		{"/ui/?limit=5000", "limit is a whole number"},
		{"/ui/?cursor=" + huge, "cursor"},
		{"/ui/session", "Name a session"},
		{"/ui/session?uri=nonsense", "not a session"},
		{"/ui/session?uri=ahp-session:/" + huge, "Name a session"},
		{"/ui/session?uri=ahp-session:/x&at=-4", "at is an event"},
		{"/ui/session?uri=ahp-session:/x&kind=" + huge, "kind is one of"},
	} {
		r := b.get(tc.path)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, tc.says) || strings.Contains(r.body, huge) {
			t.Errorf("GET %.60s: %d, want 400 saying %q: %.300s", tc.path, r.status, tc.says, r.body)
		}
	}
	if r := b.get("/ui/session?uri=ahp-session:/nothere"); r.status != http.StatusNotFound {
		t.Errorf("an unknown session: %d %s", r.status, r.body)
	}
	if r := b.get("/ui/?q=" + strings.Repeat("y", 5000)); r.status != http.StatusRequestURITooLong {
		t.Errorf("a huge query: %d", r.status)
	}
}

// TestSessionPage checks the conversation, the timeline, its filter and
// links, and the replay at an earlier event.
func TestSessionPage(t *testing.T) {
	e := newEnv(t, envOptions{})
	mo := e.conn("mo")
	uri, chat := e.startSessionWith(t, mo, "s1", "two turns", "say first <b>reply</b>\nrun echo hi", bypass)
	waitChat(t, mo, chat, idle)
	send(t, mo, chat, "t2", "say second reply")
	waitChat(t, mo, chat, func(cs *protocol.ChatState) bool { return cs.ActiveTurn == nil && len(cs.Turns) == 2 })

	b := e.signIn("mo")
	page := "/ui/session?" + url.Values{"uri": {uri}}.Encode()
	r := b.get(page)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", page, r.status, r.body)
	}
	for _, want := range []string{"<h1>two turns</h1>", `id="turn-t-s1"`, `id="turn-t2"`, "first &lt;b&gt;reply&lt;/b&gt;", "second reply",
		`class="tool`, "echo hi", `<span class="kind">turn_completed</span>`, `href="#turn-t2"`, `data-live="/ui/session/events?`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the session page lacks %q", want)
		}
	}
	if strings.Contains(r.body, "<b>reply</b>") {
		t.Error("the agent's HTML reached the page")
	}
	// The timeline is newest first, and each event links to the state
	// right after it.
	ats := regexp.MustCompile(`<span class="kind">turn_completed</span>(?s:.*?)data-seq="(\d+)"`).FindAllStringSubmatch(r.body, -1)
	if len(ats) != 2 {
		t.Fatalf("%d turn_completed events, want 2", len(ats))
	}
	first := ats[1][1]
	r = b.get(page + "&at=" + first)
	if r.status != http.StatusOK || !strings.Contains(r.body, "(event "+first+")") || !strings.Contains(r.body, `id="turn-t-s1"`) ||
		strings.Contains(r.body, `id="turn-t2"`) || strings.Contains(r.body, "data-live=\"/ui/session/events") {
		t.Fatalf("the replay after the first turn: %d %s", r.status, r.body)
	}
	if strings.Contains(r.body, `action="/ui/session/action"`) {
		t.Error("a replay offers writes")
	}
	// Kinds filter the timeline.
	r = b.get(page + "&kind=tool_call")
	if !strings.Contains(r.body, `<span class="kind">tool_call</span>`) || strings.Contains(r.body, `<span class="kind">turn_started</span>`) ||
		!strings.Contains(r.body, `value="tool_call" checked`) {
		t.Errorf("the kind filter: %s", r.body)
	}
}

// TestWritesFollowGrants checks that a guest is shown no button that
// writes and is refused one posted anyway, while a member's work.
func TestWritesFollowGrants(t *testing.T) {
	e := newEnv(t, envOptions{})
	mo := e.conn("mo")
	uri, chat := e.startSessionWith(t, mo, "w1", "waits", "wait 30s", teamShared)
	waitChat(t, mo, chat, func(cs *protocol.ChatState) bool { return cs.ActiveTurn != nil })
	page := "/ui/session?" + url.Values{"uri": {uri}}.Encode()

	gus := e.signIn("gus")
	r := gus.get(page)
	if r.status != http.StatusOK || strings.Contains(r.body, `action="/ui/session/action"`) {
		t.Fatalf("the guest's page: %d: %s", r.status, r.body)
	}
	r = gus.post("/ui/session/action", url.Values{"csrf": {gus.csrf()}, "uri": {uri}, "op": {"cancel"}})
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "chat:cancel") {
		t.Fatalf("a guest's cancel: %d %s", r.status, r.body)
	}
	mob := e.signIn("mo")
	r = mob.get(page)
	for _, op := range []string{"cancel", "archive"} {
		if !strings.Contains(r.body, `name="op" value="`+op+`"`) {
			t.Errorf("the member is not offered %s", op)
		}
	}
	if strings.Contains(r.body, `name="op" value="suspend"`) || strings.Contains(r.body, `name="op" value="wake"`) {
		t.Errorf("a running, awake session offers suspend or wake: %s", r.body)
	}
	if r = mob.post("/ui/session/action", url.Values{"csrf": {"nope"}, "uri": {uri}, "op": {"cancel"}}); r.status != http.StatusForbidden {
		t.Fatalf("a cancel without the CSRF token: %d", r.status)
	}
	if r = mob.post("/ui/session/action", url.Values{"csrf": {mob.csrf()}, "uri": {uri}, "op": {"explode"}}); r.status != http.StatusBadRequest {
		t.Fatalf("an unknown op: %d", r.status)
	}
	if r = mob.post("/ui/session/action", url.Values{"csrf": {mob.csrf()}, "uri": {uri}, "op": {"cancel"}}); r.status != http.StatusSeeOther {
		t.Fatalf("the member's cancel: %d %s", r.status, r.body)
	}
	waitChat(t, mo, chat, func(cs *protocol.ChatState) bool {
		return cs.ActiveTurn == nil && len(cs.Turns) == 1 && cs.Turns[0].State == protocol.TurnStateCancelled
	})
	// Idle now, and watched by nobody (a watched session stays in
	// memory): suspend, then wake.
	for _, ch := range []string{chat, uri} {
		if err := mo.Unsubscribe(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct{ op, offered string }{{"suspend", "wake"}, {"wake", "suspend"}} {
		if r = mob.post("/ui/session/action", url.Values{"csrf": {mob.csrf()}, "uri": {uri}, "op": {step.op}}); r.status != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", step.op, r.status, r.body)
		}
		if r = mob.get(page); !strings.Contains(r.body, `name="op" value="`+step.offered+`"`) {
			t.Errorf("after %s the page does not offer %s", step.op, step.offered)
		}
	}
}

// TestCheckpointsShown: the session page lists the session's checkpoints,
// newest first, each with what its turn changed; a session in no
// repository says it has none.
func TestCheckpointsShown(t *testing.T) {
	e := newEnv(t, envOptions{repo: true})
	mo := e.conn("mo")
	uri, chat := e.startSessionWith(t, mo, "cp", "edits", "run printf 'one\\ntwo\\n' > notes.txt", bypass)
	waitChat(t, mo, chat, idle)
	// The turn's checkpoint is recorded just after it ends, and then its
	// changes are counted on the session.
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if _, err := mo.WaitState(ctx, uri, func(st protocol.ChannelState) bool {
		ss, ok := st.(*protocol.SessionState)
		return ok && len(ss.Chats) > 0 && ss.Chats[0].Changes != nil && ss.Chats[0].Changes.Files != nil && *ss.Chats[0].Changes.Files == 1
	}); err != nil {
		t.Fatalf("waiting for the turn's changes: %v", err)
	}
	b := e.signIn("mo")
	r := b.get("/ui/session?" + url.Values{"uri": {uri}}.Encode())
	for _, want := range []string{`<h2 id="cp-h">Checkpoints</h2>`, `class="review-turn">1</a></th><td>1</td><td><span class="add">+2</span> <span class="del">−0</span>`, `<th scope="row">start</th>`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
