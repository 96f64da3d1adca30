package plugins

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ahpd/ahpd/protocol"
)

// The kinds of tool a ToolCall may be, as ACP names them; a backend maps
// its own tools onto them, so that one rule ("edit", "execute") reaches
// every backend's tools of that kind.
const (
	KindRead    = "read"
	KindEdit    = "edit" // writes or changes files
	KindDelete  = "delete"
	KindMove    = "move"
	KindSearch  = "search"
	KindExecute = "execute" // runs a command
	KindFetch   = "fetch"
	KindOther   = "other"
)

// Verdict is what a policy decided of a call.
type Verdict int

const (
	// Ask leaves the call to a person.
	Ask Verdict = iota
	// Allow runs it without asking.
	Allow
	// Deny refuses it without asking.
	Deny
)

// Decision is a policy's verdict on one call and why, in a few words a
// person reads in the turn: `deny "execute"`, `mode acceptEdits`.
type Decision struct {
	Verdict Verdict
	Rule    string
}

// PolicyDenied starts the reason of every call a policy denied, which a
// backend reading its transcript back knows a denial by.
const PolicyDenied = "Denied by the session's permissions"

// Reason says the decision in a sentence, for the agent and the turn.
func (d Decision) Reason() string {
	switch d.Verdict {
	case Allow:
		return "Allowed by the session's permissions (" + d.Rule + ")."
	case Deny:
		return PolicyDenied + " (" + d.Rule + ")."
	}
	return ""
}

// Policy is a session's permissions bound to the folder its agents work
// in, which every path glob is relative to and acceptEdits stays inside.
// Its methods are safe for concurrent use.
type Policy struct {
	perm        Permissions
	allow, deny []rule // the session's, then the host's
	dir         string
	allowAll    bool           // the host's AllowAll
	terminal    []TerminalRule // the host's terminal rules
}

// NewPolicy binds p to dir. A rule that does not parse (p was not
// checked) is left out of allow and makes the policy ask for everything
// it would otherwise allow: never more than asked.
func NewPolicy(p Permissions, dir string) *Policy {
	pol := &Policy{perm: p, dir: dir}
	bad := false
	for _, s := range p.Allow {
		if r, err := parseRule(s); err == nil {
			pol.allow = append(pol.allow, r)
		}
	}
	for _, s := range p.Deny {
		r, err := parseRule(s)
		if err != nil {
			bad = true
			continue
		}
		pol.deny = append(pol.deny, r)
	}
	if bad {
		// A deny rule lost could be the one that matters.
		pol.perm.Mode, pol.allow = ModeAsk, nil
	}
	return pol
}

// PolicyOf is the policy of a session's config values for its agents
// working in dir (PermissionsOf), with the host's rules the values carry
// (ConfigHostRules).
func PolicyOf(config protocol.Object, dir string) *Policy {
	pol := NewPolicy(PermissionsOf(config), dir)
	host := hostLayerOf(config)
	if host.bad {
		pol.perm.Mode, pol.allow = ModeAsk, nil
	}
	pol.allow = append(pol.allow, host.allow...)
	pol.deny = append(pol.deny, host.deny...)
	pol.allowAll, pol.terminal = host.allowAll, host.terminal
	return pol
}

// Permissions returns what the policy was made of.
func (p *Policy) Permissions() Permissions { return p.perm }

// target is one path a call touches, as the policy sees it.
type target struct {
	rel    string // relative to the folder's real path, slash-separated
	inside bool   // it lands inside the folder
	ok     bool   // it could be resolved
}

