package dashboard

import (
	"context"
	"net/http"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// automationAction runs one of an automation's buttons (op: run, enable,
// disable, delete): a POST with the login's CSRF token, sent through the
// person's own AHP connection as the HTTP API sends it, so the host
// refuses what their grants refuse whatever the page showed. Delete asks
// first: without confirm=yes it answers with a page that asks, whose
// form sends it again with it.
func (d *Dashboard) automationAction(w http.ResponseWriter, r *http.Request) {
	if !d.formOK(w, r) {
		return
	}
	f := r.PostForm
	uri, op := f.Get("automation"), f.Get("op")
	if len(uri) > maxURI {
		d.fail(w, r, &pageError{Status: http.StatusBadRequest, Message: "That automation's URI is too long."})
		return
	}
	if _, ok := automationOperation(op); !ok {
		d.fail(w, r, &pageError{Status: http.StatusBadRequest, Message: "op is one of run, enable, disable or delete."})
		return
	}
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	ctx := r.Context()
	e, err := d.automationFor(ctx, c, viewerOf(r), uri, op)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if op == "delete" && f.Get("confirm") != "yes" {
		v := automationOf(e)
		v.CSRF = viewerOf(r).login.csrf
		d.render(w, r, http.StatusOK, "automation-delete", d.pageFor(r, "Delete "+v.Title+"?", "automations", v))
		return
	}
	if err := automationOps[op](ctx, c, uri); err != nil {
		d.fail(w, r, err)
		return
	}
	to := "/ui/automations"
	if op != "delete" {
		to += "#a-" + anchorSafe(uri)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// automationFor refuses op first if the person's grants do not allow
// it, then finds the automation uri names in their catalogue and refuses
// op if the entry does not offer it, as the host would (which checks
// again in any case). Nobody's catalogue holds another person's automations, so one
// of those is not found.
func (d *Dashboard) automationFor(ctx context.Context, c *client.Client, v viewer, uri, op string) (*protocol.AutomationEntry, error) {
	need, _ := automationOperation(op)
	if d.opts.Auth != nil {
		p := v.login.cred.Principal
		if err := d.opts.Auth.Directory().Check(p, need, p); err != nil {
			return nil, &pageError{Status: http.StatusForbidden, Message: err.Error()}
		}
	}
	st, err := catalogue(ctx, c)
	if err != nil {
		return nil, err
	}
	var e *protocol.AutomationEntry
	for i := range st.Entries {
		if st.Entries[i].Resource == uri {
			e = &st.Entries[i]
		}
	}
	if e == nil {
		return nil, &pageError{Status: http.StatusNotFound, Message: "You have no automation " + protocol.Quote(uri) + "."}
	}
	var a automationView
	d.buttonsFor(v, e, &a)
	offered := map[string]bool{"run": a.Run, "enable": a.Enable || a.Disable, "disable": a.Enable || a.Disable, "delete": a.Delete}
	if !offered[op] {
		return nil, &pageError{Status: http.StatusConflict, Message: "This automation is declared in the host's config file: it can be run here, and changed or removed only there."}
	}
	return e, nil
}

// automationOps are the writes of the automations page, each as the HTTP
// API does it (POST /v1/automations/{id}/runs, DELETE
// /v1/automations/{id}), and enabling as an AHP client does it: an
// automation/updateRequested changing only enabled.
var automationOps = map[string]func(ctx context.Context, c *client.Client, uri string) error{
	"run": func(ctx context.Context, c *client.Client, uri string) error {
		var res protocol.RunAutomationResult
		return c.Call(ctx, "runAutomation", protocol.RunAutomationParams{Automation: uri, RequestID: requestID()}, &res)
	},
	"enable":  func(ctx context.Context, c *client.Client, uri string) error { return setEnabled(ctx, c, uri, true) },
	"disable": func(ctx context.Context, c *client.Client, uri string) error { return setEnabled(ctx, c, uri, false) },
	"delete": func(ctx context.Context, c *client.Client, uri string) error {
		return c.DispatchWait(ctx, automations.CatalogueURI, &protocol.AutomationRemovedAction{Resource: uri})
	},
}

func setEnabled(ctx context.Context, c *client.Client, uri string, on bool) error {
	return c.DispatchWait(ctx, automations.CatalogueURI, &protocol.AutomationUpdateRequestedAction{Resource: uri,
		Changes: protocol.AutomationDefinitionPatch{Enabled: &on}})
}

// requestID names one press of Run now: a form sent twice (a reload
// posting it again) is two presses, as a person asked twice.
func requestID() string { return "ui-" + randomHex(8) }

// automationsEvents streams the automations page's list each time the
// person's catalogue changes: their own AHP connection subscribed to it,
// within the live pages' budgets as every live page is.
func (d *Dashboard) automationsEvents(w http.ResponseWriter, r *http.Request) {
	release, ok := d.streamSlot(w, r)
	if !ok {
		return
	}
	defer release()
	ctx := r.Context()
	c, err := d.connect(r)
	if err != nil {
		http.Error(w, pageErrorOf(err).Message, pageErrorOf(err).Status)
		return
	}
	defer c.Close()
	if _, err := catalogue(ctx, c); err != nil {
		http.Error(w, pageErrorOf(err).Message, pageErrorOf(err).Status)
		return
	}
	v := viewerOf(r)
	s := startSSE(w)
	last := ""
	d.follow(ctx, c, s, d.opts.Throttle, func() error {
		st, err := catalogue(ctx, c)
		if err != nil {
			return s.send("error", map[string]string{"message": pageErrorOf(err).Message})
		}
		html, err := d.fragment("automation-list", d.automationsOf(v, st))
		if err != nil {
			return err
		}
		if html == last {
			return s.write(": unchanged\n\n")
		}
		last = html
		return s.send("automations", map[string]string{"html": html})
	})
}
