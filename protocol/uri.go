package protocol

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// AHP names every channel with a URI. The forms below follow the AHP spec
// and, where the spec leaves the spelling to the client, exactly what VS
// Code computes, so that URIs ahpd mints compare equal to the ones a client
// already holds.

// RootURI is the URI of the root channel. It has no other spelling.
const RootURI = "ahp-root://"

// Schemes that AHP reserves for its channels.
const (
	RootScheme     = "ahp-root"
	SessionScheme  = "ahp-session"
	ChatScheme     = "ahp-chat"
	TerminalScheme = "ahp-terminal"
)

// DefaultChatID is the chat id of the chat every session starts with.
const DefaultChatID = "default"

// SubagentChatID is the chat id shared by all subagent chats; a subagent chat
// is told apart from its siblings by the tool call that started it.
const SubagentChatID = "subagent"

// URIError reports a malformed AHP URI.
type URIError struct {
	// Kind names the form that was expected: "session", "chat" or
	// "channel".
	Kind string
	// URI is the text that failed to parse.
	URI string
	// Reason says what is wrong with URI.
	Reason string
	// Err is the underlying error, if any, such as the error for a session
	// URI embedded in a chat URI.
	Err error
}

// Error names the URI and says what is wrong with it.
func (e *URIError) Error() string {
	var b strings.Builder
	b.WriteString("invalid ")
	if e.Kind != "" {
		b.WriteString(e.Kind)
		b.WriteByte(' ')
	}
	b.WriteString("URI ")
	b.WriteString(Quote(e.URI))
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *URIError) Unwrap() error { return e.Err }

// SessionURI identifies a session. A client may spell it either in the
// generic form "ahp-session:/<id>" or in a provider's form such as
// "copilotcli:/<id>"; only the ID identifies the session, so two URIs with
// the same ID name the same session whatever their schemes (see
// [SameSession]). The scheme is kept so that the URI can be written back
// exactly as the client spelled it.
type SessionURI struct {
	// Scheme is SessionScheme or the name of the session's provider.
	Scheme string
	// ID is the session id, the path after ":/".
	ID string
}

// NewSessionURI returns the generic "ahp-session:/<id>" form of a session
// URI.
func NewSessionURI(id string) SessionURI {
	return SessionURI{Scheme: SessionScheme, ID: id}
}

// ProviderSessionURI returns the "<provider>:/<id>" form of a session URI.
func ProviderSessionURI(provider, id string) SessionURI {
	return SessionURI{Scheme: provider, ID: id}
}

// ParseSessionURI parses s in either session URI form. Every error is a
// *URIError.
func ParseSessionURI(s string) (SessionURI, error) {
	scheme, id, ok := strings.Cut(s, ":/")
	if !ok {
		return SessionURI{}, &URIError{Kind: "session", URI: s, Reason: `missing ":/" before the session id`}
	}
	u := SessionURI{Scheme: scheme, ID: id}
	if reason := u.problem(); reason != "" {
		return SessionURI{}, &URIError{Kind: "session", URI: s, Reason: reason}
	}
	return u, nil
}

// String returns the URI text, "<scheme>:/<id>".
func (u SessionURI) String() string { return u.Scheme + ":/" + u.ID }

// Provider returns the provider named by the scheme, or "" for the generic
// ahp-session form.
func (u SessionURI) Provider() string {
	if u.Scheme == SessionScheme {
		return ""
	}
	return u.Scheme
}

// Validate reports whether u can be written as a session URI that parses
// back to u. The constructors do not validate, so that building a URI from
// trusted parts stays cheap.
func (u SessionURI) Validate() error {
	if reason := u.problem(); reason != "" {
		return &URIError{Kind: "session", URI: u.String(), Reason: reason}
	}
	return nil
}

// problem returns why u is not a valid session URI, or "" if it is.
func (u SessionURI) problem() string {
	if u.Scheme != SessionScheme {
		if !validScheme(u.Scheme) {
			return "provider " + strconv.Quote(u.Scheme) + " is not a valid URI scheme"
		}
		if reservedScheme(u.Scheme) {
			return "scheme " + strconv.Quote(u.Scheme) + " cannot name a session provider"
		}
	}
	if u.ID == "" {
		return "empty session id"
	}
	if r, bad := uriBadRune(u.ID, "/?#"); bad {
		return "session id contains " + describeURIRune(r)
	}
	return ""
}

