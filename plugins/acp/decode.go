package acp

import (
	"bytes"
	"encoding/json"

	sdk "github.com/coder/acp-go-sdk"
)

// decodeUpdate decodes the params of a session/update notification as the
// SDK does.
//
// The update an agent sends thousands of a second is a chunk of text (of
// its reply, its thinking, or the user's message replayed); the SDK
// decodes it by trying the variants of the update and of its content,
// which is most of what a chunk costs ahpd. A text chunk is decoded here
// into the same fields directly, refusing any member the SDK's types do
// not have; anything else, or anything refused, goes the SDK's way.
func decodeUpdate(params json.RawMessage) (sdk.SessionNotification, error) {
	if n, ok := decodeTextChunk(params); ok {
		return n, nil
	}
	var n sdk.SessionNotification
	if err := json.Unmarshal(params, &n); err != nil {
		return n, err
	}
	return n, n.Validate()
}

// textChunk has the members a text chunk update has in the SDK's types
// (SessionNotification, a ContentChunk variant, ContentBlockText).
type textChunk struct {
	Meta      map[string]any `json:"_meta,omitempty"`
	SessionID sdk.SessionId  `json:"sessionId"`
	Update    struct {
		Meta          map[string]any       `json:"_meta,omitempty"`
		Content       sdk.ContentBlockText `json:"content"`
		MessageID     *string              `json:"messageId,omitempty"`
		SessionUpdate string               `json:"sessionUpdate"`
	} `json:"update"`
}

// decodeTextChunk decodes a text chunk update, and reports false for any
// other.
func decodeTextChunk(params json.RawMessage) (sdk.SessionNotification, bool) {
	var c textChunk
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if dec.Decode(&c) != nil || c.Update.Content.Type != "text" {
		return sdk.SessionNotification{}, false
	}
	u, content := c.Update, sdk.ContentBlock{Text: &c.Update.Content}
	n := sdk.SessionNotification{Meta: c.Meta, SessionId: c.SessionID}
	switch u.SessionUpdate {
	case "agent_message_chunk":
		n.Update.AgentMessageChunk = &sdk.SessionUpdateAgentMessageChunk{Meta: u.Meta, Content: content, MessageId: u.MessageID, SessionUpdate: u.SessionUpdate}
	case "agent_thought_chunk":
		n.Update.AgentThoughtChunk = &sdk.SessionUpdateAgentThoughtChunk{Meta: u.Meta, Content: content, MessageId: u.MessageID, SessionUpdate: u.SessionUpdate}
	case "user_message_chunk":
		n.Update.UserMessageChunk = &sdk.SessionUpdateUserMessageChunk{Meta: u.Meta, Content: content, MessageId: u.MessageID, SessionUpdate: u.SessionUpdate}
	default:
		return sdk.SessionNotification{}, false
	}
	return n, true
}
