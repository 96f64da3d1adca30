package grants

import (
	"slices"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// The protocol surface. A method added here (or to the host) without a row
// in the command table fails TestCommandTable.
var wantCommands = []string{
	"initialize", "ping", "reconnect", "subscribe", "unsubscribe",
	"listSessions", "createSession", "disposeSession",
	"createChat", "disposeChat", "fetchTurns", "moveChat",
	"resolveSessionConfig", "sessionConfigCompletions", "dispatchAction",
	"ahpd/sessionStatus", "ahpd/suspendSession", "ahpd/resumeSession", "ahpd/setSessionMetadata", "ahpd/sessionEvents", "ahpd/replaySession",
	"ahpd/sessionCheckpoints", "ahpd/sessionDiff", "ahpd/sessionEventCounts", "ahpd/webhookLog",
	"listAutomationTriggerDefinitions", "fetchAutomationRuns", "runAutomation",
}

// The action types a client may dispatch.
var wantActions = []string{
	"root/configChanged",
	"session/titleChanged",
	"session/activeClientSet", "session/activeClientRemoved",
	"session/workingDirectorySet", "session/workingDirectoryRemoved", "session/workingDirectoryReplaced",
	"session/customizationToggled",
	"session/mcpServerStartRequested", "session/mcpServerStopRequested", "session/mcpServerBackgroundRequested",
	"session/isReadChanged", "session/isArchivedChanged",
	"session/configChanged",
	"chat/turnStarted", "chat/turnResume",
	"chat/toolCallConfirmed", "chat/toolCallComplete",
	"chat/toolCallResultConfirmed", "chat/toolCallContentChanged",
	"chat/turnCancelled",
	"chat/workingDirectorySet", "chat/workingDirectoryRemoved",
	"chat/pendingMessageSet", "chat/pendingMessageRemoved", "chat/queuedMessagesReordered",
	"chat/draftChanged",
	"chat/inputAnswerChanged", "chat/inputCompleted",
	"chat/truncated",
	"chat/isReadChanged", "chat/isArchivedChanged",
	"changeset/filesReviewChanged",
	"annotations/set", "annotations/updated", "annotations/removed",
	"annotations/entrySet", "annotations/entryRemoved",
	"terminal/input", "terminal/resized", "terminal/claimed",
	"terminal/titleChanged", "terminal/cleared",
	"automation/createRequested", "automation/updateRequested", "automation/removed",
	"automationRun/cancelRequested",
}

var wantOperations = []Operation{
	"session:list", "session:state", "session:create", "session:dispose",
	"session:rename", "session:configure", "session:folders", "session:mark",
	"session:worktree", "session:artifacts", "session:share",
	"chat:turns", "chat:create", "chat:dispose", "chat:send", "chat:cancel",
	"chat:answer", "chat:tool", "chat:draft", "chat:truncate", "chat:move",
}

func TestOperations(t *testing.T) {
	if got, want := Operations(), slices.Sorted(slices.Values(wantOperations)); !slices.Equal(got, want) {
		t.Errorf("Operations() = %v, want %v", got, want)
	}
	read := []Operation{SessionList, SessionState, ChatTurns}
	for _, op := range wantOperations {
		want := GroupWrite
		if slices.Contains(read, op) {
			want = GroupRead
		}
		if got := op.Group(); got != want {
			t.Errorf("%s.Group() = %q, want %q", op, got, want)
		}
	}
	for _, op := range []Operation{None, HostConfigure, "", "session:everything"} {
		if g := op.Group(); g != "" {
			t.Errorf("%q.Group() = %q, want none", op, g)
		}
	}
}

func TestCommandTable(t *testing.T) {
	if got, want := Commands(), slices.Sorted(slices.Values(wantCommands)); !slices.Equal(got, want) {
		t.Errorf("Commands() = %v\nwant %v", got, want)
	}
	for _, m := range wantCommands {
		// Every command resolves, given what it needs.
		detail := map[string]string{"subscribe": "session", "dispatchAction": "chat/turnStarted"}[m]
		op, ok := ForCommand(m, detail)
		if !ok || !op.known() {
			t.Errorf("ForCommand(%q, %q) = %q, %v: want a known operation", m, detail, op, ok)
		}
	}
	tests := []struct {
		method, detail string
		want           Operation
		ok             bool
	}{
		{"initialize", "", None, true},
		{"ping", "", None, true},
		{"reconnect", "", None, true},
		{"unsubscribe", "", None, true},
		{"subscribe", "root", SessionList, true},
		{"subscribe", "session", SessionState, true},
		{"subscribe", "chat", ChatTurns, true},
		{"subscribe", "terminal", SessionState, true},
		{"subscribe", "", "", false},
		{"subscribe", "unknown", "", false},
		{"listSessions", "", SessionList, true},
		{"createSession", "", SessionCreate, true},
		{"disposeSession", "", SessionDispose, true},
		{"createChat", "", ChatCreate, true},
		{"disposeChat", "", ChatDispose, true},
		{"fetchTurns", "", ChatTurns, true},
		{"moveChat", "", ChatMove, true},
		{"resolveSessionConfig", "", SessionCreate, true},
		{"sessionConfigCompletions", "", SessionCreate, true},
		{"dispatchAction", "session/titleChanged", SessionRename, true},
		{"dispatchAction", "root/configChanged", HostConfigure, true},
		{"dispatchAction", "chat/turnComplete", "", false}, // the host's, not a client's
		{"dispatchAction", "", "", false},
		{"ahpd/sessionStatus", "", SessionState, true},
		{"ahpd/suspendSession", "", SessionConfigure, true},
		{"ahpd/resumeSession", "", SessionConfigure, true},
		{"ahpd/setSessionMetadata", "", SessionRename, true},
		{"ahpd/webhookLog", "", HostConfigure, true},
		{"shutdown", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		op, ok := ForCommand(tt.method, tt.detail)
		if op != tt.want || ok != tt.ok {
			t.Errorf("ForCommand(%q, %q) = %q, %v; want %q, %v", tt.method, tt.detail, op, ok, tt.want, tt.ok)
		}
	}
}

func TestActionTable(t *testing.T) {
	if got, want := Actions(), slices.Sorted(slices.Values(wantActions)); !slices.Equal(got, want) {
		t.Errorf("Actions() = %v\nwant %v", got, want)
	}
	for _, a := range wantActions {
		op, ok := ForAction(a)
		if !ok || !op.known() || op == None {
			t.Errorf("ForAction(%q) = %q, %v: want a grant", a, op, ok)
		}
		// The table and the protocol agree on what a client may send.
		if !protocol.ActionType(a).ClientDispatchable() {
			t.Errorf("%q is in the action table but the protocol does not let a client dispatch it", a)
		}
	}
	want := map[string]Operation{
		"root/configChanged":              HostConfigure,
		"session/titleChanged":            SessionRename,
		"session/activeClientSet":         SessionConfigure,
		"session/workingDirectoryRemoved": SessionFolders,
		"session/mcpServerStopRequested":  SessionConfigure,
		"session/isArchivedChanged":       SessionMark,
		"session/configChanged":           SessionConfigure,
		"chat/turnStarted":                ChatSend,
		"chat/toolCallContentChanged":     ChatTool,
		"chat/turnCancelled":              ChatCancel,
		"chat/workingDirectorySet":        SessionFolders,
		"chat/queuedMessagesReordered":    ChatSend,
		"chat/draftChanged":               ChatDraft,
		"chat/inputCompleted":             ChatAnswer,
		"chat/truncated":                  ChatTruncate,
		"changeset/filesReviewChanged":    SessionArtifacts,
		"annotations/entryRemoved":        SessionArtifacts,
		"terminal/input":                  ChatSend,
		"terminal/cleared":                ChatSend,
	}
	for a, w := range want {
		if got, _ := ForAction(a); got != w {
			t.Errorf("ForAction(%q) = %q, want %q", a, got, w)
		}
	}
	for _, a := range []string{"", "chat/turnComplete", "session/ready", "root/agentsChanged", "terminal/exited"} {
		if op, ok := ForAction(a); ok {
			t.Errorf("ForAction(%q) = %q, true: want refused", a, op)
		}
	}
}
