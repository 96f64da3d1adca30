package session

import (
	"encoding/json"
	"maps"

	"github.com/ahpd/ahpd/protocol"
)

// metadataMeta is the _meta key the metadata is shown under.
const metadataMeta = "ahpd.metadata"

const MaxMetadataKeys = 64 // keys of one session

type metadataResult struct {
	Metadata map[string]string `json:"metadata"`
}

// SetMetadata merges changes into the session's metadata, telling its
// clients and keeping it, all under the one lock so that no other merge
// comes in between the read and the write.
func (s *Session) SetMetadata(method string, changes map[string]*string) (any, error) {
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
