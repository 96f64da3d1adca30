package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/ahpd/ahpd/protocol"
)

// Versions returns the protocol versions a client offers by default, most
// preferred first: 1.0.0 and 0.9.0.
func Versions() []string { return []string{"1.0.0", "0.9.0"} }

// Options configure a client. The zero value (and nil) is valid.
type Options struct {
	// Token is the connection token, or a person's own token; "" sends
	// none. It is sent as an Authorization: Bearer header.
	Token string
	// ClientID names the client to the host; "" picks a random one.
	// Reconnecting needs the same id, which the client keeps.
	ClientID string
	// ClientInfo is sent with initialize, when set.
	ClientInfo *protocol.Implementation
	// Versions are the protocol versions offered; nil offers [Versions].
	Versions []string
	// Subscriptions are channels to subscribe to at initialize, beside
	// root, which is always watched.
	Subscriptions []string
	// EventBuffer is how many events wait for the reader of Events before
	// newer ones are dropped; 0 means 1024.
	EventBuffer int
	// MaxMessageBytes bounds one message from the host; 0 means 64 MiB.
	MaxMessageBytes int64
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Received, when set, is given every message the host sends, as it
	// came (one that is not JSON too), once the client has handled it:
	// what the message changed (a state, the version) is in place, and a
	// call it answers returns only after the hook did (a Call that returned
	// had its answer shown). A caller logs the wire with it, or
	// checks what the host says (against the protocol's schemas, say). It
	// runs on the goroutine that reads the connection, which reads
	// nothing more until it returns: it may read the client (State,
	// Version, LastSeq) but must not wait on it (a Call from it would
	// wait for an answer nobody reads). It must not modify data, nor keep
	// it past the call.
	Received func(data []byte)
	// Sent, when set, is given every message the client writes, just
	// before it is written, on the goroutine writing it (a caller's; it
	// may be several at once). The same rules as Received's hold.
	Sent func(data []byte)
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.ClientID == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		out.ClientID = "ahpd-client-" + hex.EncodeToString(b)
	}
	if out.Versions == nil {
		out.Versions = Versions()
	}
	if out.EventBuffer <= 0 {
		out.EventBuffer = 1024
	}
	if out.MaxMessageBytes <= 0 {
		out.MaxMessageBytes = 64 << 20
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return out
}

