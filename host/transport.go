package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/coder/websocket"
)

// maxMessage bounds one incoming message: a prompt with attachments fits,
// a runaway client does not take the daemon's memory.
const maxMessage = 32 << 20

// Handler serves AHP over WebSocket: one JSON-RPC message per text frame.
// Options.Auth names who a connection acts for from the token it presents
// (?tkn= or Authorization: Bearer) before it is upgraded; a request it
// refuses gets HTTP 401. sameOrigin refuses browser pages of other
// origins, for a host that asks no token of its clients.
func (h *Host) Handler(sameOrigin bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, ok := h.opts.Auth.Login(tokenOf(r))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ahpd"`)
			http.Error(w, "a valid connection token is required (?tkn= or Authorization: Bearer)", http.StatusUnauthorized)
			return
		}
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: !sameOrigin})
		if err != nil {
			h.log.Debug("websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
			return
		}
		ws.SetReadLimit(maxMessage)
		c, err := h.admit(&wsTransport{ws: ws}, false, cred)
		if err != nil {
			_ = ws.Close(websocket.StatusGoingAway, err.Error())
			return
		}
		c.log.Debug("websocket connected", "remote", r.RemoteAddr)
		h.serve(c)
	})
}

type wsTransport struct{ ws *websocket.Conn }

// read is not bound to ctx. A connection's context ends as it starts to
// close, and coder/websocket drops the socket the moment a read's context
// ends, before the close frame saying why (a token revoked, a shutdown)
// could go out; close ends the read instead, once that frame is sent.
func (t *wsTransport) read(context.Context) ([]byte, error) {
	_, data, err := t.ws.Read(context.Background())
	return data, err
}

func (t *wsTransport) write(ctx context.Context, msg []byte) error {
	return t.ws.Write(ctx, websocket.MessageText, msg)
}

func (t *wsTransport) close(reason string) error {
	if len(reason) > 120 {
		reason = reason[:120] // a close frame's reason is at most 123 bytes
	}
	return t.ws.Close(websocket.StatusNormalClosure, reason)
}

// ServeStdio serves one connection on r and w, one JSON-RPC message per
// line, until r ends or the host closes. It is the host's own connection.
func (h *Host) ServeStdio(r io.Reader, w io.Writer) error {
	t := &stdioTransport{r: bufio.NewReaderSize(r, 64<<10), w: w}
	c, err := h.newConnection(t, true, h.opts.Auth.Root())
	if err != nil {
		return err
	}
	h.serve(c)
	return nil
}

type stdioTransport struct {
	r  *bufio.Reader
	mu sync.Mutex
	w  io.Writer
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
		chunk, err := t.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxMessage {
			return nil, fmt.Errorf("a message longer than %d bytes", maxMessage)
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

func (t *stdioTransport) close(string) error {
	if c, ok := t.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
