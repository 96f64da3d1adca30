package dashboard

import (
	"net/http"
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
		d.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Next: next,
			Error: "That token is not one this host accepts. Use the connection token or a personal token (ahpd user token)."})
		return
	}
	if old, ok := d.current(r); ok {
		d.logins.close(old.id)
	}
	id, in := d.logins.open(cred)
	d.setCookie(w, r, id, in.expires)
	http.Redirect(w, r, next, http.StatusSeeOther)
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