// SameSession reports whether a and b name the same session. Only the ids
// are compared: a client may address one session by its provider form and
// the generic form interchangeably.
func SameSession(a, b SessionURI) bool { return a.ID == b.ID }

// ChatURI identifies one chat of a session:
//
//	ahp-chat://<chatId>/<base64url(session)>
//	ahp-chat://subagent/<base64url(session)>/<encodeURIComponent(toolCallId)>
//
// The session part is the session URI text exactly as the client spelled
// it, base64url-encoded without padding. Two chat URIs may therefore name
// the same chat of the same session yet differ as strings; compare their
// parsed session URIs with [SameSession] when that matters.
type ChatURI struct {
	// ChatID is the chat's id within its session.
	ChatID string
	// Session is the text of the session URI the chat URI encodes.
	Session string
	// ToolCallID is the tool call that started a subagent chat; it is
	// empty for other chats.
	ToolCallID string
}

// ChatURIFor returns the URI of the chat chatID in the session whose URI text
// is session. It does not validate its arguments; use [SubagentChatURI] for
// subagent chats.
func ChatURIFor(session, chatID string) string {
	return ChatURI{ChatID: chatID, Session: session}.String()
}

// DefaultChatURI returns the URI of the default chat of session.
func DefaultChatURI(session string) string {
	return ChatURIFor(session, DefaultChatID)
}

// SubagentChatURI returns the URI of the subagent chat that the tool call
// toolCallID started in session.
func SubagentChatURI(session, toolCallID string) string {
	return ChatURI{ChatID: SubagentChatID, Session: session, ToolCallID: toolCallID}.String()
}

// ParseChatURI parses a chat URI. The session part may be base64url with or
// without padding, but the session text it decodes to must itself be a
// valid session URI. Every error is a *URIError.
func ParseChatURI(s string) (ChatURI, error) {
	fail := func(reason string, err error) (ChatURI, error) {
		return ChatURI{}, &URIError{Kind: "chat", URI: s, Reason: reason, Err: err}
	}
	rest, ok := strings.CutPrefix(s, ChatScheme+"://")
	if !ok {
		return fail(`scheme is not "`+ChatScheme+`://"`, nil)
	}
	chatID, rest, ok := strings.Cut(rest, "/")
	if reason := chatIDProblem(chatID); reason != "" {
		return fail(reason, nil)
	}
	if !ok || rest == "" {
		return fail("missing session part", nil)
	}
	encoded, tool, hasTool := strings.Cut(rest, "/")
	session, err := decodeBase64URL(encoded)
	if err != nil {
		return fail("session part is not base64url", err)
	}
	if _, err := ParseSessionURI(session); err != nil {
		return fail("session part does not name a session", err)
	}
	u := ChatURI{ChatID: chatID, Session: session}
	if chatID != SubagentChatID {
		if hasTool {
			return fail("unexpected path after session part", nil)
		}
		return u, nil
	}
	if !hasTool || tool == "" {
		return fail("subagent chat has no tool call id", nil)
	}
	if u.ToolCallID, err = decodeURIComponent(tool); err != nil {
		return fail("bad tool call id", err)
	}
	if reason := toolCallIDProblem(u.ToolCallID); reason != "" {
		return fail(reason, nil)
	}
	return u, nil
}

// String returns the canonical URI text: unpadded base64url for the session
// part and, for a subagent chat, the tool call id escaped as JavaScript's
// encodeURIComponent escapes it.
func (u ChatURI) String() string {
	var b strings.Builder
	n := len(ChatScheme) + 4 + len(u.ChatID) + base64.RawURLEncoding.EncodedLen(len(u.Session))
	if u.IsSubagent() {
		n += 1 + 3*len(u.ToolCallID)
	}
	b.Grow(n)
	b.WriteString(ChatScheme)
	b.WriteString("://")
	b.WriteString(u.ChatID)
	b.WriteByte('/')
	b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(u.Session)))
	if u.IsSubagent() {
		b.WriteByte('/')
		appendURIComponent(&b, u.ToolCallID)
	}
	return b.String()
}

