package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// Answering from the session page what the running turn waits on: a
// question's form, a tool call's approve and deny buttons (and the
// options the agent offered). They post with the login's CSRF token and
// are sent through the person's own AHP connection as the actions a
// person's client sends, so the host checks chat:answer and chat:tool as
// for anybody; the page shows them only to whom the grants allow them.

// formsView is what the conversation's forms need, for the person
// looking at it.
type formsView struct {
	CSRF, URI, Chat string
	Answer, Approve bool // the grants allow answering, approving
}

// formsFor says which answering forms the person is offered: on a live
// page (not a replay, not a sleeping session's), as the grants allow.
func (d *Dashboard) formsFor(v viewer, b *sessionBody) *formsView {
	if !b.Live || b.At >= 0 || v.login == nil {
		return nil
	}
	p := v.login.cred.Principal
	may := func(op string) bool {
		need, ok := opOperation(op)
		return ok && d.may(p, need, b.Owner, b.Sharing)
	}
	f := &formsView{CSRF: v.login.csrf, URI: b.URI, Chat: b.Chat, Answer: may("answer"), Approve: may("approve")}
	if !f.Answer && !f.Approve {
		return nil
	}
	return f
}

// fieldsOf is an input request's questions as form fields.
func fieldsOf(r *protocol.ChatInputRequest) []fieldView {
	var out []fieldView
	for _, pq := range r.Questions {
		q := client.QuestionOf(pq)
		label := strings.TrimSpace(q.Title + " " + q.Message)
		f := fieldView{Name: "q." + q.ID, Other: "o." + q.ID, HTMLID: "q-" + anchorSafe(r.ID+"-"+q.ID),
			Kind: q.Kind, Label: label, Required: q.Required, Freeform: q.Freeform}
		for i, o := range q.Options {
			f.Options = append(f.Options, optionView{ID: o.ID, Label: o.Label, HTMLID: f.HTMLID + "-" + itoa(i)})
		}
		out = append(out, f)
	}
	return out
}

// answerAction takes a question's form: POST /ui/session/answer.
func (d *Dashboard) answerAction(w http.ResponseWriter, r *http.Request) {
	d.respond(w, r, "answer", "request", func(wt client.Waiting, f url.Values) (protocol.Action, error) {
		if wt.Request == nil {
			return nil, &pageError{Status: http.StatusNotFound, Message: "That is a tool call, not a question."}
		}
		if f.Get("response") == "decline" {
			return client.Decline(wt.Request), nil
		}
		given := client.Answers{}
		for _, pq := range wt.Request.Questions {
			id := client.QuestionOf(pq).ID
			values := f["q."+id]
			if other := strings.TrimSpace(f.Get("o." + id)); other != "" {
				values = append(values, other)
			}
			given[id] = values
		}
		return client.Accept(wt.Request, given)
	})
}

// confirmAction takes a tool call's buttons: POST /ui/session/confirm,
// with decision approve or deny, or one of the options the call offers.
func (d *Dashboard) confirmAction(w http.ResponseWriter, r *http.Request) {
	d.respond(w, r, "approve", "toolCall", func(wt client.Waiting, f url.Values) (protocol.Action, error) {
		if wt.Tool == nil {
			return nil, &pageError{Status: http.StatusNotFound, Message: "That is a question, not a tool call."}
		}
		decision, option := f.Get("decision"), f.Get("option")
		if option != "" {
			for _, o := range wt.Tool.Options {
				if o.ID == option {
					decision = string(o.Kind)
				}
			}
		}
		if decision != "approve" && decision != "deny" {
			return nil, &pageError{Status: http.StatusBadRequest, Message: "Approve or deny it, or pick one of the options the tool call offers."}
		}
		return client.Confirm(wt.TurnID, wt.Tool, decision == "approve", option)
	})
}

// respond finds what the form names (field idField) in the session,
// builds its answer with build, sends it and goes back to the page.
func (d *Dashboard) respond(w http.ResponseWriter, r *http.Request, op, idField string, build func(client.Waiting, url.Values) (protocol.Action, error)) {
	if !d.formOK(w, r) {
		return
	}
	f := r.PostForm
	uri, chat, id := f.Get("uri"), f.Get("chat"), f.Get(idField)
	if len(uri) > maxURI || len(chat) > maxURI || len(id) > maxURI {
		d.fail(w, r, &pageError{Status: http.StatusBadRequest, Message: "That session, chat or " + idField + " is too long."})
		return
	}
	if _, err := protocol.ParseSessionURI(uri); err != nil {
		d.fail(w, r, &pageError{Status: http.StatusBadRequest, Message: "That is not a session's URI."})
		return
	}
	d.writeSession(w, r, uri, chat, op, func(ctx context.Context, c *client.Client) error {
		return answer(ctx, c, uri, id, f, build)
	})
}

// answer finds id in the session and sends build's answer to it.
func answer(ctx context.Context, c *client.Client, uri, id string, f url.Values, build func(client.Waiting, url.Values) (protocol.Action, error)) error {
	wt, found, err := c.FindIn(ctx, uri, id)
	if err == nil && found != client.FoundOpen {
		err = notWaiting(found)
	}
	var act protocol.Action
	if err == nil {
		act, err = build(wt, f)
	}
	if err == nil {
		err = c.Respond(ctx, wt, act)
	}
	var ae *client.AnswerError
	switch {
	case errors.As(err, &ae):
		return &pageError{Status: http.StatusBadRequest, Message: "That answer does not fit: " + ae.Message + "."}
	case errors.Is(err, client.ErrSettled):
		return notWaiting(client.FoundSettled)
	case errors.Is(err, client.ErrTurnEnded):
		return notWaiting(client.FoundEnded)
	}
	return err
}

// notWaiting is the page's error for what is not waiting any more.
func notWaiting(found client.Found) error {
	switch found {
	case client.FoundSettled:
		return &pageError{Status: http.StatusNotFound, Message: "Somebody answered that already."}
	case client.FoundEnded:
		return &pageError{Status: http.StatusConflict, Message: "The turn that asked it has ended."}
	}
	return &pageError{Status: http.StatusNotFound, Message: "The session waits for no such answer."}
}
