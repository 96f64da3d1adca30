package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"
)

// This file is the JSON machinery the generated codecs call. Encoding
// appends to a byte slice without reflection; decoding reads tokens from a
// jsontext.Decoder, which validates the input as it goes.

// wireValue is implemented by every generated and hand-written wire type.
type wireValue interface {
	encode(w *writer)
	decode(d *decoder) error
}

// writer appends JSON to buf. Writes cannot fail; the first problem with a
// value (a NaN, invalid raw JSON) is kept in err and reported by marshal.
type writer struct {
	buf []byte
	err error
}

// sep writes the comma that separates this value from the previous one.
// Every value ends in a byte other than '{', '[' or ':', so the last byte
// tells whether one is needed.
func (w *writer) sep() {
	if n := len(w.buf); n > 0 {
		switch w.buf[n-1] {
		case '{', '[', ':':
		default:
			w.buf = append(w.buf, ',')
		}
	}
}

func (w *writer) beginObject() { w.sep(); w.buf = append(w.buf, '{') }
func (w *writer) endObject()   { w.buf = append(w.buf, '}') }
func (w *writer) beginArray()  { w.sep(); w.buf = append(w.buf, '[') }
func (w *writer) endArray()    { w.buf = append(w.buf, ']') }

// key writes a member name given already quoted and followed by ':'.
func (w *writer) key(quoted string) { w.sep(); w.buf = append(w.buf, quoted...) }

// literal writes a value given as JSON text.
func (w *writer) literal(s string) { w.sep(); w.buf = append(w.buf, s...) }

// name writes a member name.
func (w *writer) name(s string) {
	w.sep()
	w.buf = appendQuoted(w.buf, s)
	w.buf = append(w.buf, ':')
}

func (w *writer) string(s string) { w.sep(); w.buf = appendQuoted(w.buf, s) }
func (w *writer) int(n int64)     { w.sep(); w.buf = strconv.AppendInt(w.buf, n, 10) }
func (w *writer) uint(n uint64)   { w.sep(); w.buf = strconv.AppendUint(w.buf, n, 10) }
func (w *writer) null()           { w.sep(); w.buf = append(w.buf, "null"...) }

func (w *writer) bool(b bool) {
	w.sep()
	w.buf = strconv.AppendBool(w.buf, b)
}

// float writes n as JavaScript would (JSON.stringify), so numbers
// round-trip with clients written in it.
func (w *writer) float(n float64) {
	w.sep()
	if math.IsNaN(n) || math.IsInf(n, 0) {
		w.fail(fmt.Errorf("cannot encode %v as JSON", n))
		w.buf = append(w.buf, '0')
		return
	}
	w.buf = jsontext.AppendFloat(w.buf, n, 64)
}

// raw writes a JSON value held as text; nil is written as null.
func (w *writer) raw(v jsontext.Value) {
	if len(v) == 0 {
		w.null()
		return
	}
	w.sep()
	if !v.IsValid() {
		w.fail(fmt.Errorf("invalid raw JSON value %.40q", v))
		w.buf = append(w.buf, "null"...)
		return
	}
	w.buf = append(w.buf, bytes.TrimSpace(v)...)
}

// object writes an open object; nil is written as {}.
func (w *writer) object(o Object) {
	w.beginObject()
	w.extra(o)
	w.endObject()
}

// extra writes the members of o into the object being written, in key order
// so output is stable.
func (w *writer) extra(o Object) {
	for _, k := range sortedKeys(o) {
		w.name(k)
		w.raw(o[k])
	}
}

