package shared

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
// has a relay: a connection this host serves itself (Core.Connect),
// acting for the same person under the same client id and protocol
// version, so that the forwarded request meets every check a local one
// does (the grants, the roots, the order of the connection's requests).
// Its requests go in as JSON-RPC lines and the answers come back; what the
// host sends it besides (an action refused, which goes to its sender
// alone) goes back to the other host as a note. The hosts of a cluster
// trust each other to say who a request is from: whoever may publish on
// the cluster's NATS may act as anyone.

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
	closed    func()        // Options.RelayClosed, for tests
}

// relayIdle is how long a relay nobody sends requests through is kept:
// the host whose connection it stands for may have died without saying.
const relayIdle = 10 * time.Minute

// serveForwarded answers a request another host forwarded here.
func (p *Part) serveForwarded(ctx context.Context, data []byte) ([]byte, error) {
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
	r, err := p.relayFor(fr, who)
	if err != nil {
		return nil, err
	}
	r.used.Store(p.core.Now().UnixNano())
	rep, err := r.call(ctx, fr.Method, fr.Params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(rep)
}

// relayFor returns the relay of a forwarded request's connection, opening
// it on the connection's first request here.
func (p *Part) relayFor(fr forwardedRequest, who grants.Principal) (*relay, error) {
	key := relayKey{fr.From, fr.Conn}
	p.relays.mu.Lock()
	r := p.relays.by[key]
	if r != nil && (r.principal != fr.Principal || r.client != fr.Client || r.version != fr.Version) {
		// The connection there is not the one this relay stands for.
		delete(p.relays.by, key)
		go r.close()
		r = nil
	}
	switch {
	case r == nil && p.relays.ended:
		p.relays.mu.Unlock()
		return nil, errors.New("this host is shutting down")
	case r == nil && len(p.relays.by) >= maxRelays:
		p.relays.mu.Unlock()
		return nil, fmt.Errorf("this host serves %d connections of other hosts, the most it may", maxRelays)
	}
	p.relays.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := p.openRelay(fr, who)
	if err != nil {
		return nil, err
	}
	p.relays.mu.Lock()
	defer p.relays.mu.Unlock()
	if old := p.relays.by[key]; old != nil || p.relays.ended {
		// Another request of the same connection opened one meanwhile.
		go r.close()
		if old == nil {
			return nil, errors.New("this host is shutting down")
		}
		return old, nil
	}
	p.relays.by[key] = r
	return r, nil
}

// openRelay connects a relay and initializes it as the client did.
func (p *Part) openRelay(fr forwardedRequest, who grants.Principal) (*relay, error) {
	stream, err := p.core.Connect(grants.Credential{Principal: who}, fr.From)
	if err != nil {
		return nil, err
	}
	r := &relay{
		key: relayKey{fr.From, fr.Conn}, principal: fr.Principal, client: fr.Client, version: fr.Version,
		stream: stream, lines: make(chan []byte, 256), gone: make(chan struct{}), turn: make(chan struct{}, 1),
		closed: p.opts.RelayClosed,
	}
	r.used.Store(p.core.Now().UnixNano())
	p.core.Go(func() { r.read(p) })
	params, err := json.Marshal(protocol.InitializeParams{ProtocolVersions: []string{fr.Version}, ClientID: fr.Client})
	if err == nil {
		var rep forwardedReply
		rep, err = r.call(p.core.Context(), "initialize", params)
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
func (r *relay) read(p *Part) {
	defer close(r.gone)
	br := bufio.NewReaderSize(r.stream, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			r.take(p, line)
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
func (r *relay) take(p *Part, line []byte) {
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
			p.log.Debug("dropped an answer nobody waits for", "from", r.key.from)
		}
		return
	}
	data, err := json.Marshal(relayNotes{Conn: r.key.conn, Notes: []json.RawMessage{line}})
	if err == nil {
		err = p.member.Note(r.key.from, data)
	}
	if err != nil {
		p.log.Debug("could not pass a notification on to its host", "host", r.key.from, "err", err)
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
func (p *Part) takeNote(data []byte) {
	var n struct {
		relayClosed
		relayNotes
	}
	if json.Unmarshal(data, &n) != nil {
		return
	}
	if len(n.Notes) > 0 {
		if c := p.core.Conn(n.Conn); c != nil {
			p.takeNotes(c, n.Notes)
		}
		return
	}
	if n.Closed.From == "" {
		return
	}
	p.relays.mu.Lock()
	key := relayKey{n.Closed.From, n.Closed.Conn}
	r := p.relays.by[key]
	delete(p.relays.by, key)
	p.relays.mu.Unlock()
	if r != nil {
		go r.close()
	}
}

// dropIdleRelays ends the relays idle for relayIdle.
func (p *Part) dropIdleRelays(now time.Time) {
	p.relays.mu.Lock()
	var idle []*relay
	for key, r := range p.relays.by {
		if now.Sub(time.Unix(0, r.used.Load())) >= relayIdle {
			idle = append(idle, r)
			delete(p.relays.by, key)
		}
	}
	p.relays.mu.Unlock()
	for _, r := range idle {
		go r.close()
	}
}

// CloseRelays ends every relay, for Close.
func (p *Part) CloseRelays() {
	p.relays.mu.Lock()
	list := make([]*relay, 0, len(p.relays.by))
	for _, r := range p.relays.by {
		list = append(list, r)
	}
	p.relays.by = map[relayKey]*relay{}
	p.relays.ended = true
	p.relays.mu.Unlock()
	for _, r := range list {
		r.close()
	}
}

// ConnClosed tells the hosts a connection forwarded to that it ended:
// their relays of it go.
func (p *Part) ConnClosed(c *conn.Conn) {
	var n relayClosed
	n.Closed.From, n.Closed.Conn = p.hostID(), c.ID()
	data, err := json.Marshal(n)
	if err != nil {
		return
	}
	for _, to := range c.ForwardedHosts() {
		if err := p.member.Note(to, data); err != nil {
			p.log.Debug("could not tell a host a connection ended", "host", to, "err", err)
		}
	}
}
