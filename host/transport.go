package host

import (
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// Handler serves AHP over WebSocket: one JSON-RPC message per text frame.
// Options.Auth names who a connection acts for from the token it presents
// (?tkn= or Authorization: Bearer) before it is upgraded; a request it
// refuses gets HTTP 401. A host that asks no token of its clients
// (open) takes only requests whose Host is an address, a loopback name or
// the name it listens on, and no browser page of another origin: a page
// of any site could otherwise reach it by a name of the site's that
// resolves to 127.0.0.1 (DNS rebinding).
func (h *Host) Handler(open bool, listen string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open && !localHost(r.Host, listen) {
			h.log.Warn("refused a request for another host name", "host", protocol.Quote(r.Host), "remote", r.RemoteAddr)
			http.Error(w, "this host serves only loopback names without a connection token", http.StatusForbidden)
			return
		}
		cred, ok := h.opts.Auth.Login(tokenOf(r))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ahpd"`)
			http.Error(w, "a valid connection token is required (?tkn= or Authorization: Bearer)", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/metrics" {
			if cred.Principal.Kind != grants.KindRoot {
				http.Error(w, "the metrics are for the host's own connection token", http.StatusForbidden)
				return
			}
			h.MetricsHandler().ServeHTTP(w, r)
			return
		}
		release, ok := h.connectionSlot(w, cred.Principal)
		if !ok {
			return
		}
		defer release()
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: !open})
		if err != nil {
			h.log.Debug("websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
			return
		}
		c, err := h.admit(conn.WebSocket(ws, h.opts.Limits.MessageBytes), false, cred, "")
		if err != nil {
			_ = ws.Close(websocket.StatusGoingAway, err.Error())
			return
		}
		c.Log().Debug("websocket connected", "remote", r.RemoteAddr)
		c.Serve(h.dispatch)
	})
}

// LocalHost reports whether a request's Host is one an open host takes:
// an IP address, a loopback name, or the name it listens on (listen). The
// HTTP API checks requests with it as Handler does.
func LocalHost(hostport, listen string) bool { return localHost(hostport, listen) }

// localHost reports whether a request's Host is one a page of another
// site cannot have made resolve here: an IP address, a loopback name, or
// the name ahpd was told to listen on.
func localHost(hostport, listen string) bool {
	name := hostport
	if n, _, err := net.SplitHostPort(hostport); err == nil {
		name = n
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if strings.EqualFold(name, "localhost") || strings.HasSuffix(strings.ToLower(name), ".localhost") {
		return true
	}
	if net.ParseIP(name) != nil {
		// An address, not a name: no DNS answer of an attacker's stands
		// behind it, so it is what the client meant to reach.
		return true
	}
	if l, _, err := net.SplitHostPort(listen); err == nil && l != "" && strings.EqualFold(strings.Trim(l, "[]"), name) {
		return true
	}
	return false
}

// ServeStdio serves one connection on r and w, one JSON-RPC message per
// line, until r ends or the host closes. It is the host's own connection.
func (h *Host) ServeStdio(r io.Reader, w io.Writer) error {
	c, err := h.newConnection(conn.Lines(r, w, h.opts.Limits.MessageBytes), true, h.opts.Auth.Root())
	if err != nil {
		return err
	}
	c.Serve(h.dispatch)
	return nil
}
