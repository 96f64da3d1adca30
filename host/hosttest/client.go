// Package hosttest is an AHP client for tests: it speaks to a host over a
// real WebSocket, validates every message the host sends against the
// official schemas, and keeps the state of every channel it subscribes to
// by applying the actions it receives through the protocol's reducers, as
// a real client does.
package hosttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

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
	ws      *websocket.Conn
	ctx     context.Context
	cancel  context.CancelFunc
	schemas *protocoltest.Schemas
	done    chan struct{}

	mu       sync.Mutex
	version  string // negotiated; "" before initialize
	nextID   int64
	seq      int64 // the client's own clientSeq
	pending  map[string]pendingCall
	states   map[string]protocol.ChannelState
	fromSeq  map[string]int64
	blind    map[string]bool // channels resumed without a state to apply to
	lastSeq  int64
	messages []Message   // every notification received, in order
	orphans  []*RPCError // errors answering no request the client knows
	changed  chan struct{}
	closed   error

	// Invalid records messages that failed validation; the test fails at
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

type pendingCall struct {
	method string
	ch     chan response
}

type response struct {
	result json.RawMessage
	err    *RPCError
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
	dialCtx, stop := context.WithTimeout(ctx, Timeout)
	defer stop()
	ws, _, err := websocket.Dial(dialCtx, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	c := &Client{
		t: t, ws: ws, ctx: ctx, cancel: cancel, schemas: schemas, done: make(chan struct{}),
		pending: map[string]pendingCall{},
		states:  map[string]protocol.ChannelState{},
		fromSeq: map[string]int64{},
		blind:   map[string]bool{},
		changed: make(chan struct{}),
	}
	go c.read()
	t.Cleanup(c.Close)
	return c, nil
}

// Close ends the connection and reports messages that did not validate.
func (c *Client) Close() {
	c.cancel()
	_ = c.ws.Close(websocket.StatusNormalClosure, "")
	<-c.done
	c.mu.Lock()
	invalid := c.invalid
	c.invalid = nil
	c.mu.Unlock()
	for _, msg := range invalid {
		c.t.Errorf("the host sent an invalid message: %s", msg)
	}
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) read() {
	defer close(c.done)
	for {
		_, data, err := c.ws.Read(c.ctx)
		if err != nil {
			c.mu.Lock()
			c.closed = err
			for id, p := range c.pending {
				close(p.ch)
				delete(c.pending, id)
			}
			c.signalLocked()
			c.mu.Unlock()
			return
		}
		c.handle(data)
	}
}

func (c *Client) handle(data []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		c.bad("not JSON: %v: %s", err, data)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.Method != "" {
		c.notification(m.Method, m.Params, data)
		return
	}
	id := string(m.ID)
	if (id == "" || id == "null") && m.Error != nil {
		// A message the host could not read gets an error with no id.
		c.orphans = append(c.orphans, m.Error)
		c.signalLocked()
		return
	}
	p, ok := c.pending[id]
	if !ok {
		c.badLocked("a response to no request: %s", data)
		return
	}
	delete(c.pending, id)
	if m.Error == nil {
		def := resultDefs[p.method]
		if p.method == "reconnect" {
			def = "ReconnectSnapshotResult"
			if strings.Contains(string(m.Result), `"type":"replay"`) {
				def = "ReconnectReplayResult"
			}
		}
		if def != "" && !c.light {
			if err := c.schemas.Validate(def, m.Result); err != nil {
				c.badLocked("%s result: %v", p.method, err)
			}
		}
		c.takeSnapshots(p.method, m.Result)
	}
	p.ch <- response{result: m.Result, err: m.Error}
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

func (c *Client) notification(method string, params json.RawMessage, data []byte) {
	def, ok := notificationDefs[method]
	if !ok {
		c.badLocked("an unknown notification: %s", data)
		return
	}
	if c.light {
		// Checked no further.
	} else if err := c.schemas.Validate(def, params); err != nil && !refusal(params) {
		c.badLocked("%s: %v", method, err)
	}
	if c.version != "" && method != "action" && !protocol.NotificationKnownTo(method, c.version) {
		c.badLocked("a %s client was sent %s, which its version does not know", c.version, method)
	}
	msg := Message{Method: method, Params: params}
	if method == "action" {
		var env protocol.ActionEnvelope
		if err := json.Unmarshal(params, &env); err != nil {
			// A refusal carries the client's action back as it came, or,
			// for one too large to send back, its type alone: it need not
			// decode.
			if !refusal(params) {
				c.badLocked("action: %v", err)
				return
			}
			env = refusedEnvelope(params)
		}
		// The echo of a client's own action, refused, is the action as it
		// sent it; anything else must be of a type its version knows.
		if t := env.Action.Type(); c.version != "" && env.RejectionReason == nil && !t.KnownTo(c.version) {
			c.badLocked("a %s client was sent %s, which its version does not know", c.version, t)
		}
		msg.Envelope = &env
		c.applyLocked(&env)
	}
	if !c.light {
		c.messages = append(c.messages, msg)
	}
	c.signalLocked()
}

// applyLocked brings a channel's state up to date with an envelope, as a
// client does: after its snapshot, in serverSeq order; refused actions
// change nothing.
// refusal reports whether params are a refused action's echo, which
// carries the client's own action back as it was sent.
func refusal(params json.RawMessage) bool {
	var env struct {
		RejectionReason *string `json:"rejectionReason"`
	}
	return json.Unmarshal(params, &env) == nil && env.RejectionReason != nil
}

// refusedEnvelope reads a refusal whose action does not decode.
func refusedEnvelope(params json.RawMessage) protocol.ActionEnvelope {
	var raw struct {
		Channel         string                 `json:"channel"`
		Action          json.RawMessage        `json:"action"`
		ServerSeq       int64                  `json:"serverSeq"`
		Origin          *protocol.ActionOrigin `json:"origin"`
		RejectionReason *string                `json:"rejectionReason"`
	}
	_ = json.Unmarshal(params, &raw)
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw.Action, &head)
	return protocol.ActionEnvelope{Channel: raw.Channel, ServerSeq: raw.ServerSeq, Origin: raw.Origin,
		RejectionReason: raw.RejectionReason, Action: &protocol.Unknown{Kind: head.Type, Raw: []byte(raw.Action)}}
}

func (c *Client) applyLocked(env *protocol.ActionEnvelope) {
	if env.RejectionReason != nil {
		return
	}
	if env.ServerSeq <= c.lastSeq && env.Origin == nil {
		c.badLocked("serverSeq went back: %d after %d", env.ServerSeq, c.lastSeq)
	}
	if env.ServerSeq > c.lastSeq {
		c.lastSeq = env.ServerSeq
	}
	state, ok := c.states[env.Channel]
	if !ok {
		if !c.blind[env.Channel] {
			c.badLocked("an action on %s, which this client does not watch: %s", env.Channel, mustJSON(env))
		}
		return
	}
	if env.ServerSeq <= c.fromSeq[env.Channel] {
		return // already in the snapshot
	}
	c.states[env.Channel] = protocol.Apply(state, env.Action)
}

func (c *Client) takeSnapshots(method string, result json.RawMessage) {
	var snaps []protocol.Snapshot
	switch method {
	case "initialize":
		var r protocol.InitializeResult
		if json.Unmarshal(result, &r) == nil {
			snaps = r.Snapshots
			c.lastSeq = max(c.lastSeq, r.ServerSeq)
		}
	case "subscribe":
		var r protocol.SubscribeResult
		if json.Unmarshal(result, &r) == nil && r.Snapshot != nil {
			snaps = []protocol.Snapshot{*r.Snapshot}
		}
	case "reconnect":
		if r, err := protocol.UnmarshalReconnectResult(result); err == nil {
			switch r := r.(type) {
			case *protocol.ReconnectSnapshotResult:
				snaps = r.Snapshots
			case *protocol.ReconnectReplayResult:
				for i := range r.Actions {
					c.applyLocked(&r.Actions[i])
				}
			}
		}
	}
	for _, s := range snaps {
		c.states[s.Resource] = s.State
		c.fromSeq[s.Resource] = s.FromSeq
	}
}

func (c *Client) bad(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.badLocked(format, args...)
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
	ch, err := c.send(method, params, true)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			c.t.Fatalf("%s: the connection ended: %v", method, c.Err())
		}
		return r.result, r.err
	case <-time.After(Timeout):
		c.t.Fatalf("%s: no answer in %v", method, Timeout)
	}
	return nil, nil
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
	ch     chan response
}

