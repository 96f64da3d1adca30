package dashboard_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// The browser tests drive chromium, headless, through
// github.com/chromedp/chromedp: $AHPD_CHROMIUM, else Debian's
// /usr/bin/chromium, else a chromium on PATH. A machine without one skips
// them, saying how to install it, so that go test ./... passes where
// nothing but Go, git, Node and npm is installed; CI installs chromium
// and sets AHPD_REQUIRE_CHROMIUM=1 (.ci/run), which fails them instead.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("AHPD_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
		if _, err := os.Stat(path); err != nil {
			if found, err := exec.LookPath("chromium"); err == nil {
				path = found
			}
		}
	}
	if _, err := exec.LookPath(path); err != nil {
		msg := fmt.Sprintf("the browser tests need chromium (%v): apt-get install -y chromium, or set AHPD_CHROMIUM to one", err)
		if os.Getenv("AHPD_REQUIRE_CHROMIUM") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; skipped, as AHPD_REQUIRE_CHROMIUM is not set")
	}
	return path
}

var screenshots = flag.Bool("screenshots", false, "write the browser test's screenshots to docs/images/")

// startBrowser launches a headless chromium with a fresh profile and
// returns a tab, closed with the test. It is told nothing that would
// make it reach the network.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 760),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// tab runs steps, failing the test with the page's text when one fails.
func tab(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, testwait.Hang)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, body)
	}
}

// follow clicks sel, which leads to a page, and waits for it to load.
func follow(t *testing.T, ctx context.Context, what, sel string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, testwait.Hang)
	defer cancel()
	loaded := chromedp.Events(c, page.LoadEventFired)
	// Clicked from the page's own script: a live update may replace the
	// element between a lookup and a click from outside.
	if _, err := chromedp.Run(c, chromedp.Evaluate[bool](fmt.Sprintf(`(document.querySelector(%q).click(), true)`, sel))); err != nil {
		t.Fatalf("%s: clicking %s: %v", what, sel, err)
	}
	for _, err := range loaded {
		if err != nil {
			t.Fatalf("%s: waiting for the page %s leads to: %v", what, sel, err)
		}
		return
	}
}

// poll waits until a JavaScript expression is true in the page.
func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(testwait.Hang))
}

// shoot saves a screenshot of the page under docs/images/, when asked to,
// and the page's artifacts when they are (AHPD_SCREENSHOTS).
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	artifacts(t, ctx, strings.TrimSuffix(name, ".png"))
	if !*screenshots {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "images", name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func signInBrowser(t *testing.T, ctx context.Context, e *env, who string) {
	t.Helper()
	tab(t, ctx, "signing in as "+who,
		chromedp.Navigate(e.srv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), e.tokens[who]),
	)
	follow(t, ctx, "signing in as "+who, `form.login button[type="submit"]`)
	tab(t, ctx, "signed in as "+who,
		chromedp.WaitVisible(chromedp.CSS("table.sessions")),
		poll(`document.documentElement.dataset.live === "on"`),
	)
}

