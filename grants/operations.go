package grants

import (
	"maps"
	"slices"
)

// Operation is one thing that may be done to a session or a chat in it,
// the unit a role grants. Every command and every client-dispatchable
// action maps to exactly one (see ForCommand and ForAction).
//
// Besides the grants proper there are two markers: None, for commands any
// authenticated principal may send, and HostConfigure, for changes to the
// host's own configuration, which only an administrator (or root) makes.
// The zero Operation is no operation at all and Check refuses it, so a
// handler that forgot to look its operation up fails closed.
type Operation string

// The session's operations.
const (
	SessionList      Operation = "session:list"
	SessionState     Operation = "session:state"
	SessionCreate    Operation = "session:create"
	SessionDispose   Operation = "session:dispose"
	SessionRename    Operation = "session:rename"
	SessionConfigure Operation = "session:configure"
	SessionFolders   Operation = "session:folders"
	SessionMark      Operation = "session:mark"
	SessionWorktree  Operation = "session:worktree"
	SessionArtifacts Operation = "session:artifacts"
	// SessionShare is changing who a session is shared with (its
	// sharing): its owner's or an administrator's, like dispose.
	SessionShare Operation = "session:share"
)

// The chat's operations. A chat lives in a session, so each belongs to one
// of the session's groups.
const (
	ChatTurns    Operation = "chat:turns"
	ChatCreate   Operation = "chat:create"
	ChatDispose  Operation = "chat:dispose"
	ChatSend     Operation = "chat:send"
	ChatCancel   Operation = "chat:cancel"
	ChatAnswer   Operation = "chat:answer"
	ChatTool     Operation = "chat:tool"
	ChatDraft    Operation = "chat:draft"
	ChatTruncate Operation = "chat:truncate"
	ChatMove     Operation = "chat:move"
)

// The markers that are not grants.
const (
	// None is the operation of a command that touches no session:
	// initialize, ping, reconnect and unsubscribe. Every authenticated
	// principal may send them.
	None Operation = "none"
	// HostConfigure is changing the host's own configuration
	// (root/configChanged). It is in neither group: admin holds it,
	// member and guest do not.
	HostConfigure Operation = "host:configure"
)

// Group is a set of operations a role is granted together.
type Group string

// The groups. Read sees the catalogue, a session's state and a chat's
// turns; write is everything else done to a session or its chats.
const (
	GroupRead  Group = "session:read"
	GroupWrite Group = "session:write"
)

var groups = map[Operation]Group{
	SessionList:  GroupRead,
	SessionState: GroupRead,
	ChatTurns:    GroupRead,

	SessionCreate:    GroupWrite,
	SessionDispose:   GroupWrite,
	SessionRename:    GroupWrite,
	SessionConfigure: GroupWrite,
	SessionFolders:   GroupWrite,
	SessionMark:      GroupWrite,
	SessionWorktree:  GroupWrite,
	SessionArtifacts: GroupWrite,
	SessionShare:     GroupWrite,
	ChatCreate:       GroupWrite,
	ChatDispose:      GroupWrite,
	ChatSend:         GroupWrite,
	ChatCancel:       GroupWrite,
	ChatAnswer:       GroupWrite,
	ChatTool:         GroupWrite,
	ChatDraft:        GroupWrite,
	ChatTruncate:     GroupWrite,
	ChatMove:         GroupWrite,
}

// Operations returns every grantable operation, sorted. The markers None
// and HostConfigure are not among them.
func Operations() []Operation { return slices.Sorted(maps.Keys(groups)) }

// Group returns the group op belongs to, or "" for None, HostConfigure and
// anything that is not an operation.
func (op Operation) Group() Group { return groups[op] }

// known reports whether op is a grant or one of the markers.
func (op Operation) known() bool {
	return groups[op] != "" || op == None || op == HostConfigure
}

// commandOp is one row of the command table: a fixed operation, or a
// function of the command's detail for the commands whose operation
// depends on what they name.
type commandOp struct {
	op Operation
	by func(detail string) (Operation, bool)
}

// commands is the operation table of the protocol surface. A command
// missing here is refused by the host.
//
// ahpd/suspendSession and ahpd/resumeSession are session:configure: they
// change how the host runs the session (whether its agents are resident),
// not what is recorded about it, and neither reads nor marks anything.
// ahpd/setSessionMetadata is session:rename: like the title, it is what
// people call and label the session by.
var commands = map[string]commandOp{
	"initialize":               {op: None},
	"ping":                     {op: None},
	"reconnect":                {op: None},
	"unsubscribe":              {op: None},
	"subscribe":                {by: forChannel},
	"dispatchAction":           {by: ForAction},
	"listSessions":             {op: SessionList},
	"createSession":            {op: SessionCreate},
	"disposeSession":           {op: SessionDispose},
	"createChat":               {op: ChatCreate},
	"disposeChat":              {op: ChatDispose},
	"fetchTurns":               {op: ChatTurns},
	"moveChat":                 {op: ChatMove},
	"resolveSessionConfig":     {op: SessionCreate},
	"sessionConfigCompletions": {op: SessionCreate},
	"ahpd/sessionStatus":       {op: SessionState},
	"ahpd/suspendSession":      {op: SessionConfigure},
	"ahpd/resumeSession":       {op: SessionConfigure},
	"ahpd/setSessionMetadata":  {op: SessionRename},
	"ahpd/sessionEvents":       {op: SessionState},
	"ahpd/replaySession":       {op: SessionState},
	"ahpd/sessionCheckpoints":  {op: SessionState},
	"ahpd/sessionDiff":         {op: SessionState},
	"ahpd/sessionEventCounts":  {op: SessionList},
	// ahpd/webhookLog shows what became of the events of every user's
	// sessions: the host's, so only an administrator (or root) reads it.
	"ahpd/webhookLog": {op: HostConfigure},

	// Automations: seeing them is a listing; running one sends its message
	// as its owner, so it is chat:send.
	"listAutomationTriggerDefinitions": {op: SessionList},
	"fetchAutomationRuns":              {op: SessionList},
	"runAutomation":                    {op: ChatSend},
}

