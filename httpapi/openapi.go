package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The OpenAPI 3.1 document of the API, built from the route table and the
// descriptions below: a route without a description is a test failure,
// and so is a description of no route.

// op describes one route for the document.
type op struct {
	summary string
	body    string // the request body's schema, or ""
	status  int    // the success status
	result  string // the success body's schema, "" for none, "events" for a stream
	params  []string
}

var ops = map[string]op{
	"GET /v1/openapi.json":           {summary: "This document", status: 200, result: "Object"},
	"GET /v1/sessions":               {summary: "List sessions (archived ones with ?archived=true)", status: 200, result: "SessionList", params: []string{"limit", "cursor", "archived"}},
	"POST /v1/sessions":              {summary: "Create a session; input is its first message", body: "CreateSession", status: 201, result: "Session"},
	"GET /v1/sessions/{id}":          {summary: "A session with its active turn, queued turns, open questions and lastSeq; ?minSeq waits (30 s at most, then 504) until the host's serverSeq reached it", status: 200, result: "Session", params: []string{"minSeq"}},
	"PATCH /v1/sessions/{id}":        {summary: "Change the title, the archived mark, metadata (merged key by key; null removes a key)", body: "PatchSession", status: 200, result: "Session"},
	"DELETE /v1/sessions/{id}":       {summary: "Dispose of a session and its conversation", status: 204},
	"POST /v1/sessions/{id}/turns":   {summary: "Send a message: a turn starts, or is queued behind the one running", body: "SendTurn", status: 202, result: "TurnAccepted"},
	"POST /v1/sessions/{id}/cancel":  {summary: "Cancel the running turn", status: 202, result: "TurnAccepted"},
	"POST /v1/sessions/{id}/suspend": {summary: "Let the session's agents go; 409 session_busy while a turn runs with no question open, unless ifIdle", body: "Suspend", status: 200, result: "Residency"},
	"POST /v1/sessions/{id}/resume":  {summary: "Start a suspended session's agents again", status: 200, result: "Residency"},
	"GET /v1/sessions/{id}/events":   {summary: "Server-Sent Events: the session's and its chat's actions; ?after=SEQ or Last-Event-ID replays from there", status: 200, result: "events", params: []string{"after"}},
	"POST /v1/sessions/{id}/questions/{requestId}": {summary: "Answer a question the running turn asks (an input request of the session's questions): answer for its one question, answers by question id for several, or decline; 404 when it is not open (unknown, or answered already), 409 turn_ended when its turn has ended",
		body: "Answer", status: 200, result: "Answered"},
	"POST /v1/sessions/{id}/tool-calls/{toolCallId}": {summary: "Approve or deny a tool call waiting for approval, with one of the options it offers when it offers some; 404 when it is not waiting, 409 turn_ended when its turn has ended",
		body: "Confirm", status: 200, result: "Answered"},
	"GET /v1/automations":            {summary: "Your automations", status: 200, result: "AutomationList"},
	"POST /v1/automations":           {summary: "Create an automation (an AHP AutomationDefinition)", body: "CreateAutomation", status: 201, result: "Object"},
	"GET /v1/automations/events":     {summary: "Server-Sent Events: changes to your automations", status: 200, result: "events", params: []string{"after"}},
	"GET /v1/automations/{id}":       {summary: "One automation (an AHP AutomationEntry)", status: 200, result: "Object"},
	"DELETE /v1/automations/{id}":    {summary: "Remove an automation", status: 204},
	"GET /v1/automations/{id}/runs":  {summary: "An automation's recent runs; waitingFor lists what a running one's session waits on a person for", status: 200, result: "RunList"},
	"POST /v1/automations/{id}/runs": {summary: "Run an automation now; a retry with the same requestId starts no second run", body: "StartRun", status: 202, result: "RunStarted"},
	"GET /v1/automation-triggers":    {summary: "The event triggers the host offers, with their config schemas", status: 200, result: "TriggerList"},
	"GET /v1/runs/{id}":              {summary: "One run (an AHP AutomationRunState), with waitingFor", status: 200, result: "Run"},
	"POST /v1/runs/{id}/cancel":      {summary: "Cancel a run's turn", status: 202, result: "RunStarted"},
	"GET /v1/runs/{id}/events":       {summary: "Server-Sent Events: a run's lifecycle", status: 200, result: "events", params: []string{"after"}},
}

