// Package hosttest is an AHP client for tests: the product's own client
// (package client), which keeps the state of every channel it subscribes
// to as a real client does, with what a test needs on top. Every message
// the host sends is checked against the official schemas and the
// protocol's rules, every notification is kept in order (Messages, Wait),
// and a call that gets no answer fails the test rather than returning an
// error.
package hosttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

// Timeout bounds every wait of a test client: a guard against a hang
// (testwait.Hang), not a budget.
const Timeout = testwait.Hang

// Client is one connection to a host.
type Client struct {
	t       testing.TB
	c       *client.Client
	ctx     context.Context // ends at Close, and a write under way with it
	cancel  context.CancelFunc
	schemas *protocoltest.Schemas

	mu sync.Mutex
	// seq is the last clientSeq Dispatch used. client.Dispatch would wait
	// for echoes naming the client by its Options.ClientID, while the host
	// names it by the id the test initialized with.
	seq int64
	// asked is the method of each request on its way, by id: its answer
	// is checked against that method's result.
	asked map[string]string
	blind map[string]bool // channels resumed without a state to apply to
	// seen is the client's LastSeq as the message being checked found it:
	// the check runs once the client has applied the message.
	seen     int64
	messages []Message   // every notification received, in order
	orphans  []*RPCError // errors answering no request the client knows
	changed  chan struct{}

	// invalid records messages that failed validation; the test fails at
	// Close when it is not empty.
	invalid []string
	// light skips validation and keeps no messages (Light).
	light bool
}

// Light makes the client keep states only: it validates nothing and keeps
// no messages, as a load test's hundreds of clients must.
func (c *Client) Light() *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.light = true
	return c
}

// Message is a notification the client received.
type Message struct {
	Method string
	Params json.RawMessage
	// Envelope is set for an `action` notification.
	Envelope *protocol.ActionEnvelope
}