func (w *writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// appendQuoted appends s as a JSON string. Invalid UTF-8 is replaced with
// U+FFFD rather than failing: the bytes came from somewhere else (a tool's
// output, a file) and a readable string beats a lost message.
func appendQuoted(dst []byte, s string) []byte {
	out, _ := jsontext.AppendQuote(dst, s)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func encodeUnion(w *writer, v wireValue) {
	if v == nil {
		w.null()
		return
	}
	v.encode(w)
}

var writers = sync.Pool{New: func() any { return new(writer) }}

// marshal encodes v into a new slice.
func marshal(v wireValue) ([]byte, error) {
	w := writers.Get().(*writer)
	w.buf, w.err = w.buf[:0], nil
	v.encode(w)
	out, err := slices.Clone(w.buf), w.err
	if cap(w.buf) <= 64<<10 {
		writers.Put(w)
	}
	return out, err
}

// Append appends the JSON encoding of v to dst. It is the allocation-free
// way to encode a value many times into buffers the caller owns.
func Append(dst []byte, v interface{ encode(*writer) }) ([]byte, error) {
	w := writer{buf: dst}
	v.encode(&w)
	return w.buf, w.err
}

// decoder reads one JSON document.
type decoder struct {
	dec     *jsontext.Decoder
	r       bytes.Reader
	scratch []byte
}

var decoders = sync.Pool{New: func() any {
	d := new(decoder)
	d.dec = jsontext.NewDecoder(&d.r)
	return d
}}

// withDecoder runs fn on a decoder reading b, and checks that b holds
// exactly one JSON value.
func withDecoder(b []byte, fn func(d *decoder) error) error {
	return readWith(b, fn, true)
}

// scan runs fn on a decoder reading b; fn may stop early.
func scan(b []byte, fn func(d *decoder) error) error {
	return readWith(b, fn, false)
}

func readWith(b []byte, fn func(d *decoder) error, whole bool) error {
	d := decoders.Get().(*decoder)
	defer func() {
		d.r.Reset(nil) // do not keep b alive from the pool
		decoders.Put(d)
	}()
	d.r.Reset(b)
	d.dec.Reset(&d.r)
	if err := fn(d); err != nil || !whole {
		return err
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("unexpected data after the JSON value")
		}
		return err
	}
	return nil
}

func unmarshal(b []byte, v wireValue) error {
	return withDecoder(b, v.decode)
}

func unmarshalUnion[T any](b []byte, fn func(*decoder) (T, error)) (T, error) {
	var v T
	err := withDecoder(b, func(d *decoder) (err error) {
		v, err = fn(d)
		return err
	})
	return v, err
}

func decodeRaw(raw []byte, v wireValue) error {
	return withDecoder(raw, v.decode)
}

func (d *decoder) kind() jsontext.Kind { return d.dec.PeekKind() }

// typeError reports a value of the wrong JSON kind, reading past it.
func (d *decoder) typeError(want string) error {
	k := d.dec.PeekKind()
	if k == jsontext.KindInvalid {
		_, err := d.dec.ReadToken()
		return err
	}
	_ = d.dec.SkipValue()
	return fmt.Errorf("expected %s, found %s", want, kindName(k))
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "invalid JSON"
}

func (d *decoder) beginObject() error {
	if d.kind() != '{' {
		return d.typeError("object")
	}
	_, err := d.dec.ReadToken()
	return err
}

func (d *decoder) endObject() error {
	_, err := d.dec.ReadToken()
	return err
}

func (d *decoder) beginArray() error {
	if d.kind() != '[' {
		return d.typeError("array")
	}
	_, err := d.dec.ReadToken()
	return err
}

func (d *decoder) endArray() error {
	_, err := d.dec.ReadToken()
	return err
}

// more reports whether the object or array being read has another member.
// At malformed input it answers true, so the next read reports the error.
func (d *decoder) more() bool {
	k := d.dec.PeekKind()
	return k != '}' && k != ']'
}

// name reads a member name. The bytes are valid until the next read.
func (d *decoder) name() ([]byte, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], nil
	}
	d.scratch, err = jsontext.AppendUnquote(d.scratch[:0], v)
	return d.scratch, err
}

func (d *decoder) string() (string, error) {
	if d.kind() != '"' {
		return "", d.typeError("string")
	}
	tok, err := d.dec.ReadToken()
	if err != nil {
		return "", err
	}
	return tok.String(), nil
}

// Limits on identifiers a peer sends, in bytes: a URI, and a member that
// holds an id (a turn's, a client's, ...). They are checked as the value is
// read, before anything else is done with it.
var (
	maxURIBytes atomic.Int64
	maxIDBytes  atomic.Int64
)

// DefaultMaxIdentifier is the default limit on a URI or an id, in bytes.
const DefaultMaxIdentifier = 2048

