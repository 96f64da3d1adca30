package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// apiError is an error as the API answers it.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

// badRequest is a 400 naming the field at fault.
func badRequest(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_request", Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, map[string]any{"error": e})
}

// fail answers err as the API's error for it.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := toAPIError(err)
	if e.Status >= 500 {
		a.log.Warn("an HTTP API request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, e)
}

// toAPIError maps an error from the host (a JSON-RPC error, a refused
// action), from reading the request, or from the API itself to a status
// and a code.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
			Message: fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit)}
	}
	var rej *client.RejectedError
	if errors.As(err, &rej) {
		return refusal(rej.Reason)
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		return rpcError(ce)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{Status: http.StatusGatewayTimeout, Code: "timeout", Message: "the host did not answer in time"}
	case errors.Is(err, context.Canceled), errors.Is(err, client.ErrDisconnected), errors.Is(err, client.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the host is shutting down or closed the connection"}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "the request failed inside ahpd; its log says why"}
}

// fieldOf finds the member a host's "invalid params" message names:
// "invalid params for createSession: workingDirectories[0]: ...", and
// the config key after it: "config.permissions: ...".
var fieldOf = regexp.MustCompile(`invalid params for [\w/]+: ([A-Za-z_][\w]*)(?:\.([^:\s]{1,64}):)?`)

// protocolFields names the API's fields for the protocol's members.
var protocolFields = map[string]string{
	"channel":            "id",
	"workingDirectories": "folder",
	"provider":           "provider",
	"config":             "config",
	"automation":         "id",
	"requestId":          "requestId",
}

func rpcError(e *client.Error) *apiError {
	out := &apiError{Message: e.Message}
	switch e.Code {
	case protocol.CodeInvalidParams, protocol.CodeInvalidRequest, protocol.CodeParseError:
		out.Status, out.Code = http.StatusBadRequest, "invalid_request"
		if m := fieldOf.FindStringSubmatch(e.Message); m != nil {
			out.Field = protocolFields[m[1]]
			if out.Field == "" {
				out.Field = m[1]
			}
			// A config key's refusal names the key: config.isolation,
			// or the member the request takes it as (permissions).
			if m[1] == "config" && m[2] != "" {
				out.Field = "config." + m[2]
				if member, ok := configMembers[m[2]]; ok {
					out.Field = member
				}
			}
		}
	case protocol.CodeProviderNotFound:
		out.Status, out.Code, out.Field = http.StatusBadRequest, "invalid_request", "provider"
	case protocol.CodeSessionNotFound, protocol.CodeNotFound, protocol.CodeContentNotFound:
		out.Status, out.Code = http.StatusNotFound, "not_found"
	case protocol.CodeSessionAlreadyExists, protocol.CodeAlreadyExists:
		out.Status, out.Code = http.StatusConflict, "already_exists"
	case protocol.CodeTurnInProgress:
		out.Status, out.Code = http.StatusConflict, "session_busy"
	case protocol.CodeConflict:
		out.Status, out.Code = http.StatusConflict, "conflict"
	case protocol.CodePermissionDenied:
		out.Status, out.Code = http.StatusForbidden, "forbidden"
	case protocol.CodeAuthRequired:
		out.Status, out.Code = http.StatusServiceUnavailable, "agent_auth_required"
	case protocol.CodeMethodNotFound:
		out.Status, out.Code = http.StatusNotImplemented, "not_implemented"
	default:
		out.Status, out.Code = http.StatusBadGateway, "host_error"
	}
	return out
}

// noAgent is a host's refusal of a session that names no provider: it
// has no agent to run it on.
func noAgent(err error) *apiError {
	msg := err.Error()
	var ce *client.Error
	if errors.As(err, &ce) {
		msg = ce.Message
	}
	return &apiError{Status: http.StatusBadRequest, Code: "no_agent", Field: "provider",
		Message: msg + ` ("provider": "script" runs the built-in script backend)`}
}

// refusal maps the reason the host gave for refusing an action. A
// refused action carries no code, only its reason; the grants and the
// allowed roots word theirs so they can be told apart.
func refusal(reason string) *apiError {
	e := &apiError{Message: reason}
	switch {
	case strings.Contains(reason, " may not "), strings.Contains(reason, "allowed roots"):
		e.Status, e.Code = http.StatusForbidden, "forbidden"
	case strings.Contains(reason, "already running"), strings.Contains(reason, "in progress"):
		e.Status, e.Code = http.StatusConflict, "session_busy"
	default:
		e.Status, e.Code = http.StatusBadRequest, "invalid_request"
	}
	return e
}
