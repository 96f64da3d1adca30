package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ahpd/ahpd/internal/testwait"
)

// Screenshots as test artifacts: with AHPD_SCREENSHOTS=DIR the browser
// tests write each page they show at 1366x900 and 390x844, light and
// dark, into DIR as TEST-PAGE-WIDTHxHEIGHT-THEME.png. Without it they
// take none.

// screenshotSizes are the windows each page is taken at.
var screenshotSizes = [][2]int64{{1366, 900}, {390, 844}}

// colorScheme emulates the system's prefers-color-scheme ("" lets it be).
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		p := emulation.SetEmulatedMediaParams{}
		if scheme != "" {
			p.Features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
		}
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, p)
		return err
	})
}

// clearViewport gives the tab back its window's size.
func clearViewport() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
		return err
	})
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// artifacts writes the page as it is now, at each size and in each
// theme, into $AHPD_SCREENSHOTS, when it is set; then puts the tab back
// as it was.
func artifacts(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("AHPD_SCREENSHOTS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := unsafeName.ReplaceAllString(t.Name()+"-"+name, "_")
	for _, size := range screenshotSizes {
		for _, scheme := range []string{"light", "dark"} {
			mobile := size[0] < 600
			var opts []chromedp.EmulateViewportOption
			if mobile {
				opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
			}
			tab(t, ctx, "emulating "+scheme+" at "+fmt.Sprint(size),
				chromedp.EmulateViewport(size[0], size[1], opts...),
				colorScheme(scheme),
				poll(fmt.Sprintf(`window.innerWidth === %d && matchMedia("(prefers-color-scheme: %s)").matches`, size[0], scheme)),
			)
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, fmt.Sprintf("%s-%dx%d-%s.png", base, size[0], size[1], scheme))
			if err := os.WriteFile(file, png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tab(t, ctx, "the tab as it was", clearViewport(), colorScheme(""))
}

// TestBrowserLinkSignIn signs in with a ?tkn= link: the page it leads to
// has no token in its address, and sends no Referer onwards; a bad
// link's page says so.
func TestBrowserLinkSignIn(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := startBrowser(t)
	tab(t, ctx, "a bad link",
		chromedp.Navigate(e.srv.URL+"/ui/?tkn=wrong"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		poll(`document.querySelector(".login .error").innerText.includes("The link's token is not one this host accepts")`),
		poll(`!location.href.includes("tkn") && !location.href.includes("wrong")`),
	)
	artifacts(t, ctx, "refused-link")
	keptSession(t, e.conn("root"), "linked", "reached by a link", t.TempDir())
	tab(t, ctx, "the link",
		chromedp.Navigate(e.srv.URL+"/ui/?sort=title&tkn="+e.tokens["root"]),
		chromedp.WaitVisible(chromedp.CSS("table.sessions")),
		poll(`location.pathname + location.search === "/ui/?sort=title"`),
		poll(`!document.body.innerHTML.includes("root-token")`),
	)
	follow(t, ctx, "a session from the table", `tr[data-session="ahp-session:/linked"] a`)
	tab(t, ctx, "the session's page",
		chromedp.WaitVisible(chromedp.CSS("h1")),
		poll(`document.referrer === ""`),
		poll(`performance.getEntriesByType("navigation").every(n => !n.name.includes("tkn"))`),
	)
}

// TestBrowserLooks checks the dark theme follows the system's, and that
// the keyboard reaches the page: Tab shows the skip link with a focus
// ring, Enter skips to the content, the next Tab reaches the search box,
// and the search can be typed and sent from the keyboard.
func TestBrowserLooks(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := startBrowser(t)
	root := e.conn("root")
	keptSession(t, root, "k1", "keyboard one", filepath.Join(t.TempDir(), "alpha"))
	keptSession(t, root, "k2", "keyboard two", filepath.Join(t.TempDir(), "beta"))
	signInBrowser(t, ctx, e, "root")
	bg := `getComputedStyle(document.body).backgroundColor`
	tab(t, ctx, "the themes",
		colorScheme("dark"),
		poll(bg+` === "rgb(13, 17, 23)"`),
		poll(`getComputedStyle(document.body).color === "rgb(230, 237, 243)"`),
		colorScheme("light"),
		poll(bg+` === "rgb(255, 255, 255)"`),
		colorScheme(""),
	)
	tab(t, ctx, "the keyboard",
		chromedp.KeyEvent(kb.Tab),
		poll(`document.activeElement.classList.contains("skip")`),
		poll(`document.activeElement.getBoundingClientRect().left >= 0`),
		poll(`getComputedStyle(document.activeElement).outlineStyle === "solid" && getComputedStyle(document.activeElement).outlineWidth === "3px"`),
		chromedp.KeyEvent(kb.Enter),
		poll(`document.activeElement.id === "main"`),
		chromedp.KeyEvent(kb.Tab),
		poll(`document.activeElement.id === "f-q"`),
		poll(`getComputedStyle(document.activeElement).outlineStyle === "solid"`),
	)
	artifacts(t, ctx, "sessions-focus")
	tab(t, ctx, "typing a search", chromedp.KeyEvent("two"))
	pressToLoad(t, ctx, "sending the search", kb.Enter)
	tab(t, ctx, "the search's page",
		poll(`new URLSearchParams(location.search).get("q") === "two"`),
		poll(`document.querySelectorAll("tr[data-session]").length === 1 && !!document.querySelector('tr[data-session="ahp-session:/k2"]')`),
	)
	tab(t, ctx, "the list grouped", chromedp.Navigate(e.srv.URL+"/ui/?group=repo"), poll(`document.querySelectorAll("tr.group").length === 2`))
	artifacts(t, ctx, "sessions-grouped")
	tab(t, ctx, "the automations", chromedp.Navigate(e.srv.URL+"/ui/automations"), chromedp.WaitVisible(chromedp.CSS("h1")))
	artifacts(t, ctx, "automations")
	tab(t, ctx, "a session", chromedp.Navigate(e.srv.URL+"/ui/session?uri=ahp-session:/k1"), chromedp.WaitVisible(chromedp.CSS("h1")))
	artifacts(t, ctx, "session")
}

// pressToLoad presses key, which leads to a page, and waits for it to
// load.
func pressToLoad(t *testing.T, ctx context.Context, what, key string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, testwait.Hang)
	defer cancel()
	loaded := chromedp.Events(c, page.LoadEventFired)
	// The key's event may be answered by the page it leaves, or not.
	_ = chromedp.Do(c, chromedp.KeyEvent(key))
	for _, err := range loaded {
		if err != nil {
			t.Fatalf("%s: waiting for the page: %v", what, err)
		}
		return
	}
}
