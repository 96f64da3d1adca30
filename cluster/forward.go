package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// errorHeader carries a serving host's failure in a reply, in place of a
// body.
const errorHeader = "Ahpd-Cluster-Error"

// maxErrorBytes bounds the error text a reply carries.
const maxErrorBytes = 512

// Handler answers a request forwarded to this host: the reply's bytes, or
// an error whose text the requester gets (ErrRemote). It runs on its own
// goroutine, up to 64 at once; ctx ends when the member closes.
type Handler func(ctx context.Context, request []byte) ([]byte, error)

// Subject is the subject host id serves requests on.
func (m *Member) Subject(id string) string { return m.cfg.Prefix + ".host." + id }

// Serve answers requests sent to this host (Request with its id) with h,
// until Close. It may be called once.
func (m *Member) Serve(h Handler) error {
	if h == nil {
		return fmt.Errorf("%w: nil handler", ErrBadConfig)
	}
	ctx, cancel := context.WithCancel(context.Background())
	slots := make(chan struct{}, maxInFlight)
	sub, err := m.nc.Subscribe(m.Subject(m.cfg.HostID), func(msg *nats.Msg) {
		// Counted under the lock Close sets closed with, so that Close's
		// wait for the handlers misses none.
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return
		}
		m.handles.Add(1)
		m.mu.Unlock()
		slots <- struct{}{} // blocks the subscription's delivery when full
		go func() {
			defer func() { <-slots; m.handles.Done() }()
			m.handle(ctx, h, msg)
		}()
	})
	if err != nil {
		cancel()
		return fmt.Errorf("cluster: serving requests: %w", err)
	}
	m.mu.Lock()
	if m.closed || m.serveCancel != nil {
		closed := m.closed
		m.mu.Unlock()
		cancel()
		_ = sub.Unsubscribe()
		if closed {
			return ErrClosed
		}
		return fmt.Errorf("%w: Serve called twice", ErrBadConfig)
	}
	m.subs = append(m.subs, sub)
	m.serveCancel = cancel
	m.mu.Unlock()
	// The server has the subscription before Serve returns: a request
	// sent right after finds this host answering.
	if err := m.nc.Flush(); err != nil {
		return fmt.Errorf("cluster: serving requests: %w", err)
	}
	return nil
}

// handle answers one request.
func (m *Member) handle(ctx context.Context, h Handler, msg *nats.Msg) {
	if msg.Reply == "" {
		return // not a request: nobody to answer
	}
	if len(msg.Data) > m.maxMsg {
		m.replyError(msg, fmt.Sprintf("request of %d bytes is over the limit of %d", len(msg.Data), m.maxMsg))
		return
	}
	out, err := h(ctx, msg.Data)
	if err != nil {
		m.replyError(msg, err.Error())
		return
	}
	if len(out) > m.maxMsg {
		m.replyError(msg, fmt.Sprintf("reply of %d bytes is over the limit of %d", len(out), m.maxMsg))
		return
	}
	if err := msg.Respond(out); err != nil {
		m.log.Warn("cluster: replying to a forwarded request", "host", m.cfg.HostID, "err", err)
	}
}

func (m *Member) replyError(msg *nats.Msg, text string) {
	if len(text) > maxErrorBytes {
		text = text[:maxErrorBytes]
	}
	reply := nats.NewMsg(msg.Reply)
	reply.Header.Set(errorHeader, text)
	if err := msg.RespondMsg(reply); err != nil {
		m.log.Warn("cluster: replying to a forwarded request", "host", m.cfg.HostID, "err", err)
	}
}

// Request sends request to host id and waits for its reply, until ctx ends
// or, when ctx has no deadline, DefaultRequestTimeout. Errors: ErrTooLarge
// (the request is over MaxMessageBytes), ErrNoResponder (no host serves
// that id: it died, or never served), ErrTimeout (no reply in time),
// ErrRemote (the host answered with an error; its text is in the message).
func (m *Member) Request(ctx context.Context, id string, request []byte) ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	if !nameRE.MatchString(id) {
		return nil, fmt.Errorf("%w: host id must be 1 to 64 letters, digits, '-' or '_'", ErrBadName)
	}
	if len(request) > m.maxMsg {
		return nil, fmt.Errorf("%w: request of %d bytes, at most %d", ErrTooLarge, len(request), m.maxMsg)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	reply, err := m.nc.RequestWithContext(ctx, m.Subject(id), request)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%w: host %s", ErrNoResponder, id)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, fmt.Errorf("%w: host %s did not answer", ErrTimeout, id)
	case err != nil:
		return nil, fmt.Errorf("cluster: request to host %s: %w", id, err)
	}
	if text := reply.Header.Get(errorHeader); text != "" {
		return nil, fmt.Errorf("%w: host %s: %s", ErrRemote, id, text)
	}
	if len(reply.Data) > m.maxMsg {
		return nil, fmt.Errorf("%w: reply of %d bytes, at most %d", ErrTooLarge, len(reply.Data), m.maxMsg)
	}
	return reply.Data, nil
}