// IsSubagent reports whether u names a subagent chat.
func (u ChatURI) IsSubagent() bool { return u.ChatID == SubagentChatID }

// SessionURI parses the session URI that u encodes.
func (u ChatURI) SessionURI() (SessionURI, error) { return ParseSessionURI(u.Session) }

// Validate reports whether u can be written as a chat URI that parses back
// to u.
func (u ChatURI) Validate() error {
	fail := func(reason string, err error) error {
		return &URIError{Kind: "chat", URI: u.String(), Reason: reason, Err: err}
	}
	if reason := chatIDProblem(u.ChatID); reason != "" {
		return fail(reason, nil)
	}
	if _, err := ParseSessionURI(u.Session); err != nil {
		return fail("session part does not name a session", err)
	}
	switch {
	case u.IsSubagent() && u.ToolCallID == "":
		return fail("subagent chat has no tool call id", nil)
	case !u.IsSubagent() && u.ToolCallID != "":
		return fail("tool call id on a chat that is not a subagent chat", nil)
	}
	if reason := toolCallIDProblem(u.ToolCallID); reason != "" {
		return fail(reason, nil)
	}
	return nil
}

// ChannelKind says which kind of channel a URI names.
type ChannelKind int

// The kinds of channel.
const (
	ChannelUnknown ChannelKind = iota
	ChannelRoot
	ChannelSession
	ChannelChat
	ChannelTerminal
)

// String returns the kind's name in lower case.
func (k ChannelKind) String() string {
	switch k {
	case ChannelRoot:
		return "root"
	case ChannelSession:
		return "session"
	case ChannelChat:
		return "chat"
	case ChannelTerminal:
		return "terminal"
	}
	return "unknown"
}

// ClassifyChannel returns the kind of channel uri names. Root, session and
// chat URIs are parsed in full; a terminal URI's path is left to the terminal
// provider, so any non-empty one is accepted. Every error is a *URIError.
func ClassifyChannel(uri string) (ChannelKind, error) {
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok || !validScheme(scheme) {
		return ChannelUnknown, &URIError{Kind: "channel", URI: uri, Reason: "no URI scheme"}
	}
	switch scheme {
	case RootScheme:
		if uri != RootURI {
			return ChannelUnknown, &URIError{Kind: "channel", URI: uri, Reason: "root URI must be exactly " + strconv.Quote(RootURI)}
		}
		return ChannelRoot, nil
	case ChatScheme:
		if _, err := ParseChatURI(uri); err != nil {
			return ChannelUnknown, err
		}
		return ChannelChat, nil
	case TerminalScheme:
		if rest == "" {
			return ChannelUnknown, &URIError{Kind: "channel", URI: uri, Reason: "empty terminal URI path"}
		}
		return ChannelTerminal, nil
	}
	if reservedScheme(scheme) {
		// Catches other spellings of AHP's schemes as well as web and
		// file URIs, which a client may hold but are never channels.
		return ChannelUnknown, &URIError{Kind: "channel", URI: uri, Reason: "scheme " + strconv.Quote(scheme) + " does not name a channel"}
	}
	if _, err := ParseSessionURI(uri); err != nil {
		return ChannelUnknown, err
	}
	return ChannelSession, nil
}

