package conn

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

// DrainInput stops the connection taking requests; those taken are answered and
// the connection finishes (Conn.Finish) with why.
func (c *Conn) DrainInput(why string) {
	c.in.drainOnce.Do(func() {
		c.mu.Lock()
		c.in.why = why
		served := c.served
		c.mu.Unlock()
		close(c.in.draining)
		if !served {
			c.Finish(why) // nothing reads it: what is queued is all there is
		}
	})
}

// read moves messages from the transport to recv until reading fails or
// the connection ends.
func (c *Conn) read() {
	defer close(c.in.readerEnd)
	for {
		data, err := c.t.Read(c.ctx)
		if err == nil {
			c.heard.Store(c.now().UnixNano())
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
func (c *Conn) recv() ([]byte, error) {
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
func (c *Conn) stopTaking(err error) ([]byte, error) {
	var v *Violation
	if errors.As(err, &v) {
		c.log.Info("connection cut", "client", c.Client(), "code", int(v.Code), "why", v.Reason)
		c.cutFor(CutViolation)
		c.Abort(v.Code, v.Reason)
		return nil, err
	}
	c.in.eofSent = true
	c.line.take(1)
	return []byte(`{"jsonrpc":"2.0","method":"` + c.in.eofMethod + `"}`), nil
}

// bulky are the methods whose params carry content, a prompt's
// attachments: any other is held to Limits.CommandBytes.
var bulky = map[string]bool{"dispatchAction": true, "createSession": true, "createChat": true}

// maxRequestID bounds a request id: it is echoed in the answer.
const maxRequestID = 256

// admit looks at a message before jrpc2 decodes it, without decoding its
// params, and answers what it refuses itself, cheaply: a command of
// megabytes, an id of null (which jrpc2 takes for a notification and
// never answers), a batch of more requests than may be in flight. It also
// refuses what jrpc2 would refuse without handling it, so that every
// request it lets through takes a place in the line (Assign) and the line
// counts exactly the requests taken and not done.
func (c *Conn) admit(data []byte) ([]byte, bool) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		return c.admitBatch(data)
	}
	r, ok := readHead(data)
	if !ok || r.reply {
		return data, true // jrpc2 answers or drops it, and handles nothing
	}
	if why := c.refusal(&r, len(data)); why != "" {
		c.answer(r.answerID(), protocol.CodeInvalidRequest, why)
		return nil, false
	}
	c.take([]request{r})
	return data, true
}

// admitBatch admits a batch whole or answers it with one error.
func (c *Conn) admitBatch(data []byte) ([]byte, bool) {
	reqs, err := readBatch(data)
	if err != nil {
		return data, true // jrpc2 answers it
	}
	why := ""
	switch {
	case len(reqs) > c.limits.InFlight:
		why = fmt.Sprintf("a batch of %d requests: at most %d", len(reqs), c.limits.InFlight)
	case len(data) > c.limits.CommandBytes:
		why = fmt.Sprintf("a batch of %d bytes: at most %d (send content in a request of its own)", len(data), c.limits.CommandBytes)
	}
	ids := map[string]bool{}
	for i := 0; why == "" && i < len(reqs); i++ {
		r := &reqs[i]
		if why = c.refusal(r, 0); why == "" && r.id != nil && ids[string(r.id)] {
			why = "two requests of the batch have the id " + protocol.Quote(string(r.id))
		}
		ids[string(r.id)] = true
		if why != "" && len(reqs) > 1 {
			why = fmt.Sprintf("request %d of the batch: %s", i+1, why)
		}
	}
	if why != "" {
		c.answer(nil, protocol.CodeInvalidRequest, why)
		return nil, false
	}
	c.take(reqs)
	return data, true
}

// refusal says why a request is not taken, or "". size is the bytes of
// its message, or 0 within a batch (bounded as a whole).
func (c *Conn) refusal(r *request, size int) string {
	switch {
	case r.problem != "":
		return r.problem
	case r.reply:
		return "a message with both a method and a result or error"
	case len(r.id) > maxRequestID:
		return fmt.Sprintf("a request id of %d bytes: at most %d", len(r.id), maxRequestID)
	case string(r.id) == "null":
		return "a request id of null cannot be answered apart from others: use a number or a string"
	case r.method == "":
		return "a request needs a method"
	case size > c.limits.CommandBytes && !bulky[r.method]:
		return fmt.Sprintf("%s of %d bytes: at most %d for a command", protocol.Quote(r.method), size, c.limits.CommandBytes)
	}
	if r.id != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.asked[string(r.id)] {
			return "the request id " + protocol.Quote(string(r.id)) + " is in use by a request not yet answered"
		}
	}
	return ""
}

// take counts requests admitted: each takes a place in the line, and the
// ids of those that are answered are in use until they are.
func (c *Conn) take(reqs []request) {
	c.mu.Lock()
	for _, r := range reqs {
		if r.id != nil {
			c.asked[string(r.id)] = true
		}
	}
	c.mu.Unlock()
	c.line.take(len(reqs))
}

// answer sends an error response of the host's own.
func (c *Conn) answer(id jsontext.Value, code protocol.ErrorCode, msg string) {
	if id == nil {
		id = jsontext.Value("null")
	}
	type rpcError struct {
		Code    protocol.ErrorCode `json:"code"`
		Message string             `json:"message"`
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", json.RawMessage(id), rpcError{code, msg}})
	if err != nil {
		c.log.Error("encoding an answer", "err", err)
		return
	}
	c.respond(data)
}

// request is what admit reads of a request: its id as sent, its method,
// and what is wrong with it for jrpc2.
type request struct {
	id      jsontext.Value // nil for a notification
	method  string
	reply   bool   // it has a result or an error
	problem string // why jrpc2 would refuse it
}

// answerID is the id to answer r with: its own when that can be echoed.
func (r *request) answerID() jsontext.Value {
	if r.id == nil || len(r.id) > maxRequestID || (r.id.Kind() != '"' && r.id.Kind() != '0') {
		return nil
	}
	return r.id
}

// readHead reads a message's members, skipping params and results without
// copying them. ok is false for what is not a JSON object, which jrpc2
// answers as it does.
func readHead(data []byte) (r request, ok bool) {
	d := jsontext.NewDecoder(bytes.NewBuffer(data))
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return r, false
	}
	version := false
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return r, false
		}
		member := name.String()
		var v jsontext.Value
		if member == "params" || member == "result" || member == "error" {
			k := d.PeekKind()
			if err := d.SkipValue(); err != nil {
				return r, false
			}
			if member == "params" && k != '{' && k != '[' && k != 'n' {
				r.problem = "params must be an object or an array"
			}
			r.reply = r.reply || member != "params"
			continue
		}
		if v, err = d.ReadValue(); err != nil {
			return r, false
		}
		switch member {
		case "jsonrpc":
			version = string(v) == `"2.0"`
		case "id":
			r.id = v.Clone()
			if k := v.Kind(); k != '"' && k != '0' && k != 'n' {
				r.problem = "a request id must be a string or a number"
			}
		case "method":
			switch {
			case v.Kind() != '"':
				r.problem = "a method must be a string"
			case len(v) > 258:
				r.method = "a method of " + fmt.Sprint(len(v)) + " bytes"
			default:
				_ = json.Unmarshal(v, &r.method)
			}
		default:
			r.problem = "an unknown member " + protocol.Quote(member) + ": a request has jsonrpc, id, method and params"
		}
	}
	if !version && r.problem == "" {
		r.problem = `jsonrpc must be "2.0"`
	}
	if !r.reply && r.method == "" && r.problem == "" {
		r.problem = "a request needs a method"
	}
	return r, true
}