// Start sends a request and returns at once: a client that does not wait
// for one answer before its next request.
func (c *Client) Start(method string, params any) *Pending {
	c.t.Helper()
	ch, err := c.send(method, params, true)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return &Pending{c: c, method: method, ch: ch}
}

// Await waits for the answer.
func (p *Pending) Await() (json.RawMessage, *RPCError) {
	p.c.t.Helper()
	select {
	case r, ok := <-p.ch:
		if !ok {
			p.c.t.Fatalf("%s: the connection ended: %v", p.method, p.c.Err())
		}
		return r.result, r.err
	case <-time.After(Timeout):
		p.c.t.Fatalf("%s: no answer in %v", p.method, Timeout)
	}
	return nil, nil
}

// Notify sends a notification.
func (c *Client) Notify(method string, params any) {
	c.t.Helper()
	if _, err := c.send(method, params, false); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

// SendRaw writes a frame as it is.
func (c *Client) SendRaw(data []byte) error {
	return c.ws.Write(c.ctx, websocket.MessageText, data)
}

func (c *Client) send(method string, params any, call bool) (chan response, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": json.RawMessage(p)}
	var ch chan response
	if call {
		c.mu.Lock()
		c.nextID++
		id := c.nextID
		ch = make(chan response, 1)
		c.pending[strconv.FormatInt(id, 10)] = pendingCall{method: method, ch: ch}
		c.mu.Unlock()
		msg["id"] = id
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return ch, c.ws.Write(c.ctx, websocket.MessageText, data)
}

// Dispatch sends a client action on a channel and returns its clientSeq.
func (c *Client) Dispatch(channel string, a protocol.Action) int64 {
	c.t.Helper()
	c.mu.Lock()
	c.seq++
	seq := c.seq
	c.mu.Unlock()
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
func (c *Client) State(channel string) protocol.ChannelState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[channel]
}

// Messages returns every notification received so far.
func (c *Client) Messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.messages...)
}

