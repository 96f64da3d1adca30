package dashboard_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestBrowserAutomations follows a person through the automations page
// in a real browser, in New York: an automation made elsewhere appears
// live, its schedule in words and its next run in the browser's time;
// Run now runs it and the run's row follows it to the end live; Disable
// turns it off; Delete asks, and deletes it; one removed elsewhere
// leaves the page live.
func TestBrowserAutomations(t *testing.T) {
	e := newEnv(t, envOptions{throttle: 50 * time.Millisecond})
	ctx := startBrowser(t)
	tab(t, ctx, "browsing from New York", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "America/New_York"})
		return err
	}))
	signInBrowser(t, ctx, e, "mo")
	tab(t, ctx, "the automations page, live",
		chromedp.Navigate(e.srv.URL+"/ui/automations"),
		poll(`document.documentElement.dataset.synced === "on"`),
		poll(`document.querySelector("#automations").innerText.includes("No automations you may see")`),
	)

	// Made through the HTTP API, it appears without a reload.
	e.makeAutomation("mo", "nightly", "Nightly tests", "30 2 * * *", "Europe/Berlin")
	e.makeAutomation("mo", "other", "Another one", "", "")
	const sec = `section[data-automation="ahp-automation:/nightly"]`
	tab(t, ctx, "the new automation appears, its schedule in words and its next run in New York's time",
		poll(`!!document.querySelector('`+sec+`')`),
		poll(`!!document.querySelector('section[data-automation="ahp-automation:/other"]')`),
		poll(`document.querySelector('`+sec+` .trigger').textContent === "at 02:30 Europe/Berlin"`),
		poll(`(function () { var t = document.querySelector('`+sec+` time.local');
			return t && t.dataset.localized === "on" && /E[DS]T/.test(t.textContent) && / \(in \d+ hours?\)$/.test(t.textContent)
				&& t.title.endsWith("Europe/Berlin") && !t.textContent.includes("Europe/Berlin"); })()`),
		poll(`document.querySelector('`+sec+` .runs-count').textContent === "no runs on record"`),
	)

	// Run now: back on the page, the run is listed, and its row follows it
	// to its end live.
	follow(t, ctx, "pressing Run now", sec+` button[value="run"]`)
	tab(t, ctx, "the run is listed and completes",
		poll(`!!document.querySelector('`+sec+` tr[data-run]')`),
		poll(`document.documentElement.dataset.synced === "on"`),
		poll(`!!document.querySelector('`+sec+` tr[data-run] .s-complete')`),
		poll(`document.querySelector('`+sec+` .runs-count').textContent === "1 run on record, by hand"`),
		poll(`!!document.querySelector('`+sec+` tr[data-run] a[href^="/ui/session?"]')`),
	)
	shoot(t, ctx, "dashboard-automations.png")

	// Disable.
	follow(t, ctx, "pressing Disable", sec+` button[value="disable"]`)
	tab(t, ctx, "it is disabled",
		poll(`!!document.querySelector('`+sec+` .t-disabled')`),
		poll(`!!document.querySelector('`+sec+` button[value="enable"]') && !document.querySelector('`+sec+` button[value="disable"]')`),
	)
	if a := e.automation("mo", "nightly"); a == nil || a.Definition.Enabled {
		t.Fatalf("after Disable: %+v", a)
	}

	// Delete asks on a page of its own; Delete it deletes it.
	follow(t, ctx, "pressing Delete", sec+` button[value="delete"]`)
	tab(t, ctx, "Delete asks", poll(`document.querySelector("h1").textContent === "Delete Nightly tests?"`))
	shoot(t, ctx, "dashboard-automation-delete.png")
	follow(t, ctx, "confirming", `form.confirm-delete button[value="delete"]`)
	tab(t, ctx, "it is gone",
		poll(`location.pathname === "/ui/automations"`),
		poll(`!document.querySelector('`+sec+`') && !!document.querySelector('section[data-automation="ahp-automation:/other"]')`),
		poll(`document.documentElement.dataset.synced === "on"`),
	)
	if e.automation("mo", "nightly") != nil {
		t.Fatal("Delete left it there")
	}

	// Removed elsewhere, it leaves the open page.
	if status, body := e.api("mo", "DELETE", "/v1/automations/other", nil); status != http.StatusNoContent {
		t.Fatalf("DELETE /v1/automations/other: %d %s", status, body)
	}
	tab(t, ctx, "the automation removed elsewhere leaves the page",
		poll(`!document.querySelector('section[data-automation="ahp-automation:/other"]')`),
		poll(`document.querySelector("#automations").innerText.includes("No automations you may see")`),
	)
}
