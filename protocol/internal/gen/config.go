package main

import "strings"

// The decisions the schema cannot carry. Each entry is a place where the
// JSON Schema is silent or lossy (TypeScript has one number type; a few
// unions have no discriminator) and Go needs an answer.

// renames gives Go names to definitions and inline objects. Keys are
// definition names or "Definition.property" paths of inline objects.
var renames = map[string]string{
	"StateAction":                          "Action",
	"SessionSummaryChangedParams.changes":  "PartialSessionSummary",
	"SessionChatUpdatedAction.changes":     "PartialChatSummary",
	"Snapshot.state":                       "ChannelState",
	"ToolCallResult.error":                 "ToolError",
	"ResourceWatchState.includes":          "GlobList",
	"ResourceWatchChangedAction.changes":   "ResourceChangeList",
	"ToolDefinition.inputSchema":           "ToolSchema",
	"AhpMcpUiHostCapabilities.serverTools": "ListChangedCapability",
	"AhpMcpUiHostCapabilities.sampling":    "SamplingCapability",
}

// skipped definitions are not generated: either hand-written in the
// protocol package (errors.go) or not a type at all.
var skipped = map[string]bool{
	"AhpErrorDetailsMap":         true, // a TypeScript mapped type, not a wire shape
	"ProtocolNotification":       true, // params of different methods; the method discriminates
	"AhpErrorCode":               true, // hand-written in errors.go
	"JsonRpcErrorCode":           true, // hand-written in errors.go
	"ChatToolCallApprovedAction": true, // merged into ChatToolCallConfirmedAction
	"ChatToolCallDeniedAction":   true,
}

// manual definitions are hand-written in manual.go with encode and decode
// methods of the same shape the generated types have.
var manual = map[string]bool{
	"StringOrMarkdown": true,
	"ToolInput":        true,
}

// scalars are numeric definitions hand-written as named Go types.
var scalars = map[string]string{
	"SessionStatus": "uint32",
}

// rawDefs are definitions kept as raw JSON.
var rawDefs = map[string]bool{
	"JsonPrimitive": true,
}

// floats lists the number properties that may be fractional. Every other
// schema "number" is an integer on the wire (sequence numbers, counts,
// sizes, milliseconds since the epoch, line and column numbers).
var floats = map[string]bool{
	"ChatInputNumberQuestion.min":                true,
	"ChatInputNumberQuestion.max":                true,
	"ChatInputNumberQuestion.defaultValue":       true,
	"ChatInputNumberAnswerValue.value":           true,
	"ToolCallRiskAssessmentCompleteState.safety": true,
	"ProgressParams.progress":                    true,
	"ProgressParams.total":                       true,
}

// rounded lists the integer properties a peer may send with a fraction,
// such as a duration measured with a high-resolution clock: they are read
// rounded to the nearest integer, and written as integers, which is what
// the typed clients (Go, Rust, Swift, Kotlin) decode.
var rounded = map[string]bool{
	"ChatTurnCompleteAction.duration":  true,
	"ChatTurnCancelledAction.duration": true,
	"ChatErrorAction.duration":         true,
	"Turn.duration":                    true,
}

// appendable lists the text members that grow by appends as a turn
// streams (chat/delta, chat/reasoning): a reducer appends to them in
// place, so a reply streamed in n pieces costs O(n), not O(n^2).
var appendable = map[string]bool{
	"MarkdownResponsePart.content":  true,
	"ReasoningResponsePart.content": true,
}

// identifiers are the members, by name, that hold an id: they are read
// with the decoder's length limit for ids (URIs have their own), so a
// client's oversized id is refused as it is read, before anything is done
// with it.
var identifiers = map[string]bool{
	"id": true, "clientId": true, "turnId": true, "partId": true, "toolCallId": true,
	"requestId": true, "questionId": true, "queuedMessageId": true, "annotationId": true,
	"entryId": true, "operationId": true, "commandId": true, "sessionId": true,
}

// untyped gives a type to properties the schema leaves open.
var untyped = map[string]string{
	"ChatToolCallApprovedAction.approved": "boolean",
	"ChatToolCallDeniedAction.approved":   "boolean",
}

// merged unions are oneOfs whose variants share one action type string;
// they become one struct holding the fields of every variant.
var merged = map[string]bool{
	"ChatToolCallConfirmedAction": true,
}

// extraUnions are unions the schema names only in prose (a command whose
// result is one of several shapes).
var extraUnions = map[string][]string{
	"ReconnectResult": {"ReconnectReplayResult", "ReconnectSnapshotResult"},
}

// releasedIn corrects the registry's introduced-in versions where they
// are not the release an action shipped in. registry.ts dates these 0.9.0
// (and the canvas actions 0.10.0, a version never released), yet they are
// not in 0.9.0: the 1.0.0 release notes (upstream clients/dotnet
// CHANGELOG, 1.0.0) and schema-1.0/SOURCE.md list them as new in 1.0.0,
// and a client that negotiated 0.9.0 has no reducer for them.
var releasedIn = map[string]string{
	"session/chatsReordered":               "1.0.0",
	"session/mcpServerBackgroundRequested": "1.0.0",
	"chat/movableChanged":                  "1.0.0",
	"chat/isReadChanged":                   "1.0.0",
	"chat/isArchivedChanged":               "1.0.0",
	"chat/backgroundWorkSet":               "1.0.0",
	"chat/backgroundWorkRemoved":           "1.0.0",
	"chat/changesetsChanged":               "1.0.0",
	"chat/canvasesChanged":                 "1.0.0",
	"canvas/stateChanged":                  "1.0.0",
}

// initialisms are written in upper case in Go names.
var initialisms = map[string]string{
	"id": "ID", "uri": "URI", "url": "URL", "json": "JSON", "http": "HTTP",
	"api": "API", "tcp": "TCP", "ui": "UI", "mcp": "MCP", "ahp": "AHP",
	"otlp": "OTLP", "rpc": "RPC",
}

// stateRoots are the state definitions the others hang from. Abstract bases
// (…Base, …Fields) are state roots too: the schema repeats their members in
// each type that extends them, so nothing refers to them.
var stateRoots = map[string]bool{
	"Snapshot": true, "SessionSummary": true, "SessionMetadata": true,
	"ResourceChange": true, "ToolCallResult": true, "TelemetryCapabilities": true,
}

// actionRoots are the action unions and the envelope.
var actionRoots = map[string]bool{
	"StateAction": true, "ChatAction": true, "ActionEnvelope": true, "ToolCallActionBase": true,
}

// notificationRoots are the notification union and its params.
var notificationRoots = map[string]bool{
	"ProtocolNotification": true, "AuthRequiredParams": true, "SessionAddedParams": true,
	"SessionRemovedParams": true, "SessionSummaryChangedParams": true, "ProgressParams": true,
	"OtlpExportLogsParams": true, "OtlpExportTracesParams": true, "OtlpExportMetricsParams": true,
}

// rootOf names the Go file a definition is a root of, or "" when it is
// reached only through others.
func rootOf(name string, _ *node) string {
	switch {
	case stateRoots[name] || strings.HasSuffix(name, "Base") || strings.HasSuffix(name, "Fields"):
		return "state"
	case actionRoots[name]:
		return "actions"
	case notificationRoots[name]:
		return "notifications"
	case strings.HasSuffix(name, "Params") || strings.HasSuffix(name, "Result"):
		return "commands"
	case strings.HasSuffix(name, "ErrorCode") || strings.HasSuffix(name, "ErrorData") || name == "AhpErrorDetailsMap":
		return "errors"
	}
	return ""
}