// Error is a JSON-RPC error the host answered.
type Error struct {
	Code    protocol.ErrorCode `json:"code"`
	Message string             `json:"message"`
	Data    json.RawMessage    `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// ErrorCode returns the JSON-RPC code of err when it is (or wraps) an
// *Error, else 0.
func ErrorCode(err error) protocol.ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// ErrClosed is returned by a client that was closed.
var ErrClosed = errors.New("client: closed")

// ErrDisconnected is wrapped by calls that could not finish because the
// connection ended: Reconnect, or dial again.
var ErrDisconnected = errors.New("client: disconnected")

// Event is a notification from the host.
type Event struct {
	// Method is the notification: "action", "root/sessionAdded", ...
	Method string
	// Params are its params as they came.
	Params json.RawMessage
	// Action is set for an "action" notification, and for every action a
	// reconnect replayed. A refused action of this client's comes back
	// with RejectionReason set.
	Action *protocol.ActionEnvelope
	// Dropped is how many events were dropped before this one because
	// the buffer was full.
	Dropped int
}

// Client is a connection to an AHP host. See the package documentation.
type Client struct {
	url    string
	dial   func(ctx context.Context) (wire, error) // opens a connection
	opts   Options
	log    *slog.Logger
	events chan Event

	mu         sync.Mutex
	snapReason string      // why the last reconnect was sent snapshots, as the host said
	conn       *connection // the current connection
	closed     bool
	version    string
	init       *protocol.InitializeResult
	lastSeq    int64
	nextID     int64
	clientSeq  int64
	channels   map[string]*channel
	echoes     map[int64]chan error
	changed    chan struct{} // closed and replaced whenever anything arrives
	dropped    int
	eventsDone bool
}

// channel is a watched channel's state.
type channel struct {
	state   protocol.ChannelState
	fromSeq int64 // the serverSeq the snapshot reflects
}

// connection is one connection to the host; a reconnect replaces it.
type connection struct {
	w       wire
	cancel  context.CancelFunc
	done    chan struct{} // closed once its reader has returned
	err     error         // why it ended; read after done
	pending map[string]*pendingCall
}

type pendingCall struct {
	ch chan response
	// onResult runs in the reader, under the client's lock, before the
	// answer is delivered: a subscribe's snapshot is in place before any
	// action after it is applied.
	onResult func(json.RawMessage)
}

type response struct {
	result json.RawMessage
	err    *Error
}

// Dial connects to url (ws:// or wss://), initializes, and returns the
// client. ctx bounds the dial and the handshake only.
func Dial(ctx context.Context, url string, opts *Options) (*Client, error) {
	c := newClient(url, opts)
	c.dial = c.dialWebSocket
	return c.start(ctx)
}

// Connect opens the WebSocket to url as Dial does, but sends nothing: the
// caller speaks first, with Call. It sends initialize (with params of its
// own making), or reconnect as a client the host already knows, maybe
// carrying on from another client (Adopt); the client takes their
// answers as its own. Until then the client watches nothing and has no
// version. Reconnect speaks as Options say (their ClientID), whatever the
// caller's initialize said. ctx bounds the dial only.
func Connect(ctx context.Context, url string, opts *Options) (*Client, error) {
	c := newClient(url, opts)
	c.dial = c.dialWebSocket
	if err := c.connect(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func newClient(url string, opts *Options) *Client {
	o := opts.withDefaults()
	return &Client{
		url:      url,
		opts:     o,
		log:      o.Logger,
		events:   make(chan Event, o.EventBuffer),
		channels: map[string]*channel{},
		echoes:   map[int64]chan error{},
		changed:  make(chan struct{}),
	}
}

// start connects and initializes.
func (c *Client) start(ctx context.Context) (*Client, error) {
	if err := c.connect(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.initialize(ctx, append([]string{protocol.RootURI}, c.opts.Subscriptions...)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// connect opens a connection and starts its reader.
func (c *Client) connect(ctx context.Context) error {
	w, err := c.dial(ctx)
	if err != nil {
		return err
	}
	readCtx, cancel := context.WithCancel(context.Background())
	cn := &connection{w: w, cancel: cancel, done: make(chan struct{}), pending: map[string]*pendingCall{}}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		_ = w.close()
		return ErrClosed
	}
	c.conn = cn
	c.mu.Unlock()
	go c.read(readCtx, cn)
	return nil
}

// ErrUnauthorized is wrapped by a dial the host refused for its token.
var ErrUnauthorized = errors.New("client: unauthorized")

// initialize negotiates the version and takes root's snapshot.
func (c *Client) initialize(ctx context.Context, subs []string) error {
	params := protocol.InitializeParams{
		ProtocolVersions:     c.opts.Versions,
		ClientID:             c.opts.ClientID,
		ClientInfo:           c.opts.ClientInfo,
		InitialSubscriptions: subs,
	}
	// Decoded here too, so that an answer that does not decode fails the
	// handshake.
	var res protocol.InitializeResult
	if err := c.call(ctx, "initialize", params, &res, c.takeInitialize); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return nil
}

// takeInitialize takes initialize's answer: the version, the snapshots.
func (c *Client) takeInitialize(raw json.RawMessage) {
	var r protocol.InitializeResult
	if json.Unmarshal(raw, &r) != nil {
		return
	}
	c.init = &r
	c.version = r.ProtocolVersion
	c.lastSeq = max(c.lastSeq, r.ServerSeq)
	for _, s := range r.Snapshots {
		c.channels[s.Resource] = &channel{state: s.State, fromSeq: s.FromSeq}
	}
}

// Close ends the connection and every goroutine of the client, and closes
// the events channel. Calls in flight fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cn := c.conn
	c.mu.Unlock()
	if cn != nil {
		cn.close()
	}
	c.mu.Lock()
	c.eventsDone = true
	close(c.events)
	c.signalLocked()
	for seq, ch := range c.echoes {
		ch <- ErrClosed
		delete(c.echoes, seq)
	}
	c.mu.Unlock()
	return nil
}

// close ends a connection and waits for its reader.
func (cn *connection) close() {
	_ = cn.w.close()
	cn.cancel()
	<-cn.done
}

// Disconnected returns a channel closed when the current connection ends.
func (c *Client) Disconnected() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn.done
}

// Err returns why the current connection ended, or nil while it is up.
func (c *Client) Err() error {
	c.mu.Lock()
	cn := c.conn
	c.mu.Unlock()
	select {
	case <-cn.done:
		return cn.err
	default:
		return nil
	}
}

// Events returns the channel notifications are delivered on. It is closed
// by Close.
func (c *Client) Events() <-chan Event { return c.events }

// Version returns the protocol version negotiated.
func (c *Client) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// ClientID returns the id the client gave the host.
func (c *Client) ClientID() string { return c.opts.ClientID }

// URL returns the address the client dials.
func (c *Client) URL() string { return c.url }

// Initialized returns what the host answered to the last initialize.
func (c *Client) Initialized() *protocol.InitializeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.init
}

// LastSeq returns the last serverSeq the client saw.
func (c *Client) LastSeq() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSeq
}

// Call sends a request and waits for its answer, decoding the result into
// result unless it is nil. A JSON-RPC error is returned as an *Error.
//
// The answers to initialize, subscribe and reconnect are taken as the
// client's own methods take them (the version, the snapshots, a replay),
// so a caller may send those with params of its own making (a
// subscribe's view, say) and still have the states kept.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, c.taker(method))
}

// taker is how the client takes a successful answer to method, in the
// reader, before any message after it is handled; nil for one that
// changes nothing the client keeps.
func (c *Client) taker(method string) func(json.RawMessage) {
	switch method {
	case "initialize":
		return c.takeInitialize
	case "subscribe":
		return c.takeSubscribe
	case "reconnect":
		return c.takeReconnect
	}
	return nil
}

func (c *Client) call(ctx context.Context, method string, params, result any, onResult func(json.RawMessage)) error {
	p, err := c.send(ctx, method, params, onResult)
	if err != nil {
		return err
	}
	return p.Await(ctx, result)
}

// Pending is a request sent whose answer may not have come yet.
type Pending struct {
	c      *Client
	cn     *connection
	method string
	id     string
	pc     *pendingCall
}

// Start sends a request and returns once it is written, without waiting
// for its answer: a caller with several requests in flight, or one that
// must send something right behind a request, before it is answered.
// ctx bounds the write only. The answer is taken as Call's is.
func (c *Client) Start(ctx context.Context, method string, params any) (*Pending, error) {
	return c.send(ctx, method, params, c.taker(method))
}

func (c *Client) send(ctx context.Context, method string, params any, onResult func(json.RawMessage)) (*Pending, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding params: %w", method, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	cn := c.conn
	select {
	case <-cn.done:
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w: %v", method, ErrDisconnected, cn.err)
	default:
	}
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	pc := &pendingCall{ch: make(chan response, 1), onResult: onResult}
	cn.pending[id] = pc
	c.mu.Unlock()
	pending := &Pending{c: c, cn: cn, method: method, id: id, pc: pc}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.Number     `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", json.Number(id), method, p})
	if err != nil {
		pending.forget()
		return nil, err
	}
	if err := c.write(ctx, cn, data); err != nil {
		pending.forget()
		return nil, fmt.Errorf("%s: %w", method, c.sendError(cn, err))
	}
	return pending, nil
}