var paramDocs = map[string]map[string]any{
	"limit":    {"name": "limit", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 500}},
	"cursor":   {"name": "cursor", "in": "query", "schema": map[string]any{"type": "string", "maxLength": 1024}},
	"archived": {"name": "archived", "in": "query", "schema": map[string]any{"type": "boolean"}},
	"minSeq":   {"name": "minSeq", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 0}},
	"after":    {"name": "after", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 0}},
}

func str(max int) map[string]any {
	s := map[string]any{"type": "string"}
	if max > 0 {
		s["maxLength"] = max
	}
	return s
}

func obj(required []string, props map[string]any) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

func arrayOf(name string) map[string]any { return map[string]any{"type": "array", "items": ref(name)} }

var idPattern = map[string]any{"type": "string", "pattern": `^[A-Za-z0-9_-]{1,64}$`}

func metadataSchema(nullable bool) map[string]any {
	v := map[string]any{"type": "string", "maxLength": maxMetaValue}
	if nullable {
		v = map[string]any{"type": []string{"string", "null"}, "maxLength": maxMetaValue}
	}
	return map[string]any{"type": "object", "maxProperties": maxMetaKeys,
		"propertyNames": map[string]any{"minLength": 1, "maxLength": maxMetaKey}, "additionalProperties": v}
}