// readBatch reads the requests of a batch.
func readBatch(data []byte) ([]request, error) {
	d := jsontext.NewDecoder(bytes.NewBuffer(data))
	if _, err := d.ReadToken(); err != nil {
		return nil, err
	}
	var out []request
	for d.PeekKind() != ']' {
		v, err := d.ReadValue()
		if err != nil {
			return nil, err
		}
		r, ok := readHead(v)
		if !ok {
			r.problem = "a batch holds JSON-RPC requests, each an object"
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("an empty batch")
	}
	return out, nil
}

// replyIDs returns the ids of the responses in a message ahpd sends, as
// their JSON text. jrpc2 writes a response's id after its version, so a
// response of megabytes is not read through.
func replyIDs(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	if data[0] != '[' {
		if id := replyID(data); id != "" {
			return []string{id}
		}
		return nil
	}
	d := jsontext.NewDecoder(bytes.NewBuffer(data))
	if _, err := d.ReadToken(); err != nil {
		return nil
	}
	var ids []string
	for d.PeekKind() == '{' {
		v, err := d.ReadValue()
		if err != nil {
			return ids
		}
		if id := replyID(v); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// replyID returns a response's id, or "".
func replyID(data []byte) string {
	d := jsontext.NewDecoder(bytes.NewBuffer(data))
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return ""
	}
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return ""
		}
		if name.String() == "id" {
			v, err := d.ReadValue()
			if err != nil || v.Kind() == 'n' {
				return ""
			}
			return string(v)
		}
		if err := d.SkipValue(); err != nil {
			return ""
		}
	}
	return ""
}
