package host

import (
	"encoding/json"

	"github.com/ahpd/ahpd/protocol"
)

var jsonUnmarshal = json.Unmarshal

// actionFrame encodes the `action` notification of an envelope.
func actionFrame(env *protocol.ActionEnvelope) *frame {
	buf := make([]byte, 0, 256)
	buf = append(buf, `{"jsonrpc":"2.0","method":"action","params":`...)
	// Append reports a value JSON cannot hold (a NaN from a backend) but
	// still writes valid JSON in its place; the frame goes out regardless.
	buf, _ = protocol.Append(buf, env)
	buf = append(buf, '}')
	f := &frame{data: buf, channel: env.Channel, action: env.Action.Type()}
	if env.Origin == nil {
		switch a := env.Action.(type) {
		case *protocol.ChatDeltaAction:
			f.text = &streamed{turnID: a.TurnID, partID: a.PartID, content: a.Content, seq: env.ServerSeq}
		case *protocol.ChatReasoningAction:
			f.text = &streamed{turnID: a.TurnID, partID: a.PartID, content: a.Content, seq: env.ServerSeq}
		}
	}
	return f
}

// streamed is the text of a chat/delta or chat/reasoning frame: a
// connection that is behind merges the next ones of the same part into it
// (see conn.enqueueLocked).
type streamed struct {
	turnID, partID, content string
	seq                     int64
}

// mergedText is the text of several such frames, merged for one
// connection and written as one action when the connection gets to it.
type mergedText struct {
	streamed
	buf []byte
}

// mergeable reports whether f can be added to the text merged in m.
func (m *mergedText) mergeable(channel string, f *frame, into *frame) bool {
	return f.text != nil && into.channel == channel && into.action == f.action &&
		m.turnID == f.text.turnID && m.partID == f.text.partID
}

// encode writes the merged text as one action, under the serverSeq of the
// last one merged.
func (m *mergedText) encode(channel string, t protocol.ActionType) []byte {
	var a protocol.Action = &protocol.ChatDeltaAction{TurnID: m.turnID, PartID: m.partID, Content: string(m.buf)}
	if t == protocol.ActionChatReasoning {
		a = &protocol.ChatReasoningAction{TurnID: m.turnID, PartID: m.partID, Content: string(m.buf)}
	}
	return actionFrame(&protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: m.seq}).data
}

// notificationFrame encodes a protocol notification.
func notificationFrame(method string, params any) *frame {
	p, err := json.Marshal(params)
	if err != nil {
		p = []byte("{}") // the host's own types always encode; see actionFrame
	}
	buf := make([]byte, 0, len(p)+64)
	buf = append(buf, `{"jsonrpc":"2.0","method":`...)
	m, _ := json.Marshal(method)
	buf = append(buf, m...)
	buf = append(buf, `,"params":`...)
	buf = append(buf, p...)
	buf = append(buf, '}')
	return &frame{data: buf, channel: channelOf(params), method: method}
}

// channelOf returns the channel a notification's params name.
func channelOf(params any) string {
	switch p := params.(type) {
	case *protocol.SessionAddedParams:
		return p.Channel
	case *protocol.SessionRemovedParams:
		return p.Channel
	case *protocol.SessionSummaryChangedParams:
		return p.Channel
	}
	return ""
}