// TestBrowser follows a person through the dashboard in a real browser:
// sign in, watch a session appear while its turn runs, open it, see the
// reply and the timeline grow live, scrub back to the first turn, cancel
// a running turn, answer a question and approve a write from their
// sessions' pages; a guest sees no button that writes or answers; a
// reply of 10,000 deltas ends with the whole text on the page.
func TestBrowser(t *testing.T) {
	e := newEnv(t, envOptions{throttle: 50 * time.Millisecond})
	ctx := startBrowser(t)
	root := e.conn("root")

	tab(t, ctx, "the sign-in page", chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	shoot(t, ctx, "dashboard-login.png")
	signInBrowser(t, ctx, e, "root")

	// Made while the table is open, the session appears in it.
	_, done := e.startSession(t, root, "older", "an earlier session", "say done already")
	_, asks := e.startSession(t, root, "asks", "a question for you", "ask Which file?")
	_, fails := e.startSession(t, root, "fails", "a failed attempt", "fail the tests do not build")
	waitChat(t, root, done, idle)
	waitChat(t, root, fails, idle)
	waitChat(t, root, asks, func(cs *protocol.ChatState) bool { return cs.Status.Activity() == protocol.StatusInputNeeded })
	uri, chat := e.startSessionWith(t, root, "live", "a live session", "say first reply", bypass)
	tab(t, ctx, "the new session appears in the table",
		poll(`!!document.querySelector('tr[data-session="ahp-session:/live"]')`),
		poll(`!!document.querySelector('tr[data-session="ahp-session:/older"] .s-idle')`),
		poll(`!!document.querySelector('tr[data-session="ahp-session:/asks"] .s-needs-input')`),
		poll(`!!document.querySelector('tr[data-session="ahp-session:/fails"] .s-failed')`),
	)
	waitChat(t, root, chat, idle)
	tab(t, ctx, "the table follows the turn's end", poll(`!!document.querySelector('tr[data-session="ahp-session:/live"] .s-idle')`))
	shoot(t, ctx, "dashboard-sessions.png")

	// Open it: the reply is there; a second turn streams in live and the
	// timeline grows.
	follow(t, ctx, "opening the session", `tr[data-session="ahp-session:/live"] a`)
	tab(t, ctx, "the session's page",
		chromedp.WaitVisible(chromedp.CSS("#conversation .md")),
		poll(`document.querySelector("#conversation").innerText.includes("first reply")`),
		poll(`document.documentElement.dataset.live === "on"`),
	)
	before, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline li.ev").length`))
	if err != nil {
		t.Fatal(err)
	}
	send(t, root, chat, "t2", "say second reply with **bold** text\nrun echo hi\nwait 30s")
	tab(t, ctx, "the second turn renders live, and the timeline grows",
		poll(`!!document.querySelector("#turn-t2 .md strong")`),
		poll(`document.querySelector("#turn-t2").innerText.includes("second reply")`),
		poll(`!!document.querySelector("#turn-t2 details.tool")`),
		poll(fmt.Sprintf(`document.querySelectorAll("#timeline li.ev").length > %d`, before)),
		poll(`!!document.querySelector('button[name="op"][value="cancel"]')`),
		poll(`!!document.querySelector('#status .s-running')`),
	)
	shoot(t, ctx, "dashboard-session.png")

	// Cancel the running turn from the page.
	follow(t, ctx, "pressing Cancel", `button[name="op"][value="cancel"]`)
	tab(t, ctx, "the turn is cancelled",
		poll(`!!document.querySelector("#turn-t2.t-cancelled")`),
		poll(`!document.querySelector('button[name="op"][value="cancel"]')`),
	)
	waitChat(t, root, chat, func(cs *protocol.ChatState) bool {
		return cs.ActiveTurn == nil && len(cs.Turns) == 2 && cs.Turns[1].State == protocol.TurnStateCancelled
	})

	// Scrub back to the end of the first turn: the state then had one turn.
	tab(t, ctx, "the timeline", poll(`document.querySelectorAll("#timeline li.k-turn_completed a.at").length === 1`))
	follow(t, ctx, "scrubbing back to the first turn", `#timeline li.k-turn_completed a.at`)
	tab(t, ctx, "the first turn's state",
		chromedp.WaitVisible(chromedp.CSS(".replay")),
		poll(`!!document.querySelector("#turn-t-live") && !document.querySelector("#turn-t2")`),
		poll(`!!document.querySelector("#timeline li.current.k-turn_completed")`),
	)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.scrollTo(0, 0), true)`)); err != nil {
		t.Fatal(err)
	}
	shoot(t, ctx, "dashboard-replay.png")

	// The question a session asks is answered from its page, and a write
	// another waits for is approved from its.
	tab(t, ctx, "the asking session's page",
		chromedp.Navigate(e.srv.URL+"/ui/session?uri=ahp-session:/asks"),
		chromedp.WaitVisible(chromedp.CSS(`form.answer input[name="q.answer"]`)),
		// Typed once the stream's first update has redrawn the form:
		// typing into the form it replaces fails in the browser's
		// protocol (a node that is gone), though the page keeps what
		// was typed.
		poll(`document.documentElement.dataset.synced === "on"`),
		chromedp.SendKeys(chromedp.CSS(`form.answer input[name="q.answer"]`), "notes.txt"),
	)
	follow(t, ctx, "pressing Answer", `form.answer button[value="accept"]`)
	tab(t, ctx, "the answered turn",
		poll(`!!document.querySelector("#turn-t-asks.t-complete")`),
		poll(`document.querySelector("#turn-t-asks").innerText.includes("notes.txt")`),
		poll(`!document.querySelector("form.answer")`),
	)
	waitChat(t, root, asks, idle)
	_, writes := e.startSession(t, root, "writes", "a write to approve", "write approved.txt hi")
	waitChat(t, root, writes, waiting)
	tab(t, ctx, "the writing session's page",
		chromedp.Navigate(e.srv.URL+"/ui/session?uri=ahp-session:/writes"),
		// The host's options, as its buttons.
		chromedp.WaitVisible(chromedp.CSS(`form.confirm button[value="allow-once"]`)),
		poll(`!!document.querySelector('form.confirm button[value="deny"]')`),
	)
	follow(t, ctx, "pressing Allow Once", `form.confirm button[value="allow-once"]`)
	tab(t, ctx, "the approved write",
		poll(`!!document.querySelector("#turn-t-writes.t-complete")`),
		poll(`document.querySelector("#turn-t-writes details.tool summary").innerText.includes("completed")`),
	)
	waitChat(t, root, writes, idle)
	_, guestAsks := e.startSession(t, root, "guestasks", "a question a guest cannot answer", "ask Anything?")
	waitChat(t, root, guestAsks, waiting)

	// A guest sees the session but no button that writes.
	tab(t, ctx, "the sessions page", chromedp.Navigate(e.srv.URL+"/ui/"))
	follow(t, ctx, "signing out", `form[action="/ui/logout"] button`)
	tab(t, ctx, "signed out", chromedp.WaitVisible(chromedp.CSS("#token")))
	signInBrowser(t, ctx, e, "gus")
	tab(t, ctx, "the guest's session page",
		chromedp.Navigate(e.srv.URL+"/ui/session?uri="+uri),
		chromedp.WaitVisible(chromedp.CSS("#conversation .md")),
	)
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('form[action="/ui/session/action"]').length`)); err != nil || n != 0 {
		t.Fatalf("the guest is shown %d forms that write (%v)", n, err)
	}
	tab(t, ctx, "the guest's page of a session that asks",
		chromedp.Navigate(e.srv.URL+"/ui/session?uri=ahp-session:/guestasks"),
		chromedp.WaitVisible(chromedp.CSS("#conversation .question")),
		poll(`document.querySelector("#conversation").innerText.includes("Waiting for an answer.")`),
	)
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('form[method="post"][action^="/ui/session/"]').length`)); err != nil || n != 0 {
		t.Fatalf("the guest is shown %d forms that answer or write (%v)", n, err)
	}

	// A reply streamed in 10,000 deltas ends with its whole text.
	words := make([]string, 30000) // the script backend says three words a delta
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i+1)
	}
	want := strings.Join(words, " ")
	bigURI, bigChat := e.startSession(t, root, "big", "a long reply", "say short")
	waitChat(t, root, bigChat, idle)
	tab(t, ctx, "opening the long reply's session",
		chromedp.Navigate(e.srv.URL+"/ui/session?uri="+bigURI),
		chromedp.WaitVisible(chromedp.CSS("#conversation .md")),
		poll(`document.documentElement.dataset.live === "on"`),
	)
	start := time.Now()
	send(t, root, bigChat, "tbig", "say "+want)
	tab(t, ctx, "the long reply's final text",
		poll(`!!document.querySelector("#turn-tbig.t-complete")`),
		poll(fmt.Sprintf(`document.querySelector("#turn-tbig .md").textContent.trim().endsWith(%q)`, words[len(words)-1])),
	)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#turn-tbig .md").textContent.trim()`))
	if err != nil || got != want {
		t.Fatalf("the long reply on the page has %d bytes, want %d (%v)", len(got), len(want), err)
	}
	cancel(t, root, guestAsks)
	if *screenshots {
		tab(t, ctx, "a narrow screen", chromedp.EmulateViewport(390, 760), chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("table.sessions")))
		shoot(t, ctx, "dashboard-narrow.png")
	}
	t.Logf("a reply of 10,000 deltas was on the page %v after it was sent", time.Since(start).Round(time.Millisecond))
}

// TestBrowserLivePageRefused checks that a page whose live stream is
// refused, its person having all their live pages open elsewhere, says
// it is not live rather than that it reconnects.
func TestBrowserLivePageRefused(t *testing.T) {
	e := newEnv(t, envOptions{livePerPerson: 1})
	ctx := startBrowser(t)
	e.signIn("root").stream(t, "/ui/events")
	signInBrowser(t, ctx, e, "root")
	tab(t, ctx, "the refused page's state",
		poll(`document.querySelector(".live-state").textContent.includes("Not live: reload the page")`),
	)
}