func schemas() map[string]any {
	turn := obj([]string{"id", "input"}, map[string]any{
		"id": str(0), "input": str(0), "state": str(0), "response": str(0), "error": str(0), "startedAt": str(0),
	})
	return map[string]any{
		"Object": map[string]any{"type": "object"},
		"Error": obj([]string{"error"}, map[string]any{"error": obj([]string{"code", "message"}, map[string]any{
			"code": str(0), "message": str(0), "field": str(0)})}),
		"Turn": turn,
		"Question": obj([]string{"id", "turnId", "kind", "text"}, map[string]any{
			"id": str(0), "turnId": str(0), "kind": map[string]any{"enum": []string{"input", "confirmation"}}, "text": str(0),
			"questions": arrayOf("InputQuestion"), "tool": str(0), "options": arrayOf("Option")}),
		"InputQuestion": obj([]string{"id", "kind", "message", "required"}, map[string]any{
			"id": str(0), "kind": map[string]any{"enum": []string{"text", "number", "integer", "boolean", "single-select", "multi-select"}},
			"title": str(0), "message": str(0), "required": map[string]any{"type": "boolean"}, "options": arrayOf("Option"),
			"freeform": map[string]any{"type": "boolean"}}),
		"Option": obj([]string{"id", "label"}, map[string]any{"id": str(0), "label": str(0),
			"kind": map[string]any{"enum": []string{"approve", "deny"}}}),
		"Answer": map[string]any{"type": "object", "additionalProperties": false,
			"oneOf": []any{
				map[string]any{"required": []string{"answer"}, "not": map[string]any{"anyOf": []any{map[string]any{"required": []string{"answers"}}, map[string]any{"required": []string{"decline"}}}}},
				map[string]any{"required": []string{"answers"}, "not": map[string]any{"anyOf": []any{map[string]any{"required": []string{"answer"}}, map[string]any{"required": []string{"decline"}}}}},
				map[string]any{"required": []string{"decline"}, "properties": map[string]any{"decline": map[string]any{"const": true}},
					"not": map[string]any{"anyOf": []any{map[string]any{"required": []string{"answer"}}, map[string]any{"required": []string{"answers"}}}}},
			},
			"description": `One of: answer (the request's one question), answers (by question id), decline: true. A text answers a text question; a number (or its text) a number one; true/false (or "yes"/"no") a boolean one; an option's id, label or number (from 1) a select one, a list of them a multi-select one.`,
			"properties": map[string]any{
				"answer":  answerValue,
				"answers": map[string]any{"type": "object", "additionalProperties": answerValue},
				"decline": map[string]any{"type": "boolean"},
			}},
		"Confirm": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"decision"}, "properties": map[string]any{
			"decision": map[string]any{"enum": []string{"approve", "deny"}},
			"option":   map[string]any{"type": "string", "description": "the id (or label) of one of the options the tool call offers, of the decision's kind"},
		}},
		"Answered": obj([]string{"id", "turnId", "lastSeq"}, map[string]any{"id": str(0), "turnId": str(0), "lastSeq": map[string]any{"type": "integer"}}),
		"Session": obj([]string{"id", "uri", "title", "provider", "status", "archived", "folders", "metadata", "activeTurn", "queuedTurns", "questions", "lastSeq"}, map[string]any{
			"id": str(0), "uri": str(0), "title": str(0), "provider": str(0),
			"status":   map[string]any{"enum": []string{"idle", "running", "waiting", "error", "suspended"}},
			"archived": map[string]any{"type": "boolean"}, "folders": map[string]any{"type": "array", "items": str(0)},
			"createdAt": str(0), "modifiedAt": str(0), "metadata": metadataSchema(false),
			"activeTurn":  map[string]any{"oneOf": []any{ref("Turn"), map[string]any{"type": "null"}}},
			"queuedTurns": arrayOf("Turn"), "questions": arrayOf("Question"), "turns": arrayOf("Turn"),
			"lastSeq": map[string]any{"type": "integer"},
		}),
		"SessionList": obj([]string{"sessions"}, map[string]any{"sessions": arrayOf("Session"), "nextCursor": str(0)}),
		"CreateSession": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
			"id": idPattern, "input": str(maxInput), "title": str(maxTitle), "folder": str(4096), "provider": str(64),
			"worktree": map[string]any{"type": "boolean", "description": `config.isolation "worktree"`},
			"config": map[string]any{"type": "object", "description": "The session's config (resolveSessionConfig lists a provider's keys), taken as given or refused: " +
				"an unknown key is 400 with field config, a value its key does not take 400 with field config.KEY"},
			"metadata":     metadataSchema(true),
			"permissions":  ref("Permissions"),
			"inputTimeout": inputTimeoutSchema,
		}},
		"Permissions": map[string]any{"type": "object", "additionalProperties": false,
			"description": "config.permissions: what the agent may do without a person confirming it (docs/PERMISSIONS.md). Not with config.permissions.",
			"properties": map[string]any{
				"mode":  map[string]any{"enum": []string{"ask", "acceptEdits", "bypass"}, "default": "ask"},
				"allow": rulesSchema("Calls that run without asking"),
				"deny":  rulesSchema("Calls refused without asking, in every mode"),
			}},
		"PatchSession":     obj(nil, map[string]any{"title": str(maxTitle), "archived": map[string]any{"type": "boolean"}, "metadata": metadataSchema(true)}),
		"SendTurn":         obj([]string{"input"}, map[string]any{"input": str(maxInput), "id": idPattern}),
		"TurnAccepted":     obj([]string{"turnId"}, map[string]any{"turnId": str(0), "queued": map[string]any{"type": "boolean"}, "lastSeq": map[string]any{"type": "integer"}}),
		"Suspend":          obj(nil, map[string]any{"ifIdle": map[string]any{"type": "boolean"}}),
		"Residency":        obj([]string{"id", "residency"}, map[string]any{"id": str(0), "residency": map[string]any{"enum": []string{"active", "suspended"}}}),
		"AutomationList":   obj([]string{"automations"}, map[string]any{"automations": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}}),
		"CreateAutomation": obj([]string{"definition"}, map[string]any{"id": idPattern, "definition": definitionSchema}),
		"RunList":          obj([]string{"runs"}, map[string]any{"runs": arrayOf("Run")}),
		"Run": map[string]any{"type": "object", "required": []string{"waitingFor"}, "description": "An AHP AutomationRunSummary (or, read alone, AutomationRunState), with waitingFor",
			"properties": map[string]any{"waitingFor": arrayOf("Waiting")}},
		"Waiting": obj([]string{"session", "id", "kind", "text"}, map[string]any{"session": str(0), "id": str(0),
			"kind": map[string]any{"enum": []string{"input", "confirmation"}}, "text": str(0)}),
		"StartRun":    obj(nil, map[string]any{"requestId": idPattern}),
		"RunStarted":  obj([]string{"id"}, map[string]any{"id": str(0), "uri": str(0)}),
		"TriggerList": obj([]string{"triggers"}, map[string]any{"triggers": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}}),
	}
}

