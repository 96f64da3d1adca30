package conn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Transport carries whole JSON-RPC messages: WebSocket text frames, or
// lines.
type Transport interface {
	// Read returns the next message: io.EOF when the peer closed, a
	// *Violation when it broke the rules.
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, msg []byte) error
	// Close ends the transport; code and reason say why, where they can
	// be said.
	Close(code CloseCode, reason string) error
}

// Pinger is a transport that can ask its peer for a sign of life.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Violation is a client breaking the transport's rules: the connection
// ends with Code.
type Violation struct {
	Code   CloseCode
	Reason string
}

func (v *Violation) Error() string { return v.Reason }

// WebSocket is a transport of one JSON-RPC message per text frame, of at
// most limit bytes. It bounds messages itself, to say why it refuses one.
func WebSocket(ws *websocket.Conn, limit int) Transport {
	ws.SetReadLimit(-1)
	return &wsTransport{ws: ws, limit: limit}
}

type wsTransport struct {
	ws    *websocket.Conn
	limit int
}

// Read is not bound to ctx. A connection's context ends as it starts to
// close, and coder/websocket drops the socket the moment a read's context
// ends, before the close frame saying why could go out; close ends the
// read instead, once that frame is sent.
func (t *wsTransport) Read(context.Context) ([]byte, error) {
	typ, r, err := t.ws.Reader(context.Background())
	if err != nil {
		return nil, readEnded(err)
	}
	if typ != websocket.MessageText {
		return nil, &Violation{CloseUnsupported, "a binary frame: AHP is JSON-RPC in text frames"}
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
	var v *Violation
	if errors.As(err, &v) {
		return err
	}
	return fmt.Errorf("%w: %v", io.EOF, err)
}

func (t *wsTransport) Write(ctx context.Context, msg []byte) error {
	return t.ws.Write(ctx, websocket.MessageText, msg)
}

func (t *wsTransport) Close(code CloseCode, reason string) error {
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

func (t *wsTransport) Ping(ctx context.Context) error { return t.ws.Ping(ctx) }

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
			return nil, &Violation{CloseTooBig, fmt.Sprintf("a message of more than %d bytes", limit)}
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

// Lines is a transport of one JSON-RPC message a line, of at most limit
// bytes, read from r and written to w; closing it closes w when w is an
// io.Closer.
func Lines(r io.Reader, w io.Writer, limit int) Transport {
	return &stdioTransport{mu: lockcheck.Mutex{Class: "transport"}, r: bufio.NewReaderSize(r, 64<<10), w: w, limit: limit}
}

type stdioTransport struct {
	r     *bufio.Reader
	limit int
	mu    lockcheck.Mutex
	w     io.Writer
}

func (t *stdioTransport) Read(ctx context.Context) ([]byte, error) {
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
			return nil, &Violation{CloseTooBig, fmt.Sprintf("a message of more than %d bytes", t.limit)}
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

func (t *stdioTransport) Write(ctx context.Context, msg []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	_, err := t.w.Write(buf)
	return err
}

func (t *stdioTransport) Close(CloseCode, string) error {
	if c, ok := t.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
