package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// sessionAction runs one of the session page's buttons: a POST with the
// login's CSRF token, done through the person's own AHP connection, so
// the host refuses what their grants refuse whatever the page showed.
func (d *Dashboard) sessionAction(w http.ResponseWriter, r *http.Request) {
	if !d.formOK(w, r) {
		return
	}
	f := r.PostForm
	uri, chat, op := f.Get("uri"), f.Get("chat"), f.Get("op")
	if len(uri) > maxURI || len(chat) > maxURI {
		d.fail(w, r, &pageError{Status: http.StatusBadRequest, Message: "That session or chat URI is too long."})
		return
	}
	if _, err := protocol.ParseSessionURI(uri); err != nil {
		d.fail(w, r, &pageError{Status: http.StatusBadRequest, Message: "That is not a session's URI."})
		return
	}
	run, ok := sessionOps[op]
	if !ok {
		d.fail(w, r, &pageError{Status: http.StatusBadRequest, Message: "op is one of wake, suspend, cancel, archive or unarchive."})
		return
	}
	d.writeSession(w, r, uri, chat, op, func(ctx context.Context, c *client.Client) error {
		return run(ctx, c, uri, chat)
	})
}

// writeSession does a form's write to a session: through the person's
// own connection, refused first if their grants refuse op (checkWrite),
// then back to the session's page (its chat's, when the form named one).
func (d *Dashboard) writeSession(w http.ResponseWriter, r *http.Request, uri, chat, op string, do func(context.Context, *client.Client) error) {
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	if err := d.checkWrite(r.Context(), c, viewerOf(r), uri, op); err != nil {
		d.fail(w, r, err)
		return
	}
	if err := do(r.Context(), c); err != nil {
		d.fail(w, r, err)
		return
	}
	q := url.Values{}
	if chat != "" {
		q.Set("chat", chat)
	}
	http.Redirect(w, r, sessionLink(uri, q), http.StatusSeeOther)
}

// checkWrite refuses a write the person's grants do not allow before it
// is tried, as the host would (which checks again in any case).
func (d *Dashboard) checkWrite(ctx context.Context, c *client.Client, v viewer, uri, op string) error {
	var probe probeResult
	if err := c.Call(ctx, "ahpd/sessionStatus", map[string]string{"channel": uri}, &probe); err != nil {
		return err
	}
	need, ok := opOperation(op)
	if !ok {
		return &pageError{Status: http.StatusInternalServerError, Message: "The grants table does not name " + op + "."}
	}
	if d.opts.Auth == nil {
		return nil
	}
	owner, _ := grants.Parse(probe.Owner)
	if err := d.opts.Auth.Directory().CheckSession(v.login.cred.Principal, need, grants.Session(owner, probe.Sharing)); err != nil {
		return &pageError{Status: http.StatusForbidden, Message: err.Error()}
	}
	return nil
}

// opOperation is the operation of the grants table a button's write
// needs: that of the command or action it sends.
func opOperation(op string) (grants.Operation, bool) {
	switch op {
	case "wake":
		return grants.ForCommand("ahpd/resumeSession", "")
	case "suspend":
		return grants.ForCommand("ahpd/suspendSession", "")
	case "cancel":
		return grants.ForAction("chat/turnCancelled")
	case "archive", "unarchive":
		return grants.ForAction("session/isArchivedChanged")
	case "answer":
		return grants.ForAction("chat/inputCompleted")
	case "approve":
		return grants.ForAction("chat/toolCallConfirmed")
	// The composer's and the new session form's (compose.go,
	// newsession.go).
	case "send":
		return grants.ForAction("chat/turnStarted")
	case "newchat":
		return grants.ForCommand("createChat", "")
	case "create":
		return grants.ForCommand("createSession", "")
	}
	return "", false
}

// sessionOps are the writes the session page offers.
var sessionOps = map[string]func(ctx context.Context, c *client.Client, uri, chat string) error{
	"wake": func(ctx context.Context, c *client.Client, uri, _ string) error {
		return c.Call(ctx, "ahpd/resumeSession", map[string]any{"channel": uri}, nil)
	},
	"suspend": suspend,
	"cancel":  cancelTurn,
	"archive": func(ctx context.Context, c *client.Client, uri, _ string) error {
		return setArchived(ctx, c, uri, true)
	},
	"unarchive": func(ctx context.Context, c *client.Client, uri, _ string) error {
		return setArchived(ctx, c, uri, false)
	},
}

// openChat subscribes c to session uri and to its chat (the session's
// default when chat names none of its chats), returning the chat's URI
// and state.
func openChat(ctx context.Context, c *client.Client, uri, chat string) (string, *protocol.ChatState, error) {
	st, err := c.Subscribe(ctx, uri)
	if err != nil {
		return "", nil, err
	}
	ss, _ := st.(*protocol.SessionState)
	if ss == nil {
		return "", nil, &pageError{Status: http.StatusNotFound, Message: "There is no such session."}
	}
	chat = pickChat(ss, chat)
	cst, err := c.Subscribe(ctx, chat)
	if err != nil {
		return "", nil, err
	}
	cs, _ := cst.(*protocol.ChatState)
	return chat, cs, nil
}

// cancelTurn cancels the chat's running turn as any client does: a
// chat/turnCancelled naming it.
func cancelTurn(ctx context.Context, c *client.Client, uri, chat string) error {
	chat, cs, err := openChat(ctx, c, uri, chat)
	if err != nil {
		return err
	}
	if cs == nil || cs.ActiveTurn == nil {
		return &pageError{Status: http.StatusConflict, Message: "The chat runs no turn: there is nothing to cancel."}
	}
	started, _ := time.Parse(time.RFC3339Nano, cs.ActiveTurn.StartedAt)
	return c.DispatchWait(ctx, chat, &protocol.ChatTurnCancelledAction{TurnID: cs.ActiveTurn.ID, Duration: max(0, time.Since(started).Milliseconds())})
}

func setArchived(ctx context.Context, c *client.Client, uri string, archived bool) error {
	if _, err := c.Subscribe(ctx, uri); err != nil {
		return err
	}
	return c.DispatchWait(ctx, uri, &protocol.SessionIsArchivedChangedAction{IsArchived: archived})
}

// suspend puts the session to sleep. A turn that has just ended may
// still be winding down in the host for a moment, which the host answers
// as a turn in progress: that is asked again a few times, briefly.
func suspend(ctx context.Context, c *client.Client, uri, _ string) error {
	wait := 10 * time.Millisecond
	for {
		err := c.Call(ctx, "ahpd/suspendSession", map[string]any{"channel": uri}, nil)
		if client.ErrorCode(err) != protocol.CodeTurnInProgress || wait > time.Second {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait *= 2
	}
}
