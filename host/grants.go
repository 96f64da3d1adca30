package host

import (
	"net/http"
	"strings"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// Grants: every command and every client action is checked against the
// principal of its connection by one grants.Check before it runs.

// tokenOf returns the token a WebSocket handshake presents.
func tokenOf(r *http.Request) string {
	if t := r.URL.Query().Get("tkn"); t != "" {
		return t
	}
	if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return auth[7:]
	}
	return ""
}

// directory is the users directory, or nil for a host with none.
func (h *Host) directory() *grants.Directory { return h.opts.Auth.Directory() }

// allow checks a command against the connection's principal. The
// operation comes from the method and, for subscribe, the channel's kind;
// the owner is that of the session the command names.
func (h *Host) allow(c *conn.Conn, method, params string) error {
	if method == "dispatchAction" {
		return nil // each action is checked as it is taken
	}
	var p struct {
		Channel string `json:"channel"`
	}
	_ = jsonUnmarshal([]byte(params), &p)
	if len(p.Channel) > protocol.MaxURIBytes() {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: channel: a URI of %d bytes: at most %d are allowed", method, len(p.Channel), protocol.MaxURIBytes())
	}
	kind, kerr := protocol.ClassifyChannel(p.Channel)
	if method == "subscribe" && kerr != nil {
		return nil // no channel to grant: the handler refuses the params
	}
	op, ok := grants.ForCommand(method, kind.String())
	if !ok {
		return protocol.Errorf(protocol.CodePermissionDenied, "%s is not in the grants table", method)
	}
	return h.check(c, op, h.targetOf(c, p.Channel))
}

// check checks op on the session t (the zero Target for none) against
// c's principal.
func (h *Host) check(c *conn.Conn, op grants.Operation, t grants.Target) error {
	return h.directory().CheckSession(c.Principal(), op, t)
}

// checkAction checks a client action; a refusal says why, for the echo.
func (h *Host) checkAction(c *conn.Conn, channel string, a protocol.Action) string {
	op, ok := grants.ForAction(string(a.Type()))
	if !ok {
		return string(a.Type()) + " is not in the grants table"
	}
	t := h.targetOf(c, channel)
	if err := h.check(c, op, t); err != nil {
		return err.Error()
	}
	// Who a session is shared with is its owner's to say, not everybody's
	// who may configure it.
	if cc, ok := a.(*protocol.SessionConfigChangedAction); ok {
		if _, sharing := cc.Config[session.KeySharing]; sharing {
			if err := h.check(c, grants.SessionShare, t); err != nil {
				return err.Error()
			}
		}
	}
	return ""
}

// targetOf returns the session a channel belongs to, as the grants check
// it: its owner and sharing. It looks only at the sessions the host
// holds: checking a grant opens nothing.
func (h *Host) targetOf(c *conn.Conn, channel string) grants.Target {
	uri := channel
	switch kind, _ := protocol.ClassifyChannel(channel); kind {
	case protocol.ChannelSession:
	case protocol.ChannelChat:
		cu, err := protocol.ParseChatURI(channel)
		if err != nil {
			return grants.Target{}
		}
		uri = cu.Session
		if home := h.chatHome(channel); home != nil {
			uri = home.URI()
		}
	default:
		return grants.Target{}
	}
	s := h.held(uri)
	if s == nil || !s.VisibleTo(c) {
		return grants.Target{}
	}
	return s.Target()
}

// ownerFilter reads listSessions' owner filter: _meta {"ahpd.owner": "me"}
// keeps the sessions the connection's principal owns. It reports whether
// the filter is on.
func ownerFilter(meta protocol.Object) (bool, error) {
	v, ok := meta["ahpd.owner"]
	if !ok {
		return false, nil
	}
	if strings.TrimSpace(string(v)) != `"me"` {
		return false, protocol.Errorf(protocol.CodeInvalidParams, `invalid params for listSessions: _meta["ahpd.owner"]: the only filter is "me"`)
	}
	return true, nil
}
