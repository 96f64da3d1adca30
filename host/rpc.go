package host

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math"
	"slices"

	"github.com/creachadair/jrpc2"
	jchannel "github.com/creachadair/jrpc2/channel"

	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// maxQueuedRequests is jrpc2's bound on a connection's handlers at once.
// Each waits its turn in the connection's line (Assign) holding one of
// jrpc2's slots, and jrpc2 gives the slots in no order: a bound a client
// could fill with later requests would leave the earliest waiting behind
// them for good. So it is no bound at all: Limits.InFlight is, as recv
// takes no more requests while the line is full.
const maxQueuedRequests = math.MaxInt32

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
	"ahpd/setSessionMetadata":  (*Host).setSessionMetadata,
	"ahpd/sessionEvents":       (*Host).sessionEvents,
	"ahpd/replaySession":       (*Host).replaySession,
	"ahpd/sessionCheckpoints":  (*Host).sessionCheckpoints,
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

// assigner routes a connection's requests to the host's handlers.
type assigner struct {
	h *Host
	c *conn
}

// Assign is called in the order messages arrive (jrpc2 assigns a batch
// under its lock, one batch at a time), and jrpc2 then runs each batch on
// a goroutine of its own, in no order. So each handler takes its place in
// the connection's line here and waits for the one before it: a client
// may send subscribe and, without waiting, a turn on what it subscribed
// to, or createSession and then subscribe, and they are taken in that
// order. No handler waits on the client, so the line always moves.
func (a assigner) Assign(ctx context.Context, method string) jrpc2.Handler {
	h := a.handler(method)
	if method == a.c.in.eofMethod {
		// The end of input: every request before it has been answered.
		h = func(context.Context, *jrpc2.Request) (any, error) {
			close(a.c.in.drained)
			return nil, nil
		}
	}
	turn, done := a.c.line.next()
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		defer a.c.line.leave(done)
		select {
		case <-turn:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return h(ctx, req)
	}
}

// line orders a connection's requests: each waits for the one before. It
// counts those taken and not done, for recv to take no more while it is
// full: counted as recv takes them, not as jrpc2 assigns them, for jrpc2
// reads ahead of what it has assigned.
type line struct {
	mu   lockcheck.Mutex
	last chan struct{}
	n    int           // requests in line
	peak int           // the most there have been, for tests
	left chan struct{} // closed when one leaves, for room to wait on
}

// next returns the channel closed when the request before is done, and
// the one to close when this one is.
func (l *line) next() (turn <-chan struct{}, done chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.last
	if prev == nil {
		prev = make(chan struct{})
		close(prev)
	}
	l.last = make(chan struct{})
	return prev, l.last
}

// take counts k requests taken off the transport: each will take its
// place in line, as admit made sure.
func (l *line) take(k int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += k
	l.peak = max(l.peak, l.n)
}

// leave ends a request's turn.
func (l *line) leave(done chan struct{}) {
	close(done)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.left != nil {
		close(l.left)
		l.left = nil
	}
}

// room waits until fewer than max requests are in line, or stop is
// closed, or ctx ends.
func (l *line) room(ctx context.Context, stop <-chan struct{}, max int) error {
	for {
		l.mu.Lock()
		if l.n < max {
			l.mu.Unlock()
			return nil
		}
		if l.left == nil {
			l.left = make(chan struct{})
		}
		left := l.left
		l.mu.Unlock()
		select {
		case <-left:
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// busy reports whether requests are in line.
func (l *line) busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n > 0
}

func (a assigner) handler(method string) jrpc2.Handler {
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
		if since, ok := commandSince[method]; ok && !versionAtLeast(a.c.negotiated(), since) {
			return nil, rpcError(protocol.Errorf(protocol.CodeMethodNotFound, "%s came with protocol %s; this connection speaks %s", method, since, a.c.negotiated()))
		}
		if err := a.h.allow(a.c, method, req.ParamString()); err != nil {
			return nil, rpcError(err)
		}
		if done, v, err := a.h.route(ctx, a.c, req); done {
			if err != nil {
				return nil, rpcError(err)
			}
			return v, nil
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

// serve runs the JSON-RPC server of a connection until it ends: reading
// stops, every request taken is answered, and the connection finishes.
func (h *Host) serve(c *conn) {
	defer close(c.serveEnd)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.served = true
	c.mu.Unlock()
	go c.read()
	srv := jrpc2.NewServer(assigner{h, c}, &jrpc2.ServerOptions{
		AllowPush: false,
		// Requests are taken one at a time in the order they came (see
		// Assign), and recv takes no more than Limits.InFlight of them.
		Concurrency: maxQueuedRequests,
		// rpc.serverInfo would answer outside the grants table.
		DisableBuiltin: true,
		NewContext:     func() context.Context { return c.ctx },
	})
	srv.Start(rpcChannel{c})
	err := srv.Wait()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) && !jchannel.IsErrClosing(err) {
		c.log.Debug("connection ended", "err", err)
	}
	c.mu.Lock()
	why := c.in.why
	c.mu.Unlock()
	if why == "" {
		why = "the client closed the connection"
	}
	c.finish(why)
}

// rpcChannel is the jrpc2 channel of a connection: requests come from the
// transport through recv, responses go out through the connection's queue
// so they are ordered with the notifications.
type rpcChannel struct{ c *conn }

func (ch rpcChannel) Send(msg []byte) error {
	ch.c.respond(append([]byte(nil), msg...))
	return nil
}

func (ch rpcChannel) Recv() ([]byte, error) { return ch.c.recv() }

// Close is jrpc2's when it stops; serve ends the connection after.
func (ch rpcChannel) Close() error { return nil }

func (h *Host) ping(ctx context.Context, c *conn, req *jrpc2.Request) (any, error) {
	return nil, nil
}

func notImplemented(what string) error {
	return protocol.Errorf(protocol.CodeInvalidParams, "%s is not supported by this host", what)
}

var jsonUnmarshal = json.Unmarshal
