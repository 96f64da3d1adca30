package dashboard

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/protocol"
)

// Connector opens AHP connections to a host from inside the process,
// acting for a person: *host.Host is one (host.Connect). The dashboard
// reaches the host through it alone, so a page can do nothing that
// person could not do over a WebSocket.
type Connector interface {
	Connect(cred grants.Credential) (io.ReadWriteCloser, error)
}

// Options configure the dashboard. Host is required; the rest may be
// zero.
type Options struct {
	// Host is the host the pages show.
	Host Connector
	// Auth names who signs in from their token, as it does for the
	// host's WebSocket clients; nil takes everybody as the host.
	Auth *grants.Authenticator
	// Open says the host asks no token: nobody signs in, every browser
	// acts as the host, and a request must name the host by a loopback
	// name or Listen (DNS rebinding).
	Open bool
	// Listen is the address the host listens on, for Open's check.
	Listen string
	// Logger receives the dashboard's logs; nil discards them.
	Logger *slog.Logger
	// Metrics counts what the dashboard refuses; nil counts nothing.
	Metrics *Metrics
	// LoginTTL is how long a login lasts; 0 means 12 hours.
	LoginTTL time.Duration
	// MaxLogins bounds the logins open at once, a bound on memory; 0
	// means 1,000. A full table lets its expired logins go, then the
	// signing-in person's own oldest; when every login left is somebody
	// else's the sign-in is refused (429, with Retry-After), for letting
	// one go would sign a person out for another.
	MaxLogins int
	// MaxLoginsPerPerson bounds the logins one person (the principal of
	// their token) holds at once; 0 means 20. A sign-in past it lets that
	// person's own oldest login go, and nobody else's. On an Open host
	// every browser is the host's one person and only MaxLogins applies:
	// else a 21st browser would end the first one's login, and the forms
	// it has open with it.
	MaxLoginsPerPerson int
	// MaxLivePagesPerPerson bounds the live streams one person keeps open
	// across all their logins, beside the 16 of each login; 0 means 32.
	MaxLivePagesPerPerson int
	// KeepAlive is how often an idle live stream sends a comment (and a
	// sessions table is read again); 0 means 15 seconds.
	KeepAlive time.Duration
	// Throttle is the least time between two updates a live stream
	// sends; 0 means 150 ms. The sessions table is sent at most once per
	// four of them.
	Throttle time.Duration
	// Now is the clock of logins' expiry; nil is time.Now.
	Now func() time.Time
}

// The bounds on what a browser sends.
const (
	maxForm      = 16 << 10 // a form's body
	maxToken     = 1024     // a token typed at sign-in
	maxURI       = 1024     // a session or chat URI in a query
	maxCursor    = 1024
	maxPageRows  = 1000
	pageRows     = 50
	timelineSize = 500
)

// cookieName is the login cookie's name.
const cookieName = "ahpd_ui"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Dashboard is the /ui/ HTTP handler.
type Dashboard struct {
	opts   Options
	log    *slog.Logger
	mux    *http.ServeMux
	logins *logins
	pages  *template.Template
}

// New returns the dashboard of o.Host.
func New(o Options) *Dashboard {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.LoginTTL <= 0 {
		o.LoginTTL = 12 * time.Hour
	}
	if o.MaxLogins <= 0 {
		o.MaxLogins = 1000
	}
	if o.MaxLoginsPerPerson <= 0 {
		o.MaxLoginsPerPerson = 20
	}
	if o.MaxLivePagesPerPerson <= 0 {
		o.MaxLivePagesPerPerson = 32
	}
	perPerson := o.MaxLoginsPerPerson
	if o.Open {
		perPerson = o.MaxLogins
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.Throttle <= 0 {
		o.Throttle = 150 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	d := &Dashboard{opts: o, log: o.Logger, mux: http.NewServeMux(),
		logins: newLogins(loginBounds{max: o.MaxLogins, perPerson: perPerson, livePerson: o.MaxLivePagesPerPerson}, o.LoginTTL, o.Now),
		pages:  parseTemplates()}
	static, _ := fs.Sub(staticFS, "static")
	d.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	d.mux.HandleFunc("POST /ui/login", d.signIn)
	d.mux.HandleFunc("POST /ui/logout", d.signedIn(d.signOut))
	d.mux.HandleFunc("GET /ui/{$}", d.signedIn(d.sessionsPage))
	d.mux.HandleFunc("GET /ui/events", d.signedIn(d.sessionsEvents))
	d.mux.HandleFunc("GET /ui/session", d.signedIn(d.sessionPage))
	d.mux.HandleFunc("GET /ui/session/events", d.signedIn(d.sessionEvents))
	d.mux.HandleFunc("POST /ui/session/action", d.signedIn(d.sessionAction))
	d.mux.HandleFunc("POST /ui/session/answer", d.signedIn(d.answerAction))
	d.mux.HandleFunc("POST /ui/session/confirm", d.signedIn(d.confirmAction))
	d.mux.HandleFunc("GET /ui/automations", d.signedIn(d.automationsPage))
	d.mux.HandleFunc("GET /ui/automations/events", d.signedIn(d.automationsEvents))
	d.mux.HandleFunc("POST /ui/automations/action", d.signedIn(d.automationAction))
	// Start work, converse (newsession.go, compose.go).
	d.mux.HandleFunc("GET /ui/new", d.signedIn(d.newPage))
	d.mux.HandleFunc("POST /ui/new", d.signedIn(d.newAction))
	d.mux.HandleFunc("POST /ui/session/send", d.signedIn(d.sendAction))
	d.mux.HandleFunc("POST /ui/session/chat", d.signedIn(d.newChatAction))
	// Find, sign-in, looks.
	d.mux.HandleFunc("POST /ui/logout/all", d.signedIn(d.signOutEverywhere))
	// Review and timeline (review.go).
	d.mux.HandleFunc("GET /ui/session/review", d.signedIn(d.reviewPage))
	d.mux.HandleFunc("/ui/", d.signedIn(func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, &pageError{Status: http.StatusNotFound, Message: "There is no such page."})
	}))
	return d
}

