package dashboard

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// maxRunsShown is how many of an automation's latest runs its row shows.
const maxRunsShown = 10

// automationView is one automation as the automations page shows it.
type automationView struct {
	ID, Title string
	Anchor    string
	Enabled   bool
	Triggers  []string
	NextRunAt string
	RunCount  int64
	Runs      []runView
	// WatchError says why its triggers do not watch, or "".
	WatchError string
}

// runView is one run of an automation.
type runView struct {
	ID, Status, StatusClass string
	Started, Ended          string
	Error                   string
	SessionLink             string
	Sessions                int64
}

func (d *Dashboard) automationsPage(w http.ResponseWriter, r *http.Request) {
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	list, err := readAutomations(r.Context(), c)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "automations", d.pageFor(r, "Automations", "automations", list))
}

// readAutomations reads the automations c's person may see, as the HTTP
// API does: the catalogue channel's state.
func readAutomations(ctx context.Context, c *client.Client) ([]automationView, error) {
	st, err := c.Subscribe(ctx, automations.CatalogueURI)
	if err != nil {
		return nil, err
	}
	as, _ := st.(*protocol.AutomationState)
	if as == nil {
		return nil, nil
	}
	out := make([]automationView, 0, len(as.Entries))
	for i := range as.Entries {
		out = append(out, automationOf(&as.Entries[i]))
	}
	return out, nil
}

func automationOf(e *protocol.AutomationEntry) automationView {
	v := automationView{ID: e.Resource, Anchor: "a-" + anchorSafe(e.Resource), Title: e.Definition.Title, Enabled: e.Definition.Enabled, RunCount: deref(e.RunCount)}
	if v.Title == "" {
		v.Title = "(untitled)"
	}
	if e.NextRunAt != nil {
		v.NextRunAt = *e.NextRunAt
	}
	if info, ok := automations.WatchErrorOf(*e); ok {
		v.WatchError = info.Message
	}
	for _, t := range e.Definition.Triggers {
		v.Triggers = append(v.Triggers, triggerText(t))
	}
	runs := e.Runs
	if len(runs) > maxRunsShown {
		runs = runs[:maxRunsShown]
	}
	for _, run := range runs {
		v.Runs = append(v.Runs, runOf(run))
	}
	return v
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
		data, _ := json.Marshal(t.Schedule)
		return "schedule " + textOf(data)
	}
	return "a trigger this version does not know"
}

func runOf(run protocol.AutomationRunSummary) runView {
	v := runView{ID: run.Resource, Sessions: run.SessionCount}
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
	v.StatusClass = v.Status
	return v
}
