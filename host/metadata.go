package host

import (
	"context"
	"unicode/utf8"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// A session's metadata: string keys and values a client sets on it (the
// HTTP API's `metadata`), kept in its record and shown in its state's and
// summary's _meta under metadataMeta. The protocol has no client action
// that sets a session's _meta, so ahpd/setSessionMetadata does.

// The bounds on a session's metadata.
const (
	MaxMetadataKey   = 40  // characters of a key
	MaxMetadataValue = 500 // characters of a value

)

type metadataParams struct {
	Channel string `json:"channel"`
	// Metadata are merged one by one: a string sets its key, null
	// removes it.
	Metadata map[string]*string `json:"metadata"`
}

func (h *Host) setSessionMetadata(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p metadataParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil {
		return nil, invalidParams(req.Method(), err)
	}
	if p.Channel == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: channel: missing required member", req.Method())
	}
	if err := checkMetadata(req.Method(), p.Metadata); err != nil {
		return nil, err
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	return s.SetMetadata(req.Method(), p.Metadata)
}

func checkMetadata(method string, m map[string]*string) error {
	if len(m) > session.MaxMetadataKeys {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: metadata: at most %d keys", method, session.MaxMetadataKeys)
	}
	for k, v := range m {
		if k == "" || utf8.RuneCountInString(k) > MaxMetadataKey {
			return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: metadata: the key %s: a key has 1 to %d characters", method, protocol.Quote(k), MaxMetadataKey)
		}
		if v != nil && utf8.RuneCountInString(*v) > MaxMetadataValue {
			return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: metadata: the value of %s: a value has at most %d characters", method, protocol.Quote(k), MaxMetadataValue)
		}
	}
	return nil
}