// forget drops the call: an answer that comes after is read and dropped.
func (p *Pending) forget() {
	p.c.mu.Lock()
	delete(p.cn.pending, p.id)
	p.c.mu.Unlock()
}

// Await waits for the answer and decodes its result into result unless
// it is nil, as Call does. One caller awaits it; once an Await ended with
// ctx, the answer is dropped when it comes.
func (p *Pending) Await(ctx context.Context, result any) error {
	select {
	case r, ok := <-p.pc.ch:
		if !ok {
			if p.c.isClosed() {
				return ErrClosed
			}
			return fmt.Errorf("%s: %w: %v", p.method, ErrDisconnected, p.cn.err)
		}
		if r.err != nil {
			return r.err
		}
		if result != nil {
			if err := json.Unmarshal(r.result, result); err != nil {
				return fmt.Errorf("%s: decoding the result: %w", p.method, err)
			}
		}
		return nil
	case <-ctx.Done():
		p.forget()
		return fmt.Errorf("%s: %w", p.method, ctx.Err())
	}
}

// Notify sends a notification: a request that gets no answer.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("%s: encoding params: %w", method, err)
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", method, p})
	if err != nil {
		return err
	}
	cn, err := c.current()
	if err != nil {
		return err
	}
	if err := c.write(ctx, cn, data); err != nil {
		return fmt.Errorf("%s: %w", method, c.sendError(cn, err))
	}
	return nil
}

