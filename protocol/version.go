package protocol

import (
	"fmt"
	"slices"
	"strings"
)

// ProtocolVersion is the version of the AHP schema the generated types in
// this package come from.
const ProtocolVersion = "0.8.0"

// supportedVersions are the baselines ahpd negotiates against, most
// preferred first. ahpd speaks the 0.8 schema; the 1.0 and 0.9 baselines
// let clients that only offer those newer versions connect as well.
var supportedVersions = [...]string{"1.0.0", "0.9.0", "0.8.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1"}

// SupportedVersions returns the protocol versions ahpd supports as caret
// baselines, most preferred first. The caller owns the returned slice.
func SupportedVersions() []string { return slices.Clone(supportedVersions[:]) }

// Version is a protocol version, a SemVer MAJOR.MINOR.PATCH without
// pre-release or build suffix.
type Version struct {
	Major, Minor, Patch int
}

// ParseVersion parses s as MAJOR.MINOR.PATCH. Each part must be 0 or a
// decimal number without leading zeros, as SemVer requires, so every
// version has one spelling.
func ParseVersion(s string) (Version, error) {
	v, ok := parseVersion(s)
	if !ok {
		return Version{}, fmt.Errorf("invalid protocol version %q: want MAJOR.MINOR.PATCH", s)
	}
	return v, nil
}

// parseVersion is ParseVersion without the error, so that the action
// registry can check versions without allocating.
func parseVersion(s string) (Version, bool) {
	var parts [3]int
	for i := range parts {
		field := s
		if i < 2 {
			var ok bool
			if field, s, ok = strings.Cut(s, "."); !ok {
				return Version{}, false
			}
		}
		n, ok := parseVersionPart(field)
		if !ok {
			return Version{}, false
		}
		parts[i] = n
	}
	return Version{parts[0], parts[1], parts[2]}, true
}