// RPCError is an error response.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// Dial connects to url (ws://...). The connection closes when the test
// ends.
func Dial(t testing.TB, url string) *Client {
	t.Helper()
	c, err := DialErr(t, url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return c
}

// DialErr is Dial returning the error instead of failing the test.
func DialErr(t testing.TB, url string) (*Client, error) {
	schemas, err := protocoltest.Default()
	if err != nil {
		t.Fatalf("loading AHP schemas: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		t: t, ctx: ctx, cancel: cancel, schemas: schemas,
		asked:   map[string]string{},
		blind:   map[string]bool{},
		changed: make(chan struct{}),
	}
	dialCtx, stop := context.WithTimeout(ctx, Timeout)
	defer stop()
	// The client reads from before Connect returns: holding the lock
	// keeps the checks of what it reads waiting until c.c is set. (Connect
	// waits on nothing the reader does.)
	c.mu.Lock()
	c.c, err = client.Connect(dialCtx, url, &client.Options{
		// Events go unread, every message being checked and kept by
		// received: past one, they are dropped, which costs nothing.
		EventBuffer: 1,
		Received:    c.received,
		Sent:        c.sent,
	})
	c.mu.Unlock()
	if err != nil {
		cancel()
		return nil, err
	}
	t.Cleanup(c.Close)
	return c, nil
}

// Close ends the connection and reports messages that did not validate.
func (c *Client) Close() {
	c.cancel()
	_ = c.c.Close()
	c.mu.Lock()
	invalid := c.invalid
	c.invalid = nil
	c.mu.Unlock()
	for _, msg := range invalid {
		c.t.Errorf("the host sent an invalid message: %s", msg)
	}
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.c.Disconnected() }

// Err returns why the connection ended.
func (c *Client) Err() error { return c.c.Err() }

// sent notes the method of each request, for its answer to be checked
// by.
func (c *Client) sent(data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.light {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	// A frame sent raw need not decode: it asks nothing known.
	if json.Unmarshal(data, &m) == nil && len(m.ID) > 0 && m.Method != "" {
		c.asked[string(m.ID)] = m.Method
	}
}

// received checks and keeps a message the host sent, which the client
// has handled.
func (c *Client) received(data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.signalLocked()
	if c.light {
		return
	}
	defer func() { c.seen = max(c.seen, c.c.LastSeq()) }()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		c.badLocked("not JSON: %v: %s", err, data)
		return
	}
	if m.Method != "" {
		c.notificationLocked(m.Method, m.Params, data)
		return
	}
	id := string(m.ID)
	if (id == "" || id == "null") && m.Error != nil {
		// A message the host could not read gets an error with no id.
		c.orphans = append(c.orphans, m.Error)
		return
	}
	method, ok := c.asked[id]
	if !ok {
		c.badLocked("a response to no request: %s", data)
		return
	}
	delete(c.asked, id)
	if m.Error == nil {
		c.resultLocked(method, m.Result)
	}
}

// resultDefs names the schema definition of each method's result.
var resultDefs = map[string]string{
	"initialize":               "InitializeResult",
	"subscribe":                "SubscribeResult",
	"listSessions":             "ListSessionsResult",
	"resolveSessionConfig":     "ResolveSessionConfigResult",
	"sessionConfigCompletions": "SessionConfigCompletionsResult",
	"fetchTurns":               "FetchTurnsResult",
	"moveChat":                 "MoveChatResult",
}

// notificationDefs names the schema definition of each notification's params.
var notificationDefs = map[string]string{
	"action":                     "ActionEnvelope",
	"root/sessionAdded":          "SessionAddedParams",
	"root/sessionRemoved":        "SessionRemovedParams",
	"root/sessionSummaryChanged": "SessionSummaryChangedParams",
	"root/progress":              "ProgressParams",
}

func (c *Client) resultLocked(method string, result json.RawMessage) {
	def := resultDefs[method]
	if method == "reconnect" {
		def = "ReconnectSnapshotResult"
		if strings.Contains(string(result), `"type":"replay"`) {
			def = "ReconnectReplayResult"
		}
		if r, err := protocol.UnmarshalReconnectResult(result); err == nil {
			if r, ok := r.(*protocol.ReconnectReplayResult); ok {
				for i := range r.Actions {
					c.checkActionLocked(&r.Actions[i])
				}
			}
		}
	}
	if def != "" {
		if err := c.schemas.Validate(def, result); err != nil {
			c.badLocked("%s result: %v", method, err)
		}
	}
}

func (c *Client) notificationLocked(method string, params json.RawMessage, data []byte) {
	def, ok := notificationDefs[method]
	if !ok {
		c.badLocked("an unknown notification: %s", data)
		return
	}
	if err := c.schemas.Validate(def, params); err != nil && !refusal(params) {
		c.badLocked("%s: %v", method, err)
	}
	version := c.c.Version()
	if version != "" && method != "action" && !protocol.NotificationKnownTo(method, version) {
		c.badLocked("a %s client was sent %s, which its version does not know", version, method)
	}
	msg := Message{Method: method, Params: params}
	if method == "action" {
		env, err := client.DecodeEnvelope(params)
		if err != nil {
			c.badLocked("action: %v", err)
			return
		}
		// The echo of a client's own action, refused, is the action as it
		// sent it; anything else must be of a type its version knows.
		if t := env.Action.Type(); version != "" && env.RejectionReason == nil && !t.KnownTo(version) {
			c.badLocked("a %s client was sent %s, which its version does not know", version, t)
		}
		msg.Envelope = env
		c.checkActionLocked(env)
	}
	c.messages = append(c.messages, msg)
}

// refusal reports whether params are a refused action's echo, which
// carries the client's own action back as it was sent.
func refusal(params json.RawMessage) bool {
	var env struct {
		RejectionReason *string `json:"rejectionReason"`
	}
	return json.Unmarshal(params, &env) == nil && env.RejectionReason != nil
}

// checkActionLocked checks an action the client applied (or skipped) as
// a client takes them: after its channel's snapshot, in serverSeq order;
// refused actions change nothing.
func (c *Client) checkActionLocked(env *protocol.ActionEnvelope) {
	if env.RejectionReason != nil {
		return
	}
	if env.ServerSeq <= c.seen && env.Origin == nil {
		c.badLocked("serverSeq went back: %d after %d", env.ServerSeq, c.seen)
	}
	c.seen = max(c.seen, env.ServerSeq)
	if c.c.State(env.Channel) == nil && !c.blind[env.Channel] {
		c.badLocked("an action on %s, which this client does not watch: %s", env.Channel, mustJSON(env))
	}
}

func (c *Client) badLocked(format string, args ...any) {
	c.invalid = append(c.invalid, fmt.Sprintf(format, args...))
}

func (c *Client) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Call sends a request and waits for its answer.
func (c *Client) Call(method string, params any) (json.RawMessage, *RPCError) {
	c.t.Helper()
	return c.Start(method, params).Await()
}

// MustCall is Call failing the test on an error response.
func (c *Client) MustCall(method string, params any) json.RawMessage {
	c.t.Helper()
	res, err := c.Call(method, params)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return res
}

// Pending is a request on its way.
type Pending struct {
	c      *Client
	method string
	p      *client.Pending
}

// Start sends a request and returns at once: a client that does not wait
// for one answer before its next request.
func (c *Client) Start(method string, params any) *Pending {
	c.t.Helper()
	p, err := c.c.Start(c.ctx, method, params)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return &Pending{c: c, method: method, p: p}
}

// Await waits for the answer.
func (p *Pending) Await() (json.RawMessage, *RPCError) {
	p.c.t.Helper()
	ctx, cancel := context.WithTimeout(p.c.ctx, Timeout)
	defer cancel()
	var res json.RawMessage
	err := p.p.Await(ctx, &res)
	var rpcErr *client.Error
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &rpcErr):
		return nil, &RPCError{Code: int64(rpcErr.Code), Message: rpcErr.Message, Data: rpcErr.Data}
	case errors.Is(err, context.DeadlineExceeded):
		p.c.t.Fatalf("%s: no answer in %v", p.method, Timeout)
	default:
		p.c.t.Fatalf("%s: the connection ended: %v", p.method, err)
	}
	return nil, nil
}