func init() {
	maxURIBytes.Store(DefaultMaxIdentifier)
	maxIDBytes.Store(DefaultMaxIdentifier)
}

// SetIdentifierLimits sets the longest URI and id a decoded value may
// hold, in bytes; 0 keeps a limit as it is.
func SetIdentifierLimits(uri, id int) {
	if uri > 0 {
		maxURIBytes.Store(int64(uri))
	}
	if id > 0 {
		maxIDBytes.Store(int64(id))
	}
}

// MaxURIBytes returns the longest URI a decoded value may hold.
func MaxURIBytes() int { return int(maxURIBytes.Load()) }

// uri reads a URI, refusing one longer than the limit.
func (d *decoder) uri() (string, error) {
	return d.limited("URI", maxURIBytes.Load())
}

// id reads an id, refusing one longer than the limit.
func (d *decoder) id() (string, error) {
	return d.limited("id", maxIDBytes.Load())
}

func (d *decoder) limited(what string, limit int64) (string, error) {
	s, err := d.string()
	if err == nil && int64(len(s)) > limit {
		return "", fmt.Errorf("a %s of %d bytes: at most %d are allowed", what, len(s), limit)
	}
	return s, err
}

// expect reads a string that must equal want.
func (d *decoder) expect(want string) error {
	s, err := d.string()
	if err != nil {
		return err
	}
	if s != want {
		return fmt.Errorf("must be %q, not %s", want, Quote(s))
	}
	return nil
}

func (d *decoder) bool() (bool, error) {
	if k := d.kind(); k != 't' && k != 'f' {
		return false, d.typeError("boolean")
	}
	tok, err := d.dec.ReadToken()
	if err != nil {
		return false, err
	}
	return tok.Bool(), nil
}

func (d *decoder) number() (jsontext.Value, error) {
	if d.kind() != '0' {
		return nil, d.typeError("number")
	}
	return d.dec.ReadValue()
}

func (d *decoder) float() (float64, error) {
	v, err := d.number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, fmt.Errorf("number %s is out of range", v)
	}
	return f, nil
}

// int reads an integer. Integers written with a fraction or exponent
// (3.0, 1e3), as JavaScript may write them, are accepted when exact.
func (d *decoder) int() (int64, error) {
	v, err := d.number()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("expected an integer, found %s", v)
	}
	return int64(f), nil
}

// roundedInt reads a number as an integer, rounding a fraction to the
// nearest: for the counts a peer may measure with a fractional clock.
func (d *decoder) roundedInt() (int64, error) {
	v, err := d.number()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("expected a number of at most 2^53, found %s", v)
	}
	return int64(math.Round(f)), nil
}

func decodeUint32[T ~uint32](d *decoder) (T, error) {
	n, err := d.int()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > math.MaxUint32 {
		return 0, fmt.Errorf("%d is out of range for a 32-bit flag set", n)
	}
	return T(n), nil
}

func decodeString[T ~string](d *decoder) (T, error) {
	s, err := d.string()
	return T(s), err
}

// raw reads any JSON value and keeps its text.
func (d *decoder) raw() (jsontext.Value, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	return v.Clone(), nil
}

// object reads an open object.
func (d *decoder) object() (Object, error) {
	if err := d.beginObject(); err != nil {
		return nil, err
	}
	o := Object{}
	for d.more() {
		name, err := d.name()
		if err != nil {
			return nil, err
		}
		if err := d.extra(&o, name); err != nil {
			return nil, err
		}
	}
	return o, d.endObject()
}

// extra keeps a member the type does not define.
func (d *decoder) extra(o *Object, name []byte) error {
	key := string(name)
	v, err := d.raw()
	if err != nil {
		return inField(key, err)
	}
	if *o == nil {
		*o = Object{}
	}
	(*o)[key] = v
	return nil
}

// null consumes a null, reporting whether there was one.
func (d *decoder) null() (bool, error) {
	if d.kind() != 'n' {
		return false, nil
	}
	_, err := d.dec.ReadToken()
	return true, err
}

func decodeStruct[T any, P interface {
	*T
	wireValue
}](d *decoder) (T, error) {
	var v T
	err := P(&v).decode(d)
	return v, err
}

