package conn

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
)

// Encoded is a handler's result already encoded as JSON, which the
// connection sends as it is.
//
// jrpc2 encodes every result with encoding/json, which rescans and copies
// whatever a MarshalJSON returns (it compacts it): for listSessions' page
// of 500 rows, some 330 KB the host writes from rows each encoded once,
// that rescan was most of the page's cost, and the more so on a host busy
// with turns. So jrpc2 is handed a short token in its place (a JSON
// string naming a random nonce of the connection's, which no client's
// data can name), and the connection puts the bytes where the token is as
// the response goes to its queue (rpcChannel.Send). The bytes must be one
// valid JSON value: nothing checks them again.
type Encoded []byte

// MarshalJSON is the bytes, for whatever encodes an Encoded on another way
// than a connection's response.
func (e Encoded) MarshalJSON() ([]byte, error) { return e, nil }

// encodedResults are the results waiting for their responses to be
// sent, by token (guarded by Conn.mu).
type encodedResults struct {
	nonce  string
	n      uint64
	byText map[string][]byte
}

// stand returns the token jrpc2 is handed for e, kept until its response
// is sent.
func (c *Conn) stand(e Encoded) json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &c.encoded
	if r.nonce == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		r.nonce, r.byText = hex.EncodeToString(b[:]), map[string][]byte{}
	}
	r.n++
	token := `"\u0000ahpd-encoded:` + r.nonce + ":" + strconv.FormatUint(r.n, 10) + `"`
	r.byText[token] = e
	return json.RawMessage(token)
}

// spliced is a copy of a response jrpc2 sent with the results it was
// handed tokens for in their place.
func (c *Conn) spliced(msg []byte) []byte {
	c.mu.Lock()
	if len(c.encoded.byText) == 0 {
		c.mu.Unlock()
		return append([]byte(nil), msg...)
	}
	tokens := make([]string, 0, len(c.encoded.byText))
	for t := range c.encoded.byText {
		tokens = append(tokens, t)
	}
	c.mu.Unlock()
	type part struct {
		at    int
		token string
	}
	var parts []part
	for _, t := range tokens {
		// A single response ends with its result: found without a scan.
		if bytes.HasSuffix(msg, append([]byte(t), '}')) {
			parts = append(parts, part{len(msg) - len(t) - 1, t})
		} else if msg[0] == '[' {
			if i := bytes.Index(msg, []byte(t)); i >= 0 {
				parts = append(parts, part{i, t})
			}
		}
	}
	if len(parts) == 0 {
		return append([]byte(nil), msg...)
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(a.at, b.at) })
	c.mu.Lock()
	size := len(msg)
	values := make([][]byte, len(parts))
	for i, p := range parts {
		values[i] = c.encoded.byText[p.token]
		delete(c.encoded.byText, p.token)
		size += len(values[i]) - len(p.token)
	}
	c.mu.Unlock()
	out := make([]byte, 0, size)
	from := 0
	for i, p := range parts {
		out = append(out, msg[from:p.at]...)
		out = append(out, values[i]...)
		from = p.at + len(p.token)
	}
	return append(out, msg[from:]...)
}
