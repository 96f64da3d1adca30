package conn

import (
	"context"
	"errors"
	"io"
	"math"

	"github.com/creachadair/jrpc2"
	jchannel "github.com/creachadair/jrpc2/channel"
)

// maxQueuedRequests is jrpc2's bound on a connection's handlers at once.
// Each waits its turn in the connection's line (Assign) holding one of
// jrpc2's slots, and jrpc2 gives the slots in no order: a bound a client
// could fill with later requests would leave the earliest waiting behind
// them for good. So it is no bound at all: Limits.InFlight is, as recv
// takes no more requests while the line is full.
const maxQueuedRequests = math.MaxInt32

// Dispatch returns the handler of a connection's request for method. It
// is called in the order requests arrive, and its handlers are run one at
// a time in that order; none may wait on the client.
type Dispatch func(c *Conn, method string) jrpc2.Handler

// assigner routes a connection's requests to the dispatcher's handlers.
type assigner struct {
	c        *Conn
	dispatch Dispatch
}

// Assign is called in the order messages arrive (jrpc2 assigns a batch
// under its lock, one batch at a time), and jrpc2 then runs each batch on
// a goroutine of its own, in no order. So each handler takes its place in
// the connection's line here and waits for the one before it: a client
// may send subscribe and, without waiting, a turn on what it subscribed
// to, or createSession and then subscribe, and they are taken in that
// order. No handler waits on the client, so the line always moves.
func (a assigner) Assign(ctx context.Context, method string) jrpc2.Handler {
	var h jrpc2.Handler
	if method == a.c.in.eofMethod {
		// The end of input: every request before it has been answered.
		h = func(context.Context, *jrpc2.Request) (any, error) {
			close(a.c.in.drained)
			return nil, nil
		}
	} else {
		h = a.dispatch(a.c, method)
	}
	turn, done := a.c.line.next()
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		defer a.c.line.leave(done)
		select {
		case <-turn:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		v, err := h(ctx, req)
		if e, ok := v.(Encoded); ok && err == nil {
			return a.c.stand(e), nil // encoded.go
		}
		return v, err
	}
}

// Serve runs the JSON-RPC server of the connection until it ends: reading
// stops, every request taken is answered, and the connection finishes.
// It returns once the connection is done.
func (c *Conn) Serve(d Dispatch) {
	c.serve(d)
	<-c.done
}

// Start serves the connection in the background: Done says when it ends.
func (c *Conn) Start(d Dispatch) { go c.serve(d) }

func (c *Conn) serve(d Dispatch) {
	defer close(c.serveEnd)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.served = true
	c.mu.Unlock()
	go c.read()
	srv := jrpc2.NewServer(assigner{c, d}, &jrpc2.ServerOptions{
		AllowPush: false,
		// Requests are taken one at a time in the order they came (see
		// Assign), and recv takes no more than Limits.InFlight of them.
		Concurrency: maxQueuedRequests,
		// rpc.serverInfo would answer outside the host's grants.
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
	c.Finish(why)
}

// rpcChannel is the jrpc2 channel of a connection: requests come from the
// transport through recv, responses go out through the connection's queue
// so they are ordered with the notifications.
type rpcChannel struct{ c *Conn }

func (ch rpcChannel) Send(msg []byte) error {
	ch.c.respond(ch.c.spliced(msg))
	return nil
}

func (ch rpcChannel) Recv() ([]byte, error) { return ch.c.recv() }

// Close is jrpc2's when it stops; serve ends the connection after.
func (ch rpcChannel) Close() error { return nil }