// securityHeaders are on every answer: no script, style or frame from
// anywhere but here, no inline script or style, and no referrer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
}

// ServeHTTP sets the security headers, refuses what another site may
// have sent, and routes.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	if !d.sameSite(r) {
		d.log.Warn("refused a dashboard request for another host name or from another origin", "host", protocol.Quote(r.Host), "remote", r.RemoteAddr)
		http.Error(w, "This host serves its dashboard only to its own pages.", http.StatusForbidden)
		return
	}
	if len(r.URL.RawQuery) > 4096 {
		http.Error(w, "The address is too long.", http.StatusRequestURITooLong)
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	}
	d.mux.ServeHTTP(w, r)
}

// sameSite reports whether r may be served: a POST comes from no page of
// another origin, and on an open host every request names the host by a
// name no other site can make resolve here. A browser sends Origin with a
// POST; under Referrer-Policy no-referrer it sends "null", and then its
// Sec-Fetch-Site must say the request is the site's own.
func (d *Dashboard) sameSite(r *http.Request) bool {
	if d.opts.Open && !host.LocalHost(r.Host, d.opts.Listen) {
		return false
	}
	site := r.Header.Get("Sec-Fetch-Site")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && site != "" && site != "same-origin" && site != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" || (r.Method == http.MethodGet && !d.opts.Open) {
		return true
	}
	if o == "null" {
		return site == "same-origin"
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// viewer is who a request is from: their login and what it stands for.
type viewer struct {
	id    string // the login's id, its cookie's value
	login *login
}

type viewerKey struct{}

func viewerOf(r *http.Request) viewer {
	v, _ := r.Context().Value(viewerKey{}).(viewer)
	return v
}

// signedIn serves next to a signed-in browser and answers anybody else
// with the sign-in page. On an open host every browser is signed in as
// the host, silently: its forms still need the CSRF token of a login.
func (d *Dashboard) signedIn(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d.linkSignIn(w, r) {
			return
		}
		v, ok := d.current(r)
		if ok && d.opts.Auth != nil {
			if err := d.opts.Auth.Recheck(v.login.cred); err != nil {
				d.logins.close(v.id)
				ok = false
			}
		}
		if !ok && d.opts.Open {
			cred := grants.Credential{Principal: d.rootPrincipal()}
			id, in, err := d.logins.open(cred)
			if err != nil {
				// Unreached while every login is the host's, as on an
				// open host: a full table lets the oldest go.
				d.tableFull(w, r, cred, err, r.URL.RequestURI())
				return
			}
			d.setCookie(w, r, id, in.expires)
			v, ok = viewer{id: id, login: in}, true
		}
		if !ok {
			if r.Method != http.MethodGet || r.URL.Path == "/ui/events" || r.URL.Path == "/ui/session/events" {
				http.Error(w, "Sign in first: the dashboard needs a token.", http.StatusUnauthorized)
				return
			}
			d.loginPage(w, r)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	}
}

func (d *Dashboard) rootPrincipal() grants.Principal {
	if d.opts.Auth != nil {
		return d.opts.Auth.Root()
	}
	return grants.RootPrincipal("")
}

func (d *Dashboard) current(r *http.Request) (viewer, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return viewer{}, false
	}
	in, ok := d.logins.get(c.Value)
	if !ok {
		return viewer{}, false
	}
	return viewer{id: c.Value, login: in}, true
}

func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request, id string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/ui/", Expires: expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// connect opens an AHP connection acting for the request's person.
func (d *Dashboard) connect(r *http.Request) (*client.Client, error) {
	return d.connectAs(r.Context(), viewerOf(r).login.cred)
}

func (d *Dashboard) connectAs(ctx context.Context, cred grants.Credential) (*client.Client, error) {
	stream, err := d.opts.Host.Connect(cred)
	if err != nil {
		return nil, err
	}
	return client.Open(ctx, stream, &client.Options{ClientID: clientIDOf(cred),
		ClientInfo: &protocol.Implementation{Name: "ahpd-dashboard"}, Logger: d.log})
}

// clientIDOf is the AHP client id of a person's dashboard connections:
// one for all of them, so the host shows them what it shows that client.
func clientIDOf(cred grants.Credential) string {
	sum := sha256.Sum256([]byte(cred.Principal.String()))
	return "ahpd-ui-" + hex.EncodeToString(sum[:8])
}
