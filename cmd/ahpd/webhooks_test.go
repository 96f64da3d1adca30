package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	hostevents "github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/webhooks"
)

const hookSecret = "the receiver's secret: 0123456789"

// hookReceiver is a webhook receiver on 127.0.0.1 that verifies each
// delivery under hookSecret. While down, it answers 503.
type hookReceiver struct {
	srv  *httptest.Server
	got  chan webhooks.Body
	mu   sync.Mutex
	down bool
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{got: make(chan webhooks.Body, 100)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if err := webhooks.Verify([]byte(hookSecret), r.Header, raw, time.Now(), 0); err != nil {
			t.Errorf("a delivery does not verify: %v", err)
		}
		var b webhooks.Body
		if err := json.Unmarshal(raw, &b); err != nil || b.ID != r.Header.Get(webhooks.HeaderDelivery) {
			t.Errorf("a delivery's body %s (%v), id header %q", raw, err, r.Header.Get(webhooks.HeaderDelivery))
		}
		rc.got <- b
		rc.mu.Lock()
		down := rc.down
		rc.mu.Unlock()
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) setDown(down bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.down = down
}

// next returns the next delivery, which must be of kind k.
func (rc *hookReceiver) next(t *testing.T, k hostevents.Kind) webhooks.Body {
	t.Helper()
	select {
	case b := <-rc.got:
		if b.Event != k {
			t.Fatalf("delivered %s (%+v), want %s", b.Event, b, k)
		}
		return b
	case <-time.After(startTimeout):
		t.Fatalf("no %s delivered", k)
		return webhooks.Body{}
	}
}

// hookConfig is a config file whose webhook posts every event to rc,
// with its secret in a file.
func hookConfig(t *testing.T, e *env, rc *hookReceiver, more string) string {
	t.Helper()
	secret := filepath.Join(e.root, "webhook-secret")
	if err := os.WriteFile(secret, []byte(hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, e, `
webhooks:
  - name: rx
    url: `+rc.srv.URL+`/hook/T0KEN-IN-PATH
    events: [needs_input, turn_completed, turn_failed, automation_run_finished]
    secretFile: `+secret+`
`+more)
}

// TestWebhooksInTheDaemon: a daemon with a webhook posts a session's
// question, its turns' ends and an automation's run to a receiver on
// 127.0.0.1, signed, in order; `ahpd webhooks log` shows the deliveries
// to an admin and refuses a member; /metrics counts them; neither the
// secret nor the URL's path reaches the logs.
func TestWebhooksInTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newHookReceiver(t)
	users := filepath.Join(e.root, "users.yaml")
	ahpdUser(t, e, users, 0, "add", "mo", "--role", "member")
	mo := ahpdUser(t, e, users, 0, "token", "mo")[0]
	config := hookConfig(t, e, rc, `
users: `+users+`
automations:
  - id: nightly
    title: Nightly
    message: say ran
    session: {provider: script, folders: [`+e.work+`]}
`)
	p := serveDaemon(t, e, "--config", config, "--log-level", "debug")
	c := connect(t, p, e.token(t), "watcher")
	session, chat := newSession(t, c, e, "s1")

	startTurn(c, chat, "t1", "ask Which file?")
	ask := waitingOn(t, c, chat, "question")
	b := rc.next(t, hostevents.NeedsInput)
	if b.Session == nil || b.Session.URI != session || b.Request == nil || b.Request.ID != ask || b.Request.Text != "Which file?" ||
		b.Request.AnswerPath != "/v1/sessions/s1/questions/"+ask {
		t.Errorf("needs_input: %+v %+v", b.Session, b.Request)
	}
	if r := cli(t, e, "answer", "s1", "notes.txt"); r.code != 0 {
		t.Fatalf("ahpd answer: %d %s", r.code, r.stderr)
	}
	rc.next(t, hostevents.TurnCompleted)
	send(t, c, chat, "t2", "say hi")
	if b = rc.next(t, hostevents.TurnCompleted); b.Turn == nil || b.Turn.ID != "t2" {
		t.Errorf("turn_completed: %+v", b.Turn)
	}
	send(t, c, chat, "t3", "fail boom")
	if b = rc.next(t, hostevents.TurnFailed); b.Turn == nil || b.Turn.Error == nil || !strings.Contains(b.Turn.Error.Message, "boom") {
		t.Errorf("turn_failed: %+v", b.Turn)
	}
	if r := cli(t, e, "automations", "run", "nightly"); r.code != 0 {
		t.Fatalf("ahpd automations run: %d %s", r.code, r.stderr)
	}
	turn := rc.next(t, hostevents.TurnCompleted)
	b = rc.next(t, hostevents.AutomationRunFinished)
	if b.Run == nil || b.Run.Automation != "ahp-automation:/nightly" || b.Run.Outcome != "completed" || b.Session == nil || turn.Session == nil || b.Session.URI != turn.Session.URI {
		t.Errorf("automation_run_finished: %+v %+v", b.Run, b.Session)
	}

	r := cli(t, e, "webhooks", "log")
	if r.code != 0 {
		t.Fatalf("ahpd webhooks log: %d %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 10 || !strings.HasPrefix(lines[0], "WEBHOOK") || !strings.HasPrefix(lines[1], "rx  ") || !strings.Contains(lines[1], rc.srv.URL) ||
		!strings.HasPrefix(lines[3], "TIME") || !strings.Contains(lines[4], "automation_run_finished") || strings.Join(strings.Fields(lines[9])[2:], " ") != "rx needs_input s1 delivered 1" {
		t.Errorf("ahpd webhooks log:\n%s", r.stdout)
	}
	r = cli(t, e, "webhooks", "log", "--json", "--limit", "2")
	var log webhooks.Log
	if err := json.Unmarshal([]byte(r.stdout), &log); err != nil || r.code != 0 {
		t.Fatalf("ahpd webhooks log --json: %v %d %s %s", err, r.code, r.stdout, r.stderr)
	}
	if len(log.Webhooks) != 1 || log.Webhooks[0].Name != "rx" || !log.Webhooks[0].Signed || len(log.Deliveries) != 2 || log.Deliveries[1].Event != hostevents.TurnCompleted {
		t.Errorf("ahpd webhooks log --json --limit 2: %s", r.stdout)
	}
	if r = cli(t, e, "webhooks", "log", "--token", mo, "--url", p.url("")); r.code != exitFailed || !strings.Contains(r.stderr, "for admins") {
		t.Errorf("a member's ahpd webhooks log: %d %q", r.code, r.stderr)
	}
	if r = cli(t, e, "webhooks", "nope"); r.code != exitUsage {
		t.Errorf("ahpd webhooks nope: %d %q", r.code, r.stderr)
	}

	req, _ := http.NewRequest("GET", "http://"+p.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+e.token(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`ahpd_webhook_deliveries_total{result="delivered",webhook="rx"}`, `ahpd_webhook_pending{webhook="rx"}`, `ahpd_webhook_attempt_seconds_bucket{webhook="rx"`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	p.terminate()
	for _, hidden := range []string{hookSecret, "T0KEN-IN-PATH"} {
		if strings.Contains(p.stderr.String(), hidden) || strings.Contains(string(metrics), hidden) {
			t.Errorf("the daemon's logs or metrics show %q", hidden)
		}
	}
}

// TestWebhooksOutliveARestart: a delivery the receiver refused when the
// daemon stopped is sent again, with the same id, when it starts again.
func TestWebhooksOutliveARestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newHookReceiver(t)
	rc.setDown(true)
	config := hookConfig(t, e, rc, "")
	p := serveDaemon(t, e, "--config", config)
	c := connect(t, p, e.token(t), "c")
	_, chat := newSession(t, c, e, "s1")
	send(t, c, chat, "t1", "say once")
	first := rc.next(t, hostevents.TurnCompleted) // refused: 503
	c.Close()
	p.terminate()

	rc.setDown(false)
	p = serveDaemon(t, e, "--config", config)
	if again := rc.next(t, hostevents.TurnCompleted); again.ID != first.ID || again.Turn.ID != "t1" {
		t.Errorf("after the restart, %s of %+v; before, %s", again.ID, again.Turn, first.ID)
	}
	p.terminate()
	if !strings.Contains(p.stderr.String(), "deliveries that waited when ahpd stopped") {
		t.Errorf("the start does not say it resumed deliveries:\n%s", p.stderr.String())
	}
}

// TestWebhooksConfigRefused: a webhook the checks refuse stops the
// daemon with status 2, naming the entry and the field, not the URL's
// path; a daemon without webhooks says so to `ahpd webhooks log`.
func TestWebhooksConfigRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tt := range []struct{ yaml, want string }{
		{"webhooks:\n  - {url: http://hooks.example.com/T0KEN, events: [turn_failed], secret: 0123456789abcdef}\n",
			"ahpd: config file: webhooks[0].url: http://hooks.example.com is plain http beyond this machine"},
		{"webhooks:\n  - {url: https://hooks.example.com/T0KEN, events: [turn_failed]}\n",
			"ahpd: config file: webhooks[0]: no secret"},
		{"webhooks:\n  - {url: https://hooks.example.com/T0KEN, events: [turn_failed], unsigned: true, retries: 3}\n",
			`unknown key "retries"; the keys allowed there are`},
	} {
		p := launch(t, e, 0, "--config", writeConfig(t, e, tt.yaml), "--state-dir", e.state)
		if code := p.wait(exitTimeout); code != 2 || !strings.Contains(p.stderr.String(), tt.want) || strings.Contains(p.stderr.String(), "T0KEN") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant it to say %q", tt.yaml, code, p.stderr.String(), tt.want)
		}
	}
	serveDaemon(t, e)
	if r := cli(t, e, "webhooks", "log"); r.code != 0 || !strings.Contains(r.stderr, "has no webhooks") {
		t.Errorf("ahpd webhooks log on a daemon without webhooks: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, e, "webhooks", "log", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "{\n  \"webhooks\": [],\n  \"deliveries\": []\n}" {
		t.Errorf("ahpd webhooks log --json without webhooks: %d %q", r.code, r.stdout)
	}
}