// Notify sends a notification.
func (c *Client) Notify(method string, params any) {
	c.t.Helper()
	if err := c.c.Notify(c.ctx, method, params); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

// SendRaw writes a frame as it is.
func (c *Client) SendRaw(data []byte) error {
	return c.c.SendRaw(c.ctx, data)
}

// NextSeq takes the client's next clientSeq, for an action a test sends
// as it is on the wire: the host takes each clientSeq of a client once.
func (c *Client) NextSeq() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	return c.seq
}

// Dispatch sends a client action on a channel and returns its clientSeq.
func (c *Client) Dispatch(channel string, a protocol.Action) int64 {
	c.t.Helper()
	seq := c.NextSeq()
	c.Notify("dispatchAction", map[string]any{"channel": channel, "clientSeq": seq, "action": a})
	return seq
}

// Orphans returns the error responses that answered no known request: the
// host's answers to messages it could not read.
func (c *Client) Orphans() []*RPCError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*RPCError(nil), c.orphans...)
}

// State returns the client's state of a channel.
func (c *Client) State(channel string) protocol.ChannelState { return c.c.State(channel) }

// Messages returns every notification received so far.
func (c *Client) Messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.messages...)
}

// Wait waits until cond, called with what was received so far, holds.
func (c *Client) Wait(what string, cond func(msgs []Message) bool) {
	c.t.Helper()
	switch err := c.wait(cond); {
	case errors.Is(err, errEnded):
		c.t.Fatalf("waiting for %s: the connection ended: %v", what, c.Err())
	case err != nil:
		c.t.Fatalf("waiting for %s: not in %v", what, Timeout)
	}
}

// WaitOrNot is Wait reporting, rather than failing the test, when cond
// does not come to hold in time (or the connection ends), for a caller
// that then says how what it waited for differs.
func (c *Client) WaitOrNot(what string, cond func(msgs []Message) bool) bool {
	c.t.Helper()
	return c.wait(cond) == nil
}

var (
	errEnded   = errors.New("the connection ended")
	errTimeout = errors.New("timed out")
)

// wait waits until cond holds, waking each time a message was checked
// (and so handled by the client: its states are up to date).
func (c *Client) wait(cond func(msgs []Message) bool) error {
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	ended := c.c.Disconnected()
	for {
		c.mu.Lock()
		msgs := slices.Clone(c.messages)
		changed := c.changed
		c.mu.Unlock()
		if cond(msgs) {
			return nil
		}
		select {
		case <-ended:
			return errEnded
		default:
		}
		select {
		case <-changed:
		case <-ended:
		case <-deadline.C:
			return errTimeout
		}
	}
}