func parseVersionPart(s string) (int, bool) {
	// Nine digits fit any int and are more than a protocol will need;
	// capping the length also rules out overflow.
	if s == "" || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !isASCIIDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// String returns v as MAJOR.MINOR.PATCH.
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Compare returns -1, 0 or +1 as v is lower than, equal to or higher than w.
func (v Version) Compare(w Version) int {
	if c := cmpInt(v.Major, w.Major); c != 0 {
		return c
	}
	if c := cmpInt(v.Minor, w.Minor); c != 0 {
		return c
	}
	return cmpInt(v.Patch, w.Patch)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CompatibleWith reports whether a peer speaking v can be served by a host
// implementing baseline, by the rules of a caret range (^baseline): v must
// not be older than baseline, and must keep the leftmost non-zero part of
// baseline. Below 1.0 every minor release may break, hence the narrower
// ranges there.
func (v Version) CompatibleWith(baseline Version) bool {
	if v.Compare(baseline) < 0 || v.Major != baseline.Major {
		return false
	}
	switch {
	case baseline.Major > 0:
		return true
	case baseline.Minor > 0:
		return v.Minor == baseline.Minor
	}
	return v == baseline
}

// CompareVersions parses a and b and compares them as [Version.Compare]
// does.
func CompareVersions(a, b string) (int, error) {
	va, err := ParseVersion(a)
	if err != nil {
		return 0, err
	}
	vb, err := ParseVersion(b)
	if err != nil {
		return 0, err
	}
	return va.Compare(vb), nil
}

// Negotiate picks the protocol version to speak with a client that offered
// the versions in offered. It returns the highest offered version that is
// compatible with one of [SupportedVersions], whatever order the client
// listed them in, so that the connection gets the newest protocol both sides
// understand. Malformed versions are skipped rather than fatal, so that one
// entry ahpd cannot read does not spoil the rest. If nothing can be served,
// the error is an *UnsupportedVersionError.
func Negotiate(offered []string) (string, error) {
	var best Version
	found := false
	for _, s := range offered {
		v, ok := parseVersion(s)
		if !ok || (found && v.Compare(best) <= 0) || !supported(v) {
			continue
		}
		best, found = v, true
	}
	if !found {
		return "", &UnsupportedVersionError{Offered: slices.Clone(offered), Supported: SupportedVersions()}
	}
	return best.String(), nil
}

func supported(v Version) bool {
	for _, s := range supportedVersions {
		if b, ok := parseVersion(s); ok && v.CompatibleWith(b) {
			return true
		}
	}
	return false
}

// UnsupportedVersionError reports that a client offered no protocol version
// ahpd can speak. A host answers it with the JSON-RPC error
// [UnsupportedVersionError.Code] carrying [UnsupportedVersionError.Data].
type UnsupportedVersionError struct {
	// Offered is what the client offered, malformed entries included.
	Offered []string
	// Supported is the baselines ahpd would have accepted.
	Supported []string
}

// Error lists both what the client offered and what ahpd supports, so that
// either side's log shows how to fix the mismatch.
func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("unsupported protocol version: offered [%s], supported [%s]",
		strings.Join(e.Offered, ", "), strings.Join(e.Supported, ", "))
}

// Code returns the JSON-RPC error code AHP assigns to an unsupported
// protocol version.
func (e *UnsupportedVersionError) Code() ErrorCode { return CodeUnsupportedProtocolVersion }

// Data returns the error data AHP sends with [UnsupportedVersionError.Code].
func (e *UnsupportedVersionError) Data() UnsupportedProtocolVersionErrorData {
	return UnsupportedProtocolVersionErrorData{SupportedVersions: slices.Clone(e.Supported)}
}

// actionIntroducedIn records the protocol version that introduced each
// action type, so that the host never sends a connection an action its
// negotiated version does not know.
//
// Every action type the schema defines needs an entry, and a test fails
// when one is missing or an entry names a type the schema lacks. When the
// schema gains an action, add a line here with the version the upstream
// registry gives; session/workingDirectoryReplaced, for one, will arrive as
//
//	ActionSessionWorkingDirectoryReplaced: "0.8.0",
var actionIntroducedIn = map[ActionType]string{
	ActionRootAgentsChanged:         "0.1.0",
	ActionRootActiveSessionsChanged: "0.1.0",
	ActionRootTerminalsChanged:      "0.1.0",
	ActionRootConfigChanged:         "0.1.0",

	ActionSessionReady:                   "0.1.0",
	ActionSessionCreationFailed:          "0.1.0",
	ActionSessionChatAdded:               "0.4.0",
	ActionSessionChatRemoved:             "0.4.0",
	ActionSessionChatUpdated:             "0.4.0",
	ActionSessionDefaultChatChanged:      "0.4.0",
	ActionSessionTitleChanged:            "0.1.0",
	ActionSessionServerToolsChanged:      "0.1.0",
	ActionSessionActiveClientSet:         "0.5.0",
	ActionSessionActiveClientRemoved:     "0.5.0",
	ActionSessionWorkingDirectorySet:     "0.7.0",
	ActionSessionWorkingDirectoryRemoved: "0.7.0",
	// After the 0.8 schema, in the released 0.8.0 (internal/extensions).
	ActionSessionWorkingDirectoryReplaced: "0.8.0",
	ActionSessionInputNeededSet:           "0.5.1",
	ActionSessionInputNeededRemoved:       "0.5.1",
	ActionSessionCustomizationsChanged:    "0.1.0",
	ActionSessionCustomizationToggled:     "0.1.0",
	ActionSessionCustomizationUpdated:     "0.1.0",
	ActionSessionCustomizationRemoved:     "0.2.0",
	ActionSessionMCPServerStateChanged:    "0.3.0",
	ActionSessionMCPServerStartRequested:  "0.5.2",
	ActionSessionMCPServerStopRequested:   "0.5.2",
	ActionSessionIsReadChanged:            "0.1.0",
	ActionSessionIsArchivedChanged:        "0.1.0",
	ActionSessionActivityChanged:          "0.1.0",
	ActionSessionChangesetsChanged:        "0.2.0",
	ActionSessionConfigChanged:            "0.1.0",
	ActionSessionMetaChanged:              "0.1.0",

	ActionChatTurnStarted:             "0.4.0",
	ActionChatDelta:                   "0.4.0",
	ActionChatResponsePart:            "0.4.0",
	ActionChatToolCallStart:           "0.4.0",
	ActionChatToolCallDelta:           "0.4.0",
	ActionChatToolCallReady:           "0.4.0",
	ActionChatToolCallConfirmed:       "0.4.0",
	ActionChatToolCallComplete:        "0.4.0",
	ActionChatToolCallResultConfirmed: "0.4.0",
	ActionChatToolCallContentChanged:  "0.4.0",
	ActionChatToolCallAuthRequired:    "0.6.0",
	ActionChatToolCallAuthResolved:    "0.6.0",
	ActionChatTurnComplete:            "0.4.0",
	ActionChatTurnCancelled:           "0.4.0",
	ActionChatError:                   "0.4.0",
	ActionChatActivityChanged:         "0.5.0",
	ActionChatWorkingDirectorySet:     "0.7.0",
	ActionChatWorkingDirectoryRemoved: "0.7.0",
	ActionChatUsage:                   "0.4.0",
	ActionChatReasoning:               "0.4.0",
	ActionChatPendingMessageSet:       "0.4.0",
	ActionChatPendingMessageRemoved:   "0.4.0",
	ActionChatQueuedMessagesReordered: "0.4.0",
	ActionChatDraftChanged:            "0.5.0",
	ActionChatInputRequested:          "0.4.0",
	ActionChatInputAnswerChanged:      "0.4.0",
	ActionChatInputCompleted:          "0.4.0",
	ActionChatTruncated:               "0.4.0",
	ActionChatTurnsLoaded:             "0.5.1",

	ActionChangesetStatusChanged:          "0.2.0",
	ActionChangesetFileSet:                "0.2.0",
	ActionChangesetFileRemoved:            "0.2.0",
	ActionChangesetFilesReviewChanged:     "0.6.0",
	ActionChangesetContentChanged:         "0.4.0",
	ActionChangesetOperationsChanged:      "0.2.0",
	ActionChangesetOperationStatusChanged: "0.3.0",
	ActionChangesetCleared:                "0.2.0",

	ActionAnnotationsSet:          "0.4.0",
	ActionAnnotationsUpdated:      "0.4.0",
	ActionAnnotationsRemoved:      "0.4.0",
	ActionAnnotationsEntrySet:     "0.4.0",
	ActionAnnotationsEntryRemoved: "0.4.0",

	ActionTerminalData:                      "0.1.0",
	ActionTerminalInput:                     "0.1.0",
	ActionTerminalResized:                   "0.1.0",
	ActionTerminalClaimed:                   "0.1.0",
	ActionTerminalTitleChanged:              "0.1.0",
	ActionTerminalCwdChanged:                "0.1.0",
	ActionTerminalExited:                    "0.1.0",
	ActionTerminalCleared:                   "0.1.0",
	ActionTerminalCommandDetectionAvailable: "0.1.0",
	ActionTerminalCommandExecuted:           "0.1.0",
	ActionTerminalCommandFinished:           "0.1.0",

	ActionResourceWatchChanged: "0.2.0",
}

// clientDispatchable holds the action types a client may dispatch. All
// others describe what the agent or host did, and are only ever sent by the
// host; a client dispatching one is refused.
var clientDispatchable = map[ActionType]bool{
	ActionRootConfigChanged: true,

	ActionSessionTitleChanged:            true,
	ActionSessionActiveClientSet:         true,
	ActionSessionActiveClientRemoved:     true,
	ActionSessionWorkingDirectorySet:     true,
	ActionSessionWorkingDirectoryRemoved: true,
	ActionSessionCustomizationToggled:    true,
	ActionSessionMCPServerStartRequested: true,
	ActionSessionMCPServerStopRequested:  true,
	ActionSessionIsReadChanged:           true,
	ActionSessionIsArchivedChanged:       true,
	ActionSessionConfigChanged:           true,

	ActionChatTurnStarted:             true,
	ActionChatToolCallConfirmed:       true,
	ActionChatToolCallComplete:        true,
	ActionChatToolCallResultConfirmed: true,
	ActionChatToolCallContentChanged:  true,
	ActionChatTurnCancelled:           true,
	ActionChatWorkingDirectorySet:     true,
	ActionChatWorkingDirectoryRemoved: true,
	ActionChatPendingMessageSet:       true,
	ActionChatPendingMessageRemoved:   true,
	ActionChatQueuedMessagesReordered: true,
	ActionChatDraftChanged:            true,
	ActionChatInputAnswerChanged:      true,
	ActionChatInputCompleted:          true,
	ActionChatTruncated:               true,

	ActionChangesetFilesReviewChanged: true,

	ActionAnnotationsSet:          true,
	ActionAnnotationsUpdated:      true,
	ActionAnnotationsRemoved:      true,
	ActionAnnotationsEntrySet:     true,
	ActionAnnotationsEntryRemoved: true,

	ActionTerminalInput:        true,
	ActionTerminalResized:      true,
	ActionTerminalClaimed:      true,
	ActionTerminalTitleChanged: true,
	ActionTerminalCleared:      true,
}

// IntroducedIn returns the protocol version that introduced t. It reports
// false for a type this package does not define, such as one a newer peer
// sent.
func (t ActionType) IntroducedIn() (string, bool) {
	v, ok := actionIntroducedIn[t]
	return v, ok
}

// ClientDispatchable reports whether a client may dispatch actions of type
// t.
func (t ActionType) ClientDispatchable() bool { return clientDispatchable[t] }

// KnownTo reports whether a peer speaking version knows actions of type t.
// It reports false for a type this package does not define and for a
// malformed version, since sending an action the peer may not understand is
// never safe.
func (t ActionType) KnownTo(version string) bool {
	introduced, ok := actionIntroducedIn[t]
	if !ok {
		return false
	}
	since, ok := parseVersion(introduced)
	if !ok {
		return false
	}
	v, ok := parseVersion(version)
	return ok && v.Compare(since) >= 0
}

// Channel returns the kind of channel actions of type t apply to, the part
// of the type before the first "/": "root", "session", "chat", "changeset",
// "annotations", "terminal" or "resourceWatch". It returns "" when t has no
// "/".
func (t ActionType) Channel() string {
	channel, _, ok := strings.Cut(string(t), "/")
	if !ok {
		return ""
	}
	return channel
}

// ActionTypes returns every action type this package defines, in schema
// order. The caller owns the returned slice.
func ActionTypes() []ActionType { return slices.Clone(actionTypes[:]) }
