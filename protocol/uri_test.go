package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSessionURI(t *testing.T) {
	tests := []struct {
		in       string
		want     SessionURI
		provider string
		err      string // substring of the error; "" when parsing succeeds
	}{
		{in: "ahp-session:/abc", want: SessionURI{"ahp-session", "abc"}},
		{in: "copilotcli:/1234", want: SessionURI{"copilotcli", "1234"}, provider: "copilotcli"},
		{in: "claude:/abc", want: SessionURI{"claude", "abc"}, provider: "claude"},
		{in: "script:/x", want: SessionURI{"script", "x"}, provider: "script"},
		{in: "a+b-c.d:/x", want: SessionURI{"a+b-c.d", "x"}, provider: "a+b-c.d"},
		{in: "ahp-session:/é%20", want: SessionURI{"ahp-session", "é%20"}},

		{in: "ahp-session:abc", err: `missing ":/"`},
		{in: "abc", err: `missing ":/"`},
		{in: "", err: `missing ":/"`},
		{in: "ahp-session:/", err: "empty session id"},
		{in: "copilotcli:/", err: "empty session id"},
		{in: "ahp-session://abc", err: `session id contains '/'`},
		{in: "copilotcli:/a/b", err: `session id contains '/'`},
		{in: "copilotcli:/a?b", err: `session id contains '?'`},
		{in: "copilotcli:/a#b", err: `session id contains '#'`},
		{in: "copilotcli:/a b", err: "white space"},
		{in: "copilotcli:/a\x00b", err: "control character"},
		{in: "copilotcli:/a\xffb", err: "invalid UTF-8"},
		{in: "ahp-session:/abc\u202etxt.exe", err: "invisible formatting character (U+202E)"},
		{in: "ahp-session:/a\u200bb", err: "invisible formatting character (U+200B)"},
		{in: "ahp-session:/\ufeffab", err: "invisible formatting character (U+FEFF)"},
		{in: "ahp-session:/a\u2066b", err: "invisible formatting character (U+2066)"},
		{in: "ahp-session:/a\ue000b", err: "not printable (U+E000)"},
		{in: "ahp-session:/a\U000e0041b", err: "invisible formatting character (U+E0041)"},
		{in: ":/abc", err: "not a valid URI scheme"},
		{in: "1cli:/abc", err: "not a valid URI scheme"},
		{in: "co_pilot:/abc", err: "not a valid URI scheme"},
		{in: "ahp-chat:/abc", err: "cannot name a session provider"},
		{in: "ahp-root:/abc", err: "cannot name a session provider"},
		{in: "ahp-terminal:/abc", err: "cannot name a session provider"},
		{in: "file:/abc", err: "cannot name a session provider"},
		{in: "http:/abc", err: "cannot name a session provider"},
		{in: "HTTPS:/abc", err: "cannot name a session provider"},
		{in: "AHP-Session:/abc", err: "cannot name a session provider"},
	}
	for _, tt := range tests {
		got, err := ParseSessionURI(tt.in)
		if tt.err != "" {
			checkURIError(t, "ParseSessionURI", tt.in, err, "session", tt.err)
			continue
		}
		if err != nil {
			t.Errorf("ParseSessionURI(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseSessionURI(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.in {
			t.Errorf("ParseSessionURI(%q).String() = %q", tt.in, s)
		}
		if p := got.Provider(); p != tt.provider {
			t.Errorf("ParseSessionURI(%q).Provider() = %q, want %q", tt.in, p, tt.provider)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("ParseSessionURI(%q).Validate(): %v", tt.in, err)
		}
	}
}

// checkURIError fails t unless err is a *URIError of the given kind for
// input whose message contains want.
func checkURIError(t *testing.T, fn, input string, err error, kind, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s(%q) succeeded, want error containing %q", fn, input, want)
		return
	}
	var ue *URIError
	if !errors.As(err, &ue) {
		t.Errorf("%s(%q) error %T is not a *URIError", fn, input, err)
		return
	}
	if ue.URI != input || ue.Kind != kind {
		t.Errorf("%s(%q) error has Kind %q URI %q, want %q %q", fn, input, ue.Kind, ue.URI, kind, input)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%s(%q) error %q does not contain %q", fn, input, err, want)
	}
}

