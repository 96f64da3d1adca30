package host

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// inbound is the reading side of a connection: a reader goroutine takes
// messages off the transport, and jrpc2 takes them from recv once they
// pass admit. It is where a connection stops taking requests: when the
// client closes, or ahpd drains it for shutdown, recv hands jrpc2 a last
// notification of a method only this connection knows (eofMethod) and
// ends input when that one's turn in line comes, so every request taken
// before it is answered first.
type inbound struct {
	msgs      chan message
	readerEnd chan struct{}
	eofMethod string
	drainOnce sync.Once
	draining  chan struct{} // closed to stop taking requests
	drained   chan struct{} // closed when eofMethod's turn came
	eofSent   bool          // recv's own: eofMethod was handed to jrpc2
	why       string        // why it was drained; guarded by conn.mu
}

// message is one read off the transport, or why reading ended.
type message struct {
	data []byte
	err  error
}

func (in *inbound) init() {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	in.msgs = make(chan message)
	in.readerEnd = make(chan struct{})
	in.eofMethod = "ahpd/end-of-input-" + hex.EncodeToString(b)
	in.draining = make(chan struct{})
	in.drained = make(chan struct{})
}

// drainInput stops the connection taking requests; those taken are answered and
// the connection finishes (conn.finish) with why.
func (c *conn) drainInput(why string) {
	c.in.drainOnce.Do(func() {
		c.mu.Lock()
		c.in.why = why
		served := c.served
		c.mu.Unlock()
		close(c.in.draining)
		if !served {
			c.finish(why) // nothing reads it: what is queued is all there is
		}
	})
}

// read moves messages from the transport to recv until reading fails or
// the connection ends.
func (c *conn) read() {
	defer close(c.in.readerEnd)
	for {
		data, err := c.t.read(c.ctx)
		if err == nil {
			c.heard.Store(c.h.now().UnixNano())
		}
		select {
		case c.in.msgs <- message{data, err}:
		case <-c.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// recv is the connection's jrpc2 Recv: the next message to take, once
// there is room in the line for it.
func (c *conn) recv() ([]byte, error) {
	if c.in.eofSent {
		select {
		case <-c.in.drained:
		case <-c.ctx.Done():
		}
		return nil, io.EOF
	}
	for {
		if err := c.line.room(c.ctx, c.in.draining, c.limits.InFlight); err != nil {
			return nil, err
		}
		select {
		case m := <-c.in.msgs:
			if m.err != nil {
				return c.stopTaking(m.err)
			}
			if data, ok := c.admit(m.data); ok {
				return data, nil
			}
		case <-c.in.draining:
			return c.stopTaking(nil)
		case <-c.ctx.Done():
			return nil, c.ctx.Err()
		}
	}
}

// stopTaking ends input: at once for a rule broken, after the requests
// already taken for a close.
func (c *conn) stopTaking(err error) ([]byte, error) {
	var v *violation
	if errors.As(err, &v) {
		c.log.Info("connection cut", "client", c.client(), "code", int(v.code), "why", v.reason)
		c.h.metrics.cutFor(cutViolation)
		c.abort(v.code, v.reason)
		return nil, err
	}
	c.in.eofSent = true
	return []byte(`{"jsonrpc":"2.0","method":"` + c.in.eofMethod + `"}`), nil
}

// bulky are the methods whose params carry content, a prompt's
// attachments: any other is held to Limits.CommandBytes.
var bulky = map[string]bool{"dispatchAction": true, "createSession": true, "createChat": true}

// maxRequestID bounds a request id: it is echoed in the answer.
const maxRequestID = 256

// admit looks at a message before jrpc2 decodes it, without decoding its
// params: what it refuses it answers itself, cheaply. A command of
// megabytes is not decoded; an id of null, which jrpc2 would take for a
// notification and never answer, is answered; a batch may hold no more
// requests than may be in flight.
func (c *conn) admit(data []byte) ([]byte, bool) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return data, true // jrpc2 answers it
	}
	if data[0] == '[' {
		n, err := batchLen(data)
		switch {
		case err != nil:
			return data, true // jrpc2 answers it
		case n > c.limits.InFlight:
			c.answer(nil, protocol.CodeInvalidRequest, fmt.Sprintf("a batch of %d requests: at most %d", n, c.limits.InFlight))
			return nil, false
		case len(data) > c.limits.CommandBytes:
			c.answer(nil, protocol.CodeInvalidRequest, fmt.Sprintf("a batch of %d bytes: at most %d (send content in a request of its own)", len(data), c.limits.CommandBytes))
			return nil, false
		}
		return data, true
	}
	id, method, ok := head(data)
	if !ok {
		return data, true // jrpc2 answers it
	}
	switch {
	case len(id) > maxRequestID:
		c.answer(nil, protocol.CodeInvalidRequest, fmt.Sprintf("a request id of %d bytes: at most %d", len(id), maxRequestID))
	case string(id) == "null":
		c.answer(id, protocol.CodeInvalidRequest, "a request id of null cannot be answered apart from others: use a number or a string")
	case len(data) > c.limits.CommandBytes && !bulky[method]:
		c.answer(id, protocol.CodeInvalidRequest, fmt.Sprintf("%s of %d bytes: at most %d for a command", protocol.Quote(method), len(data), c.limits.CommandBytes))
	default:
		return data, true
	}
	return nil, false
}

// answer sends an error response of the host's own; a request without an
// id (a notification) gets none.
func (c *conn) answer(id jsontext.Value, code protocol.ErrorCode, msg string) {
	if id == nil {
		id = jsontext.Value("null")
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   protocol.Error  `json:"error"`
	}{"2.0", json.RawMessage(id), protocol.Error{Code: code, Message: msg}})
	if err != nil {
		c.log.Error("encoding an answer", "err", err)
		return
	}
	c.respond(data)
}

// head reads a request's id and method, skipping the rest, params
// included, without copying it. ok is false for what is not a JSON object.
func head(data []byte) (id jsontext.Value, method string, ok bool) {
	d := jsontext.NewDecoder(bytes.NewBuffer(data))
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return nil, "", false
	}
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return nil, "", false
		}
		switch name.String() {
		case "id":
			v, err := d.ReadValue()
			if err != nil {
				return nil, "", false
			}
			id = v.Clone()
		case "method":
			v, err := d.ReadValue()
			if err != nil {
				return nil, "", false
			}
			if len(v) <= 256 && v.Kind() == '"' {
				_ = json.Unmarshal(v, &method)
			} else {
				method = "a method"
			}
		default:
			if err := d.SkipValue(); err != nil {
				return nil, "", false
			}
		}
	}
	return id, method, true
}

// batchLen counts the messages of a batch.
func batchLen(data []byte) (int, error) {
	d := jsontext.NewDecoder(bytes.NewBuffer(data))
	if _, err := d.ReadToken(); err != nil {
		return 0, err
	}
	n := 0
	for d.PeekKind() != ']' {
		if err := d.SkipValue(); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
