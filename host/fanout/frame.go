package fanout

import (
	"encoding/json"

	"github.com/ahpd/ahpd/protocol"
)

// A Frame is one message to send: encoded once, however many connections
// it goes to, and never changed after. A connection that is behind merges
// the text of streamed deltas into a frame of its own (Merge).
type Frame struct {
	data    []byte
	channel string
	action  protocol.ActionType // "" for a response or a notification
	method  string              // a notification's method
	text    *streamed           // a chat/delta or chat/reasoning without origin
	merged  *mergedText         // one connection's merged text; data is made at write
}

// Raw returns a frame of data already encoded: a response.
func Raw(data []byte) *Frame { return &Frame{data: data} }

// Channel returns the channel the frame is of, or "".
func (f *Frame) Channel() string { return f.channel }

// Action returns the type of the action the frame carries, or "".
func (f *Frame) Action() protocol.ActionType { return f.action }

// Method returns the method of the notification the frame is, or "".
func (f *Frame) Method() string { return f.method }

// Len returns the frame's size as queued.
func (f *Frame) Len() int {
	if f.merged != nil {
		return len(f.merged.buf)
	}
	return len(f.data)
}

// Bytes returns the frame's message, encoding a merged one.
func (f *Frame) Bytes() []byte {
	if f.merged != nil {
		return f.merged.encode(f.channel, f.action)
	}
	return f.data
}

// ActionFrame encodes the `action` notification of an envelope.
func ActionFrame(env *protocol.ActionEnvelope) *Frame {
	buf := make([]byte, 0, 256)
	buf = append(buf, `{"jsonrpc":"2.0","method":"action","params":`...)
	// Append reports a value JSON cannot hold (a NaN from a backend) but
	// still writes valid JSON in its place; the frame goes out regardless.
	buf, _ = protocol.Append(buf, env)
	buf = append(buf, '}')
	f := &Frame{data: buf, channel: env.Channel, action: env.Action.Type()}
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

// NotificationFrame encodes a protocol notification.
func NotificationFrame(method string, params any) *Frame {
	p, err := json.Marshal(params)
	if err != nil {
		p = []byte("{}") // the host's own types always encode; see ActionFrame
	}
	buf := make([]byte, 0, len(p)+64)
	buf = append(buf, `{"jsonrpc":"2.0","method":`...)
	m, _ := json.Marshal(method)
	buf = append(buf, m...)
	buf = append(buf, `,"params":`...)
	buf = append(buf, p...)
	buf = append(buf, '}')
	return &Frame{data: buf, channel: channelOf(params), method: method}
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

// streamed is the text of a chat/delta or chat/reasoning frame.
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

// encode writes the merged text as one action, under the serverSeq of the
// last one merged.
func (m *mergedText) encode(channel string, t protocol.ActionType) []byte {
	var a protocol.Action = &protocol.ChatDeltaAction{TurnID: m.turnID, PartID: m.partID, Content: string(m.buf)}
	if t == protocol.ActionChatReasoning {
		a = &protocol.ChatReasoningAction{TurnID: m.turnID, PartID: m.partID, Content: string(m.buf)}
	}
	return ActionFrame(&protocol.ActionEnvelope{Channel: channel, Action: a, ServerSeq: m.seq}).data
}

// Mergeable reports whether f's text can be added to last, a frame not yet
// written at the end of a connection's queue, and how many bytes it adds:
// both are streamed text of the same part.
func Mergeable(last, f *Frame) (int, bool) {
	if f.text == nil || (last.text == nil && last.merged == nil) {
		return 0, false
	}
	if last.channel != f.channel || last.action != f.action {
		return 0, false
	}
	s := last.text
	if last.merged != nil {
		s = &last.merged.streamed
	}
	if s.turnID != f.text.turnID || s.partID != f.text.partID {
		return 0, false
	}
	return len(f.text.content), true
}

// Merge adds f's text to last (Mergeable said it can be) and returns the
// frame to queue in last's place: a connection's own, since frames are
// shared.
func Merge(last, f *Frame) *Frame {
	m := last.merged
	if m == nil {
		m = &mergedText{streamed: *last.text, buf: []byte(last.text.content)}
		last = &Frame{channel: last.channel, action: last.action, merged: m}
	}
	m.buf = append(m.buf, f.text.content...)
	m.seq = f.text.seq
	return last
}
