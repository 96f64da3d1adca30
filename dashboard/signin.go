package dashboard

import (
	"net/http"
	"strings"
	"time"

	"github.com/ahpd/ahpd/grants"
)

// Signing in from a link, and signing out everywhere.
//
// A client's link carries the token as ?tkn= (ahpd prints one for the
// dashboard, as for its WebSocket): a GET with it signs in once, the
// token going into the login, and is answered with a redirect to the
// same address without it, so the token stays in no history, no bookmark
// and no Referer. A token the host does not take is answered with that
// redirect too, and the sign-in page it leads to says the link was
// refused (a cookie of one request says so, never the token).

// tokenParam is the query parameter a link's token comes in.
const tokenParam = "tkn"

// refusedCookie marks the next sign-in page as following a refused link.
const refusedCookie = "ahpd_ui_refused"

// linkSignIn signs in from r's ?tkn=, when it has one, and answers r
// with the redirect that takes the token out of the address. It reports
// whether it answered r.
func (d *Dashboard) linkSignIn(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	if r.Method != http.MethodGet || !q.Has(tokenParam) {
		return false
	}
	token := strings.TrimSpace(q.Get(tokenParam))
	q.Del(tokenParam)
	next := r.URL.Path
	if len(q) > 0 {
		next += "?" + q.Encode()
	}
	next = safeNext(next)
	if d.opts.Open {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return true
	}
	cred, ok := d.check(token)
	if !ok {
		d.log.Info("a dashboard sign-in from a link was refused", "remote", r.RemoteAddr)
		d.opts.Metrics.refuse(refusedToken)
		if _, in := d.current(r); in {
			// Signed in already: the page as before.
			http.Redirect(w, r, next, http.StatusSeeOther)
			return true
		}
		http.SetCookie(w, &http.Cookie{Name: refusedCookie, Value: "1", Path: "/ui/", MaxAge: 60,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		http.Redirect(w, r, next, http.StatusSeeOther)
		return true
	}
	if old, ok := d.current(r); ok {
		d.logins.close(old.id)
	}
	id, in, err := d.logins.open(cred)
	if err != nil {
		d.tableFull(w, r, cred, err, next)
		return true
	}
	d.setCookie(w, r, id, in.expires)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return true
}

// loginPage answers a request that is not signed in with the sign-in
// page, saying so when a link's token was just refused.
func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "Sign in", Next: r.URL.RequestURI()}
	if c, err := r.Cookie(refusedCookie); err == nil && c.Value == "1" {
		http.SetCookie(w, &http.Cookie{Name: refusedCookie, Value: "", Path: "/ui/", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		p.Error = "The link's token is not one this host accepts. Sign in with the connection token or a personal token (ahpd user token)."
	}
	d.render(w, r, http.StatusUnauthorized, "login", p)
}

// signOutEverywhere ends every login of the signed-in person, this one
// among them: every browser they signed in from is signed out.
func (d *Dashboard) signOutEverywhere(w http.ResponseWriter, r *http.Request) {
	if !d.formOK(w, r) {
		return
	}
	who := viewerOf(r).login.cred.Principal
	n := d.logins.closeAll(who)
	d.log.Info("a person signed out of the dashboard everywhere", "principal", who.String(), "logins", n)
	d.setCookie(w, r, "", time.Unix(1, 0))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// closeAll ends every login of who, and says how many there were.
func (l *logins) closeAll(who grants.Principal) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.people[who]
	if p == nil {
		return 0
	}
	ids := append([]string(nil), p.ids...)
	for _, id := range ids {
		l.dropLocked(id)
	}
	return len(ids)
}
