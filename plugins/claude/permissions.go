package claude

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// The session's permissions (plugins.Policy) reach the CLI two ways. The
// CLI runs in its own default mode, which asks for edits, commands and
// fetches, and every can_use_tool it asks is answered by the policy
// before a person is (permission.go): acceptEdits and bypass are ahpd's
// decisions, not the CLI's modes, whose acceptEdits also runs some
// commands (mkdir, rm, mv) unasked and whose bypassPermissions the CLI
// refuses as root and would skip deny. The CLI reads and searches inside
// its folder without asking, though, and nothing asked cannot be denied:
// so the deny rules also go to the CLI, as --disallowedTools: a rule
// without a glob as the tools it names (the CLI then offers them to no
// model), a glob on reading or searching as a Read rule on that path.

// cliArgs returns the flags the agent's config gives the CLI: the
// backend's own keys (but the model, model.go) and the deny rules of the
// session's permissions, one --disallowedTools list for both. Called with
// a.mu held.
func (a *Agent) cliArgs() []string {
	// --mcp-config first: the tool lists that follow take every value up
	// to the next flag.
	args := append(mcpArgs(a.config), configArgs(a.config)...)
	deny := denyArgs(a.config, a.conv.Dir, a.realDir)
	if len(deny) == 0 {
		return args
	}
	// configArgs ends with its --disallowedTools list when it has one:
	// the rules join it.
	if slices.Contains(args, "--disallowedTools") {
		return append(args, deny[1:]...)
	}
	return append(args, deny...)
}

// readKinds are the kinds whose deny globs become the CLI's Read rules:
// the CLI applies those to every tool that reads.
var readKinds = []string{"*", plugins.KindRead, plugins.KindSearch}

// denyArgs returns --disallowedTools for the deny rules of the session's
// permissions, for the CLI working in dir (realDir once its links are
// resolved), or nothing.
func denyArgs(config protocol.Object, dir, realDir string) []string {
	var tools []string
	add := func(t string) {
		if !slices.Contains(tools, t) {
			tools = append(tools, t)
		}
	}
	for _, rule := range plugins.PermissionsOf(config).Deny {
		word, glob, hasGlob := strings.Cut(rule, "(")
		glob = strings.TrimSuffix(glob, ")")
		if !hasGlob {
			for _, t := range toolsNamed(word) {
				add(t)
			}
			continue
		}
		if !readsFiles(word) {
			continue // edits, commands: the CLI asks, the policy answers
		}
		// An absolute rule ("//" starts one), so neither the CLI's idea of
		// a relative path nor a link in the folder's path can miss it.
		for _, d := range []string{dir, realDir} {
			add("Read(/" + filepath.ToSlash(filepath.Join(d, glob)) + ")")
		}
	}
	if len(tools) == 0 {
		return nil
	}
	return append([]string{"--disallowedTools"}, tools...)
}

// toolsNamed returns the CLI's tools a rule's word names: "*" all it has,
// a kind those of the kind, else the tool of that name in any case, or
// the word itself when it could be a tool the CLI has and ahpd does not
// know (an MCP tool, a newer one).
func toolsNamed(word string) []string {
	var out []string
	for name, k := range toolKinds {
		if word == "*" || strings.EqualFold(word, k.kind) || strings.EqualFold(word, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 && word != "" && strings.Trim(word, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == "" {
		out = append(out, word)
	}
	slices.Sort(out)
	return out
}

// readsFiles reports whether a rule's word names a kind or tool that
// reads files.
func readsFiles(word string) bool {
	for _, k := range readKinds {
		if strings.EqualFold(word, k) {
			return true
		}
	}
	k, ok := toolKindFold(word)
	return ok && (k == plugins.KindRead || k == plugins.KindSearch)
}

// toolKindFold returns the kind of the CLI's tool named word, in any case.
func toolKindFold(word string) (string, bool) {
	for name, k := range toolKinds {
		if strings.EqualFold(word, name) {
			return k.kind, true
		}
	}
	return "", false
}