// WaitState waits until cond holds for the client's state of a channel.
func (c *Client) WaitState(channel, what string, cond func(protocol.ChannelState) bool) protocol.ChannelState {
	c.t.Helper()
	var last protocol.ChannelState
	c.Wait(what, func([]Message) bool {
		last = c.State(channel)
		return last != nil && cond(last)
	})
	return last
}

// Initialize performs the handshake at the current protocol version,
// subscribing to subs.
func (c *Client) Initialize(clientID string, subs ...string) *protocol.InitializeResult {
	c.t.Helper()
	return c.InitializeAt([]string{protocol.ProtocolVersion}, clientID, subs...)
}

// InitializeAt performs the handshake offering versions. From then on, the
// client holds the host to the version it negotiated: an action or a
// notification that version does not know is an invalid message.
func (c *Client) InitializeAt(versions []string, clientID string, subs ...string) *protocol.InitializeResult {
	c.t.Helper()
	if subs == nil {
		subs = []string{}
	}
	return c.InitializeWith(map[string]any{
		"channel":              protocol.RootURI,
		"protocolVersions":     versions,
		"clientId":             clientID,
		"initialSubscriptions": subs,
	})
}

// InitializeWith performs the handshake with params as they are.
func (c *Client) InitializeWith(params map[string]any) *protocol.InitializeResult {
	c.t.Helper()
	raw := c.MustCall("initialize", params)
	var r protocol.InitializeResult
	if err := json.Unmarshal(raw, &r); err != nil {
		c.t.Fatal(err)
	}
	return &r
}

// Version returns the protocol version the client negotiated.
func (c *Client) Version() string { return c.c.Version() }

// LastSeq returns the last serverSeq the client saw.
func (c *Client) LastSeq() int64 { return c.c.LastSeq() }

// Reconnect resumes an earlier connection's subscriptions. This client held
// no state of them, so actions replayed or sent on them are recorded but
// not applied.
func (c *Client) Reconnect(clientID string, lastSeen int64, subs []string) protocol.ReconnectResult {
	c.t.Helper()
	c.mu.Lock()
	for _, ch := range subs {
		c.blind[ch] = true
	}
	c.mu.Unlock()
	raw := c.MustCall("reconnect", map[string]any{"channel": protocol.RootURI, "clientId": clientID,
		"lastSeenServerSeq": lastSeen, "subscriptions": subs})
	r, err := protocol.UnmarshalReconnectResult(raw)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// Resume takes over what an earlier client of the same program held (its
// states, the version it spoke, the last serverSeq it saw) and reconnects
// as it, without a channel as VS Code does: a replay is applied to the
// states, a snapshot replaces them.
func (c *Client) Resume(from *Client, clientID string) protocol.ReconnectResult {
	c.t.Helper()
	c.c.Adopt(from.c)
	lastSeen := c.c.LastSeq()
	from.mu.Lock()
	seq := from.seq
	from.mu.Unlock()
	c.mu.Lock()
	c.seen = max(c.seen, lastSeen)
	c.seq = max(c.seq, seq) // a client carries its numbering on across a reconnect, as VS Code does
	c.mu.Unlock()
	raw := c.MustCall("reconnect", map[string]any{"clientId": clientID, "lastSeenServerSeq": lastSeen, "subscriptions": c.c.Channels()})
	r, err := protocol.UnmarshalReconnectResult(raw)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// Subscribe subscribes to a channel and returns its snapshot.
func (c *Client) Subscribe(channel string) *protocol.Snapshot {
	c.t.Helper()
	raw := c.MustCall("subscribe", map[string]any{"channel": channel})
	var r protocol.SubscribeResult
	if err := json.Unmarshal(raw, &r); err != nil {
		c.t.Fatal(err)
	}
	return r.Snapshot
}

// ErrClosed is returned by calls on a closed client.
var ErrClosed = errors.New("hosttest: connection closed")

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
