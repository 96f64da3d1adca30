package dashboard_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// scrubSession runs a session of three turns in a repository: two that
// write a file each, and one that asks and waits for an answer.
func scrubSession(t *testing.T, e *env) (uri, chat string) {
	t.Helper()
	mo := e.conn("mo")
	uri, chat = e.startSessionWith(t, mo, "sc", "scrubbed", "write notes.txt hello", bypass)
	waitChat(t, mo, chat, idle)
	waitFiles(t, mo, uri, 1)
	send(t, mo, chat, "t2", "write b.txt bee")
	waitChat(t, mo, chat, func(cs *protocol.ChatState) bool { return cs.ActiveTurn == nil && len(cs.Turns) == 2 })
	waitFiles(t, mo, uri, 2)
	send(t, mo, chat, "t3", "ask Which branch?")
	waitChat(t, mo, chat, waiting)
	t.Cleanup(func() { cancel(t, mo, chat) })
	return uri, chat
}

var (
	optionRE = regexp.MustCompile(`<option value="(\d*)"( selected)?>([^<]*)</option>`)
	labelRE  = regexp.MustCompile(`<span class="text">([^<]*)</span>`)
)

// TestTimelineLabels: the timeline says in words what each event was,
// names chats by their titles, and its scrubber lists the events oldest
// first, now last; the state right after turn 1 shows the checkpoints
// the session had then.
func TestTimelineLabels(t *testing.T) {
	e := newEnv(t, envOptions{repo: true})
	uri, _ := scrubSession(t, e)
	b := e.signIn("mo")
	link := "/ui/session?" + url.Values{"uri": {uri}}.Encode()
	r := b.get(link)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d", link, r.status)
	}
	var labels []string
	for _, m := range labelRE.FindAllStringSubmatch(r.body, -1) {
		labels = append(labels, html.UnescapeString(m[1]))
	}
	all := strings.Join(labels, "\n")
	for _, want := range []string{"turn 1: write notes.txt hello", "sent: write notes.txt hello", "wrote notes.txt", "turn 1 completed",
		"turn 2: write b.txt bee", "wrote b.txt", "asked: Which branch?", "turn 3: ask Which branch?", "called a tool: Write"} {
		if !strings.Contains(all, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "ahp-chat:") {
		t.Errorf("the timeline names a chat by its URI:\n%s", all)
	}
	// The default chat is titled by its session (session/chatUpdated).
	if !strings.Contains(all, "“scrubbed” needs input") {
		t.Errorf("the chat's transition is not named by its title:\n%s", all)
	}
	opts := optionRE.FindAllStringSubmatch(r.body, -1)
	if len(opts) < 5 || opts[len(opts)-1][1] != "" || opts[len(opts)-1][2] == "" {
		t.Fatalf("the scrubber's points: %v", opts)
	}
	// Oldest first, one point an action.
	first, third, seen := -1, -1, map[string]bool{}
	for i, o := range opts {
		if seen[o[1]] {
			t.Errorf("two points at %s", o[1])
		}
		seen[o[1]] = true
		if strings.HasSuffix(o[3], "turn 1: write notes.txt hello") {
			first = i
		}
		if strings.HasSuffix(o[3], "turn 3: ask Which branch?") {
			third = i
		}
	}
	if first < 0 || third < first {
		t.Errorf("the scrubber's points, oldest first: %v", opts)
	}
	// The state right after turn 1 ended: one turn, and its checkpoints.
	var at string
	for _, o := range opts {
		if strings.HasSuffix(o[3], "turn 1 completed") {
			at = o[1]
		}
	}
	if at == "" {
		t.Fatalf("no point at turn 1's end: %v", opts)
	}
	r = b.get(link + "&at=" + at)
	if r.status != http.StatusOK || !strings.Contains(r.body, "As they were then: 2 checkpoints.") || !strings.Contains(r.body, `class="review-turn">1</a>`) ||
		strings.Contains(r.body, `class="review-turn">2</a>`) || !strings.Contains(r.body, `<option value="`+at+`" selected>`) ||
		!strings.Contains(r.body, "turn 1 completed</strong> (event "+at+")") {
		t.Errorf("the state after turn 1: %d %s", r.status, r.body)
	}
	// Now, all three.
	if r = b.get(link); !strings.Contains(r.body, `class="review-turn">2</a>`) || strings.Contains(r.body, "As they were then") {
		t.Errorf("now: %s", r.body)
	}
}

// TestBrowserScrub drags the timeline's scrubber back to the end of the
// first turn: the page shows the session then, with the checkpoints it
// had then, and the scrubber where it was let go.
func TestBrowserScrub(t *testing.T) {
	e := newEnv(t, envOptions{repo: true})
	ctx := startBrowser(t)
	uri, _ := scrubSession(t, e)
	signInBrowser(t, ctx, e, "mo")
	tab(t, ctx, "the session's page",
		chromedp.Navigate(e.srv.URL+"/ui/session?uri="+uri),
		chromedp.WaitVisible(chromedp.CSS("#scrub")),
		// Right is now.
		poll(`document.querySelector("#scrub").value === document.querySelector("#scrub").max`),
		poll(`document.querySelector("#scrub-label").textContent === "now"`),
	)
	i, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("#scrub-at option")].findIndex(o => o.textContent.endsWith("turn 1 completed"))`))
	if err != nil || i < 0 {
		t.Fatalf("no point at turn 1's end (%v)", err)
	}
	// Moved as a pointer moves it: input events as it goes, change when
	// let go.
	c, stop := context.WithTimeout(ctx, testwait.Hang)
	defer stop()
	loaded := chromedp.Events(c, page.LoadEventFired)
	if _, err := chromedp.Run(c, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		const r = document.querySelector("#scrub");
		r.dispatchEvent(new PointerEvent("pointerdown", {bubbles: true}));
		for (let v = Number(r.max); v >= %d; v--) { r.value = String(v); r.dispatchEvent(new Event("input", {bubbles: true})); }
		r.dispatchEvent(new Event("change", {bubbles: true}));
		return true;
	})()`, i))); err != nil {
		t.Fatal(err)
	}
	for _, err := range loaded {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	tab(t, ctx, "the session right after turn 1",
		chromedp.WaitVisible(chromedp.CSS(".replay")),
		poll(`!!document.querySelector("#turn-t-sc") && !document.querySelector("#turn-t2")`),
		poll(`document.querySelector(".checkpoints .then").innerText.includes("2 checkpoints")`),
		poll(`!document.querySelector('a.review-turn[href*="turn=2"]')`),
		poll(fmt.Sprintf(`document.querySelector("#scrub").value === "%d"`, i)),
		poll(`document.querySelector("#scrub-label").textContent.endsWith("turn 1 completed")`),
	)
	shoot(t, ctx, "dashboard-scrub.png")
}