// Decide says what becomes of call: deny rules first, then bypass, then
// allow rules, then acceptEdits for an edit inside the folder; else a
// person is asked. A path that cannot be resolved is never allowed by a
// glob, and with a deny glob to check it asks rather than guesses.
func (p *Policy) Decide(call ToolCall) Decision {
	if p == nil {
		return Decision{Verdict: Ask}
	}
	var targets []target
	resolved := false
	paths := func() []target {
		if !resolved {
			targets, resolved = p.resolve(call.Paths), true
		}
		return targets
	}
	unsure := false
	for _, r := range p.deny {
		if !r.names(call) {
			continue
		}
		if r.glob == nil {
			return Decision{Verdict: Deny, Rule: r.from + "deny " + quoteRule(r.text)}
		}
		for _, t := range paths() {
			switch {
			case !t.ok:
				unsure = true
			case t.inside && matchGlob(r.glob, t.rel):
				return Decision{Verdict: Deny, Rule: r.from + "deny " + quoteRule(r.text)}
			}
		}
	}
	if unsure {
		return Decision{Verdict: Ask}
	}
	if p.perm.Mode == ModeBypass {
		return Decision{Verdict: Allow, Rule: "mode bypass"}
	}
	if p.allowAll {
		return Decision{Verdict: Allow, Rule: "host allowAll"}
	}
	for _, r := range p.allow {
		if r.names(call) && (r.glob == nil || allInside(paths(), r.glob)) {
			return Decision{Verdict: Allow, Rule: r.from + "allow " + quoteRule(r.text)}
		}
	}
	if p.perm.Mode == ModeAcceptEdits && strings.EqualFold(call.Kind, KindEdit) && allInside(paths(), nil) {
		return Decision{Verdict: Allow, Rule: "mode acceptEdits"}
	}
	if len(p.terminal) > 0 && strings.EqualFold(call.Kind, KindExecute) {
		if key, ok := DecideCommand(p.terminal, commandOf(call)); ok {
			return Decision{Verdict: Allow, Rule: "host terminal " + quoteRule(key)}
		}
	}
	return Decision{Verdict: Ask}
}

// names reports whether the rule's word names the call's tool or kind.
func (r rule) names(call ToolCall) bool {
	return r.word == "*" || strings.EqualFold(r.word, call.Kind) || strings.EqualFold(r.word, call.Name)
}

// allInside reports whether the call touches at least one path, and every
// one lands inside the folder (and matches glob, when there is one).
func allInside(ts []target, glob []string) bool {
	if len(ts) == 0 {
		return false
	}
	for _, t := range ts {
		if !t.ok || !t.inside || (glob != nil && !matchGlob(glob, t.rel)) {
			return false
		}
	}
	return true
}

func quoteRule(s string) string { return protocol.Quote(s) }

// resolve finds where each path lands, relative to the folder's real path.
// A path with ".." in it is taken both ways: as the kernel resolves it
// (".." after the links before it) and as most tools do (cleaned first,
// as Go's filepath.Clean and Node's path.resolve do), since the policy
// cannot know which the tool does: deny matches either, allow needs both.
func (p *Policy) resolve(paths []string) []target {
	if len(paths) == 0 {
		return nil
	}
	realDir, err := realPath(p.dir)
	out := make([]target, 0, len(paths))
	for _, name := range paths {
		if err != nil || name == "" || strings.ContainsRune(name, 0) {
			out = append(out, target{})
			continue
		}
		abs := name
		if !filepath.IsAbs(abs) {
			// Not filepath.Join, which would take ".." before the links
			// ahead of it.
			abs = p.dir + string(filepath.Separator) + abs
		}
		out = append(out, landing(realDir, abs))
		if clean := filepath.Clean(abs); clean != abs {
			out = append(out, landing(realDir, clean))
		}
	}
	return out
}

// landing resolves the absolute path abs and places it against realDir.
func landing(realDir, abs string) target {
	real, err := realPath(abs)
	if err != nil {
		return target{}
	}
	rel, err := filepath.Rel(realDir, real)
	inside := err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
	return target{rel: filepath.ToSlash(rel), inside: inside, ok: true}
}

// maxLinks bounds the symbolic links followed resolving one path, as the
// kernel bounds them.
const maxLinks = 40

