package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// setValue sets a form control's value from the page's own script.
func setValue(t *testing.T, ctx context.Context, sel, value string) {
	t.Helper()
	q, _ := json.Marshal(sel)
	v, _ := json.Marshal(value)
	run(t, ctx, "setting "+sel, fmt.Sprintf(`(document.querySelector(%s).value = %s, true)`, q, v))
}

// run runs a script in the page.
func run(t *testing.T, ctx context.Context, what, script string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](script)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestBrowserConverse starts work from the browser: a member held to the
// allowed roots makes a session from the New session form, sees its
// first reply with its code block highlighted and a long tool output
// folded, sends a message, queues one while that turn runs, steers it,
// cancels another, and starts a second chat, shown as a tab.
func TestBrowserConverse(t *testing.T) {
	e := newEnv(t, envOptions{throttle: 50 * time.Millisecond, roots: true})
	ctx := startBrowser(t)
	signInBrowser(t, ctx, e, "mo")

	follow(t, ctx, "opening the New session form", `.top nav a[href="/ui/new"]`)
	tab(t, ctx, "the New session form",
		chromedp.WaitVisible(chromedp.CSS("form.start")),
		poll(fmt.Sprintf(`document.querySelector("#folder").value === %q`, e.work)),
		poll(`document.querySelector('input[name="provider"][value="script"]').checked`),
	)
	setValue(t, ctx, "#first", "say hello from the form\n```go\nfunc main() { return \"hi\" } // done\nx := '<img src=x onerror=alert(1)>'\n```\nrun seq 1 40")
	setValue(t, ctx, "#permissions", "bypass")
	setValue(t, ctx, "#title", "From the form")
	shoot(t, ctx, "dashboard-new.png")
	follow(t, ctx, "starting the session", `form.start button[type="submit"]`)
	tab(t, ctx, "the new session's page",
		poll(`location.pathname === "/ui/session"`),
		poll(`document.querySelector("#status h1").textContent === "From the form"`),
		poll(`document.documentElement.dataset.synced === "on"`),
		poll(`!!document.querySelector("#conversation .turn.t-complete")`),
		poll(`document.querySelector("#conversation").innerText.includes("hello from the form")`),
		// The code block, highlighted; the command's 40 lines, folded.
		poll(`!!document.querySelector('#conversation pre code.hl .tok-k')`),
		poll(`[...document.querySelectorAll('#conversation code.hl .tok-s')].some(s => s.textContent === '"hi"')`),
		poll(`[...document.querySelectorAll('#conversation code.hl .tok-c')].some(s => s.textContent === '// done')`),
		poll(`!!document.querySelector('#conversation details.tool details.fold')`),
	)
	// What the code block holds is text, highlighted or not.
	tab(t, ctx, "the code block's markup as text",
		poll(`[...document.querySelectorAll('#conversation code.hl .tok-s')].some(s => s.textContent === "'<img src=x onerror=alert(1)>'")`),
		poll(`!document.querySelector('#conversation img')`),
	)

	// A message, then one queued while it runs, then a steer that ends
	// its wait; the queued one runs after it.
	setValue(t, ctx, "#message", "say second\nwait 30s")
	follow(t, ctx, "sending a message", `form.composer button[value="send"]`)
	tab(t, ctx, "the second turn runs", poll(`!!document.querySelector("#conversation .turn.t-running")`))
	setValue(t, ctx, "#message", "say third, queued")
	follow(t, ctx, "queueing a message", `form.composer button[value="send"]`)
	tab(t, ctx, "the message is queued",
		poll(`!!document.querySelector("#conversation .turn.t-running")`),
		poll(`[...document.querySelectorAll("#conversation .turn.t-queued")].some(t => t.innerText.includes("third, queued"))`),
	)
	run(t, ctx, "scrolling to the composer", `(document.querySelector("#composer").scrollIntoView({block: "end"}), true)`)
	shoot(t, ctx, "dashboard-converse.png")
	setValue(t, ctx, "#message", "say steered")
	follow(t, ctx, "steering the turn", `form.composer button[value="steer"]`)
	tab(t, ctx, "the steered turn ends and the queued one runs",
		poll(`document.querySelectorAll("#conversation .turn.t-complete").length === 3`),
		poll(`!document.querySelector("#conversation .turn.t-queued, #conversation .turn.t-running")`),
		poll(`[...document.querySelectorAll("#conversation .turn.t-complete .md")].some(m => m.innerText.includes("steered"))`),
	)

	// Another, cancelled.
	setValue(t, ctx, "#message", "wait 30s")
	follow(t, ctx, "sending a long turn", `form.composer button[value="send"]`)
	tab(t, ctx, "the long turn runs", poll(`!!document.querySelector('button[name="op"][value="cancel"]')`))
	follow(t, ctx, "pressing Cancel", `button[name="op"][value="cancel"]`)
	tab(t, ctx, "the turn is cancelled", poll(`!!document.querySelector("#conversation .turn.t-cancelled")`))

	// A second chat, a tab of its own.
	run(t, ctx, "opening the new chat form", `(document.querySelector("details.new-chat").open = true, true)`)
	setValue(t, ctx, "#new-chat-text", "say in the second chat")
	follow(t, ctx, "starting a chat", `form.new-chat button[type="submit"]`)
	tab(t, ctx, "the second chat's tab",
		poll(`document.querySelectorAll("nav.chats > a").length === 2`),
		poll(`document.querySelector('nav.chats > a[aria-current="page"]').textContent === "Chat 2"`),
		poll(`document.querySelector("#conversation").innerText.includes("in the second chat")`),
		poll(`!document.querySelector("#conversation").innerText.includes("hello from the form")`),
	)
	follow(t, ctx, "going back to the first chat", `nav.chats > a:not([aria-current])`)
	tab(t, ctx, "the first chat's tab",
		poll(`document.querySelector("#conversation").innerText.includes("hello from the form")`),
		poll(`document.querySelectorAll("#conversation .turn").length === 4`),
	)
}