// SendRaw writes msg to the host as it is, as one message: what Call and
// Notify do not send, a message of the caller's own making (one a test
// spoils on purpose, say). Over a stream it must hold no newline. The
// client matches no answer to it: what the host answers reaches the
// Received hook only.
func (c *Client) SendRaw(ctx context.Context, msg []byte) error {
	cn, err := c.current()
	if err != nil {
		return err
	}
	if err := c.write(ctx, cn, msg); err != nil {
		return c.sendError(cn, err)
	}
	return nil
}

// current is the connection to write on.
func (c *Client) current() (*connection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	return c.conn, nil
}

// write shows msg to the Sent hook and writes it.
func (c *Client) write(ctx context.Context, cn *connection, msg []byte) error {
	if c.opts.Sent != nil {
		c.opts.Sent(msg)
	}
	return cn.w.write(ctx, msg)
}

// sendError says why a write failed: the client closed, the connection
// ended, or the write itself.
func (c *Client) sendError(cn *connection, err error) error {
	if c.isClosed() {
		return ErrClosed
	}
	select {
	case <-cn.done:
		return fmt.Errorf("%w: %v", ErrDisconnected, cn.err)
	default:
		return err
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// read takes messages from one connection until it ends.
func (c *Client) read(ctx context.Context, cn *connection) {
	defer close(cn.done)
	for {
		data, err := cn.w.read(ctx)
		if err != nil {
			c.mu.Lock()
			cn.err = err
			for id, p := range cn.pending {
				close(p.ch)
				delete(cn.pending, id)
			}
			c.signalLocked()
			c.mu.Unlock()
			c.log.Debug("connection ended", "url", c.url, "err", err)
			return
		}
		answer := c.handle(cn, data)
		if c.opts.Received != nil {
			c.opts.Received(data)
		}
		// The caller has its answer only once the hook saw it, so a
		// Call that returned was shown to Received.
		answer()
	}
}

// message is any JSON-RPC message from the host.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
}

// handle applies one message from the host and returns what hands a
// call its answer (a no-op for anything else).
func (c *Client) handle(cn *connection, data []byte) (answer func()) {
	answer = func() {}
	var m message
	if err := json.Unmarshal(data, &m); err != nil {
		c.log.Debug("a message that is not JSON-RPC", "err", err)
		return answer
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.signalLocked()
	if m.Method != "" {
		c.notificationLocked(m.Method, m.Params)
		return answer
	}
	p, ok := cn.pending[string(m.ID)]
	if !ok {
		if m.Error != nil {
			c.log.Debug("an error answering no request", "err", m.Error)
		}
		return answer
	}
	delete(cn.pending, string(m.ID))
	if m.Error == nil && p.onResult != nil {
		p.onResult(m.Result)
	}
	// p.ch holds one answer, so handing it over never blocks.
	return func() { p.ch <- response{result: m.Result, err: m.Error} }
}

// notificationLocked applies an action and hands the notification on.
func (c *Client) notificationLocked(method string, params json.RawMessage) {
	ev := Event{Method: method, Params: params}
	if method == "action" {
		env, err := DecodeEnvelope(params)
		if err != nil {
			c.log.Debug("an action that does not decode", "err", err)
			return
		}
		c.applyLocked(env)
		ev.Action = env
	}
	c.emitLocked(ev)
}

// emitLocked queues an event, dropping it when the buffer is full.
func (c *Client) emitLocked(ev Event) {
	if c.eventsDone {
		return
	}
	ev.Dropped = c.dropped
	select {
	case c.events <- ev:
		c.dropped = 0
	default:
		c.dropped++
	}
}

func (c *Client) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
