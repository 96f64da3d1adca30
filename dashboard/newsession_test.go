package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestNewSessionForm starts a session from /ui/new as a member held to
// the host's allowed roots: the form offers the root and the host's
// agents, a folder outside the roots and an unknown agent are refused on
// the form with what was typed kept, and a good form makes the session,
// runs its first message and leads to its page.
func TestNewSessionForm(t *testing.T) {
	e := newEnv(t, envOptions{roots: true})
	b := e.signIn("mo")
	if page := b.get("/ui/"); !strings.Contains(page.body, `href="/ui/new"`) {
		t.Fatal("a member's pages have no New session link")
	}
	page := b.get("/ui/new")
	if page.status != http.StatusOK {
		t.Fatalf("GET /ui/new: %d %s", page.status, page.body)
	}
	for _, want := range []string{`<option value="` + e.work + `" selected>`, `name="provider" value="script" checked`,
		`name="isolation" value="worktree"`, `<option value="bypass">`, "Only inside the allowed roots"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("the form has no %s:\n%s", want, page.body)
		}
	}
	csrf := b.csrf()
	form := func(kv ...string) url.Values {
		f := url.Values{"csrf": {csrf}, "folder": {e.work}, "provider": {"script"}, "isolation": {"folder"},
			"permissions": {"bypass"}, "text": {"say hello from the form"}}
		for i := 0; i < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	for _, c := range []struct {
		form   url.Values
		status int
		says   string
	}{
		{form("other", "/etc", "text", "say <kept> & typed"), http.StatusForbidden, "outside the allowed roots"},
		{form("provider", "nobody", "text", "say <kept> & typed"), http.StatusNotFound, "nobody"},
		{form("other", "etc", "text", "say <kept> & typed"), http.StatusBadRequest, "an absolute path"},
		{form("permissions", "yolo", "text", "say <kept> & typed"), http.StatusBadRequest, "ask, acceptEdits or bypass"},
		{form("text", " "), http.StatusBadRequest, "Write the first message"},
		{form("isolation", "worktree", "text", "say <kept> & typed"), http.StatusBadRequest, "isolation"},
	} {
		resp := b.post("/ui/new", c.form)
		if resp.status != c.status || !strings.Contains(resp.body, `role="alert"`) || !strings.Contains(html.UnescapeString(resp.body), c.says) {
			t.Fatalf("posting %v: %d, want %d saying %q:\n%s", c.form, resp.status, c.status, c.says, resp.body)
		}
		if strings.TrimSpace(c.form.Get("text")) != "" && !strings.Contains(resp.body, "say &lt;kept&gt; &amp; typed</textarea>") {
			t.Fatalf("posting %v: the message typed is not kept:\n%s", c.form, resp.body)
		}
		if o := c.form.Get("other"); o != "" && !strings.Contains(resp.body, `name="other" type="text" class="path" value="`+o+`"`) {
			t.Fatalf("posting %v: the folder typed is not kept", c.form)
		}
	}

	root := e.conn("root")
	if _, err := root.Subscribe(context.Background(), protocol.RootURI); err != nil {
		t.Fatal(err)
	}
	resp := b.post("/ui/new", form())
	loc, err := url.Parse(resp.header.Get("Location"))
	if resp.status != http.StatusSeeOther || err != nil || loc.Path != "/ui/session" {
		t.Fatalf("a good form: %d to %q:\n%s", resp.status, resp.header.Get("Location"), resp.body)
	}
	uri := loc.Query().Get("uri")
	st, err := root.Subscribe(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	ss := st.(*protocol.SessionState)
	if ss.Provider != "script" || len(ss.WorkingDirectories) != 1 || !strings.HasSuffix(ss.WorkingDirectories[0], e.work) {
		t.Fatalf("the session runs %s in %v", ss.Provider, ss.WorkingDirectories)
	}
	if _, err := root.Subscribe(context.Background(), *ss.DefaultChat); err != nil {
		t.Fatal(err)
	}
	waitChat(t, root, *ss.DefaultChat, idle)
	cs := root.State(*ss.DefaultChat).(*protocol.ChatState)
	if len(cs.Turns) != 1 || !strings.Contains(replyOf(cs.Turns[0]), "hello from the form") {
		t.Fatalf("the first turn: %+v", cs.Turns)
	}
	if raw := string(ss.Config.Values["permissions"]); !strings.Contains(raw, "bypass") {
		t.Fatalf("the session's permissions are %s", raw)
	}
	if page := b.get(loc.RequestURI()); page.status != http.StatusOK || !strings.Contains(page.body, "hello from the form") {
		t.Fatalf("the new session's page: %d\n%s", page.status, page.body)
	}
	// The form offers its folder as a recent one now.
	if page := b.get("/ui/new"); !strings.Contains(page.body, `<optgroup label="Your recent folders"><option value="`+e.work+`" selected>`) {
		t.Fatalf("the form does not offer the recent folder:\n%s", page.body)
	}
}

// TestNewSessionRefused shows a guest neither the link nor the form, and
// refuses their post.
func TestNewSessionRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.signIn("gus")
	if page := b.get("/ui/"); strings.Contains(page.body, `href="/ui/new"`) {
		t.Fatal("a guest is offered New session")
	}
	if page := b.get("/ui/new"); page.status != http.StatusForbidden || strings.Contains(page.body, `action="/ui/new"`) {
		t.Fatalf("a guest's /ui/new: %d\n%s", page.status, page.body)
	}
	form := url.Values{"csrf": {b.csrf()}, "folder": {e.work}, "provider": {"script"}, "isolation": {"folder"}, "text": {"say hi"}}
	if resp := b.post("/ui/new", form); resp.status != http.StatusForbidden {
		t.Fatalf("a guest's post: %d %s", resp.status, resp.body)
	}
	var res protocol.ListSessionsResult
	if err := e.conn("root").Call(context.Background(), "listSessions", protocol.ListSessionsParams{}, &res); err != nil || len(res.Items) != 0 {
		t.Fatalf("the host lists %d sessions (%v)", len(res.Items), err)
	}
}