func TestSessionURIConstructors(t *testing.T) {
	if got, want := NewSessionURI("abc").String(), "ahp-session:/abc"; got != want {
		t.Errorf("NewSessionURI: got %q, want %q", got, want)
	}
	if got, want := ProviderSessionURI("copilotcli", "abc").String(), "copilotcli:/abc"; got != want {
		t.Errorf("ProviderSessionURI: got %q, want %q", got, want)
	}
	if err := ProviderSessionURI("http", "abc").Validate(); err == nil {
		t.Error(`ProviderSessionURI("http", "abc").Validate() succeeded`)
	}
	if err := NewSessionURI("a/b").Validate(); err == nil {
		t.Error(`NewSessionURI("a/b").Validate() succeeded`)
	}
}

func TestSessionURISame(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"ahp-session:/abc", "ahp-session:/abc", true},
		{"ahp-session:/abc", "copilotcli:/abc", true},
		{"claude:/abc", "copilotcli:/abc", true},
		{"copilotcli:/abc", "copilotcli:/abd", false},
		{"copilotcli:/abc", "copilotcli:/ABC", false},
	}
	for _, tt := range tests {
		a, err := ParseSessionURI(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseSessionURI(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := SameSession(a, b); got != tt.want {
			t.Errorf("SameSession(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// chatURITests are canonical chat URIs, which must survive a round trip
// unchanged; they also seed FuzzParseChatURI.
var chatURITests = []struct {
	in   string
	want ChatURI
}{
	// base64url("ahp-session:/abc") is "YWhwLXNlc3Npb246L2FiYw" unpadded.
	{"ahp-chat://default/YWhwLXNlc3Npb246L2FiYw", ChatURI{ChatID: "default", Session: "ahp-session:/abc"}},
	{"ahp-chat://default/Y29waWxvdGNsaTovYWJj", ChatURI{ChatID: "default", Session: "copilotcli:/abc"}},
	{"ahp-chat://side-1/Y2xhdWRlOi8xMjM0", ChatURI{ChatID: "side-1", Session: "claude:/1234"}},
	{"ahp-chat://subagent/Y29waWxvdGNsaTovYWJj/call_1", ChatURI{ChatID: "subagent", Session: "copilotcli:/abc", ToolCallID: "call_1"}},
	{"ahp-chat://subagent/c2NyaXB0Oi94/a%2Fb%20c", ChatURI{ChatID: "subagent", Session: "script:/x", ToolCallID: "a/b c"}},
	{"ahp-chat://subagent/c2NyaXB0Oi94/%C3%A9", ChatURI{ChatID: "subagent", Session: "script:/x", ToolCallID: "é"}},
	{"ahp-chat://subagent/c2NyaXB0Oi94/A-z_0.9!~*'()", ChatURI{ChatID: "subagent", Session: "script:/x", ToolCallID: "A-z_0.9!~*'()"}},
	{"ahp-chat://subagent/c2NyaXB0Oi94/%3F%23%25%3A%40%2B%3D%26%0A", ChatURI{ChatID: "subagent", Session: "script:/x", ToolCallID: "?#%:@+=&\n"}},
}

func TestParseChatURI(t *testing.T) {
	for _, tt := range chatURITests {
		got, err := ParseChatURI(tt.in)
		if err != nil {
			t.Errorf("ParseChatURI(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseChatURI(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.in {
			t.Errorf("ParseChatURI(%q).String() = %q", tt.in, s)
		}
		if got.IsSubagent() != (tt.want.ChatID == SubagentChatID) {
			t.Errorf("ParseChatURI(%q).IsSubagent() = %v", tt.in, got.IsSubagent())
		}
		if err := got.Validate(); err != nil {
			t.Errorf("ParseChatURI(%q).Validate(): %v", tt.in, err)
		}
		s, err := got.SessionURI()
		if err != nil || s.String() != tt.want.Session {
			t.Errorf("ParseChatURI(%q).SessionURI() = %v, %v; want %q", tt.in, s, err, tt.want.Session)
		}
	}
}

func TestParseChatURINonCanonical(t *testing.T) {
	tests := []struct {
		in, canonical string
		want          ChatURI
	}{
		{"ahp-chat://default/YWhwLXNlc3Npb246L2FiYw==", "ahp-chat://default/YWhwLXNlc3Npb246L2FiYw",
			ChatURI{ChatID: "default", Session: "ahp-session:/abc"}},
		{"ahp-chat://subagent/c2NyaXB0Oi94/a%2fb", "ahp-chat://subagent/c2NyaXB0Oi94/a%2Fb",
			ChatURI{ChatID: "subagent", Session: "script:/x", ToolCallID: "a/b"}},
		{"ahp-chat://subagent/c2NyaXB0Oi94/é:@", "ahp-chat://subagent/c2NyaXB0Oi94/%C3%A9%3A%40",
			ChatURI{ChatID: "subagent", Session: "script:/x", ToolCallID: "é:@"}},
	}
	for _, tt := range tests {
		got, err := ParseChatURI(tt.in)
		if err != nil {
			t.Errorf("ParseChatURI(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseChatURI(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.canonical {
			t.Errorf("ParseChatURI(%q).String() = %q, want %q", tt.in, s, tt.canonical)
		}
	}
}

func TestParseChatURIErrors(t *testing.T) {
	tests := []struct {
		in, err string
	}{
		{"", "scheme is not"},
		{"ahp-session:/abc", "scheme is not"},
		{"ahp-chat:/default/Zm9v", "scheme is not"},
		{"AHP-CHAT://default/YWhwLXNlc3Npb246L2FiYw", "scheme is not"},
		{"ahp-chat://x", "missing session part"},
		{"ahp-chat://default", "missing session part"},
		{"ahp-chat://default/", "missing session part"},
		{"ahp-chat:///YWhwLXNlc3Npb246L2FiYw", "empty chat id"},
		{"ahp-chat://a:b/YWhwLXNlc3Npb246L2FiYw", `chat id contains ':'`},
		{"ahp-chat://a@b/YWhwLXNlc3Npb246L2FiYw", `chat id contains '@'`},
		{"ahp-chat://a?b/YWhwLXNlc3Npb246L2FiYw", `chat id contains '?'`},
		{"ahp-chat://a\u202eb/YWhwLXNlc3Npb246L2FiYw", `chat id contains an invisible formatting character (U+202E)`},
		{"ahp-chat://a b/YWhwLXNlc3Npb246L2FiYw", "chat id contains white space"},
		{"ahp-chat://default/Zm9v!", "not in the URL-safe alphabet"},
		{"ahp-chat://default/YWhwLXNlc3Npb246L2FiYw+", "not in the URL-safe alphabet"},
		{"ahp-chat://default/YWhwLXNlc3Npb2\n46L2FiYw", "not in the URL-safe alphabet"},
		{"ahp-chat://default/YWhwLXNlc3Npb246L2FiYw=", "bad padding"},
		{"ahp-chat://default/YWhwLXNlc3Npb246L2FiYw===", "bad padding"},
		{"ahp-chat://default/Y", "not base64url"},
		{"ahp-chat://default/YWJ", "not base64url"},                            // "ab" with non-zero trailing bits
		{"ahp-chat://default/Zm9v", "does not name a session"},                 // "foo"
		{"ahp-chat://default/aHR0cHM6L3g", "does not name a session"},          // "https:/x"
		{"ahp-chat://default/YWhwLXNlc3Npb246Lw", "does not name a session"},   // "ahp-session:/"
		{"ahp-chat://default/Y29waWxvdGNsaTovYS9i", "does not name a session"}, // "copilotcli:/a/b"
		{"ahp-chat://default/YWhwLXNlc3Npb246L2FiYw/x", "unexpected path"},
		{"ahp-chat://subagent/YWhwLXNlc3Npb246L2FiYw", "no tool call id"},
		{"ahp-chat://subagent/YWhwLXNlc3Npb246L2FiYw/", "no tool call id"},
		{"ahp-chat://subagent/YWhwLXNlc3Npb246L2FiYw/a/b", "bad tool call id"},
		{"ahp-chat://subagent/YWhwLXNlc3Npb246L2FiYw/a%2", "malformed percent escape"},
		{"ahp-chat://subagent/YWhwLXNlc3Npb246L2FiYw/a%zz", "malformed percent escape"},
		{"ahp-chat://subagent/YWhwLXNlc3Npb246L2FiYw/a b", "unescaped white space"},
		{"ahp-chat://subagent/YWhwLXNlc3Npb246L2FiYw/a?b", "unescaped '?'"},
		{"ahp-chat://subagent/YWhwLXNlc3Npb246L2FiYw/%FF", "not valid UTF-8"},
	}
	for _, tt := range tests {
		_, err := ParseChatURI(tt.in)
		checkURIError(t, "ParseChatURI", tt.in, err, "chat", tt.err)
	}
}

func TestChatURIErrorMessage(t *testing.T) {
	_, err := ParseChatURI("ahp-chat://x")
	if got, want := err.Error(), `invalid chat URI "ahp-chat://x": missing session part`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// An embedded session URI's own error must stay reachable.
	_, err = ParseChatURI("ahp-chat://default/Zm9v")
	var inner *URIError
	if !errors.As(errors.Unwrap(err), &inner) || inner.Kind != "session" || inner.URI != "foo" {
		t.Errorf("ParseChatURI error %v does not wrap the session URI error", err)
	}
}

func TestChatURIBuilders(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{DefaultChatURI("copilotcli:/abc"), "ahp-chat://default/Y29waWxvdGNsaTovYWJj"},
		{DefaultChatURI("ahp-session:/abc"), "ahp-chat://default/YWhwLXNlc3Npb246L2FiYw"},
		{ChatURIFor("claude:/1234", "side-1"), "ahp-chat://side-1/Y2xhdWRlOi8xMjM0"},
		{SubagentChatURI("script:/x", "a/b c"), "ahp-chat://subagent/c2NyaXB0Oi94/a%2Fb%20c"},
		{SubagentChatURI("script:/x", "é"), "ahp-chat://subagent/c2NyaXB0Oi94/%C3%A9"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	// The two spellings of one session give different chat URIs that
	// still name the same session.
	a, _ := ParseChatURI(DefaultChatURI("copilotcli:/abc"))
	b, _ := ParseChatURI(DefaultChatURI("ahp-session:/abc"))
	sa, errA := a.SessionURI()
	sb, errB := b.SessionURI()
	if a == b || errA != nil || errB != nil || !SameSession(sa, sb) {
		t.Errorf("chat URIs %v and %v: want distinct URIs for the same session", a, b)
	}
}

func TestChatURIValidate(t *testing.T) {
	tests := []struct {
		u   ChatURI
		err string
	}{
		{ChatURI{ChatID: "default", Session: "copilotcli:/abc"}, ""},
		{ChatURI{ChatID: "subagent", Session: "copilotcli:/abc", ToolCallID: "t"}, ""},
		{ChatURI{ChatID: "", Session: "copilotcli:/abc"}, "empty chat id"},
		{ChatURI{ChatID: "a/b", Session: "copilotcli:/abc"}, "chat id contains '/'"},
		{ChatURI{ChatID: "default", Session: "copilotcli"}, "does not name a session"},
		{ChatURI{ChatID: "subagent", Session: "copilotcli:/abc"}, "no tool call id"},
		{ChatURI{ChatID: "default", Session: "copilotcli:/abc", ToolCallID: "t"}, "not a subagent chat"},
		{ChatURI{ChatID: "subagent", Session: "copilotcli:/abc", ToolCallID: "\xff"}, "not valid UTF-8"},
	}
	for _, tt := range tests {
		err := tt.u.Validate()
		if tt.err == "" {
			if err != nil {
				t.Errorf("%#v.Validate(): %v", tt.u, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%#v.Validate() = %v, want error containing %q", tt.u, err, tt.err)
		}
	}
}

func TestURIClassifyChannel(t *testing.T) {
	tests := []struct {
		in   string
		want ChannelKind
		err  string
	}{
		{in: "ahp-root://", want: ChannelRoot},
		{in: "ahp-session:/abc", want: ChannelSession},
		{in: "copilotcli:/abc", want: ChannelSession},
		{in: "ahp-chat://default/YWhwLXNlc3Npb246L2FiYw", want: ChannelChat},
		{in: "ahp-chat://subagent/c2NyaXB0Oi94/t1", want: ChannelChat},
		{in: "ahp-terminal:/t1", want: ChannelTerminal},
		{in: "ahp-terminal://host/t1", want: ChannelTerminal},

		{in: "", err: "no URI scheme"},
		{in: "abc", err: "no URI scheme"},
		{in: "1a:/b", err: "no URI scheme"},
		{in: "ahp-root:/", err: "must be exactly"},
		{in: "ahp-root://x", err: "must be exactly"},
		{in: "ahp-terminal:", err: "empty terminal URI path"},
		{in: "ahp-chat://x", err: "missing session part"},
		{in: "https://example.com", err: "does not name a channel"},
		{in: "file:/tmp/x", err: "does not name a channel"},
		{in: "AHP-ROOT://", err: "does not name a channel"},
		{in: "copilotcli:/", err: "empty session id"},
		{in: "copilotcli:abc", err: `missing ":/"`},
	}
	for _, tt := range tests {
		got, err := ClassifyChannel(tt.in)
		if tt.err != "" {
			var ue *URIError
			if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.err) || got != ChannelUnknown {
				t.Errorf("ClassifyChannel(%q) = %v, %v; want URIError containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ClassifyChannel(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestURIChannelKindString(t *testing.T) {
	tests := map[ChannelKind]string{
		ChannelUnknown:  "unknown",
		ChannelRoot:     "root",
		ChannelSession:  "session",
		ChannelChat:     "chat",
		ChannelTerminal: "terminal",
		ChannelKind(99): "unknown",
	}
	for k, want := range tests {
		if got := k.String(); got != want {
			t.Errorf("ChannelKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}

func FuzzParseChatURI(f *testing.F) {
	for _, tt := range chatURITests {
		f.Add(tt.in)
	}
	f.Add("ahp-chat://default/YWhwLXNlc3Npb246L2FiYw==")
	f.Add("ahp-chat://default/")
	f.Add("ahp-chat://subagent/c2NyaXB0Oi94/a%2")
	f.Add("ahp-chat://default/Zm9v")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseChatURI(s)
		if err != nil {
			var ue *URIError
			if !errors.As(err, &ue) || ue.URI != s {
				t.Fatalf("ParseChatURI(%q): error %v is not a *URIError for the input", s, err)
			}
			return
		}
		if err := u.Validate(); err != nil {
			t.Fatalf("ParseChatURI(%q) = %#v, which does not validate: %v", s, u, err)
		}
		again, err := ParseChatURI(u.String())
		if err != nil {
			t.Fatalf("ParseChatURI(%q).String() = %q, which does not parse: %v", s, u.String(), err)
		}
		if again != u {
			t.Fatalf("ParseChatURI(%q) = %#v, but its String %q parses to %#v", s, u, u.String(), again)
		}
	})
}
