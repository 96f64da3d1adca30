package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/protocol"
)

// Connector opens AHP connections to a host from inside the process,
// acting for a person: *host.Host is one (host.Connect). The API reaches
// the host through it alone, so a request can do nothing its token's
// person could not do over a WebSocket.
type Connector interface {
	Connect(cred grants.Credential) (io.ReadWriteCloser, error)
}

// Options configure the API. Host is required; the rest may be zero.
type Options struct {
	// Host is the host requests act on.
	Host Connector
	// Auth names who a request acts for from its token, as it does for
	// the host's WebSocket clients; nil takes every request as the host.
	Auth *grants.Authenticator
	// Open says the host asks no token of its clients: requests must then
	// name it by an address, a loopback name or Listen (DNS rebinding),
	// and come from no page of another origin, by Sec-Fetch-Site and
	// Origin (openRefusal).
	Open bool
	// Listen is the address the host listens on, for Open's check.
	Listen string
	// Logger receives the API's logs; nil discards them.
	Logger *slog.Logger
	// MinSeqWait bounds how long ?minSeq= waits; 0 means 30 seconds.
	MinSeqWait time.Duration
	// KeepAlive is how often an idle event stream sends a comment, so
	// proxies keep it open; 0 means 15 seconds.
	KeepAlive time.Duration
	// MaxStreamsPerPerson bounds the event streams one person (the
	// principal of a request's credential) holds open at once; past it a
	// stream is refused with 429 too_many_streams (streams.go). 0, or
	// less, means 32.
	MaxStreamsPerPerson int
	// Metrics, when set, observe how long each route's requests take, and
	// the event streams open and refused.
	Metrics *Metrics
	// Clock is what the answers kept for an Idempotency-Key age by
	// (idempotency.go); nil is the real one.
	Clock clock.Clock
	// Answers, when set, keeps those answers across restarts and hosts
	// (the journal); nil keeps them in memory only.
	Answers Answers
}

// The bounds on what a client sends.
const (
	maxBody       = 1 << 20 // one request body
	maxInput      = 256 << 10
	maxTitle      = 200
	maxMetaKey    = 40
	maxMetaValue  = 500
	maxMetaKeys   = 64
	maxIDLen      = 64
	maxTurnsShown = 50
)

// API is the /v1 HTTP handler.
type API struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	keys *keys // the answers to POSTs sent with an Idempotency-Key
	// streams counts each person's open event streams.
	streams *streams
}

// New returns the API serving o.Host.
func New(o Options) *API {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MinSeqWait <= 0 {
		o.MinSeqWait = 30 * time.Second
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	a := &API{opts: o, log: o.Logger, mux: http.NewServeMux(), keys: newKeys(o.Clock.Now, o.Answers, o.Logger),
		streams: newStreams(o.MaxStreamsPerPerson, o.Logger, o.Metrics)}
	for _, r := range a.routes() {
		a.mux.HandleFunc(r.method+" "+r.path, o.Metrics.instrument(r.method+" "+r.path, r.handle))
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: "no such route: the routes are listed in /v1/openapi.json"})
	})
	return a
}

// route is one method and path the API serves.
type route struct {
	method, path string
	handle       http.HandlerFunc
}

func (a *API) routes() []route {
	return []route{
		{"GET", "/v1/openapi.json", a.openAPI},
		{"GET", "/v1/sessions", a.listSessions},
		{"POST", "/v1/sessions", a.createSession},
		{"GET", "/v1/sessions/{id}", a.getSession},
		{"PATCH", "/v1/sessions/{id}", a.patchSession},
		{"DELETE", "/v1/sessions/{id}", a.deleteSession},
		{"POST", "/v1/sessions/{id}/turns", a.sendTurn},
		{"POST", "/v1/sessions/{id}/cancel", a.cancelTurn},
		{"POST", "/v1/sessions/{id}/suspend", a.suspend},
		{"POST", "/v1/sessions/{id}/resume", a.resume},
		{"GET", "/v1/sessions/{id}/events", a.sessionEvents},
		{"POST", "/v1/sessions/{id}/questions/{requestId}", a.answerQuestion},
		{"POST", "/v1/sessions/{id}/tool-calls/{toolCallId}", a.confirmToolCall},
		{"GET", "/v1/automations", a.listAutomations},
		{"POST", "/v1/automations", a.createAutomation},
		{"GET", "/v1/automations/events", a.automationEvents},
		{"GET", "/v1/automations/{id}", a.getAutomation},
		{"DELETE", "/v1/automations/{id}", a.deleteAutomation},
		{"GET", "/v1/automations/{id}/runs", a.listRuns},
		{"POST", "/v1/automations/{id}/runs", a.startRun},
		{"GET", "/v1/automation-triggers", a.listTriggers},
		{"GET", "/v1/runs/{id}", a.getRun},
		{"POST", "/v1/runs/{id}/cancel", a.cancelRun},
		{"GET", "/v1/runs/{id}/events", a.runEvents},
	}
}

