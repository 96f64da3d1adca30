package host

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// handler is one JSON-RPC method of a connection.
type handler func(h *Host, ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error)

// methods is the JSON-RPC surface. Any other method answers -32601 naming
// it. Methods other than these three need initialize first.
var methods = map[string]handler{
	"initialize":               (*Host).initialize,
	"ping":                     (*Host).ping,
	"reconnect":                (*Host).reconnect,
	"subscribe":                (*Host).subscribe,
	"unsubscribe":              (*Host).unsubscribe,
	"dispatchAction":           (*Host).dispatchAction,
	"listSessions":             (*Host).listSessions,
	"createSession":            (*Host).createSession,
	"disposeSession":           (*Host).disposeSession,
	"createChat":               (*Host).createChat,
	"disposeChat":              (*Host).disposeChat,
	"fetchTurns":               (*Host).fetchTurns,
	"moveChat":                 (*Host).moveChat,
	"resolveSessionConfig":     (*Host).resolveSessionConfig,
	"sessionConfigCompletions": (*Host).sessionConfigCompletions,
	"ahpd/sessionStatus":       (*Host).sessionStatus,
	"ahpd/suspendSession":      (*Host).suspendSession,
	"ahpd/resumeSession":       (*Host).resumeSession,
	"ahpd/setSessionMetadata":  (*Host).setSessionMetadata,
	"ahpd/sessionEvents":       (*Host).sessionEvents,
	"ahpd/replaySession":       (*Host).replaySession,
	"ahpd/sessionCheckpoints":  (*Host).sessionCheckpoints,
	"ahpd/sessionDiff":         (*Host).sessionDiff,
	"ahpd/sessionEventCounts":  (*Host).sessionEventCounts,
	"ahpd/webhookLog":          (*Host).webhookLog, // events.go

	"listAutomationTriggerDefinitions": (*Host).listAutomationTriggerDefinitions,
	"runAutomation":                    (*Host).runAutomation,
	"fetchAutomationRuns":              (*Host).fetchAutomationRuns,
}

var beforeInitialize = map[string]bool{"initialize": true, "ping": true, "reconnect": true}

// commandSince are the commands of a later version than 0.9.0, the oldest
// ahpd speaks: a connection of an older version does not have them.
var commandSince = map[string]string{"moveChat": "1.0.0"}

func versionAtLeast(v, since string) bool {
	c, err := protocol.CompareVersions(v, since)
	return err == nil && c >= 0
}

// notServed are the protocol's commands this host does not offer yet,
// with what they are for: they answer -32601 saying so.
var notServed = map[string]string{
	"createTerminal":           "terminals",
	"disposeTerminal":          "terminals",
	"invokeChangesetOperation": "changesets",
	"createResourceWatch":      "resource watches",
	"authenticate":             "authentication",
	"completions":              "completions",
	"resourceRead":             "resources",
	"resourceWrite":            "resources",
	"resourceList":             "resources",
	"resourceResolve":          "resources",
	"resourceMkdir":            "resources",
	"resourceDelete":           "resources",
	"resourceMove":             "resources",
	"resourceCopy":             "resources",
	"resourceRequest":          "resources",
}

// dispatch returns the handler of a connection's request for method
// (conn.Dispatch): the method's, behind the checks every request passes
// (initialized, the version has it, the grants allow it), or routed to
// the session's holder.
func (h *Host) dispatch(c *conn.Conn, method string) jrpc2.Handler {
	m, ok := methods[method]
	if !ok {
		return func(context.Context, *jrpc2.Request) (any, error) {
			if what, ok := notServed[method]; ok {
				return nil, rpcError(protocol.Errorf(protocol.CodeMethodNotFound, "%s: this host does not offer %s", method, what))
			}
			return nil, rpcError(protocol.Errorf(protocol.CodeMethodNotFound, "unknown method %s", protocol.Quote(method)))
		}
	}
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		defer h.metrics.commandTook(method, time.Now())
		if !beforeInitialize[method] && !c.Initialized() {
			return nil, rpcError(protocol.Errorf(protocol.CodeInvalidRequest, "%s before initialize: send initialize (or reconnect) first", method))
		}
		if since, ok := commandSince[method]; ok && !versionAtLeast(c.Negotiated(), since) {
			return nil, rpcError(protocol.Errorf(protocol.CodeMethodNotFound, "%s came with protocol %s; this connection speaks %s", method, since, c.Negotiated()))
		}
		if err := h.allow(c, method, req.ParamString()); err != nil {
			return nil, rpcError(err)
		}
		if h.cluster != nil {
			if done, v, err := h.cluster.Route(ctx, c, req); done {
				if err != nil {
					return nil, rpcError(err)
				}
				return v, nil
			}
		}
		v, err := m(h, ctx, c, req)
		if err != nil {
			c.Release(req.ID())
			return nil, rpcError(err)
		}
		return v, nil
	}
}

// params decodes a request's params into v; a misfit answers -32602 naming
// the member.
func params(req *jrpc2.Request, v json.Unmarshaler) error {
	raw := req.ParamString()
	if raw == "" {
		raw = "{}"
	}
	if err := v.UnmarshalJSON([]byte(raw)); err != nil {
		return invalidParams(req.Method(), err)
	}
	return nil
}

func invalidParams(method string, err error) error {
	var de *protocol.DecodeError
	if errors.As(err, &de) && de.Path != "" {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: %s: %s", method, de.Path, de.Err)
	}
	return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: %v", method, err)
}

// maxErrorMessage bounds an error message: a message quotes at most a
// prefix of what a client sent (protocol.Quote), and this is the net under
// any message that slipped through.
const maxErrorMessage = 4096

func boundedMessage(s string) string {
	if len(s) <= maxErrorMessage {
		return s
	}
	return s[:maxErrorMessage] + "… (cut)"
}

// rpcError turns an error into the JSON-RPC error the client gets.
func rpcError(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		e := &jrpc2.Error{Code: jrpc2.Code(pe.Code), Message: boundedMessage(pe.Message)}
		if pe.Data != nil {
			if data, derr := json.Marshal(pe.Data); derr == nil {
				e.Data = data
			}
		}
		return e
	}
	var uv *protocol.UnsupportedVersionError
	if errors.As(err, &uv) {
		data, _ := json.Marshal(uv.Data())
		return &jrpc2.Error{Code: jrpc2.Code(uv.Code()), Message: boundedMessage(uv.Error()), Data: data}
	}
	return &jrpc2.Error{Code: jrpc2.Code(protocol.CodeInternalError), Message: boundedMessage(err.Error())}
}

func (h *Host) ping(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	return nil, nil
}

func notImplemented(what string) error {
	return protocol.Errorf(protocol.CodeInvalidParams, "%s is not supported by this host", what)
}

var jsonUnmarshal = json.Unmarshal