// Wait waits until cond, called with what was received so far, holds.
func (c *Client) Wait(what string, cond func(msgs []Message) bool) {
	c.t.Helper()
	deadline := time.After(Timeout)
	for {
		c.mu.Lock()
		msgs := append([]Message(nil), c.messages...)
		changed := c.changed
		closed := c.closed
		c.mu.Unlock()
		if cond(msgs) {
			return
		}
		if closed != nil {
			c.t.Fatalf("waiting for %s: the connection ended: %v", what, closed)
		}
		select {
		case <-changed:
		case <-deadline:
			c.t.Fatalf("waiting for %s: not in %v", what, Timeout)
		}
	}
}

// WaitOrNot is Wait reporting, rather than failing the test, when cond
// does not come to hold in time (or the connection ends), for a caller
// that then says how what it waited for differs.
func (c *Client) WaitOrNot(what string, cond func(msgs []Message) bool) bool {
	c.t.Helper()
	deadline := time.After(Timeout)
	for {
		c.mu.Lock()
		msgs := append([]Message(nil), c.messages...)
		changed := c.changed
		closed := c.closed
		c.mu.Unlock()
		if cond(msgs) {
			return true
		}
		if closed != nil {
			return false
		}
		select {
		case <-changed:
		case <-deadline:
			return false
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
	c.mu.Lock()
	c.version = r.ProtocolVersion
	c.mu.Unlock()
	return &r
}

// Version returns the protocol version the client negotiated.
func (c *Client) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// LastSeq returns the last serverSeq the client saw.
func (c *Client) LastSeq() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSeq
}

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
	from.mu.Lock()
	subs := make([]string, 0, len(from.states))
	c.mu.Lock()
	for ch, st := range from.states {
		subs = append(subs, ch)
		c.states[ch] = st
		c.fromSeq[ch] = from.fromSeq[ch]
	}
	c.version, c.lastSeq = from.version, from.lastSeq
	lastSeen := from.lastSeq
	c.mu.Unlock()
	from.mu.Unlock()
	raw := c.MustCall("reconnect", map[string]any{"clientId": clientID, "lastSeenServerSeq": lastSeen, "subscriptions": subs})
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
