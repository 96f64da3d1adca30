package host

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/channel"

	"github.com/ahpd/ahpd/protocol"
)

// handler is one JSON-RPC method of a connection.
type handler func(h *Host, ctx context.Context, c *conn, req *jrpc2.Request) (any, error)

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
}

var beforeInitialize = map[string]bool{"initialize": true, "ping": true, "reconnect": true}

// notServed are the protocol's commands this host does not offer yet,
// with what they are for: they answer -32601 saying so.
var notServed = map[string]string{
	"createTerminal":                   "terminals",
	"disposeTerminal":                  "terminals",
	"invokeChangesetOperation":         "changesets",
	"createResourceWatch":              "resource watches",
	"listAutomationTriggerDefinitions": "automations",
	"runAutomation":                    "automations",
	"fetchAutomationRuns":              "automations",
	"authenticate":                     "authentication",
	"completions":                      "completions",
	"resourceRead":                     "resources",
	"resourceWrite":                    "resources",
	"resourceList":                     "resources",
	"resourceResolve":                  "resources",
	"resourceMkdir":                    "resources",
	"resourceDelete":                   "resources",
	"resourceMove":                     "resources",
	"resourceCopy":                     "resources",
	"resourceRequest":                  "resources",
}

// assigner routes a connection's requests to the host's handlers.
type assigner struct {
	h *Host
	c *conn
}

func (a assigner) Assign(ctx context.Context, method string) jrpc2.Handler {
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
		if !beforeInitialize[method] && !a.c.initialized() {
			return nil, rpcError(protocol.Errorf(protocol.CodeInvalidRequest, "%s before initialize: send initialize (or reconnect) first", method))
		}
		if err := a.h.allow(a.c, method, req.ParamString()); err != nil {
			return nil, rpcError(err)
		}
		v, err := m(a.h, ctx, a.c, req)
		if err != nil {
			a.c.release(req.ID())
			return nil, rpcError(err)
		}
		return v, nil
	}
}

// Names lists the methods.
func (a assigner) Names() []string { return slices.Sorted(maps.Keys(methods)) }

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

// rpcError turns an error into the JSON-RPC error the client gets.
func rpcError(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		e := &jrpc2.Error{Code: jrpc2.Code(pe.Code), Message: pe.Message}
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
		return &jrpc2.Error{Code: jrpc2.Code(uv.Code()), Message: uv.Error(), Data: data}
	}
	return &jrpc2.Error{Code: jrpc2.Code(protocol.CodeInternalError), Message: err.Error()}
}

// serve runs the JSON-RPC server of a connection until it ends.
func (h *Host) serve(c *conn) {
	srv := jrpc2.NewServer(assigner{h, c}, &jrpc2.ServerOptions{
		AllowPush: false,
		// One at a time, in the order they came: a client sends subscribe
		// and, without waiting, a turn on what it subscribed to, or
		// createSession and then subscribe, and expects them taken in
		// that order. No handler waits on the client.
		Concurrency: 1,
		// rpc.serverInfo would answer outside the grants table.
		DisableBuiltin: true,
		NewContext:     func() context.Context { return c.ctx },
	})
	srv.Start(rpcChannel{c})
	err := srv.Wait()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) && !channel.IsErrClosing(err) {
		c.log.Debug("connection ended", "err", err)
	}
	c.close("connection ended")
}

// rpcChannel is the jrpc2 channel of a connection: requests come from the
// transport, responses go out through the connection's queue so they are
// ordered with the notifications.
type rpcChannel struct{ c *conn }

func (ch rpcChannel) Send(msg []byte) error {
	ch.c.respond(append([]byte(nil), msg...))
	return nil
}

func (ch rpcChannel) Recv() ([]byte, error) {
	msg, err := ch.c.t.read(ch.c.ctx)
	if err != nil {
		return nil, io.EOF
	}
	return msg, nil
}

func (ch rpcChannel) Close() error {
	ch.c.close("connection ended")
	return nil
}

func (h *Host) ping(ctx context.Context, c *conn, req *jrpc2.Request) (any, error) {
	return nil, nil
}

func notImplemented(what string) error {
	return protocol.Errorf(protocol.CodeInvalidParams, "%s is not supported by this host", what)
}
