package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// api calls the host's HTTP API as who and returns the status and body.
func (e *env) api(who, method, path string, body any) (int, string) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, r)
	req.Header.Set("Authorization", "Bearer "+e.tokens[who])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// makeAutomation makes an automation as who through the HTTP API, as
// TestAutomationsPage does, with a schedule when cron is not "".
func (e *env) makeAutomation(who, id, title, cron, tz string) {
	e.t.Helper()
	triggers := []any{}
	if cron != "" {
		triggers = append(triggers, map[string]any{"kind": "schedule", "id": "clock",
			"schedule": map[string]any{"expression": cron, "timeZone": tz}})
	}
	status, body := e.api(who, "POST", "/v1/automations", map[string]any{"id": id, "definition": map[string]any{
		"title":    title,
		"message":  map[string]any{"text": "say hello", "origin": map[string]any{"kind": "automation"}},
		"session":  map[string]any{"provider": "script"},
		"enabled":  true,
		"triggers": triggers,
	}})
	if status != http.StatusCreated {
		e.t.Fatalf("making automation %s as %s: %d %s", id, who, status, body)
	}
}

// automation reads one of who's automations through the HTTP API; nil
// when there is none.
func (e *env) automation(who, id string) *protocol.AutomationEntry {
	e.t.Helper()
	status, body := e.api(who, "GET", "/v1/automations/"+id, nil)
	if status == http.StatusNotFound {
		return nil
	}
	var entry protocol.AutomationEntry
	if status != http.StatusOK || entry.UnmarshalJSON([]byte(body)) != nil {
		e.t.Fatalf("reading automation %s as %s: %d %s", id, who, status, body)
	}
	return &entry
}

