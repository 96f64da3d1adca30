package protocol

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want Version
		ok   bool
	}{
		{"0.8.0", Version{0, 8, 0}, true},
		{"1.0.0", Version{1, 0, 0}, true},
		{"10.20.30", Version{10, 20, 30}, true},
		{"0.0.0", Version{0, 0, 0}, true},
		{"999999999.0.1", Version{999999999, 0, 1}, true},

		{"", Version{}, false},
		{"1", Version{}, false},
		{"1.0", Version{}, false},
		{"1.0.0.0", Version{}, false},
		{"01.0.0", Version{}, false},
		{"1.00.0", Version{}, false},
		{"1.0.01", Version{}, false},
		{"v1.0.0", Version{}, false},
		{"1.0.0-rc.1", Version{}, false},
		{"1.0.0+build", Version{}, false},
		{"-1.0.0", Version{}, false},
		{"+1.0.0", Version{}, false},
		{"1..0", Version{}, false},
		{" 1.0.0", Version{}, false},
		{"1.0.0 ", Version{}, false},
		{"1.0.x", Version{}, false},
		{"1234567890.0.0", Version{}, false},
		{"banana", Version{}, false},
	}
	for _, tt := range tests {
		got, err := ParseVersion(tt.in)
		if !tt.ok {
			if err == nil || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("ParseVersion(%q) = %v, %v; want an error naming the input", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if s := got.String(); s != tt.in {
			t.Errorf("ParseVersion(%q).String() = %q", tt.in, s)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0.8.0", "0.8.0", 0},
		{"0.8.0", "0.9.0", -1},
		{"0.10.0", "0.9.0", 1}, // numeric, not lexical
		{"1.0.0", "0.99.99", 1},
		{"0.5.1", "0.5.2", -1},
		{"2.0.0", "10.0.0", -1},
	}
	for _, tt := range tests {
		got, err := CompareVersions(tt.a, tt.b)
		if err != nil || got != tt.want {
			t.Errorf("CompareVersions(%q, %q) = %d, %v; want %d", tt.a, tt.b, got, err, tt.want)
		}
	}
	for _, pair := range [][2]string{{"x", "1.0.0"}, {"1.0.0", "1.0"}} {
		if _, err := CompareVersions(pair[0], pair[1]); err == nil {
			t.Errorf("CompareVersions(%q, %q) succeeded", pair[0], pair[1])
		}
	}
}

func TestVersionCompatibleWith(t *testing.T) {
	tests := []struct {
		v, base string
		want    bool
	}{
		{"1.0.0", "1.0.0", true},
		{"1.9.3", "1.0.0", true},
		{"2.0.0", "1.0.0", false},
		{"0.9.0", "1.0.0", false},
		{"0.9.7", "0.9.0", true},
		{"0.10.0", "0.9.0", false},
		{"0.5.3", "0.5.1", true},
		{"0.5.0", "0.5.1", false},
		{"0.0.3", "0.0.3", true},
		{"0.0.4", "0.0.3", false},
	}
	for _, tt := range tests {
		v, _ := ParseVersion(tt.v)
		b, _ := ParseVersion(tt.base)
		if got := v.CompatibleWith(b); got != tt.want {
			t.Errorf("%s.CompatibleWith(%s) = %v, want %v", tt.v, tt.base, got, tt.want)
		}
	}
}

func TestNegotiate(t *testing.T) {
	tests := []struct {
		offered []string
		want    string // "" when negotiation must fail
	}{
		{[]string{"1.0.0", "0.8.0"}, "1.0.0"},
		{[]string{"0.8.0", "1.0.0"}, "1.0.0"},
		{[]string{"0.9.0"}, "0.9.0"},
		{[]string{"0.9.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1"}, "0.9.0"}, // VS Code 1.139
		{[]string{"0.9.3", "0.8.1"}, "0.9.3"},
		{[]string{"0.9.0", "1.0.0"}, "1.0.0"},
		{[]string{"1.4.0"}, "1.4.0"},
		{[]string{"1.4.0", "1.0.2"}, "1.4.0"},
		{[]string{"2.0.0", "0.9.2"}, "0.9.2"},
		// ahpd does not claim a version it does not speak.
		{[]string{"0.8.0"}, ""},
		{[]string{"0.8.0", "0.7.0", "0.5.1"}, ""},
		{[]string{"0.10.0"}, ""},
		{[]string{"2.0.0"}, ""},
		{[]string{"0.0.9"}, ""},
		{[]string{}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		got, err := Negotiate(tt.offered)
		if tt.want != "" {
			if err != nil || got != tt.want {
				t.Errorf("Negotiate(%q) = %q, %v; want %q", tt.offered, got, err, tt.want)
			}
			continue
		}
		var uv *UnsupportedVersionError
		if !errors.As(err, &uv) {
			t.Errorf("Negotiate(%q) = %q, %v; want *UnsupportedVersionError", tt.offered, got, err)
			continue
		}
		if !slices.Equal(uv.Offered, tt.offered) || !slices.Equal(uv.Supported, SupportedVersions()) {
			t.Errorf("Negotiate(%q) error = %#v", tt.offered, uv)
		}
	}
}

// TestNegotiateMalformed: one malformed entry spoils the offer, wherever
// it is, as the registry's rule throws on it.
func TestNegotiateMalformed(t *testing.T) {
	for _, offered := range [][]string{
		{"banana", "1.0.0"},
		{"1.0.0", "1.0.0-beta"},
		{"0.9.0", "01.0.0"},
		{""},
		{"1.0.0", strings.Repeat("9", 100000)},
	} {
		got, err := Negotiate(offered)
		var mv *MalformedVersionError
		if !errors.As(err, &mv) {
			t.Errorf("Negotiate(%.40q) = %q, %v; want *MalformedVersionError", offered, got, err)
			continue
		}
		if len(err.Error()) > 200 {
			t.Errorf("the error quotes %d bytes of the client's offer", len(err.Error()))
		}
	}
}

func TestUnsupportedVersionError(t *testing.T) {
	_, err := Negotiate([]string{"2.0.0", "0.8.0"})
	var uv *UnsupportedVersionError
	if !errors.As(err, &uv) {
		t.Fatalf("Negotiate: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"2.0.0", "0.8.0", "1.0.0", "0.9.0"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if uv.Code() != -32005 {
		t.Errorf("Code() = %d, want -32005", uv.Code())
	}
	data := uv.Data()
	if !slices.Equal(data.SupportedVersions, SupportedVersions()) {
		t.Errorf("Data().SupportedVersions = %q", data.SupportedVersions)
	}
	b, err := data.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"supportedVersions":["1.0.0","0.9.0"]}`; string(b) != want {
		t.Errorf("Data() encodes as %s, want %s", b, want)
	}
	// A long offer is cut in the message.
	long := make([]string, 1000)
	for i := range long {
		long[i] = "3.0.0"
	}
	_, err = Negotiate(long)
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("error for 1000 offered versions is %d bytes", len(err.Error()))
	}
}

func TestSupportedVersions(t *testing.T) {
	got := SupportedVersions()
	if len(got) == 0 {
		t.Fatal("no supported versions")
	}
	for i, s := range got {
		if _, err := ParseVersion(s); err != nil {
			t.Error(err)
		}
		if i > 0 {
			if c, _ := CompareVersions(got[i-1], s); c <= 0 {
				t.Errorf("SupportedVersions not in descending order at %q, %q", got[i-1], s)
			}
		}
	}
	if !slices.Contains(got, ProtocolVersion) {
		t.Errorf("SupportedVersions %q lacks ProtocolVersion %q", got, ProtocolVersion)
	}
	got[0] = "9.9.9"
	if SupportedVersions()[0] == "9.9.9" {
		t.Error("SupportedVersions returns shared storage")
	}
}

// TestVersionRegistryMatchesSchema keeps actionIntroducedIn and
// clientDispatchable in step with the generated action types.
func TestVersionRegistryMatchesSchema(t *testing.T) {
	defined := make(map[ActionType]bool, len(actionTypes))
	for _, at := range actionTypes {
		defined[at] = true
		v, ok := at.IntroducedIn()
		if !ok {
			t.Errorf("action type %q has no actionIntroducedIn entry", at)
			continue
		}
		if _, err := ParseVersion(v); err != nil {
			t.Errorf("action type %q: %v", at, err)
		}
		if !at.KnownTo(ProtocolVersion) {
			t.Errorf("action type %q, introduced in %s, is unknown to ProtocolVersion %s", at, v, ProtocolVersion)
		}
	}
	for at := range actionIntroducedIn {
		if !defined[at] {
			t.Errorf("actionIntroducedIn names %q, which the schema does not define", at)
		}
	}
	for at, ok := range clientDispatchable {
		if !defined[at] || !ok {
			t.Errorf("clientDispatchable entry %q = %v: want only defined types, set to true", at, ok)
		}
	}
	if n := len(clientDispatchable); n != 47 {
		t.Errorf("%d client-dispatchable action types, want 47", n)
	}
}

func TestVersionKnownTo(t *testing.T) {
	tests := []struct {
		at      ActionType
		version string
		want    bool
	}{
		{ActionChatTurnsLoaded, "0.5.1", true},
		{ActionChatTurnsLoaded, "1.0.0", true},
		{ActionChatTurnsLoaded, "0.5.0", false},
		{ActionSessionWorkingDirectorySet, "0.7.0", true},
		{ActionSessionWorkingDirectorySet, "0.6.0", false},
		{ActionSessionMCPServerStartRequested, "0.5.2", true},
		{ActionSessionMCPServerStartRequested, "0.5.1", false},
		{ActionChatToolCallAuthRequired, "0.6.0", true},
		{ActionChatToolCallAuthRequired, "0.5.2", false},
		{ActionSessionReady, "0.1.0", true},
		{ActionSessionReady, "0.0.9", false},
		{ActionSessionReady, "banana", false},
		{ActionSessionReady, "", false},
		{ActionSessionWorkingDirectoryReplaced, "1.0.0", true},
		{ActionSessionWorkingDirectoryReplaced, "0.8.0", true},
		{ActionSessionWorkingDirectoryReplaced, "0.7.0", false},
		{"session/fromTheFuture", "1.0.0", false},
		{"", "1.0.0", false},
	}
	for _, tt := range tests {
		if got := tt.at.KnownTo(tt.version); got != tt.want {
			t.Errorf("%q.KnownTo(%q) = %v, want %v", tt.at, tt.version, got, tt.want)
		}
	}
}

func TestVersionIntroducedIn(t *testing.T) {
	tests := []struct {
		at   ActionType
		want string
		ok   bool
	}{
		{ActionRootAgentsChanged, "0.1.0", true},
		{ActionSessionInputNeededSet, "0.5.1", true},
		{ActionChangesetOperationStatusChanged, "0.3.0", true},
		{ActionChangesetFilesReviewChanged, "0.6.0", true},
		{ActionResourceWatchChanged, "0.2.0", true},
		{ActionSessionWorkingDirectoryReplaced, "0.8.0", true},
		{"session/fromTheFuture", "", false},
	}
	for _, tt := range tests {
		got, ok := tt.at.IntroducedIn()
		if got != tt.want || ok != tt.ok {
			t.Errorf("%q.IntroducedIn() = %q, %v; want %q, %v", tt.at, got, ok, tt.want, tt.ok)
		}
	}
}

func TestVersionClientDispatchable(t *testing.T) {
	tests := []struct {
		at   ActionType
		want bool
	}{
		{ActionChatTurnStarted, true},
		{ActionChatDelta, false},
		{ActionSessionReady, false},
		{ActionRootConfigChanged, true},
		{ActionRootAgentsChanged, false},
		{ActionChangesetFilesReviewChanged, true},
		{ActionChangesetFileSet, false},
		{ActionTerminalInput, true},
		{ActionTerminalData, false},
		{ActionAnnotationsEntrySet, true},
		{ActionResourceWatchChanged, false},
		{"chat/unknownFuture", false},
	}
	for _, tt := range tests {
		if got := tt.at.ClientDispatchable(); got != tt.want {
			t.Errorf("%q.ClientDispatchable() = %v, want %v", tt.at, got, tt.want)
		}
	}
}

func TestVersionActionChannel(t *testing.T) {
	tests := []struct {
		at   ActionType
		want string
	}{
		{ActionRootAgentsChanged, "root"},
		{ActionSessionTitleChanged, "session"},
		{ActionChatTurnStarted, "chat"},
		{ActionChangesetCleared, "changeset"},
		{ActionAnnotationsSet, "annotations"},
		{ActionTerminalData, "terminal"},
		{ActionResourceWatchChanged, "resourceWatch"},
		{"a/b/c", "a"},
		{"noslash", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := tt.at.Channel(); got != tt.want {
			t.Errorf("%q.Channel() = %q, want %q", tt.at, got, tt.want)
		}
	}
	channels := map[string]bool{"root": true, "session": true, "chat": true, "changeset": true,
		"annotations": true, "terminal": true, "resourceWatch": true,
		"canvas": true, "automation": true, "automationRun": true}
	for _, at := range actionTypes {
		if !channels[at.Channel()] {
			t.Errorf("%q.Channel() = %q, not a known channel", at, at.Channel())
		}
	}
}

func TestVersionActionTypes(t *testing.T) {
	got := ActionTypes()
	if !slices.Equal(got, actionTypes[:]) {
		t.Fatal("ActionTypes differs from the generated list")
	}
	got[0] = "changed"
	if actionTypes[0] == "changed" {
		t.Error("ActionTypes returns shared storage")
	}
}

func TestVersionRegistryDoesNotAllocate(t *testing.T) {
	at := ActionChatTurnsLoaded
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = at.IntroducedIn()
		_ = at.ClientDispatchable()
		_ = at.KnownTo("0.8.0")
		_ = at.KnownTo("bad")
		_ = at.Channel()
	})
	if allocs != 0 {
		t.Errorf("registry lookups allocate %v times per run", allocs)
	}
}
