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
	return &frame{data: buf, channel: env.Channel, action: env.Action.Type()}
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
