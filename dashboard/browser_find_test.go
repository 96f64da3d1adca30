package dashboard_test

import (
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserFindAmongMany searches for one session among 2,000 in the
// browser, as a person does: types its words in the search box and sends
// them, and finds its row alone, linking to its page, which it opens;
// then the same search sorted by title and grouped by repository, which
// the host does before it pages, heads the row with its group.
func TestBrowserFindAmongMany(t *testing.T) {
	const n = 2000
	e := newEnv(t, envOptions{})
	ctx := startBrowser(t)
	root := e.conn("root")
	makeKeptSessions(t, root, n, 20)
	folder := filepath.Join(t.TempDir(), "needles")
	keptSession(t, root, "needle", "The needle in the haystack", folder)
	signInBrowser(t, ctx, e, "root")
	tab(t, ctx, "the first page of 2,001 sessions",
		poll(`document.querySelectorAll("tr[data-session]").length === 50`),
		poll(`!!document.querySelector('a[rel="next"]')`),
	)

	tab(t, ctx, "typing a search",
		chromedp.Focus(chromedp.CSS("#f-q")),
		chromedp.KeyEvent("needle HAYSTACK"),
	)
	pressToLoad(t, ctx, "sending the search", kb.Enter)
	row := `tr[data-session="ahp-session:/needle"]`
	link := "/ui/session?" + url.Values{"uri": {"ahp-session:/needle"}}.Encode()
	tab(t, ctx, "the search's page",
		poll(`new URLSearchParams(location.search).get("q") === "needle HAYSTACK"`),
		poll(`document.querySelectorAll("tr[data-session]").length === 1`),
		poll(fmt.Sprintf(`document.querySelector(%q).innerText.includes("The needle in the haystack")`, row+" th a")),
		poll(fmt.Sprintf(`document.querySelector(%q).getAttribute("href") === %q`, row+" th a", link)),
		poll(fmt.Sprintf(`document.querySelector(%q).innerText.includes(%q)`, row+` td[data-label="Folder"]`, folder)),
		poll(`!document.querySelector('a[rel="next"]')`),
	)
	artifacts(t, ctx, "sessions-found")
	follow(t, ctx, "opening the found session", row+" th a")
	tab(t, ctx, "the found session's page",
		poll(`new URLSearchParams(location.search).get("uri") === "ahp-session:/needle"`),
		poll(`document.querySelector("h1").innerText.includes("The needle in the haystack")`),
	)

	tab(t, ctx, "the search sorted by title and grouped",
		chromedp.Navigate(e.srv.URL+"/ui/?"+url.Values{"q": {"needle"}, "sort": {"title"}, "group": {"repo"}}.Encode()),
		poll(`document.querySelectorAll("tr[data-session]").length === 1`),
		poll(fmt.Sprintf(`document.querySelector("tr.group").innerText.includes(%q)`, folder)),
		poll(`document.querySelector("tr.group").innerText.includes("1 session")`),
		poll(fmt.Sprintf(`document.querySelector(%q).getAttribute("href") === %q`, row+" th a", link)),
	)
}
