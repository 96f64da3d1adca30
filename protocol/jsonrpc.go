package protocol

import (
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// RPCMessage is one JSON-RPC 2.0 message as AHP frames it: a request (ID and
// Method), a notification (Method, no ID), or a response (ID with Result or
// Error). ahpd's servers speak JSON-RPC through jrpc2; this type is for
// tools and tests that read or write frames directly.
type RPCMessage struct {
	ID     jsontext.Value // nil for a notification
	Method string
	Params jsontext.Value
	Result jsontext.Value
	Error  *RPCError
}

// RPCError is the error member of a JSON-RPC response.
type RPCError struct {
	Code    int64
	Message string
	Data    jsontext.Value
}

// MarshalJSON encodes m as a JSON-RPC 2.0 message.
func (m RPCMessage) MarshalJSON() ([]byte, error) { return marshal(&m) }

// UnmarshalJSON decodes a JSON-RPC 2.0 message into m.
func (m *RPCMessage) UnmarshalJSON(b []byte) error { return unmarshal(b, m) }

func (m *RPCMessage) encode(w *writer) {
	w.beginObject()
	w.key(`"jsonrpc":`)
	w.literal(`"2.0"`)
	if m.ID != nil {
		w.key(`"id":`)
		w.raw(m.ID)
	}
	if m.Method != "" {
		w.key(`"method":`)
		w.string(m.Method)
	}
	if m.Params != nil {
		w.key(`"params":`)
		w.raw(m.Params)
	}
	if m.Result != nil {
		w.key(`"result":`)
		w.raw(m.Result)
	}
	if m.Error != nil {
		w.key(`"error":`)
		w.beginObject()
		w.key(`"code":`)
		w.int(m.Error.Code)
		w.key(`"message":`)
		w.string(m.Error.Message)
		if m.Error.Data != nil {
			w.key(`"data":`)
			w.raw(m.Error.Data)
		}
		w.endObject()
	}
	w.endObject()
}

func (m *RPCMessage) decode(d *decoder) error {
	*m = RPCMessage{}
	if err := d.beginObject(); err != nil {
		return err
	}
	version := false
	for d.more() {
		name, err := d.name()
		if err != nil {
			return err
		}
		switch string(name) {
		case "jsonrpc":
			version = true
			err = inField("jsonrpc", d.expect("2.0"))
		case "id":
			m.ID, err = d.raw()
		case "method":
			m.Method, err = d.string()
			err = inField("method", err)
		case "params":
			m.Params, err = d.raw()
		case "result":
			m.Result, err = d.raw()
		case "error":
			m.Error = new(RPCError)
			err = inField("error", m.Error.decode(d))
		default:
			err = d.dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	if err := d.endObject(); err != nil {
		return err
	}
	if !version {
		return missing("jsonrpc")
	}
	if m.Method == "" && m.ID == nil {
		return errors.New("a JSON-RPC message needs a method or an id")
	}
	return nil
}

func (e *RPCError) decode(d *decoder) error {
	if err := d.beginObject(); err != nil {
		return err
	}
	for d.more() {
		name, err := d.name()
		if err != nil {
			return err
		}
		switch string(name) {
		case "code":
			e.Code, err = d.int()
			err = inField("code", err)
		case "message":
			e.Message, err = d.string()
			err = inField("message", err)
		case "data":
			e.Data, err = d.raw()
		default:
			err = d.dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	return d.endObject()
}
