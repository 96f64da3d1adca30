package plugins

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// A session's permissions say which of its agents' tool calls run without
// a person confirming them, the same way for every backend: the session
// config key "permissions" holds them (docs/PERMISSIONS.md), and each
// backend asks its Policy before it asks a person (Confirm).

// The session config keys of permissions, which the host offers for every
// backend.
const (
	// ConfigPermissions holds a Permissions object.
	ConfigPermissions = "permissions"
	// ConfigAutoApprove is the older switch: "allow" (or true, or VS
	// Code's "autoApprove") raises the mode to bypass; anything else
	// leaves the permissions as they are.
	ConfigAutoApprove = "autoApprove"
	// ConfigInputTimeout is how long a turn may wait for a person.
	ConfigInputTimeout = "inputTimeout"
)

// PermissionMode decides what the lists leave open.
type PermissionMode string

const (
	// ModeAsk has a person confirm every call the lists do not decide.
	ModeAsk PermissionMode = "ask"
	// ModeAcceptEdits approves file edits inside the session's folder;
	// it asks for the rest.
	ModeAcceptEdits PermissionMode = "acceptEdits"
	// ModeBypass approves every call deny does not name.
	ModeBypass PermissionMode = "bypass"
)

// Permissions are a session's permissions as its config holds them.
type Permissions struct {
	Mode  PermissionMode `json:"mode"`
	Allow []string       `json:"allow,omitempty"`
	Deny  []string       `json:"deny,omitempty"`
}

// Bounds on what a permissions value may hold: enough for any hand-made
// policy, and small enough that no client makes deciding a call costly.
const (
	maxRules       = 256
	maxRuleBytes   = 512
	maxGlobDepth   = 32
	maxDoubleStars = 4
)

// ParsePermissions reads a permissions value: an object with "mode"
// (ask when left out), "allow" and "deny", nothing else. It refuses a
// malformed value, saying where: a typo must never leave a rule out.
func ParsePermissions(v jsontext.Value) (Permissions, error) {
	var raw struct {
		Mode  *string          `json:"mode"`
		Allow []jsontext.Value `json:"allow"`
		Deny  []jsontext.Value `json:"deny"`
	}
	if jsontext.Value(bytes.TrimSpace(v)).Kind() != '{' {
		return Permissions{}, errors.New(`want an object {"mode": ..., "allow": [...], "deny": [...]}`)
	}
	if err := json.Unmarshal(v, &raw, json.RejectUnknownMembers(true)); err != nil {
		var se *json.SemanticError
		if errors.As(err, &se) && se.JSONPointer != "" {
			// The member's name is the client's: quoted, and cut short.
			name := strings.TrimPrefix(string(se.JSONPointer), "/")
			return Permissions{}, fmt.Errorf("member %s: not one permissions have (mode, allow, deny), or not of its type", protocol.Quote(name))
		}
		return Permissions{}, errors.New(`want an object {"mode": ..., "allow": [...], "deny": [...]}`)
	}
	p := Permissions{Mode: ModeAsk}
	if raw.Mode != nil {
		switch m := PermissionMode(*raw.Mode); m {
		case ModeAsk, ModeAcceptEdits, ModeBypass:
			p.Mode = m
		default:
			return Permissions{}, fmt.Errorf("mode: %s is not ask, acceptEdits or bypass", protocol.Quote(*raw.Mode))
		}
	}
	var err error
	if p.Allow, err = ruleList("allow", raw.Allow); err != nil {
		return Permissions{}, err
	}
	if p.Deny, err = ruleList("deny", raw.Deny); err != nil {
		return Permissions{}, err
	}
	return p, nil
}

// ruleList reads a list of rules, each checked and trimmed.
func ruleList(name string, list []jsontext.Value) ([]string, error) {
	if len(list) > maxRules {
		return nil, fmt.Errorf("%s: %d rules; at most %d", name, len(list), maxRules)
	}
	var out []string
	for i, v := range list {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("%s[%d]: want a string such as \"edit\" or \"edit(src/**)\"", name, i)
		}
		r, err := parseRule(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %s: %v", name, i, protocol.Quote(s), err)
		}
		out = append(out, r.text)
	}
	return out, nil
}

