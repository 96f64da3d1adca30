package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Handler serves AHP over WebSocket: one JSON-RPC message per text frame.
// Options.Auth names who a connection acts for from the token it presents
// (?tkn= or Authorization: Bearer) before it is upgraded; a request it
// refuses gets HTTP 401. A host that asks no token of its clients
// (open) takes only requests whose Host is an address, a loopback name or
// the name it listens on, and no browser page of another origin: a page
// of any site could otherwise reach it by a name of the site's that
// resolves to 127.0.0.1 (DNS rebinding).
func (h *Host) Handler(open bool, listen string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open && !localHost(r.Host, listen) {
			h.log.Warn("refused a request for another host name", "host", protocol.Quote(r.Host), "remote", r.RemoteAddr)
			http.Error(w, "this host serves only loopback names without a connection token", http.StatusForbidden)
			return
		}
		cred, ok := h.opts.Auth.Login(tokenOf(r))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ahpd"`)
			http.Error(w, "a valid connection token is required (?tkn= or Authorization: Bearer)", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/metrics" {
			if cred.Principal.Kind != grants.KindRoot {
				http.Error(w, "the metrics are for the host's own connection token", http.StatusForbidden)
				return
			}
			h.MetricsHandler().ServeHTTP(w, r)
			return
		}
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: !open})
		if err != nil {
			h.log.Debug("websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
			return
		}
		// wsTransport bounds messages itself, to say why it refuses one.
		ws.SetReadLimit(-1)
		c, err := h.admit(&wsTransport{ws: ws, limit: h.opts.Limits.MessageBytes}, false, cred)
		if err != nil {
			_ = ws.Close(websocket.StatusGoingAway, err.Error())
			return
		}
		c.log.Debug("websocket connected", "remote", r.RemoteAddr)
		h.serve(c)
		<-c.done
	})
}

// LocalHost reports whether a request's Host is one an open host takes:
// an IP address, a loopback name, or the name it listens on (listen). The
// HTTP API checks requests with it as Handler does.
func LocalHost(hostport, listen string) bool { return localHost(hostport, listen) }

// localHost reports whether a request's Host is one a page of another
// site cannot have made resolve here: an IP address, a loopback name, or
// the name ahpd was told to listen on.
func localHost(hostport, listen string) bool {
	name := hostport
	if n, _, err := net.SplitHostPort(hostport); err == nil {
		name = n
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if strings.EqualFold(name, "localhost") || strings.HasSuffix(strings.ToLower(name), ".localhost") {
		return true
	}
	if net.ParseIP(name) != nil {
		// An address, not a name: no DNS answer of an attacker's stands
		// behind it, so it is what the client meant to reach.
		return true
	}
	if l, _, err := net.SplitHostPort(listen); err == nil && l != "" && strings.EqualFold(strings.Trim(l, "[]"), name) {
		return true
	}
	return false
}

type wsTransport struct {
	ws    *websocket.Conn
	limit int
}

// read is not bound to ctx. A connection's context ends as it starts to
// close, and coder/websocket drops the socket the moment a read's context
// ends, before the close frame saying why could go out; close ends the
// read instead, once that frame is sent.
func (t *wsTransport) read(context.Context) ([]byte, error) {
	typ, r, err := t.ws.Reader(context.Background())
	if err != nil {
		return nil, readEnded(err)
	}
	if typ != websocket.MessageText {
		return nil, &violation{closeUnsupported, "a binary frame: AHP is JSON-RPC in text frames"}
	}
	data, err := readMessage(r, t.limit)
	if err != nil {
		return nil, readEnded(err)
	}
	return data, nil
}

// readEnded says how reading ended: a violation stays one; anything else
// is the peer going, which is not the client's fault to answer.
func readEnded(err error) error {
	var v *violation
	if errors.As(err, &v) {
		return err
	}
	return fmt.Errorf("%w: %v", io.EOF, err)
}

func (t *wsTransport) write(ctx context.Context, msg []byte) error {
	return t.ws.Write(ctx, websocket.MessageText, msg)
}

func (t *wsTransport) close(code closeCode, reason string) error {
	if len(reason) > 120 {
		reason = reason[:120] // a close frame's reason is at most 123 bytes
	}
	// The close frame says why; a client that does not answer it, one
	// that stopped reading say, is not waited on long.
	done := make(chan error, 1)
	go func() { done <- t.ws.Close(websocket.StatusCode(code), reason) }()
	timer := time.NewTimer(closeWait)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		err := t.ws.CloseNow()
		<-done
		return err
	}
}

// closeWait bounds the WebSocket closing handshake.
const closeWait = 2 * time.Second

func (t *wsTransport) ping(ctx context.Context) error { return t.ws.Ping(ctx) }

// chunk is the unit a message is read in: a message of any size costs
// its own size once, and no more, however it grows.
const chunk = 64 << 10

var chunks = sync.Pool{New: func() any { return new([chunk]byte) }}

// readMessage reads r to its end into a slice of exactly its size, or
// refuses it past limit bytes.
func readMessage(r io.Reader, limit int) ([]byte, error) {
	var parts []*[chunk]byte
	defer func() {
		for _, p := range parts {
			chunks.Put(p)
		}
	}()
	total := 0
	for {
		p := chunks.Get().(*[chunk]byte)
		parts = append(parts, p)
		n, err := io.ReadFull(r, p[:])
		total += n
		if total > limit {
			return nil, &violation{closeTooBig, fmt.Sprintf("a message of more than %d bytes", limit)}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	out := make([]byte, total)
	for i, p := range parts {
		copy(out[i*chunk:], p[:min(chunk, total-i*chunk)])
	}
	return out, nil
}

// ServeStdio serves one connection on r and w, one JSON-RPC message per
// line, until r ends or the host closes. It is the host's own connection.
func (h *Host) ServeStdio(r io.Reader, w io.Writer) error {
	t := &stdioTransport{mu: lockcheck.Mutex{Class: "transport"}, r: bufio.NewReaderSize(r, 64<<10), w: w, limit: h.opts.Limits.MessageBytes}
	c, err := h.newConnection(t, true, h.opts.Auth.Root())
	if err != nil {
		return err
	}
	h.serve(c)
	<-c.done
	return nil
}

type stdioTransport struct {
	r     *bufio.Reader
	limit int
	mu    lockcheck.Mutex
	w     io.Writer
}

func (t *stdioTransport) read(ctx context.Context) ([]byte, error) {
	for {
		line, err := t.readLine()
		if err != nil {
			return nil, err
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return line, nil
		}
	}
}

func (t *stdioTransport) readLine() ([]byte, error) {
	var line []byte
	for {
		part, err := t.r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > t.limit {
			return nil, &violation{closeTooBig, fmt.Sprintf("a message of more than %d bytes", t.limit)}
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

func (t *stdioTransport) write(ctx context.Context, msg []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	_, err := t.w.Write(buf)
	return err
}

func (t *stdioTransport) close(closeCode, string) error {
	if c, ok := t.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
