package protocol

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrorCode is a JSON-RPC error code: the standard ones and AHP's own.
type ErrorCode int64

// The standard JSON-RPC 2.0 codes.
const (
	CodeParseError     ErrorCode = -32700
	CodeInvalidRequest ErrorCode = -32600
	CodeMethodNotFound ErrorCode = -32601
	CodeInvalidParams  ErrorCode = -32602
	CodeInternalError  ErrorCode = -32603
)

// The AHP codes. Conflict is defined by the protocol's TypeScript source
// though the 0.8 schema's enum stops at -32010.
const (
	CodeSessionNotFound            ErrorCode = -32001
	CodeProviderNotFound           ErrorCode = -32002
	CodeSessionAlreadyExists       ErrorCode = -32003
	CodeTurnInProgress             ErrorCode = -32004
	CodeUnsupportedProtocolVersion ErrorCode = -32005
	CodeContentNotFound            ErrorCode = -32006
	CodeAuthRequired               ErrorCode = -32007
	CodeNotFound                   ErrorCode = -32008
	CodePermissionDenied           ErrorCode = -32009
	CodeAlreadyExists              ErrorCode = -32010
	CodeConflict                   ErrorCode = -32011
)

// Error is an error a command answers with: a code, a message a person can
// act on, and for some codes data of a shape the protocol defines
// (UnsupportedProtocolVersionErrorData, AuthRequiredErrorData,
// PermissionDeniedErrorData).
type Error struct {
	Code    ErrorCode
	Message string
	Data    any
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// Errorf returns an *Error with a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// quoteLimit is how much of a client's string an error message quotes.
const quoteLimit = 64

// Quote returns s quoted for a message a person reads. A long s is cut to
// its first bytes (on a character boundary) followed by how much was left
// out, so that an error never carries a large client string back or into
// a log.
func Quote(s string) string {
	if len(s) <= quoteLimit {
		return strconv.Quote(s)
	}
	cut := quoteLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}
