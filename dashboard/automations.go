package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// maxRunsShown is how many of an automation's latest runs its row shows.
const maxRunsShown = 10

// automationsBody is the automations page: the person's automations, and
// what their forms and live stream need.
type automationsBody struct {
	CSRF    string
	LiveSrc string
	List    []automationView
}

// automationView is one automation as the automations page shows it.
type automationView struct {
	ID, Title string
	Anchor    string
	Enabled   bool
	Triggers  []string
	// NextRun is when a trigger next starts it, or nil.
	NextRun *whenView
	// RunsText says how many runs its entry lists, and how they started:
	// "3 runs on record: 1 by hand, 2 automatic".
	RunsText string
	// Allowance says, for an automation with an afterRuns condition, how
	// many automatic runs it has made of those allowed (runCount).
	Allowance string
	Runs      []runView
	// Shown is how many of its runs the table shows, of Listed.
	Shown, Listed int
	// WatchError says why its triggers do not watch, or "".
	WatchError string
	// The buttons the person's grants (and the entry's operations)
	// allow, and the login's CSRF token for their forms.
	CSRF                         string
	Run, Enable, Disable, Delete bool
}

// Any says whether the automation offers the person any button.
func (a automationView) Any() bool { return a.Run || a.Enable || a.Disable || a.Delete }

// whenView is an instant as a page shows it: its RFC 3339 form for
// <time datetime>, which the page's script shows in the browser's own
// time zone, and a reading in the automation's zone (else UTC) for a
// page without script.
type whenView struct {
	ISO, Text string
}

// runView is one run of an automation.
type runView struct {
	ID, Status, StatusClass string
	Started, Ended          string
	Error                   string
	SessionLink             string
	Sessions                int64
	// Origin is how it started: "by hand", "schedule night",
	// "event after-tests", with "(catch-up)" for a missed occurrence.
	Origin string
}

func (d *Dashboard) automationsPage(w http.ResponseWriter, r *http.Request) {
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	st, err := catalogue(r.Context(), c)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "automations", d.pageFor(r, "Automations", "automations", d.automationsOf(viewerOf(r), st)))
}

// catalogue subscribes c to its person's automations, as the HTTP API
// reads them (GET /v1/automations), and returns them; a connection
// already subscribed answers from the state it keeps.
func catalogue(ctx context.Context, c *client.Client) (*protocol.AutomationState, error) {
	if st, ok := c.State(automations.CatalogueURI).(*protocol.AutomationState); ok {
		return st, nil
	}
	st, err := c.Subscribe(ctx, automations.CatalogueURI)
	if err != nil {
		return nil, err
	}
	as, _ := st.(*protocol.AutomationState)
	if as == nil {
		return &protocol.AutomationState{}, nil
	}
	return as, nil
}

// automationsOf is the page's body for v's catalogue.
func (d *Dashboard) automationsOf(v viewer, st *protocol.AutomationState) automationsBody {
	b := automationsBody{LiveSrc: "/ui/automations/events", List: make([]automationView, 0, len(st.Entries))}
	if v.login != nil {
		b.CSRF = v.login.csrf
	}
	for i := range st.Entries {
		a := automationOf(&st.Entries[i])
		d.buttonsFor(v, &st.Entries[i], &a)
		a.CSRF = b.CSRF
		b.List = append(b.List, a)
	}
	return b
}

// buttonsFor sets the buttons of a that v may press: those whose write
// the entry offers (one of the config file offers only run) and v's
// grants allow, from the operation of the command or action each sends.
// An automation is its owner's alone (each person's catalogue holds only
// their own), so the owner checked against is v. The host checks again
// when one is pressed.
func (d *Dashboard) buttonsFor(v viewer, e *protocol.AutomationEntry, a *automationView) {
	if v.login == nil {
		return
	}
	may := func(op string) bool {
		need, ok := automationOperation(op)
		if !ok || !slices.Contains(e.Operations, entryOperation(op)) {
			return false
		}
		if d.opts.Auth == nil {
			return true
		}
		p := v.login.cred.Principal
		return d.opts.Auth.Directory().Check(p, need, p) == nil
	}
	a.Run = may("run")
	a.Enable = !e.Definition.Enabled && may("enable")
	a.Disable = e.Definition.Enabled && may("disable")
	a.Delete = may("delete")
}

func automationOf(e *protocol.AutomationEntry) automationView {
	v := automationView{ID: e.Resource, Anchor: "a-" + anchorSafe(e.Resource), Title: e.Definition.Title, Enabled: e.Definition.Enabled}
	if v.Title == "" {
		v.Title = "(untitled)"
	}
	zones := map[string]bool{}
	for _, t := range e.Definition.Triggers {
		v.Triggers = append(v.Triggers, triggerText(t))
		if s, ok := t.(*protocol.AutomationScheduleTrigger); ok {
			zones[s.Schedule.TimeZone] = true
		}
	}
	if e.NextRunAt != nil {
		zone := "UTC"
		if len(zones) == 1 {
			for z := range zones {
				zone = z
			}
		}
		v.NextRun = instantView(*e.NextRunAt, zone)
	}
	if info, ok := automations.WatchErrorOf(*e); ok {
		v.WatchError = info.Message
	}
	v.RunsText = runsText(e.Runs, e.RunsNextCursor != nil)
	v.Allowance = allowance(e)
	v.Listed = len(e.Runs)
	runs := e.Runs
	if len(runs) > maxRunsShown {
		runs = runs[:maxRunsShown]
	}
	v.Shown = len(runs)
	for _, run := range runs {
		v.Runs = append(v.Runs, runOf(run))
	}
	return v
}

