package client

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

// wire carries one connection's messages: WebSocket text frames, or the
// lines of a stream.
type wire interface {
	read(ctx context.Context) ([]byte, error)
	write(ctx context.Context, msg []byte) error
	// close ends the connection; a read under way returns.
	close() error
}

// dialWebSocket opens a WebSocket to the client's URL.
func (c *Client) dialWebSocket(ctx context.Context) (wire, error) {
	header := http.Header{}
	if c.opts.Token != "" {
		header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	ws, resp, err := websocket.Dial(ctx, c.url, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("connecting to %s: the host refused the token (HTTP 401): %w", c.url, ErrUnauthorized)
		}
		return nil, fmt.Errorf("connecting to %s: %w", c.url, err)
	}
	ws.SetReadLimit(c.opts.MaxMessageBytes)
	return wsWire{ws}, nil
}

type wsWire struct{ ws *websocket.Conn }

func (w wsWire) read(ctx context.Context) ([]byte, error) {
	_, data, err := w.ws.Read(ctx)
	return data, err
}

func (w wsWire) write(ctx context.Context, msg []byte) error {
	return w.ws.Write(ctx, websocket.MessageText, msg)
}

func (w wsWire) close() error { return w.ws.Close(websocket.StatusNormalClosure, "") }

// Open speaks AHP over rwc, one JSON-RPC message a line: what `ahpd
// --stdio` serves on its standard input and output, and what a host
// serves the connections it opens to itself. It initializes and returns
// the client, which closes rwc when it closes. ctx bounds the handshake
// only. A stream is used once: Reconnect fails on it.
func Open(ctx context.Context, rwc io.ReadWriteCloser, opts *Options) (*Client, error) {
	c := newClient("", opts)
	c.dial = streamDialer(c, rwc)
	return c.start(ctx)
}

// streamDialer opens rwc once; a second dial fails with ErrStreamUsed.
func streamDialer(c *Client, rwc io.ReadWriteCloser) func(context.Context) (wire, error) {
	var once sync.Once
	return func(context.Context) (wire, error) {
		var w wire
		once.Do(func() {
			w = &streamWire{rwc: rwc, r: bufio.NewReaderSize(rwc, 64<<10), limit: c.opts.MaxMessageBytes}
		})
		if w == nil {
			return nil, ErrStreamUsed
		}
		return w, nil
	}
}

// ErrStreamUsed is the error of reconnecting a client Open made.
var ErrStreamUsed = errors.New("client: a stream connection cannot be opened again")

type streamWire struct {
	rwc   io.ReadWriteCloser
	r     *bufio.Reader
	limit int64
	mu    sync.Mutex // one write at a time: a line is never split
}

// read returns the next line, refusing one longer than the limit. ctx is
// not consulted: close ends a read.
func (w *streamWire) read(context.Context) ([]byte, error) {
	var line []byte
	for {
		chunk, err := w.r.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > w.limit {
			return nil, fmt.Errorf("a message from the host is longer than %d bytes", w.limit)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			if line = bytes.TrimSpace(line); len(line) == 0 {
				continue
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0:
			return bytes.TrimSpace(line), nil
		default:
			return nil, err
		}
	}
}

func (w *streamWire) write(_ context.Context, msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.rwc.Write(append(msg, '\n'))
	return err
}

func (w *streamWire) close() error { return w.rwc.Close() }