// realPath returns where the absolute path name lands as the kernel
// resolves it: each symbolic link on the way followed, the last one too
// (writing a link writes where it points), ".." taken after the links
// before it. What does not exist yet is taken as named: nothing below it
// can be a link.
func realPath(name string) (string, error) {
	if !filepath.IsAbs(name) {
		return "", fmt.Errorf("%s is not an absolute path", name)
	}
	todo := strings.Split(filepath.ToSlash(name), "/")
	cur := "/"
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		info, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			// The rest is made as named.
			return filepath.Join(append([]string{next}, todo...)...), nil
		}
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many links", name)
		}
		dest, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(dest) {
			cur = "/"
		}
		todo = append(strings.Split(filepath.ToSlash(dest), "/"), todo...)
	}
	return cur, nil
}

// matchGlob matches a slash-separated relative path against a glob's
// segments: "**" takes any number of segments, others one each by
// path.Match.
func matchGlob(glob []string, rel string) bool {
	var segs []string
	if rel != "." && rel != "" {
		segs = strings.Split(rel, "/")
	}
	return matchSegs(glob, segs)
}

func matchSegs(glob, segs []string) bool {
	for len(glob) > 0 {
		if glob[0] == "**" {
			rest := glob[1:]
			for i := 0; i <= len(segs); i++ {
				if matchSegs(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(glob[0], segs[0]); !ok {
			return false
		}
		glob, segs = glob[1:], segs[1:]
	}
	return len(segs) == 0
}

// SessionRule returns the allow rule a person's "allow in this session"
// adds to the permissions for call, or "" when no rule would say what the
// person saw: the next calls like this one then run without asking. What
// "like this one" means depends on what the call touches:
//
//   - a call that touches paths (a write, an edit) is allowed for its tool
//     anywhere in the session's folder, NAME(**), as a person who let the
//     agent write a.txt means to let it write the folder's files without
//     asking each time; a path outside the folder is never allowed, so a
//     call that touches one gets no rule;
//   - a call that touches no path (a command, a fetch, an MCP tool) is
//     allowed for its tool whole, NAME: rules hold no command patterns,
//     so allowing a shell allows every command it runs;
//   - a file tool (edit, delete, move, read, search) whose paths the
//     backend could not tell gets no rule: allowing it whole would let it
//     touch any file, outside the folder too.
//
// A tool whose name a rule cannot hold gets none, and neither does a call
// the rule would not allow after all (a deny glob it cannot be checked
// against): offering it would promise what the policy will not do.
func (p *Policy) SessionRule(call ToolCall) string {
	if p == nil || call.Name == "*" || checkWord(call.Name) != nil {
		return ""
	}
	rule := call.Name
	switch {
	case len(call.Paths) > 0 && !pathless[strings.ToLower(call.Name)]:
		rule += "(**)"
	case len(call.Paths) == 0 && touchesFiles(call.Kind):
		return ""
	}
	grown, ok := p.perm.WithAllow(rule)
	if !ok {
		return ""
	}
	if NewPolicy(grown, p.dir).Decide(call).Verdict != Allow {
		return ""
	}
	return rule
}

// touchesFiles reports whether a kind of tool works on files.
func touchesFiles(kind string) bool {
	switch strings.ToLower(kind) {
	case KindEdit, KindDelete, KindMove, KindRead, KindSearch:
		return true
	}
	return false
}

// Confirm decides call by p and, when p leaves it open, asks a person
// through t. It reports whether the call may run, and the decision that
// says so (Ask when a person answered). A call p decides is reported to t
// as decided (Turn.Decided): visible in the turn, never silently let
// through. A nil p asks.
func Confirm(ctx context.Context, t Turn, p *Policy, call ToolCall) (bool, Decision, error) {
	d := p.Decide(call)
	switch d.Verdict {
	case Allow, Deny:
		t.Decided(call, d)
		return d.Verdict == Allow, d, nil
	}
	ok, err := t.Confirm(ctx, call)
	return ok, d, err
}
