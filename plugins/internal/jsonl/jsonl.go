// Package jsonl holds what the backends' transcript formats share for
// reading JSON Lines that other programs wrote: member types that
// tolerate a value of an unexpected type, decoding options that tolerate
// what a writer in another language may put in a line, and a reader of
// the members at the start of a line cut short. It reads lines; it knows
// no backend's lines.
package jsonl

import (
	"bytes"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// DecodeOpts makes decoding lenient about what a writer in another
// language may put in a transcript: lone surrogates, repeated names.
var DecodeOpts = json.JoinOptions(
	jsontext.AllowInvalidUTF8(true),
	jsontext.AllowDuplicateNames(true),
)

// Lenient is a string member that tolerates any JSON value: a member of
// an unexpected type reads as "" rather than making the line garbage.
type Lenient string

// UnmarshalJSONFrom reads a string, and skips anything else.
func (s *Lenient) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() != '"' {
		return d.SkipValue()
	}
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	*s = Lenient(tok.String())
	return nil
}

// Flag is a boolean member read as Lenient reads strings: anything but
// true is false.
type Flag bool

// UnmarshalJSONFrom reads true as true, and anything else as false.
func (b *Flag) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	*b = d.PeekKind() == 't'
	return d.SkipValue()
}

// OptString is a string member that records whether it was a string at
// all (OK), for a member whose presence means something even when empty.
type OptString struct {
	S  string
	OK bool
}

// UnmarshalJSONFrom reads a string, and skips anything else.
func (o *OptString) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() != '"' {
		return d.SkipValue()
	}
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	*o = OptString{tok.String(), true}
	return nil
}

// WalkPrefix reads the JSON object at the start of text, which may be cut
// anywhere, and calls fn with each scalar member whose path (names joined
// by "/", such as "turn/startedAt") want accepts, descending only into
// objects whose path descend accepts. It stops quietly where the text
// stops being JSON, which is how a line cut by a window still gives up
// the members written before the cut.
func WalkPrefix(text []byte, descend, want func(path string) bool, fn func(path string, tok jsontext.Token)) {
	d := jsontext.NewDecoder(bytes.NewReader(text), DecodeOpts)
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return
	}
	var walk func(prefix string) bool
	walk = func(prefix string) bool {
		for d.PeekKind() != '}' {
			name, err := d.ReadToken()
			if err != nil {
				return false
			}
			path := prefix + name.String()
			switch k := d.PeekKind(); {
			case k == '{' && descend(path):
				if _, err := d.ReadToken(); err != nil || !walk(path+"/") {
					return false
				}
			case k != '{' && k != '[' && want(path):
				tok, err := d.ReadToken()
				if err != nil {
					return false
				}
				fn(path, tok)
			default:
				if d.SkipValue() != nil {
					return false
				}
			}
		}
		_, err := d.ReadToken()
		return err == nil
	}
	walk("")
}
