package host

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Requests forwarded here by other hosts of the cluster (route.go sends
// them). Each connection of another host that forwarded a request here
// has a relay: a connection this host serves itself, acting for the same
// person under the same client id and protocol version, so that the
// forwarded request meets every check a local one does (the grants, the
// roots, the order of the connection's requests). Its requests go in as
// JSON-RPC lines and the answers come back; what the host sends it besides
// (an action refused, which goes to its sender alone) goes back to the
// other host as a note. The hosts of a cluster trust each other to say who a request is
// from: whoever may publish on the cluster's NATS may act as anyone.

// maxRelays bounds the relays a host keeps for other hosts' connections.
const maxRelays = 4096

// hostIDRE is what a host id looks like (cluster's rule).
var hostIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

type relayKey struct {
	from string
	conn int64
}

// relays are the relays this host keeps, by the connection they stand for.
type relays struct {
	mu    lockcheck.Mutex
	by    map[relayKey]*relay
	ended bool
}

// relay is one other host's connection as this host serves it.
type relay struct {
	key       relayKey
	principal string
	client    string
	version   string
	stream    io.ReadWriteCloser
	lines     chan []byte   // what the host sent the connection, a message each
	gone      chan struct{} // closed when the stream ends
	turn      chan struct{} // one request at a time: held while one is out
	next      int64         // the id of the last request sent (under turn)
	used      atomic.Int64  // when it last took a request (unix ns)
	closed    func()        // Options.relayClosed, for tests
}

// relayIdle is how long a relay nobody sends requests through is kept:
// the host whose connection it stands for may have died without saying.
const relayIdle = 10 * time.Minute

// serveForwarded answers a request another host forwarded here.
func (h *Host) serveForwarded(ctx context.Context, data []byte) ([]byte, error) {
	var fr forwardedRequest
	if err := json.Unmarshal(data, &fr); err != nil {
		return nil, errors.New("not a forwarded request")
	}
	if !hostIDRE.MatchString(fr.From) || !routed[fr.Method] {
		return nil, errors.New("not a request this host takes from others")
	}
	who, err := grants.Parse(fr.Principal)
	if err != nil {
		return nil, errors.New("the forwarded request names nobody this host knows how to act for")
	}
	r, err := h.relayFor(fr, who)
	if err != nil {
		return nil, err
	}
	r.used.Store(h.now().UnixNano())
	rep, err := r.call(ctx, fr.Method, fr.Params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(rep)
}

// relayFor returns the relay of a forwarded request's connection, opening
// it on the connection's first request here.
func (h *Host) relayFor(fr forwardedRequest, who grants.Principal) (*relay, error) {
	key := relayKey{fr.From, fr.Conn}
	h.relays.mu.Lock()
	r := h.relays.by[key]
	if r != nil && (r.principal != fr.Principal || r.client != fr.Client || r.version != fr.Version) {
		// The connection there is not the one this relay stands for.
		delete(h.relays.by, key)
		go r.close()
		r = nil
	}
	switch {
	case r == nil && h.relays.ended:
		h.relays.mu.Unlock()
		return nil, errors.New("this host is shutting down")
	case r == nil && len(h.relays.by) >= maxRelays:
		h.relays.mu.Unlock()
		return nil, fmt.Errorf("this host serves %d connections of other hosts, the most it may", maxRelays)
	}
	h.relays.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := h.openRelay(fr, who)
	if err != nil {
		return nil, err
	}
	h.relays.mu.Lock()
	defer h.relays.mu.Unlock()
	if old := h.relays.by[key]; old != nil || h.relays.ended {
		// Another request of the same connection opened one meanwhile.
		go r.close()
		if old == nil {
			return nil, errors.New("this host is shutting down")
		}
		return old, nil
	}
	h.relays.by[key] = r
	return r, nil
}

// openRelay connects a relay and initializes it as the client did.
func (h *Host) openRelay(fr forwardedRequest, who grants.Principal) (*relay, error) {
	stream, err := h.connect(grants.Credential{Principal: who}, fr.From)
	if err != nil {
		return nil, err
	}
	r := &relay{
		key: relayKey{fr.From, fr.Conn}, principal: fr.Principal, client: fr.Client, version: fr.Version,
		stream: stream, lines: make(chan []byte, 256), gone: make(chan struct{}), turn: make(chan struct{}, 1),
		closed: h.opts.relayClosed,
	}
	r.used.Store(h.now().UnixNano())
	h.wg.Add(1)
	go r.read(h)
	params, err := json.Marshal(protocol.InitializeParams{ProtocolVersions: []string{fr.Version}, ClientID: fr.Client})
	if err == nil {
		var rep forwardedReply
		rep, err = r.call(h.ctx, "initialize", params)
		if err == nil && rep.Error != nil {
			err = fmt.Errorf("initializing a relay: %s", rep.Error.Message)
		}
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// read takes the host's messages to the relay off its stream.
func (r *relay) read(h *Host) {
	defer h.wg.Done()
	defer close(r.gone)
	br := bufio.NewReaderSize(r.stream, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			r.take(h, line)
		}
		if err != nil {
			return
		}
	}
}

// take hands an answer to the request waiting for it, and passes a
// notification on to the host the connection is on, as a note: it may
// come after the answer (an echo waits its turn behind the changes
// numbered before it), so it cannot ride with it.
func (r *relay) take(h *Host, line []byte) {
	var head struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(line, &head) != nil {
		return
	}
	if head.Method == "" {
		select {
		case r.lines <- line:
		default:
			h.log.Debug("dropped an answer nobody waits for", "from", r.key.from)
		}
		return
	}
	data, err := json.Marshal(relayNotes{Conn: r.key.conn, Notes: []json.RawMessage{line}})
	if err == nil {
		err = h.opts.Cluster.Note(r.key.from, data)
	}
	if err != nil {
		h.log.Debug("could not pass a notification on to its host", "host", r.key.from, "err", err)
	}
}

// relayNotes are notifications a relay's connection was sent, for the
// connection it stands for.
type relayNotes struct {
	Conn  int64             `json:"conn"`
	Notes []json.RawMessage `json:"notes"`
}

// call sends one request through the relay and waits for its answer,
// keeping the notifications that came before it.
func (r *relay) call(ctx context.Context, method string, params json.RawMessage) (forwardedReply, error) {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return forwardedReply{}, ctx.Err()
	}
	defer func() { <-r.turn }()
	r.next++
	id := r.next
	msg, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int64           `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}{"2.0", id, method, params})
	if err != nil {
		return forwardedReply{}, err
	}
	if _, err := r.stream.Write(append(msg, '\n')); err != nil {
		return forwardedReply{}, fmt.Errorf("the relay closed: %w", err)
	}
	var rep forwardedReply
	for {
		select {
		case <-ctx.Done():
			return forwardedReply{}, ctx.Err()
		case <-r.gone:
			return forwardedReply{}, errors.New("the relay closed before answering")
		case line := <-r.lines:
			var m struct {
				ID     *int64          `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
				Error  *forwardedError `json:"error"`
			}
			if json.Unmarshal(line, &m) != nil {
				continue
			}
			if m.Method != "" {
				continue // read passes them on
			}
			if m.ID == nil || *m.ID != id {
				continue
			}
			rep.Result, rep.Error = m.Result, m.Error
			return rep, nil
		}
	}
}

