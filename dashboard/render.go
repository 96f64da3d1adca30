package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// page is what every page's template gets.
type page struct {
	Title  string
	Nav    string // which part of the navigation is this page's
	User   string // who is signed in
	CSRF   string // the login's CSRF token, for forms that write
	Open   bool   // the host asks no token: there is no signing out
	Next   string // the sign-in page: where to go after
	Error  string // the sign-in page: why the last try failed
	Notice string // a page's error message, on the error page
	Start  bool   // the person may start sessions: the New session link
	Body   any
}

// pageError is a failure a person is shown, with its HTTP status.
type pageError struct {
	Status  int
	Message string
}

func (e *pageError) Error() string { return e.Message }

func parseTemplates() *template.Template {
	return template.Must(template.New("").Funcs(template.FuncMap{
		"ago":      ago,
		"markdown": markdown,
		"seqTime":  seqTime,
		"opButton": opButton,
		"answerForm": func(f *formsView, q *questionView) any {
			return struct {
				Forms *formsView
				Q     *questionView
			}{f, q}
		},
		"confirmForm": func(f *formsView, t *toolView) any {
			return struct {
				Forms *formsView
				T     *toolView
			}{f, t}
		},
	}).ParseFS(templateFS, "templates/*.html"))
}

// pageFor fills the parts of a page every signed-in page has.
func (d *Dashboard) pageFor(r *http.Request, title, nav string, body any) page {
	v := viewerOf(r)
	p := page{Title: title, Nav: nav, Open: d.opts.Open, Body: body}
	if v.login != nil {
		p.User = v.login.cred.Principal.String()
		p.CSRF = v.login.csrf
	}
	p.Start = d.mayCreate(v)
	return p
}

// render executes a page's template into a buffer first, so a failure
// is a clean 500 and not half a page.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	var b bytes.Buffer
	if err := d.pages.ExecuteTemplate(&b, name, p); err != nil {
		d.log.Error("rendering a dashboard page", "page", name, "err", err)
		http.Error(w, "The page could not be drawn; the host's log says why.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fragment renders one named template to a string, for live updates.
func (d *Dashboard) fragment(name string, data any) (string, error) {
	var b strings.Builder
	if err := d.pages.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering %s: %w", name, err)
	}
	return b.String(), nil
}

// fail shows an error page with the status that fits err.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	pe := pageErrorOf(err)
	if pe.Status >= 500 {
		d.log.Error("a dashboard request failed", "path", r.URL.Path, "err", err)
	}
	d.render(w, r, pe.Status, "error", d.pageFor(r, "Error", "", nil).withNotice(pe.Message))
}

func (p page) withNotice(s string) page { p.Notice = s; return p }

// pageErrorOf maps an error, a host's refusal among them, to what a
// person is shown.
func pageErrorOf(err error) *pageError {
	var pe *pageError
	if errors.As(err, &pe) {
		return pe
	}
	var rej *client.RejectedError
	if errors.As(err, &rej) {
		status := http.StatusConflict
		if strings.Contains(rej.Reason, " may not ") {
			status = http.StatusForbidden
		}
		return &pageError{Status: status, Message: "The host refused: " + rej.Error()}
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Code {
		case protocol.CodePermissionDenied:
			return &pageError{Status: http.StatusForbidden, Message: ce.Message}
		case protocol.CodeProviderNotFound, protocol.CodeSessionNotFound, protocol.CodeNotFound:
			return &pageError{Status: http.StatusNotFound, Message: ce.Message}
		case protocol.CodeInvalidParams:
			return &pageError{Status: http.StatusBadRequest, Message: ce.Message}
		case protocol.CodeTurnInProgress:
			return &pageError{Status: http.StatusConflict, Message: ce.Message}
		}
		return &pageError{Status: http.StatusBadGateway, Message: "The host answered: " + ce.Message}
	}
	var denied *grants.Denied
	if errors.As(err, &denied) {
		return &pageError{Status: http.StatusForbidden, Message: denied.Message}
	}
	return &pageError{Status: http.StatusInternalServerError, Message: "Something went wrong on the host; its log says what."}
}

// ago says how long ago an RFC 3339 time was, roughly.
func ago(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02")
}

// seqTime formats an event's time.
func seqTime(t time.Time) string { return t.UTC().Format("15:04:05") }

// button is one write button's form.
type button struct {
	CSRF, URI, Chat, Op, Label string
}

func opButton(a actionsView, op, label string) button {
	return button{CSRF: a.CSRF, URI: a.URI, Chat: a.Chat, Op: op, Label: label}
}