// validScheme reports whether s is a URI scheme as RFC 3986 defines one.
func validScheme(s string) bool {
	if s == "" || !isASCIILetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isASCIILetter(c) && !isASCIIDigit(c) && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isASCIILetter(c byte) bool { return 'A' <= c&^0x20 && c&^0x20 <= 'Z' }

func isASCIIDigit(c byte) bool { return '0' <= c && c <= '9' }

// reservedScheme reports whether s is a scheme that never names a session
// provider. Schemes are case-insensitive, so "HTTP" is as reserved as
// "http"; the generic session scheme only escapes in its canonical
// spelling, which keeps parsing and printing exact inverses.
func reservedScheme(s string) bool {
	for _, r := range [...]string{RootScheme, SessionScheme, ChatScheme, TerminalScheme, "file", "http", "https"} {
		if strings.EqualFold(s, r) {
			return s != SessionScheme
		}
	}
	return false
}

// chatIDProblem returns why id is not a valid chat id, or "" if it is.
func chatIDProblem(id string) string {
	if id == "" {
		return "empty chat id"
	}
	if r, bad := uriBadRune(id, "/?#@:"); bad {
		return "chat id contains " + describeURIRune(r)
	}
	return ""
}

// toolCallIDProblem returns why id cannot be a tool call id, or "" if it
// can. Tool call ids are opaque, but encodeURIComponent refuses text that
// is not well formed, so such an id cannot have come from a client.
func toolCallIDProblem(id string) string {
	if !utf8.ValidString(id) {
		return "tool call id is not valid UTF-8"
	}
	return ""
}

// uriBadRune returns the first rune of s that is in extra, is white space
// or a control character, or is not valid UTF-8 (reported as
// utf8.RuneError).
func uriBadRune(s, extra string) (rune, bool) {
	if !utf8.ValidString(s) {
		return utf8.RuneError, true
	}
	for _, r := range s {
		if strings.ContainsRune(extra, r) || unicode.IsSpace(r) || unicode.IsControl(r) || hidden(r) {
			return r, true
		}
	}
	return 0, false
}

// hidden reports whether r is drawn as nothing, or changes how the text
// around it is drawn: a format character (bidirectional overrides and
// isolates, zero-width spaces and joiners, the byte order mark) or one
// that is not graphic at all (private use, unassigned). An id with one
// can be shown as another id, or as nothing.
func hidden(r rune) bool {
	return unicode.Is(unicode.Cf, r) || !unicode.IsGraphic(r)
}

func describeURIRune(r rune) string {
	switch {
	case r == utf8.RuneError:
		return "invalid UTF-8"
	case unicode.IsSpace(r):
		return "white space"
	case unicode.IsControl(r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return fmt.Sprintf("an invisible formatting character (U+%04X)", r)
	case hidden(r):
		return fmt.Sprintf("a character that is not printable (U+%04X)", r)
	}
	return strconv.QuoteRune(r)
}

// decodeBase64URL decodes the URL-safe base64 alphabet with or without
// padding. Go's decoder skips line breaks, so the alphabet is checked first
// to keep out anything a client could not have sent.
func decodeBase64URL(s string) (string, error) {
	trimmed := strings.TrimRight(s, "=")
	if pad := len(s) - len(trimmed); pad > 0 && (pad > 2 || len(s)%4 != 0) {
		return "", errors.New("bad padding")
	}
	for i := 0; i < len(trimmed); i++ {
		if c := trimmed[i]; !isASCIILetter(c) && !isASCIIDigit(c) && c != '-' && c != '_' {
			return "", fmt.Errorf("byte %q is not in the URL-safe alphabet", c)
		}
	}
	// Strict rejects non-zero trailing bits, so each session text has
	// exactly one unpadded encoding and parsing then printing is lossless.
	b, err := base64.RawURLEncoding.Strict().DecodeString(trimmed)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendURIComponent escapes s as JavaScript's encodeURIComponent does.
func appendURIComponent(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isASCIILetter(c) || isASCIIDigit(c) || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
}

// decodeURIComponent undoes appendURIComponent. It also accepts lower-case
// hex and characters left unescaped, short of those that would end the path
// segment or cannot appear in a URI, so that hand-written URIs parse too.
func decodeURIComponent(s string) (string, error) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] == '%' {
			if i+2 >= len(s) || unhexDigit(s[i+1]) < 0 || unhexDigit(s[i+2]) < 0 {
				return "", fmt.Errorf("malformed percent escape at byte %d", i)
			}
			out = append(out, byte(unhexDigit(s[i+1])<<4|unhexDigit(s[i+2])))
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return "", fmt.Errorf("invalid UTF-8 at byte %d", i)
		}
		if r == '/' || r == '?' || r == '#' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return "", fmt.Errorf("unescaped %s at byte %d", describeURIRune(r), i)
		}
		out = append(out, s[i:i+size]...)
		i += size
	}
	return string(out), nil
}

func unhexDigit(c byte) int {
	switch {
	case isASCIIDigit(c):
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}
