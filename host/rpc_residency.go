package host

import (
	"context"

	"github.com/creachadair/jrpc2"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// The extension commands of sleep and residency. They are ahpd's own,
// named ahpd/*, and documented in docs/HOST.md.

// sessionParams are the params of the ahpd/* session commands.
type sessionParams struct {
	Channel string `json:"channel"`
	// IfIdle, for ahpd/suspendSession, leaves a busy session as it is
	// instead of refusing.
	IfIdle bool `json:"ifIdle,omitempty"`
	// Operations, for ahpd/sessionStatus, asks for the operations the
	// caller may do to the session too.
	Operations bool           `json:"operations,omitempty"`
	Meta       jsontext.Value `json:"_meta,omitempty"`
}

// statusResult answers the ahpd/* session commands.
type statusResult struct {
	Status string `json:"status"`
	// Owner, for ahpd/sessionStatus, is who owns the session (user:<id>,
	// root:<host>), when the host holds it and it has one: a dashboard
	// shows it and works out from it which writes the grants allow.
	Owner string `json:"owner,omitempty"`
	// Sharing is who else may use it (grants.Sharing), with Owner.
	Sharing string `json:"sharing,omitempty"`
	// Operations, for ahpd/sessionStatus asked for them, are the
	// operations of the grants table the caller may do to the session
	// (allowed.go).
	Operations []string `json:"operations,omitempty"`
	// Meta, on a host sharing sessions, names the host that holds the
	// session ("ahpd.host", host/shared's clusterMeta) when one does.
	Meta protocol.Object `json:"_meta,omitempty"`
}

func sessionArgs(req *jrpc2.Request) (sessionParams, error) {
	var p sessionParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil {
		return p, invalidParams(req.Method(), err)
	}
	if p.Channel == "" {
		return p, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: channel: missing required member", req.Method())
	}
	return p, nil
}

// sessionStatus is the probe: it reads, and changes nothing.
func (h *Host) sessionStatus(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	p, err := sessionArgs(req)
	if err != nil {
		return nil, err
	}
	var res statusResult
	if h.cluster != nil {
		res.Status, res.Meta, err = h.cluster.Status(ctx, c, p.Channel)
	} else {
		res.Status, err = h.status(c, p.Channel)
	}
	if err != nil {
		return nil, err
	}
	t := h.targetOf(c, p.Channel)
	if !t.Owner.IsZero() {
		res.Owner, res.Sharing = t.Owner.String(), string(t.Sharing)
	}
	if p.Operations {
		res.Operations = h.operationsFor(c, t)
	}
	return res, nil
}

func (h *Host) suspendSession(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	p, err := sessionArgs(req)
	if err != nil {
		return nil, err
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	if err := h.suspend(ctx, s, p.IfIdle); err != nil {
		return nil, err
	}
	status, _ := h.status(c, p.Channel)
	return statusResult{Status: status}, nil
}

func (h *Host) resumeSession(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	p, err := sessionArgs(req)
	if err != nil {
		return nil, err
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	h.resume(s)
	return statusResult{Status: "active"}, nil
}