// forChannel is the operation of subscribing to a channel of the given
// kind ("root", "session", "chat" or "terminal"). The root channel is the
// catalogue's neighbourhood (agents, active sessions), so seeing it is
// session:list; a terminal belongs to a session and watching it is reading
// that session's state.
func forChannel(kind string) (Operation, bool) {
	switch kind {
	case "root":
		return SessionList, true
	case "session", "terminal":
		return SessionState, true
	case "chat":
		return ChatTurns, true
	}
	return "", false
}

// ForCommand returns the operation a command needs. detail says what the
// command names where that decides it: for subscribe it is the channel's
// kind ("root", "session", "chat", "terminal", as protocol.ChannelKind
// writes them), for dispatchAction the action's type; other commands
// ignore it. An unknown method, channel kind or action type reports false,
// and the host refuses the request.
func ForCommand(method, detail string) (Operation, bool) {
	c, ok := commands[method]
	switch {
	case !ok:
		return "", false
	case c.by != nil:
		return c.by(detail)
	}
	return c.op, true
}

// Commands returns the methods the command table knows, sorted.
func Commands() []string { return slices.Sorted(maps.Keys(commands)) }

// actions is the operation table of the actions a client may dispatch.
//
// Choices worth saying out loud:
//   - root/configChanged changes the host, not a session: HostConfigure,
//     which only admin holds.
//   - the active client and MCP servers are the session's settings:
//     session:configure.
//   - a working directory, whether the session's or a chat's, is the
//     session's folders: session:folders.
//   - pending and queued messages are messages on their way to the agent:
//     chat:send.
//   - reviewed files and annotations are what the session produced:
//     session:artifacts.
//   - a chat's read and archived marks are the session's marks: session:mark.
//   - resuming a turn that stopped at an error sends it on: chat:send.
//   - terminal/* drives a terminal the agent's tools run in: typing into it,
//     resizing, claiming, retitling or clearing it acts on the machine like
//     a message does, so all are chat:send.
var actions = map[string]Operation{
	"root/configChanged": HostConfigure,

	"session/titleChanged":                 SessionRename,
	"session/activeClientSet":              SessionConfigure,
	"session/activeClientRemoved":          SessionConfigure,
	"session/workingDirectorySet":          SessionFolders,
	"session/workingDirectoryRemoved":      SessionFolders,
	"session/workingDirectoryReplaced":     SessionFolders,
	"session/customizationToggled":         SessionConfigure,
	"session/mcpServerStartRequested":      SessionConfigure,
	"session/mcpServerStopRequested":       SessionConfigure,
	"session/mcpServerBackgroundRequested": SessionConfigure,
	"session/isReadChanged":                SessionMark,
	"session/isArchivedChanged":            SessionMark,
	"session/configChanged":                SessionConfigure,

	"chat/turnStarted":             ChatSend,
	"chat/turnResume":              ChatSend,
	"chat/toolCallConfirmed":       ChatTool,
	"chat/toolCallComplete":        ChatTool,
	"chat/toolCallResultConfirmed": ChatTool,
	"chat/toolCallContentChanged":  ChatTool,
	"chat/turnCancelled":           ChatCancel,
	"chat/workingDirectorySet":     SessionFolders,
	"chat/workingDirectoryRemoved": SessionFolders,
	"chat/pendingMessageSet":       ChatSend,
	"chat/pendingMessageRemoved":   ChatSend,
	"chat/queuedMessagesReordered": ChatSend,
	"chat/draftChanged":            ChatDraft,
	"chat/inputAnswerChanged":      ChatAnswer,
	"chat/inputCompleted":          ChatAnswer,
	"chat/truncated":               ChatTruncate,
	"chat/isReadChanged":           SessionMark,
	"chat/isArchivedChanged":       SessionMark,

	"changeset/filesReviewChanged": SessionArtifacts,

	"annotations/set":          SessionArtifacts,
	"annotations/updated":      SessionArtifacts,
	"annotations/removed":      SessionArtifacts,
	"annotations/entrySet":     SessionArtifacts,
	"annotations/entryRemoved": SessionArtifacts,

	"terminal/input":        ChatSend,
	"terminal/resized":      ChatSend,
	"terminal/claimed":      ChatSend,
	"terminal/titleChanged": ChatSend,
	"terminal/cleared":      ChatSend,

	// An automation makes sessions as its owner: making, changing or
	// removing one is session:create; cancelling a run cancels its turn.
	"automation/createRequested":    SessionCreate,
	"automation/updateRequested":    SessionCreate,
	"automation/removed":            SessionCreate,
	"automationRun/cancelRequested": ChatCancel,
}

// ForAction returns the operation dispatching an action of the given type
// needs. A type not in the table reports false: it is not one a client may
// dispatch, and the host refuses it.
func ForAction(actionType string) (Operation, bool) {
	op, ok := actions[actionType]
	return op, ok
}

// Actions returns the action types the action table knows, sorted.
func Actions() []string { return slices.Sorted(maps.Keys(actions)) }