// credKey carries a request's credential in its context.
type credKey struct{}

// ServeHTTP checks who the request is from, bounds its body and routes it.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.opts.Open {
		if e := a.openRefusal(r); e != nil {
			a.log.Warn("refused an HTTP API request on a host that asks no token", "code", e.Code, "host", protocol.Quote(r.Host),
				"origin", protocol.Quote(r.Header.Get("Origin")), "sec-fetch-site", protocol.Quote(r.Header.Get("Sec-Fetch-Site")), "remote", r.RemoteAddr)
			writeError(w, e)
			return
		}
	}
	cred, ok := a.login(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ahpd"`)
		writeError(w, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
			Message: "a valid connection token is required (Authorization: Bearer TOKEN, or ?tkn=)"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	a.keys.idempotent(w, r.WithContext(context.WithValue(r.Context(), credKey{}, cred)), cred.Principal, a.mux)
}

func (a *API) login(r *http.Request) (grants.Credential, bool) {
	if a.opts.Auth == nil {
		return grants.Credential{Principal: grants.RootPrincipal("")}, true
	}
	return a.opts.Auth.Login(tokenOf(r))
}

// tokenOf returns the token a request presents, as the WebSocket
// handshake takes it.
func tokenOf(r *http.Request) string {
	if t := r.URL.Query().Get("tkn"); t != "" {
		return t
	}
	if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return auth[7:]
	}
	return ""
}

// openRefusal is why a host that asks no token does not take r, or nil.
// Without a token, whatever can make a browser send a request here acts
// as the host: so r must name the host by a name a page of another site
// cannot make resolve here (DNS rebinding), and come from no page but
// the host's own. A browser says where a request comes from in
// Sec-Fetch-Site, on every request, GETs and navigations among them; it
// sends Origin on what crosses origins but a GET's. Same-site is
// refused too: a site is a scheme and a domain, not a port, so every
// other server on localhost (a dev server, a notebook) is this host's
// same site. "none" is a person's own doing (a typed URL, a bookmark);
// curl and scripts send neither header.
func (a *API) openRefusal(r *http.Request) *apiError {
	if !host.LocalHost(r.Host, a.opts.Listen) {
		return &apiError{Status: http.StatusForbidden, Code: "forbidden",
			Message: "this host asks no token: it serves requests for an IP address, a loopback name or the name it listens on, and for no other name"}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return &apiError{Status: http.StatusForbidden, Code: "cross_origin",
			Message: fmt.Sprintf("this host asks no token: it serves no request a page of another origin sent (Sec-Fetch-Site: %s)", protocol.Quote(site))}
	}
	// A page under Referrer-Policy: no-referrer (the dashboard's) sends
	// Origin: null to its own host; a sandboxed frame's, also null, is
	// never same-origin.
	if o := r.Header.Get("Origin"); o != "" && (o != "null" || r.Header.Get("Sec-Fetch-Site") != "same-origin") {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return &apiError{Status: http.StatusForbidden, Code: "cross_origin",
				Message: fmt.Sprintf("this host asks no token: it serves no request a page of another origin sent (Origin: %s)", protocol.Quote(o))}
		}
	}
	return nil
}

// connect opens an AHP connection acting for the request's person.
func (a *API) connect(r *http.Request) (*client.Client, error) {
	return a.connectAs(r.Context(), credOf(r), clientIDOf(credOf(r)))
}

// clientIDOf is the AHP client id of a person's HTTP requests: one id
// for all of them, so that a session one request made is the same
// client's in the next (the host shows a session nobody has sent a turn
// in only to the client that made it).
func clientIDOf(cred grants.Credential) string {
	sum := sha256.Sum256([]byte(cred.Principal.String()))
	return "ahpd-http-" + hex.EncodeToString(sum[:8])
}

func (a *API) connectAs(ctx context.Context, cred grants.Credential, id string) (*client.Client, error) {
	stream, err := a.opts.Host.Connect(cred)
	if err != nil {
		return nil, err
	}
	return client.Open(ctx, stream, a.clientOptions(id))
}

func (a *API) clientOptions(id string) *client.Options {
	return &client.Options{ClientID: id, ClientInfo: &protocol.Implementation{Name: "ahpd-http"}, Logger: a.log}
}

func credOf(r *http.Request) grants.Credential {
	c, _ := r.Context().Value(credKey{}).(grants.Credential)
	return c
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
