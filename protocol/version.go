package protocol

import (
	"fmt"
	"slices"
	"strings"
)

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
		return Version{}, &MalformedVersionError{Version: s}
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
// the versions in offered, by the rule of the protocol's registry: the
// highest offered version that is caret-compatible with one of
// [SupportedVersions], whatever order the client listed them in. A
// malformed entry makes the whole offer invalid (a *MalformedVersionError),
// since a client that cannot spell a version cannot be trusted to speak
// it. If nothing can be served, the error is an *UnsupportedVersionError.
func Negotiate(offered []string) (string, error) {
	var best Version
	found := false
	for _, s := range offered {
		v, ok := parseVersion(s)
		if !ok {
			return "", &MalformedVersionError{Version: s}
		}
		if (found && v.Compare(best) <= 0) || !supported(v) {
			continue
		}
		best, found = v, true
	}
	if !found {
		return "", &UnsupportedVersionError{Offered: slices.Clone(offered), Supported: SupportedVersions()}
	}
	return best.String(), nil
}

// MalformedVersionError reports an offered version that is not
// MAJOR.MINOR.PATCH.
type MalformedVersionError struct {
	// Version is the offending entry, which may be long: quote it with
	// [Quote].
	Version string
}

func (e *MalformedVersionError) Error() string {
	return fmt.Sprintf("invalid protocol version %s: want MAJOR.MINOR.PATCH", Quote(e.Version))
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
// either side's log shows how to fix the mismatch. A long offer is cut.
func (e *UnsupportedVersionError) Error() string {
	offered := e.Offered
	more := ""
	if len(offered) > 8 {
		offered, more = offered[:8], fmt.Sprintf(", and %d more", len(offered)-8)
	}
	quoted := make([]string, len(offered))
	for i, v := range offered {
		quoted[i] = Quote(v)
	}
	return fmt.Sprintf("unsupported protocol version: offered [%s%s], supported [%s]",
		strings.Join(quoted, ", "), more, strings.Join(e.Supported, ", "))
}

// Code returns the JSON-RPC error code AHP assigns to an unsupported
// protocol version.
func (e *UnsupportedVersionError) Code() ErrorCode { return CodeUnsupportedProtocolVersion }

// Data returns the error data AHP sends with [UnsupportedVersionError.Code].
func (e *UnsupportedVersionError) Data() UnsupportedProtocolVersionErrorData {
	return UnsupportedProtocolVersionErrorData{SupportedVersions: slices.Clone(e.Supported)}
}

// IntroducedIn returns the protocol version that introduced t. It reports
// false for a type this package does not define, such as one a newer peer
// sent.
func (t ActionType) IntroducedIn() (string, bool) {
	v, ok := actionIntroducedIn[t]
	return v, ok
}

// NotificationKnownTo reports whether a peer speaking version knows the
// notification method. It reports false for a method the registry does not
// list and for a malformed version.
func NotificationKnownTo(method, version string) bool {
	introduced, ok := notificationIntroducedIn[method]
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