// instantView reads an RFC 3339 time for a page, in zone: "2026-05-04 02:30
// Europe/Berlin", with its seconds when it has some.
func instantView(s, zone string) *whenView {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return &whenView{ISO: s, Text: s}
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		loc, zone = time.UTC, "UTC"
	}
	layout := "2006-01-02 15:04"
	if t.Second() != 0 {
		layout += ":05"
	}
	return &whenView{ISO: t.UTC().Format(time.RFC3339), Text: t.In(loc).Format(layout) + " " + zone}
}

// runsText says what the entry's list of runs holds, counted from the
// list itself: the host keeps each automation's latest ended runs
// (docs/AUTOMATIONS.md, 50 by default) and those in progress. runCount
// is not this: it counts only automatic runs, and only for an automation
// that turns itself off after some (allowance says it).
func runsText(runs []protocol.AutomationRunSummary, older bool) string {
	if len(runs) == 0 {
		return "no runs on record"
	}
	byHand := 0
	for _, r := range runs {
		if _, ok := r.Origin.(*protocol.AutomationManualRunOrigin); ok {
			byHand++
		}
	}
	s := fmt.Sprintf("%d runs on record", len(runs))
	if len(runs) == 1 {
		s = "1 run on record"
	}
	switch {
	case len(runs) == 1 && byHand == 1:
		s += ", by hand"
	case len(runs) == 1:
		s += ", automatic"
	default:
		s += fmt.Sprintf(": %d by hand, %d automatic", byHand, len(runs)-byHand)
	}
	if older {
		s += ", and older ones"
	}
	return s
}

// allowance is the runCount of an automation with an afterRuns
// condition, against its max: "2 of 5 automatic runs made since it was
// enabled; then its triggers turn off".
func allowance(e *protocol.AutomationEntry) string {
	for _, c := range e.Definition.DisableConditions {
		if c, ok := c.(*protocol.AutomationAfterRunsCondition); ok {
			return fmt.Sprintf("%d of %d automatic runs made since it was enabled; then its triggers turn off", deref(e.RunCount), c.Max)
		}
	}
	return ""
}

// triggerText says what starts an automation.
func triggerText(t protocol.AutomationTrigger) string {
	switch t := t.(type) {
	case *protocol.AutomationEventTrigger:
		if t.Title != "" {
			return "on " + t.Title
		}
		return "on " + t.Type
	case *protocol.AutomationScheduleTrigger:
		return describeSchedule(t.Schedule.Expression, t.Schedule.TimeZone)
	}
	return "a trigger this version does not know"
}

func runOf(run protocol.AutomationRunSummary) runView {
	v := runView{ID: run.Resource, Sessions: run.SessionCount}
	switch o := run.Origin.(type) {
	case *protocol.AutomationManualRunOrigin:
		v.Origin = "by hand"
	case *protocol.AutomationTriggeredRunOrigin:
		v.Origin = "trigger " + o.TriggerID
		if o.CatchUp != nil && *o.CatchUp {
			v.Origin += " (catch-up)"
		}
	default:
		v.Origin = "unknown"
	}
	if run.PrimarySession != nil {
		v.SessionLink = sessionLink(*run.PrimarySession, nil)
	}
	switch l := run.Lifecycle.(type) {
	case *protocol.AutomationPendingRunLifecycle:
		v.Status, v.Started = "pending", l.CreatedAt
	case *protocol.AutomationRunningRunLifecycle:
		v.Status, v.Started = "running", l.StartedAt
	case *protocol.AutomationCompletedRunLifecycle:
		v.Status, v.Started, v.Ended = "complete", l.StartedAt, l.CompletedAt
	case *protocol.AutomationFailedRunLifecycle:
		v.Status, v.Ended, v.Error = "failed", l.CompletedAt, l.Error.Message
		if l.StartedAt != nil {
			v.Started = *l.StartedAt
		}
	case *protocol.AutomationCancelledRunLifecycle:
		v.Status, v.Ended = "cancelled", l.CompletedAt
		if l.StartedAt != nil {
			v.Started = *l.StartedAt
		}
	default:
		v.Status = "unknown"
	}
	v.StatusClass = strings.ReplaceAll(v.Status, " ", "-")
	return v
}

// automationOperation is the operation of the grants table a button's
// write needs: that of the command or action it sends, as the HTTP API
// sends them (runAutomation; automation/updateRequested; automation/removed).
func automationOperation(op string) (grants.Operation, bool) {
	switch op {
	case "run":
		return grants.ForCommand("runAutomation", "")
	case "enable", "disable":
		return grants.ForAction(string(protocol.ActionAutomationUpdateRequested))
	case "delete":
		return grants.ForAction(string(protocol.ActionAutomationRemoved))
	}
	return "", false
}

// entryOperation is the operation an automation's entry must offer
// (operations) for a button.
func entryOperation(op string) protocol.AutomationOperation {
	switch op {
	case "run":
		return protocol.AutomationOperationRun
	case "delete":
		return protocol.AutomationOperationRemove
	}
	return protocol.AutomationOperationUpdate
}