// rulesSchema is the schema of a permissions rule list: TOOL or
// TOOL(GLOB), TOOL a kind, a tool's name or *.
func rulesSchema(desc string) map[string]any {
	return map[string]any{"type": "array", "maxItems": 256, "description": desc + `: rules such as "execute", "Bash", "edit(src/**)"`,
		"items": map[string]any{"type": "string", "maxLength": 512, "pattern": `^\s*(\*|[A-Za-z0-9_.:-]+)(\([^\x00-\x1f\x7f]+\))?\s*$`}}
}

// inputTimeoutSchema is config.inputTimeout's: a duration, or seconds.
var inputTimeoutSchema = map[string]any{
	"description": `config.inputTimeout: how long a turn waits for a person before it is stopped, 1s to 720h: a duration ("30m", "1h30m") or a number of seconds; 0 waits for ever. Not with config.inputTimeout.`,
	"anyOf": []any{
		map[string]any{"type": "string", "pattern": `^(0?|([0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns))+)$`},
		map[string]any{"type": "number", "minimum": 0, "maximum": 2592000},
	},
}

// definitionSchema is an automation's definition: AHP's, which the
// document does not repeat.
var definitionSchema = map[string]any{"type": "object",
	"description": "An AHP AutomationDefinition (docs/AUTOMATIONS.md): a member AHP does not define, anywhere in it but _meta and a config, is 400 naming it"}

// answerValue is the schema of one question's answer.
var answerValue = map[string]any{"oneOf": []any{
	map[string]any{"type": "string"}, map[string]any{"type": "number"}, map[string]any{"type": "boolean"},
	map[string]any{"type": "array", "items": map[string]any{"type": []string{"string", "number", "boolean"}}},
}}

var errorStatuses = map[string]string{
	"400": "Bad input: error.field names the member at fault",
	"401": "No valid token",
	"403": "forbidden: the token's person may not do this (a grant, an allowed root); cross_origin: a page of another origin sent it, to a host that asks no token",
	"404": "No such session, automation, run, question or tool call waiting (for this person)",
	"409": "session_busy: a turn is running; already_exists; turn_ended: the question's turn has ended",
	"413": "The body is larger than 1 MiB",
}

// document builds the OpenAPI document.
func document() map[string]any {
	paths := map[string]any{}
	for key, o := range ops {
		method, path, _ := strings.Cut(key, " ")
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		responses := map[string]any{}
		for code, desc := range errorStatuses {
			responses[code] = map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}
		}
		ok := map[string]any{"description": o.summary}
		switch o.result {
		case "":
		case "events":
			ok["content"] = map[string]any{"text/event-stream": map[string]any{"schema": str(0)}}
			responses["429"] = map[string]any{"description": "too_many_streams: the person holds as many event streams open as one may; Retry-After says when to try again",
				"content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}
		default:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref(o.result)}}
		}
		responses[strconv.Itoa(o.status)] = ok
		operation := map[string]any{"summary": o.summary, "responses": responses, "operationId": operationID(method, path)}
		var params []any
		for _, name := range pathParams(path) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": str(256)})
		}
		for _, p := range o.params {
			params = append(params, paramDocs[p])
		}
		if method == "POST" {
			params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "schema": str(maxKeyLen),
				"description": "The request is done once under the key: sent again with the same request it is answered as the first was (Idempotent-Replayed: true), with another request 422, while the first is answered 409. Kept for a day, in memory."})
		}
		if params != nil {
			operation["parameters"] = params
		}
		if o.body != "" {
			responses["415"] = map[string]any{"description": "unsupported_media_type: the body is sent as another type than application/json",
				"content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}
			operation["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": ref(o.body)}}}
		}
		item[strings.ToLower(method)] = operation
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "ahpd HTTP API", "version": "1",
			"description": "Sessions, turns and automations of an ahpd, over HTTP. Every request acts as the person whose token it carries."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         schemas(),
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
	}
}

// pathParams are the names of a path's {parameters}, in order.
func pathParams(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			out = append(out, strings.TrimSuffix(name, "}"))
		}
	}
	return out
}

// operationID names an operation: "GET /v1/sessions/{id}/events" is
// get_sessions_id_events.
func operationID(method, path string) string {
	r := strings.NewReplacer("/v1/", "", "/", "_", "{", "", "}", "", "-", "_", ".", "_")
	return strings.ToLower(method) + "_" + r.Replace(path)
}

var docOnce = sync.OnceValue(document)

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, docOnce())
}
