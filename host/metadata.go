package host

import (
	"context"
	"encoding/json"
	"maps"
	"unicode/utf8"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// A session's metadata: string keys and values a client sets on it (the
// HTTP API's `metadata`), kept in its record and shown in its state's and
// summary's _meta under metadataMeta. The protocol has no client action
// that sets a session's _meta, so ahpd/setSessionMetadata does.

// metadataMeta is the _meta key the metadata is shown under.
const metadataMeta = "ahpd.metadata"

// The bounds on a session's metadata.
const (
	MaxMetadataKey   = 40  // characters of a key
	MaxMetadataValue = 500 // characters of a value
	MaxMetadataKeys  = 64  // keys of one session
)

type metadataParams struct {
	Channel string `json:"channel"`
	// Metadata are merged one by one: a string sets its key, null
	// removes it.
	Metadata map[string]*string `json:"metadata"`
}

type metadataResult struct {
	Metadata map[string]string `json:"metadata"`
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
	return s.setMetadata(req.Method(), p.Metadata)
}

// setMetadata merges changes into the session's metadata, telling its
// clients and keeping it, all under the one lock so that no other merge
// comes in between the read and the write.
func (s *session) setMetadata(method string, changes map[string]*string) (any, error) {
	s.mu.Lock()
	defer s.unlock()
	merged := maps.Clone(s.rec.Metadata)
	if merged == nil {
		merged = map[string]string{}
	}
	for k, v := range changes {
		if v == nil {
			delete(merged, k)
		} else {
			merged[k] = *v
		}
	}
	if len(merged) > MaxMetadataKeys {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: metadata: a session holds at most %d keys", method, MaxMetadataKeys)
	}
	if len(merged) == 0 {
		merged = nil
	}
	s.rec.Metadata = merged
	s.emitSessionLocked(&protocol.SessionMetaChangedAction{Meta: withMetadata(s.state.Meta, merged)}, nil)
	s.persistLocked()
	return metadataResult{Metadata: merged}, nil
}

func checkMetadata(method string, m map[string]*string) error {
	if len(m) > MaxMetadataKeys {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: metadata: at most %d keys", method, MaxMetadataKeys)
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

// withMetadata returns meta with the metadata key set to m (or taken
// away when m is empty), keeping its other keys.
func withMetadata(meta protocol.Object, m map[string]string) protocol.Object {
	out := protocol.Object{}
	for k, v := range meta {
		if k != metadataMeta {
			out[k] = v
		}
	}
	if len(m) > 0 {
		data, _ := json.Marshal(m)
		out[metadataMeta] = data
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