// decodeOptional decodes a value that may be null or absent into a pointer.
func decodeOptional[T any](d *decoder, fn func(*decoder) (T, error)) (*T, error) {
	if null, err := d.null(); null || err != nil {
		return nil, err
	}
	v, err := fn(d)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// decodeNullable decodes a value whose zero value means absent (a slice, a
// map, an interface), reading null as that zero value.
func decodeNullable[T any](d *decoder, fn func(*decoder) (T, error)) (T, error) {
	var zero T
	if null, err := d.null(); null || err != nil {
		return zero, err
	}
	return fn(d)
}

func decodeArray[T any](d *decoder, fn func(*decoder) (T, error)) ([]T, error) {
	if err := d.beginArray(); err != nil {
		return nil, err
	}
	out := []T{}
	for i := 0; d.more(); i++ {
		v, err := fn(d)
		if err != nil {
			return nil, inIndex(i, err)
		}
		out = append(out, v)
	}
	return out, d.endArray()
}

func arrayOf[T any](fn func(*decoder) (T, error)) func(*decoder) ([]T, error) {
	return func(d *decoder) ([]T, error) { return decodeArray(d, fn) }
}

// variant reads an object whole and returns it with the string value of its
// discriminating member ("" when absent). raw is valid until the next read.
func (d *decoder) variant(disc string) (raw []byte, tag string, err error) {
	if d.kind() != '{' {
		return nil, "", d.typeError("object")
	}
	raw, err = d.dec.ReadValue()
	if err != nil {
		return nil, "", err
	}
	err = scan(raw, func(sub *decoder) error {
		if err := sub.beginObject(); err != nil {
			return err
		}
		for sub.more() {
			name, err := sub.name()
			if err != nil {
				return err
			}
			if string(name) == disc && sub.kind() == '"' {
				tag, err = sub.string()
				return err
			}
			if err := sub.dec.SkipValue(); err != nil {
				return err
			}
		}
		return nil
	})
	return raw, tag, err
}

// keySet is the member names of an object.
type keySet []string

func (k keySet) has(names ...string) bool {
	for _, n := range names {
		if !slices.Contains(k, n) {
			return false
		}
	}
	return true
}

// keyed reads an object whole and returns it with its member names, for
// unions whose variants are told apart by which members they have.
func (d *decoder) keyed() (raw []byte, keys keySet, err error) {
	if d.kind() != '{' {
		return nil, nil, d.typeError("object")
	}
	raw, err = d.dec.ReadValue()
	if err != nil {
		return nil, nil, err
	}
	err = scan(raw, func(sub *decoder) error {
		if err := sub.beginObject(); err != nil {
			return err
		}
		for sub.more() {
			name, err := sub.name()
			if err != nil {
				return err
			}
			keys = append(keys, string(name))
			if err := sub.dec.SkipValue(); err != nil {
				return err
			}
		}
		return nil
	})
	return raw, keys, err
}

// A DecodeError is a value that does not fit the protocol's types. Path
// names the place ("action.message.text", "turns[3].id").
type DecodeError struct {
	Path string
	Err  error
}

func (e *DecodeError) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// inField puts err inside the member name; nil stays nil.
func inField(name string, err error) error {
	if err == nil {
		return nil
	}
	var de *DecodeError
	if errors.As(err, &de) {
		if de.Path == "" || de.Path[0] == '[' {
			de.Path = name + de.Path
		} else {
			de.Path = name + "." + de.Path
		}
		return de
	}
	return &DecodeError{Path: name, Err: err}
}

func inIndex(i int, err error) error {
	var de *DecodeError
	if errors.As(err, &de) {
		if de.Path == "" || de.Path[0] == '[' {
			de.Path = "[" + strconv.Itoa(i) + "]" + de.Path
		} else {
			de.Path = "[" + strconv.Itoa(i) + "]." + de.Path
		}
		return de
	}
	return &DecodeError{Path: "[" + strconv.Itoa(i) + "]", Err: err}
}

func missing(name string) error {
	return &DecodeError{Path: name, Err: errors.New("missing required member")}
}