// addMember adds a member to the users directory, with a token.
func (e *env) addMember(id string) {
	e.t.Helper()
	dir, _ := e.auth.Users.(*grants.Directory)
	if dir == nil {
		e.t.Fatal("the host has no users directory")
	}
	if err := dir.Add(id, id, grants.Member); err != nil {
		e.t.Fatal(err)
	}
	if err := dir.SetMemberships(id, []grants.Membership{{Team: "core", Project: "ahpd", Primary: true}}); err != nil {
		e.t.Fatal(err)
	}
	tok, err := dir.IssueToken(id, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	e.tokens[id] = tok
}

// automationForm posts one of the automations page's buttons.
func (b *browser) automationForm(csrf, uri, op string, more ...string) response {
	f := url.Values{"csrf": {csrf}, "automation": {uri}, "op": {op}}
	for i := 0; i+1 < len(more); i += 2 {
		f.Set(more[i], more[i+1])
	}
	return b.post("/ui/automations/action", f)
}

var automationButton = regexp.MustCompile(`name="op" value="(run|enable|disable|delete)"`)

// buttons lists the automation buttons a page shows.
func buttons(body string) []string {
	var out []string
	for _, m := range automationButton.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestAutomationActions: the automations page says its schedule in
// words, its next run as a <time>, and its runs as the entry lists them;
// Run now, Disable, Enable and Delete (asking first) act as the person,
// as the HTTP API does, and the page and the API agree after each.
func TestAutomationActions(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.makeAutomation("mo", "nightly", "Nightly <tests>", "0 3 * * 1-5", "Europe/Berlin")
	const uri = "ahp-automation:/nightly"
	mo := e.signIn("mo")
	csrf := mo.csrf()

	r := mo.get("/ui/automations")
	for _, want := range []string{"Nightly &lt;tests&gt;", "at 03:00 Europe/Berlin on weekdays", `<time class="local" datetime="`,
		" Europe/Berlin</time>", "no runs on record", `data-live="/ui/automations/events"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("mo's automations page lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, `"expression"`) {
		t.Errorf("the page shows the schedule as JSON:\n%s", r.body)
	}
	if got := strings.Join(buttons(r.body), " "); got != "run disable delete" {
		t.Errorf("mo's buttons: %q, want run disable delete", got)
	}

	// Run now: a manual run, listed as such (runCount, which counts only
	// automatic runs, is not what the page counts).
	if r := mo.automationForm(csrf, uri, "run"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/automations#a-"+anchorOf(uri) {
		t.Fatalf("Run now: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	entry := e.automation("mo", "nightly")
	if len(entry.Runs) != 1 {
		t.Fatalf("after Run now the entry lists %d runs", len(entry.Runs))
	}
	if _, ok := entry.Runs[0].Origin.(*protocol.AutomationManualRunOrigin); !ok {
		t.Errorf("the run's origin is %T", entry.Runs[0].Origin)
	}
	r = mo.get("/ui/automations")
	for _, want := range []string{"1 run on record, by hand", `<td>by hand</td>`, `data-run="` + entry.Runs[0].Resource + `"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("after Run now the page lacks %q:\n%s", want, r.body)
		}
	}

	// Disable, then Enable.
	if r := mo.automationForm(csrf, uri, "disable"); r.status != http.StatusSeeOther {
		t.Fatalf("Disable: %d %s", r.status, r.body)
	}
	if e.automation("mo", "nightly").Definition.Enabled {
		t.Error("Disable left it enabled")
	}
	r = mo.get("/ui/automations")
	if got := strings.Join(buttons(r.body), " "); got != "run enable delete" || !strings.Contains(r.body, `t-disabled">disabled`) {
		t.Errorf("a disabled automation's buttons: %q\n%s", got, r.body)
	}
	if r := mo.automationForm(csrf, uri, "enable"); r.status != http.StatusSeeOther {
		t.Fatalf("Enable: %d %s", r.status, r.body)
	}
	if !e.automation("mo", "nightly").Definition.Enabled {
		t.Error("Enable left it disabled")
	}

	// Delete asks first, in a page of its own that works without script.
	r = mo.automationForm(csrf, uri, "delete")
	if r.status != http.StatusOK || !strings.Contains(r.body, "Delete Nightly &lt;tests&gt;?") || !strings.Contains(r.body, `name="confirm" value="yes"`) {
		t.Fatalf("Delete's question: %d\n%s", r.status, r.body)
	}
	if e.automation("mo", "nightly") == nil {
		t.Fatal("Delete removed it without asking")
	}
	if r := mo.automationForm(csrf, uri, "delete", "confirm", "yes"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/automations" {
		t.Fatalf("Delete, confirmed: %d %s", r.status, r.body)
	}
	if e.automation("mo", "nightly") != nil {
		t.Error("Delete, confirmed, left it there")
	}
	if r := mo.get("/ui/automations"); strings.Contains(r.body, "nightly") {
		t.Errorf("the deleted automation is still shown:\n%s", r.body)
	}

	// A form without the login's CSRF token, or naming no button, does
	// nothing.
	e.makeAutomation("mo", "again", "Again", "", "")
	if r := mo.automationForm("forged", "ahp-automation:/again", "delete", "confirm", "yes"); r.status != http.StatusForbidden {
		t.Errorf("a forged Delete: %d", r.status)
	}
	if r := mo.automationForm(csrf, "ahp-automation:/again", "explode"); r.status != http.StatusBadRequest {
		t.Errorf("an unknown op: %d", r.status)
	}
	if e.automation("mo", "again") == nil {
		t.Error("a refused form removed the automation")
	}
}

// anchorOf is the page's anchor of an automation's URI, as the dashboard
// makes it.
func anchorOf(uri string) string {
	return regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(uri, "_")
}

// TestAutomationActionsRefused: a guest and another member see no
// buttons for mo's automation (they do not see it at all: each person's
// catalogue is their own), and their posts are refused, as is a change
// to an automation of the config file, which offers only Run; a guest's
// own automation of the config file shows no Run either, their grants
// not allowing it.
func TestAutomationActionsRefused(t *testing.T) {
	def := protocol.AutomationDefinition{Title: "Declared", Enabled: true,
		Message: protocol.Message{Text: "say declared", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Session: protocol.AutomationSessionTemplate{Provider: new("script")}, Triggers: []protocol.AutomationTrigger{}}
	e := newEnv(t, envOptions{declared: []automations.Declared{
		{Owner: "user:mo", Resource: "ahp-automation:/from-file", Definition: def},
		{Owner: "user:gus", Resource: "ahp-automation:/gus-file", Definition: def},
	}})
	e.addMember("ada")
	e.makeAutomation("mo", "mine", "Mine", "*/5 * * * *", "UTC")
	const uri = "ahp-automation:/mine"

	for _, who := range []string{"gus", "ada"} {
		b := e.signIn(who)
		r := b.get("/ui/automations")
		if strings.Contains(r.body, "Mine") || strings.Contains(r.body, "from-file") {
			t.Errorf("%s sees mo's automations:\n%s", who, r.body)
		}
		if got := buttons(r.body); len(got) != 0 {
			t.Errorf("%s is offered %v:\n%s", who, got, r.body)
		}
		csrf := b.csrf()
		want := map[string]int{"gus": http.StatusForbidden, "ada": http.StatusNotFound}[who]
		for _, op := range []string{"run", "disable", "delete"} {
			if r := b.automationForm(csrf, uri, op, "confirm", "yes"); r.status != want {
				t.Errorf("%s posting %s to mo's automation: %d, want %d: %s", who, op, r.status, want, r.body)
			}
		}
	}
	entry := e.automation("mo", "mine")
	if entry == nil || !entry.Definition.Enabled || len(entry.Runs) != 0 {
		t.Fatalf("mo's automation after the refused posts: %+v", entry)
	}

	// The guest's own automation of the config file: shown, no buttons;
	// Run now posted anyway is refused by their grants.
	gus := e.signIn("gus")
	r := gus.get("/ui/automations")
	if !strings.Contains(r.body, "Declared") || len(buttons(r.body)) != 0 {
		t.Errorf("gus's page, with his automation of the config file:\n%s", r.body)
	}
	if r := gus.automationForm(gus.csrf(), "ahp-automation:/gus-file", "run"); r.status != http.StatusForbidden {
		t.Errorf("gus running his automation: %d %s", r.status, r.body)
	}

	// mo's automation of the config file offers Run now alone; a change
	// posted anyway is refused, and Run now runs it.
	mo := e.signIn("mo")
	csrf := mo.csrf()
	r = mo.get("/ui/automations")
	section := r.body[strings.Index(r.body, `data-automation="ahp-automation:/from-file"`):]
	section = section[:strings.Index(section, "</section>")]
	if got := strings.Join(buttons(section), " "); got != "run" {
		t.Errorf("an automation of the config file offers %q", got)
	}
	for _, op := range []string{"disable", "delete"} {
		if r := mo.automationForm(csrf, "ahp-automation:/from-file", op, "confirm", "yes"); r.status != http.StatusConflict {
			t.Errorf("%s of an automation of the config file: %d %s", op, r.status, r.body)
		}
	}
	if r := mo.automationForm(csrf, "ahp-automation:/from-file", "run"); r.status != http.StatusSeeOther {
		t.Errorf("running an automation of the config file: %d %s", r.status, r.body)
	}
	if got := e.automation("mo", "from-file"); got == nil || !got.Definition.Enabled || len(got.Runs) != 1 {
		t.Errorf("the automation of the config file after the posts: %+v", got)
	}
	waitRunsEnded(t, e, "mo")
}

// waitRunsEnded waits until none of who's automations has a run in
// progress, so none outlives the test.
func waitRunsEnded(t *testing.T, e *env, who string) {
	t.Helper()
	c := e.conn(who)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if _, err := c.Subscribe(ctx, automations.CatalogueURI); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitState(ctx, automations.CatalogueURI, func(st protocol.ChannelState) bool {
		as, _ := st.(*protocol.AutomationState)
		if as == nil {
			return false
		}
		for _, e := range as.Entries {
			for _, r := range e.Runs {
				switch r.Lifecycle.(type) {
				case *protocol.AutomationPendingRunLifecycle, *protocol.AutomationRunningRunLifecycle:
					return false
				}
			}
		}
		return true
	}); err != nil {
		t.Fatalf("waiting for %s's runs to end: %v", who, err)
	}
}

// TestAutomationsLive follows the automations page's stream: an
// automation made, run and removed through the HTTP API is each time
// sent again, as the person sees it; and the stream is one of the
// person's live pages, refused past their bound.
func TestAutomationsLive(t *testing.T) {
	e := newEnv(t, envOptions{throttle: 10 * time.Millisecond, livePerPerson: 2})
	mo := e.signIn("mo")
	s := mo.stream(t, "/ui/automations/events")
	e.makeAutomation("mo", "live", "Live one", "*/15 * * * *", "UTC")
	html := s.until(t, "automations", "html", "Live one")
	for _, want := range []string{"every 15 minutes", `value="run"`, `name="csrf"`} {
		if !strings.Contains(html, want) {
			t.Errorf("the live list lacks %q:\n%s", want, html)
		}
	}
	if status, body := e.api("mo", "POST", "/v1/automations/live/runs", map[string]any{}); status != http.StatusAccepted {
		t.Fatalf("running it: %d %s", status, body)
	}
	s.until(t, "automations", "html", "1 run on record, by hand")
	s.until(t, "automations", "html", `s-complete`)
	if status, _ := e.api("mo", "DELETE", "/v1/automations/live", nil); status != http.StatusNoContent {
		t.Fatalf("removing it: %d", status)
	}
	s.until(t, "automations", "html", "No automations you may see")

	// A second live page is mo's last; a third is refused.
	mo.stream(t, "/ui/events")
	req, _ := http.NewRequest("GET", e.srv.URL+"/ui/automations/events", nil)
	if r := mo.do(req); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Errorf("a third live page: %d %q", r.status, r.header.Get("Retry-After"))
	}
}