// Validate checks p as ParsePermissions checks a value: for permissions
// made in Go (the daemon's default).
func (p Permissions) Validate() error {
	_, err := ParsePermissions(p.Encode())
	return err
}

// Encode returns p as a config value, mode always set.
func (p Permissions) Encode() jsontext.Value {
	if p.Mode == "" {
		p.Mode = ModeAsk
	}
	v, err := json.Marshal(p)
	if err != nil { // strings and lists of them always encode
		return jsontext.Value(`{"mode":"ask"}`)
	}
	return v
}

// WithAllow returns p with rule added to its allow list, and whether it
// was added: a rule already there (as written) or a full list leaves p
// as it is. The rule is checked as a config value's are.
func (p Permissions) WithAllow(rule string) (Permissions, bool) {
	r, err := parseRule(rule)
	if err != nil || len(p.Allow) >= maxRules {
		return p, false
	}
	for _, have := range p.Allow {
		if have == r.text {
			return p, false
		}
	}
	// A new list: p's may be shared with the config value it came from.
	p.Allow = append(append(make([]string, 0, len(p.Allow)+1), p.Allow...), r.text)
	return p, true
}

// Safe returns what stands for a value that cannot be read: the mode that
// asks, with p's deny list (denying never grants anything).
func (p Permissions) Safe() Permissions {
	return Permissions{Mode: ModeAsk, Deny: p.Deny}
}

// rule is one entry of an allow or deny list: a tool, by its kind or its
// name (case does not matter; "*" is any tool), and optionally a glob the
// paths the call touches must match, relative to the session's folder.
type rule struct {
	from string   // "host " for a rule of the host's (HostRules), else ""
	text string   // as written, trimmed
	word string   // the tool or kind, lower case
	glob []string // the glob's segments; nil for none
}

// pathless are the kinds and tools whose calls touch no path: a rule
// with a glob on one is refused.
var pathless = map[string]bool{
	"execute": true, "fetch": true, "think": true,
	"bash": true, "bashoutput": true, "killshell": true, "killbash": true, "webfetch": true, "websearch": true, "run": true,
}

// parseRule reads "WORD" or "WORD(GLOB)".
func parseRule(s string) (rule, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return rule{}, errors.New("empty")
	case len(s) > maxRuleBytes:
		return rule{}, fmt.Errorf("longer than %d bytes", maxRuleBytes)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return rule{}, errors.New("holds a control character")
		}
	}
	r := rule{text: s}
	word, glob, hasGlob := strings.Cut(s, "(")
	r.word = strings.ToLower(word)
	if err := checkWord(word); err != nil {
		return rule{}, err
	}
	if !hasGlob {
		return r, nil
	}
	if !strings.HasSuffix(glob, ")") {
		return rule{}, errors.New(`a glob ends with ")": "edit(src/**)"`)
	}
	if pathless[r.word] {
		// Claude's "Bash(git *)" is a command pattern: as a path glob it
		// would never match, and a deny rule that never matches is worse
		// than none.
		return rule{}, fmt.Errorf("%s takes no path, so a glob cannot match it: a command pattern is no rule here; name the tool alone to allow or deny every call", word)
	}
	segs, err := parseGlob(strings.TrimSuffix(glob, ")"))
	if err != nil {
		return rule{}, err
	}
	r.glob = segs
	return r, nil
}

// checkWord checks a tool name or kind: letters, digits, "_", "-", ".",
// ":", or "*" alone (any tool).
func checkWord(w string) error {
	if w == "*" {
		return nil
	}
	if w == "" {
		return errors.New(`name a tool or a kind before "(": "edit(src/**)"`)
	}
	for _, c := range w {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("_-.:", c):
		default:
			return fmt.Errorf("%q cannot be part of a tool name (letters, digits, _ - . : or * alone)", c)
		}
	}
	return nil
}

