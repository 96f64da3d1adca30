package main

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
	"FileEdit.before":                      "FileEditSide",
	"FileEdit.diff":                        "DiffStat",
	"ResourceWatchState.includes":          "GlobList",
	"ChatToolCallReadyAction.edits":        "FileEditList",
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
	"ChatTurnCompleteAction.duration":            true,
	"ChatTurnCancelledAction.duration":           true,
	"ChatErrorAction.duration":                   true,
	"Turn.duration":                              true,
	"ProgressParams.progress":                    true,
	"ProgressParams.total":                       true,
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

// initialisms are written in upper case in Go names.
var initialisms = map[string]string{
	"id": "ID", "uri": "URI", "url": "URL", "json": "JSON", "http": "HTTP",
	"api": "API", "tcp": "TCP", "ui": "UI", "mcp": "MCP", "ahp": "AHP",
	"otlp": "OTLP", "rpc": "RPC",
}