// TestNewSessionWorktree starts a worktree session from the form in a
// git repository: its first turn runs in a tree of its own, and the form
// does not offer that tree as a recent folder.
func TestNewSessionWorktree(t *testing.T) {
	e := newEnv(t, envOptions{repo: true})
	b := e.signIn("mo")
	form := url.Values{"csrf": {b.csrf()}, "folder": {e.work}, "provider": {"script"}, "isolation": {"worktree"},
		"branch": {"main"}, "text": {"say in a tree"}}
	resp := b.post("/ui/new", form)
	loc, err := url.Parse(resp.header.Get("Location"))
	if resp.status != http.StatusSeeOther || err != nil {
		t.Fatalf("a worktree session: %d %s", resp.status, resp.body)
	}
	root := e.conn("root")
	st, err := root.Subscribe(context.Background(), loc.Query().Get("uri"))
	if err != nil {
		t.Fatal(err)
	}
	chat := *st.(*protocol.SessionState).DefaultChat
	if _, err := root.Subscribe(context.Background(), chat); err != nil {
		t.Fatal(err)
	}
	waitChat(t, root, chat, idle)
	ss := root.State(loc.Query().Get("uri")).(*protocol.SessionState)
	if len(ss.WorkingDirectories) == 0 || !strings.Contains(ss.WorkingDirectories[0], ".worktrees/") {
		t.Fatalf("the worktree session works in %v", ss.WorkingDirectories)
	}
	if got := string(ss.Config.Values["isolation"]); got != `"worktree"` {
		t.Fatalf("its isolation is %s", got)
	}
	if page := b.get("/ui/new"); strings.Contains(page.body, ".worktrees/") {
		t.Fatalf("the form offers the session's tree:\n%s", page.body)
	}
}