// parseGlob reads a glob relative to the session's folder: segments
// split by "/", "**" (a whole segment) for any number of segments, and
// path.Match patterns ("*", "?", "[a-z]") within a segment. Nothing in it
// can name a place outside the folder: no leading "/", no "." or "..".
func parseGlob(g string) ([]string, error) {
	switch {
	case g == "":
		return nil, errors.New(`empty glob: "**" is every path in the folder`)
	case strings.HasPrefix(g, "/"):
		return nil, errors.New("a glob is relative to the session's folder: leave out the leading /")
	case strings.HasSuffix(g, "/"):
		return nil, fmt.Errorf(`a glob names files: %q for what is under a folder`, g+"**")
	}
	segs := strings.Split(g, "/")
	if len(segs) > maxGlobDepth {
		return nil, fmt.Errorf("more than %d segments", maxGlobDepth)
	}
	stars := 0
	for _, seg := range segs {
		switch {
		case seg == "":
			return nil, errors.New(`an empty segment ("//")`)
		case seg == "." || seg == "..":
			return nil, errors.New(`"." and ".." cannot be part of a glob`)
		case seg == "**":
			stars++
			continue
		case strings.Contains(seg, "**"):
			return nil, errors.New(`"**" is a whole segment: "src/**/*.go"`)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return nil, fmt.Errorf("segment %q: %v", seg, err)
		}
	}
	if stars > maxDoubleStars {
		return nil, fmt.Errorf(`more than %d "**"`, maxDoubleStars)
	}
	return segs, nil
}

// PermissionsOf reads the permissions a session's config values give:
// the "permissions" value (the mode that asks, with no rules, when it is
// missing or cannot be read), its mode raised to bypass when the older
// autoApprove says "allow".
func PermissionsOf(config protocol.Object) Permissions {
	p := Permissions{Mode: ModeAsk}
	if v, ok := config[ConfigPermissions]; ok {
		if parsed, err := ParsePermissions(v); err == nil {
			p = parsed
		}
	}
	if AutoApproves(config[ConfigAutoApprove]) {
		p.Mode = ModeBypass
	}
	return p
}

// AutoApproves reports whether an autoApprove value says approve
// everything: "allow" (the script backend's value), true, or
// "autoApprove" (VS Code's "Allow all").
func AutoApproves(v jsontext.Value) bool {
	switch string(bytes.TrimSpace(v)) {
	case `"allow"`, `true`, `"autoApprove"`:
		return true
	}
	return false
}

// InputTimeoutOf reads an inputTimeout value: a Go duration ("10m",
// "1h30m") or a number of seconds; "0" or 0 is none. ok is false for a
// value that is neither, or is negative or below a second.
func InputTimeoutOf(v jsontext.Value) (d time.Duration, ok bool) {
	v = bytes.TrimSpace(v)
	switch jsontext.Value(v).Kind() {
	case '0':
		var secs float64
		if json.Unmarshal(v, &secs) != nil || secs < 0 || secs > maxInputTimeout.Seconds() {
			return 0, false
		}
		d = time.Duration(secs * float64(time.Second))
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return 0, false
		}
		if s == "0" || s == "" {
			return 0, true
		}
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if d != 0 && (d < time.Second || d > maxInputTimeout) {
		return 0, false
	}
	return d, true
}

// maxInputTimeout is the longest inputTimeout taken: longer is no
// timeout anyone means.
const maxInputTimeout = 30 * 24 * time.Hour

// FormatDuration writes d as people read it: "10m", "1h30m", "45s".
func FormatDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// InputTimeoutError is why a turn ended that waited for a person (a tool
// call to confirm, a question) longer than its session's inputTimeout.
type InputTimeoutError struct {
	Waited time.Duration
	// For says what was waited on: "a tool call's confirmation", "an
	// answer".
	For string
}

func (e *InputTimeoutError) Error() string {
	return fmt.Sprintf("waited %s for input (%s) and nobody answered: the turn was stopped", FormatDuration(e.Waited), e.For)
}
