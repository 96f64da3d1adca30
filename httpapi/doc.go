// Package httpapi serves ahpd's HTTP API: the /v1 surface for scripts and
// CI jobs, JSON in and out, every error as
// {"error": {"code", "message", "field"?}} with the HTTP status that fits
// it, and an OpenAPI 3.1 document of itself at /v1/openapi.json.
//
// It owns turning HTTP requests into AHP and AHP back into JSON: the
// routes, the shapes of their bodies, the bounds on every size a client
// controls, the mapping of protocol errors to statuses, and Server-Sent
// Events streams of a channel's actions.
//
// It must not decide anything a session's grants decide. Each request is
// served by an AHP connection the host opens to itself (host.Connect) for
// the person whose token came with it, spoken through the project's
// client package: the host checks every grant and allowed root exactly as
// for a WebSocket client, and what it refuses is refused here. The
// package holds no state of its own between requests but the answers to
// POSTs sent with an Idempotency-Key (idempotency.go), bounded and kept
// for a day.
package httpapi
