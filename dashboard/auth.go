package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ahpd/ahpd/grants"
)

// signIn checks the token a person typed, with the host's own
// Authenticator, and opens a login for it.
func (d *Dashboard) signIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, &pageError{Status: http.StatusRequestEntityTooLarge, Message: "The form is too large."})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if d.opts.Open {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	cred, ok := d.check(token)
	if !ok {
		d.log.Info("a dashboard sign-in was refused", "remote", r.RemoteAddr)
		d.opts.Metrics.refuse(refusedToken)
		d.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Next: next,
			Error: "That token is not one this host accepts. Use the connection token or a personal token (ahpd user token)."})
		return
	}
	if old, ok := d.current(r); ok {
		d.logins.close(old.id)
	}
	id, in, err := d.logins.open(cred)
	if err != nil {
		d.tableFull(w, r, cred, err, next)
		return
	}
	d.setCookie(w, r, id, in.expires)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// tableFull answers a sign-in the logins table had no room for with the
// sign-in page, saying when to try again: a login surely ends then, and
// one may sooner, when somebody signs out.
func (d *Dashboard) tableFull(w http.ResponseWriter, r *http.Request, cred grants.Credential, err error, next string) {
	wait := time.Minute
	var full *errTableFull
	if errors.As(err, &full) {
		wait = full.wait
	}
	secs := max(1, int((wait+time.Second-1)/time.Second))
	d.opts.Metrics.refuse(refusedLogins)
	d.log.Warn("refused a dashboard sign-in: every login the host keeps is another person's",
		"principal", cred.Principal.String(), "remote", r.RemoteAddr, "max_logins", d.opts.MaxLogins, "retry_after", secs)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	d.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Sign in", Next: next,
		Error: fmt.Sprintf("This host keeps at most %d dashboard sign-ins, and they are all other people's. "+
			"One of them ends within %s, or sooner when somebody signs out: sign in again then. "+
			"Whoever runs the host can let it keep more.", d.opts.MaxLogins, within(time.Duration(secs)*time.Second))})
}

// within says a wait in whole minutes or hours, rounded up, so that
// "within" it is true.
func within(d time.Duration) string {
	switch {
	case d <= time.Minute:
		return "a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d minutes", int((d+time.Minute-1)/time.Minute))
	case d <= time.Hour:
		return "an hour"
	}
	return fmt.Sprintf("%d hours", int((d+time.Hour-1)/time.Hour))
}

func (d *Dashboard) check(token string) (grants.Credential, bool) {
	if token == "" || len(token) > maxToken {
		return grants.Credential{}, false
	}
	if d.opts.Auth == nil {
		return grants.Credential{Principal: grants.RootPrincipal("")}, true
	}
	return d.opts.Auth.Login(token)
}

// signOut ends the login and forgets its cookie.
func (d *Dashboard) signOut(w http.ResponseWriter, r *http.Request) {
	if !d.formOK(w, r) {
		return
	}
	v := viewerOf(r)
	d.logins.close(v.id)
	d.setCookie(w, r, "", time.Unix(1, 0))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// formOK parses a POSTed form and checks its CSRF token against the
// login's; it answers the request itself when they differ.
func (d *Dashboard) formOK(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, &pageError{Status: http.StatusRequestEntityTooLarge, Message: "The form is too large."})
		return false
	}
	if !viewerOf(r).login.csrfOK(r.PostForm.Get("csrf")) {
		d.fail(w, r, &pageError{Status: http.StatusForbidden, Message: "The form is out of date or came from another page: reload the page and try again."})
		return false
	}
	return true
}

// safeNext is where to go after signing in: a path under /ui/ of this
// host, never another site.
func safeNext(s string) string {
	if !strings.HasPrefix(s, "/ui/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\r\n") || len(s) > 2048 {
		return "/ui/"
	}
	return s
}
