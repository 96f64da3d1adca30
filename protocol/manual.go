package protocol

import (
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// The wire types the generator leaves to hand: shapes a JSON Schema oneOf
// cannot tell apart by a member, and the open containers every generated
// type uses.

// Object is an open JSON object: `_meta`, config values, and the members a
// type does not define. Values keep their JSON text, so nothing is lost or
// reformatted on the way through.
type Object map[string]jsontext.Value

// MarshalJSON encodes o; a nil Object is written as {}.
func (o Object) MarshalJSON() ([]byte, error) {
	w := writer{}
	w.object(o)
	return w.buf, w.err
}

// UnmarshalJSON decodes an object into o.
func (o *Object) UnmarshalJSON(b []byte) error {
	return withDecoder(b, func(d *decoder) (err error) {
		*o, err = d.object()
		return err
	})
}

// Unknown is a union value of a variant this protocol version does not
// define: an action from a newer client, a customization of a new type. It
// keeps the JSON as it arrived, so passing it on loses nothing.
type Unknown struct {
	// Kind is the value of the member that names the variant ("type",
	// "kind", ...), or "" when there is none.
	Kind string
	Raw  jsontext.Value
}

func newUnknown(kind string, raw []byte) *Unknown {
	return &Unknown{Kind: kind, Raw: jsontext.Value(raw).Clone()}
}

// Type returns the action type of an unknown action.
func (u *Unknown) Type() ActionType { return ActionType(u.Kind) }

func (u *Unknown) encode(w *writer) { w.raw(u.Raw) }

func (u *Unknown) decode(d *decoder) (err error) {
	u.Raw, err = d.raw()
	return err
}

// MarshalJSON writes the value as it arrived.
func (u Unknown) MarshalJSON() ([]byte, error) { return marshal(&u) }

// StringOrMarkdown is text that is either plain or Markdown. On the wire
// plain text is a JSON string and Markdown is {"markdown": text}.
type StringOrMarkdown struct {
	Text     string
	Markdown bool
}

// Plain returns plain text.
func Plain(s string) StringOrMarkdown { return StringOrMarkdown{Text: s} }

// Markdown returns Markdown text.
func Markdown(s string) StringOrMarkdown { return StringOrMarkdown{Text: s, Markdown: true} }

func (s *StringOrMarkdown) encode(w *writer) {
	if !s.Markdown {
		w.string(s.Text)
		return
	}
	w.beginObject()
	w.key(`"markdown":`)
	w.string(s.Text)
	w.endObject()
}

func (s *StringOrMarkdown) decode(d *decoder) error {
	*s = StringOrMarkdown{}
	switch d.kind() {
	case '"':
		text, err := d.string()
		s.Text = text
		return err
	case '{':
		s.Markdown = true
		if err := d.beginObject(); err != nil {
			return err
		}
		found := false
		for d.more() {
			name, err := d.name()
			if err != nil {
				return err
			}
			if string(name) != "markdown" {
				if err := d.dec.SkipValue(); err != nil {
					return err
				}
				continue
			}
			found = true
			if s.Text, err = d.string(); err != nil {
				return inField("markdown", err)
			}
		}
		if !found {
			return missing("markdown")
		}
		return d.endObject()
	}
	return d.typeError("string or {markdown}")
}

// MarshalJSON encodes s as AHP JSON.
func (s StringOrMarkdown) MarshalJSON() ([]byte, error) { return marshal(&s) }

// UnmarshalJSON decodes AHP JSON into s.
func (s *StringOrMarkdown) UnmarshalJSON(b []byte) error { return unmarshal(b, s) }

// ToolInput is a tool call's input: inline text (a JSON string holding the
// arguments) or a reference to content the client fetches.
type ToolInput struct {
	// Inline is the input text when Ref is nil.
	Inline string
	Ref    *ContentRef
}

// InlineInput returns inline tool input.
func InlineInput(s string) *ToolInput { return &ToolInput{Inline: s} }

func (t *ToolInput) encode(w *writer) {
	if t.Ref != nil {
		t.Ref.encode(w)
		return
	}
	w.string(t.Inline)
}

func (t *ToolInput) decode(d *decoder) error {
	*t = ToolInput{}
	switch d.kind() {
	case '"':
		s, err := d.string()
		t.Inline = s
		return err
	case '{':
		t.Ref = new(ContentRef)
		return t.Ref.decode(d)
	}
	return d.typeError("string or content reference")
}

// MarshalJSON encodes t as AHP JSON.
func (t ToolInput) MarshalJSON() ([]byte, error) { return marshal(&t) }

// UnmarshalJSON decodes AHP JSON into t.
func (t *ToolInput) UnmarshalJSON(b []byte) error { return unmarshal(b, t) }

// SessionStatus is the bitset summarizing a session or chat. The low five
// bits are the activity (one of Idle, Error, InProgress, InputNeeded); the
// others are flags. Bits this version does not know are kept.
type SessionStatus uint32

// Session status bits.
const (
	StatusIdle        SessionStatus = 1
	StatusError       SessionStatus = 1 << 1
	StatusInProgress  SessionStatus = 1 << 3
	StatusInputNeeded SessionStatus = 1<<3 | 1<<4 // implies InProgress
	StatusIsRead      SessionStatus = 1 << 5
	StatusIsArchived  SessionStatus = 1 << 6

	// StatusActivityMask covers the activity bits.
	StatusActivityMask SessionStatus = 1<<5 - 1
)

// Activity returns the activity bits of s.
func (s SessionStatus) Activity() SessionStatus { return s & StatusActivityMask }

// WithActivity returns s with its activity bits replaced by a.
func (s SessionStatus) WithActivity(a SessionStatus) SessionStatus {
	return s&^StatusActivityMask | a&StatusActivityMask
}

// With returns s with flag set or cleared.
func (s SessionStatus) With(flag SessionStatus, set bool) SessionStatus {
	if set {
		return s | flag
	}
	return s &^ flag
}

// MarshalJSON encodes s as a JSON number.
func (s SessionStatus) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "%d", uint32(s)), nil
}

// UnmarshalJSON decodes a JSON number into s.
func (s *SessionStatus) UnmarshalJSON(b []byte) error {
	return withDecoder(b, func(d *decoder) (err error) {
		*s, err = decodeUint32[SessionStatus](d)
		return err
	})
}
