package dashboard_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserReview follows a person from a file edit in a session's
// conversation to its diff, and from there to the session's whole
// change, in a real browser.
func TestBrowserReview(t *testing.T) {
	e := newEnv(t, envOptions{repo: true})
	ctx := startBrowser(t)
	uri, _ := reviewSession(t, e)
	signInBrowser(t, ctx, e, "mo")
	tab(t, ctx, "the session's page",
		chromedp.Navigate(e.srv.URL+"/ui/session?uri="+uri),
		chromedp.WaitVisible(chromedp.CSS("#conversation .edits a.diff-link")),
		poll(`document.querySelectorAll("#turn-t2 .edits a.diff-link").length === 2`),
	)
	follow(t, ctx, "clicking the second turn's edit of a.txt", `#turn-t2 .edits a.diff-link[title$="/a.txt"]`)
	tab(t, ctx, "the edit's diff",
		chromedp.WaitVisible(chromedp.CSS("article.file pre.diff")),
		poll(`document.querySelector("h2#files-h").innerText.includes("What turn 2 changed")`),
		poll(`document.querySelector('article.file').dataset.path === "a.txt"`),
		poll(`[...document.querySelectorAll("article.file .d-add")].map(e => e.innerText).join("|") === "+hello again"`),
		poll(`[...document.querySelectorAll("article.file .d-del")].map(e => e.innerText).join("|") === "-hello"`),
	)
	shoot(t, ctx, "dashboard-review-file.png")
	follow(t, ctx, "every file of the turn", `a.all-files`)
	tab(t, ctx, "the turn's files", poll(`document.querySelectorAll("article.file").length === 2`))
	follow(t, ctx, "the whole session", `nav.changes li:first-child a`)
	tab(t, ctx, "the session's files",
		poll(`document.querySelectorAll("article.file").length === 4`),
		poll(`document.querySelector('article.file[data-path="img.bin"] .binary').innerText.includes("Binary file, 3 bytes")`),
		poll(`!!document.querySelector('article.file[data-path="big.txt"] a.more')`),
	)
	shoot(t, ctx, "dashboard-review.png")
}