func (r *relay) close() {
	_ = r.stream.Close()
	if r.closed != nil {
		r.closed()
	}
}

// relayClosed is the note a host sends when one of its connections that
// forwarded requests ends: its relays go too.
type relayClosed struct {
	Closed struct {
		From string `json:"from"`
		Conn int64  `json:"conn"`
	} `json:"closed"`
}

// takeNote handles a note another host sent this one: a connection of
// its that ended, or notifications for one of this host's.
func (h *Host) takeNote(data []byte) {
	var n struct {
		relayClosed
		relayNotes
	}
	if json.Unmarshal(data, &n) != nil {
		return
	}
	if len(n.Notes) > 0 {
		if c := h.connByID(n.Conn); c != nil {
			h.takeNotes(c, n.Notes)
		}
		return
	}
	if n.Closed.From == "" {
		return
	}
	h.relays.mu.Lock()
	key := relayKey{n.Closed.From, n.Closed.Conn}
	r := h.relays.by[key]
	delete(h.relays.by, key)
	h.relays.mu.Unlock()
	if r != nil {
		go r.close()
	}
}

// dropIdleRelays ends the relays idle for relayIdle.
func (h *Host) dropIdleRelays(now time.Time) {
	h.relays.mu.Lock()
	var idle []*relay
	for key, r := range h.relays.by {
		if now.Sub(time.Unix(0, r.used.Load())) >= relayIdle {
			idle = append(idle, r)
			delete(h.relays.by, key)
		}
	}
	h.relays.mu.Unlock()
	for _, r := range idle {
		go r.close()
	}
}

// closeRelays ends every relay, for Close.
func (h *Host) closeRelays() {
	h.relays.mu.Lock()
	list := make([]*relay, 0, len(h.relays.by))
	for _, r := range h.relays.by {
		list = append(list, r)
	}
	h.relays.by = map[relayKey]*relay{}
	h.relays.ended = true
	h.relays.mu.Unlock()
	for _, r := range list {
		r.close()
	}
}

// relaysGone tells the hosts a connection forwarded to that it ended.
func (h *Host) relaysGone(c *conn.Conn) {
	if !h.clustered() {
		return
	}
	var n relayClosed
	n.Closed.From, n.Closed.Conn = h.hostID(), c.ID()
	data, err := json.Marshal(n)
	if err != nil {
		return
	}
	for _, to := range c.ForwardedHosts() {
		if err := h.opts.Cluster.Note(to, data); err != nil {
			h.log.Debug("could not tell a host a connection ended", "host", to, "err", err)
		}
	}
}

// connByID returns the connection of an id, or nil when it is gone.
func (h *Host) connByID(id int64) *conn.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns {
		if c.ID() == id {
			return c
		}
	}
	return nil
}
