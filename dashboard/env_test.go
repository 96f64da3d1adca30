package dashboard_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/automations/asowner"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/dashboard"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/httpapi"
	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(lockcheck.Checked(m)) }

// env is a host with the script backend and a users directory (mo and
// max, members; gus, a guest; the connection token "root-token"), serving the
// dashboard as ahpd does: under /ui/ beside /v1/ and the WebSocket.
type env struct {
	t      testing.TB
	h      *host.Host
	auth   *grants.Authenticator
	srv    *httptest.Server
	ui     *dashboard.Dashboard
	tokens map[string]string
	work   string // the sessions' folder, the host's default
}

type envOptions struct {
	open     bool // no token, no users
	throttle time.Duration
	repo     bool // the sessions' folder is a git repository, with one commit
	roots    bool // the sessions' folder is the host's one allowed root
	// The dashboard's bounds and clock, as its Options have them.
	maxLogins, loginsPerPerson, livePerPerson int
	now                                       func() time.Time
	metrics                                   *dashboard.Metrics
	declared                                  []automations.Declared // the config file's automations
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	state := t.TempDir()
	work := filepath.Join(state, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if o.repo {
		initRepo(t, work)
	}
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts"))); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	auth := &grants.Authenticator{Host: "test"}
	if !o.open {
		dir := grants.NewDirectory()
		tokens["root"] = "root-token"
		for _, u := range []struct {
			id   string
			role grants.Role
		}{{"mo", grants.Member}, {"max", grants.Member}, {"gus", grants.Guest}} {
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
		auth = &grants.Authenticator{Host: "test", ConnectionToken: "root-token", Users: dir}
	}
	j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(state, "journal")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := j.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var roots []string
	if o.roots {
		roots = []string{work}
	}
	h, err := host.New(host.Options{StateDir: state, AllowedRoots: roots, Backends: backends, Logger: log, Version: "test", DefaultDirectory: work, Auth: auth, Journal: j,
		Automations: host.AutomationOptions{Declared: o.declared, NewRunner: func(h host.RunnerHost) automations.Runner { return asowner.New(h) }}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	listen := srv.Listener.Addr().String()
	mux.Handle("/v1/", httpapi.New(httpapi.Options{Host: h, Auth: auth, Open: o.open, Listen: listen, Logger: log}))
	ui := dashboard.New(dashboard.Options{Host: h, Auth: auth, Open: o.open, Listen: listen, Logger: log, Throttle: o.throttle,
		MaxLogins: o.maxLogins, MaxLoginsPerPerson: o.loginsPerPerson, MaxLivePagesPerPerson: o.livePerPerson, Now: o.now, Metrics: o.metrics})
	mux.Handle("/ui/", ui)
	mux.Handle("/", h.Handler(o.open, listen))
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("closing the host: %v", err)
		}
		srv.Close()
	})
	return &env{t: t, h: h, auth: auth, srv: srv, ui: ui, tokens: tokens, work: work}
}

// conn opens an AHP connection to the host as who, closed with the test.
func (e *env) conn(who string) *client.Client { return e.connID(who, "test-"+who) }

// connID is conn with a client id of its own.
func (e *env) connID(who, id string) *client.Client {
	e.t.Helper()
	cred := grants.Credential{Principal: e.auth.Root()}
	if tok := e.tokens[who]; tok != "" {
		var ok bool
		if cred, ok = e.auth.Login(tok); !ok {
			e.t.Fatalf("%s's token is refused", who)
		}
	}
	stream, err := e.h.Connect(cred)
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := client.Open(context.Background(), stream, &client.Options{ClientID: id})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// startSession makes a script session as c's person, with title, and
// sends it input; it returns once the host announced the session to
// everybody (the host shows a session only to its maker until its first
// turn sets out). It returns the session's URI and its default chat.
func (e *env) startSession(t testing.TB, c *client.Client, id, title, input string) (string, string) {
	t.Helper()
	return e.startSessionWith(t, c, id, title, input, nil)
}

// bypass is the session config under which a script session's steps run
// without a person confirming them (docs/PERMISSIONS.md): for sessions
// whose input runs a command, which the default permissions ask about.
var bypass = protocol.Object{"permissions": jsontext.Value(`{"mode":"bypass"}`)}

// teamShared is the config of a person's session others may work in (a
// person's is private unless shared).
var teamShared = protocol.Object{"sharing": jsontext.Value(`"team"`)}

// startSessionWith is startSession for a session made with config.
func (e *env) startSessionWith(t testing.TB, c *client.Client, id, title, input string, config protocol.Object) (string, string) {
	t.Helper()
	ctx := context.Background()
	w := e.connID("root", "watch-"+id)
	if _, err := w.Subscribe(ctx, protocol.RootURI); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	uri := protocol.SessionScheme + ":/" + id
	provider := "script"
	if err := c.Call(ctx, "createSession", protocol.CreateSessionParams{Channel: uri, Provider: &provider, Config: config,
		Meta: protocol.Object{"ahpd.strictConfig": jsontext.Value("true")}}, nil); err != nil {
		t.Fatal(err)
	}
	st, err := c.Subscribe(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	chat := protocol.DefaultChatURI(uri)
	if ss, ok := st.(*protocol.SessionState); ok && ss.DefaultChat != nil {
		chat = *ss.DefaultChat
	}
	if _, err := c.Subscribe(ctx, chat); err != nil {
		t.Fatal(err)
	}
	if err := c.DispatchWait(ctx, uri, &protocol.SessionTitleChangedAction{Title: title}); err != nil {
		t.Fatal(err)
	}
	send(t, c, chat, "t-"+id, input)
	timeout := time.After(testwait.Hang)
	for {
		select {
		case ev := <-w.Events():
			if ev.Method == "root/sessionAdded" && strings.Contains(string(ev.Params), `"`+uri+`"`) {
				return uri, chat
			}
		case <-timeout:
			t.Fatalf("%s was never announced", uri)
		}
	}
}

// send starts a turn in chat.
func send(t testing.TB, c *client.Client, chat, turnID, input string) {
	t.Helper()
	msg := protocol.Message{Text: input, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
	if err := c.DispatchWait(context.Background(), chat, &protocol.ChatTurnStartedAction{TurnID: turnID, StartedAt: client.Now(), Message: msg}); err != nil {
		t.Fatal(err)
	}
}

// waitChat waits until chat's state satisfies cond.
func waitChat(t testing.TB, c *client.Client, chat string, cond func(*protocol.ChatState) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if _, err := c.WaitState(ctx, chat, func(st protocol.ChannelState) bool {
		cs, ok := st.(*protocol.ChatState)
		return ok && cond(cs)
	}); err != nil {
		t.Fatalf("waiting on %s: %v", chat, err)
	}
}

func idle(cs *protocol.ChatState) bool { return cs.ActiveTurn == nil && len(cs.Turns) > 0 }

// browser is a signed-in (or not) HTTP client with a cookie jar, that
// does not follow redirects.
type browser struct {
	e   *env
	hc  *http.Client
	who string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn signs b in as who, failing the test if that is refused.
func (e *env) signIn(who string) *browser {
	e.t.Helper()
	b := e.browser()
	resp := b.post("/ui/login", url.Values{"token": {e.tokens[who]}, "next": {"/ui/"}})
	if resp.status != http.StatusSeeOther {
		e.t.Fatalf("signing in as %s: %d %s", who, resp.status, resp.body)
	}
	b.who = who
	return b
}

type response struct {
	status int
	body   string
	header http.Header
}

func (b *browser) do(req *http.Request) response {
	b.e.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(data), header: resp.Header}
}

func (b *browser) get(path string) response {
	req, _ := http.NewRequest("GET", b.e.srv.URL+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) response {
	req, _ := http.NewRequest("POST", b.e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page b is shown.
func (b *browser) csrf() string {
	b.e.t.Helper()
	m := csrfInput.FindStringSubmatch(b.get("/ui/").body)
	if m == nil {
		b.e.t.Fatal("the sessions page has no CSRF token")
	}
	return m[1]
}

// cancel cancels the turn running in chat, as a client does.
func cancel(t testing.TB, c *client.Client, chat string) {
	t.Helper()
	cs, _ := c.State(chat).(*protocol.ChatState)
	if cs == nil || cs.ActiveTurn == nil {
		t.Fatalf("%s runs no turn", chat)
	}
	if err := c.DispatchWait(context.Background(), chat, &protocol.ChatTurnCancelledAction{TurnID: cs.ActiveTurn.ID}); err != nil {
		t.Fatal(err)
	}
}

// initRepo makes dir a git repository with one commit.
func initRepo(t testing.TB, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "README.md"}, {"commit", "-q", "-m", "start"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.invalid",
			"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
