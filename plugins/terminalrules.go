package plugins

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Terminal rules approve commands by what they run, as VS Code's
// chat.tools.terminal.autoApprove setting does: a rule is a command
// prefix ("npm test") or a /regular expression/, and approves the
// commands it matches (true) or keeps them asking (false). A command line
// is split into the commands it chains (&&, ||, ;, |, &, new lines); it
// runs without asking only when every one is approved and none is kept
// asking. What cannot be seen through (a command substitution, an output
// redirection to a file) is never approved by a rule: it asks.

// TerminalRule is one terminal auto-approve rule.
type TerminalRule struct {
	// Key is the rule as written: a command prefix, or /re/flags.
	Key string
	// Approve runs what the rule matches; false keeps it asking, even
	// where another rule approves it.
	Approve bool
	// CommandLine matches the whole command line instead of each command
	// of it.
	CommandLine bool
	// Unrunnable marks a /re/ rule Go cannot run (JavaScript's
	// look-arounds and back references, which VS Code's own defaults
	// use). Such a rule approves nothing; one that keeps commands asking
	// keeps every command asking that starts with the word its
	// expression starts with, or every command when it starts with none:
	// never fewer than it would.
	Unrunnable bool

	re   *regexp.Regexp // a /re/ rule's expression; nil for a prefix
	word string         // an unrunnable rule's leading word
}

// Bounds on terminal rules and the commands they decide.
const (
	maxTerminalRules     = 1024
	maxTerminalRuleBytes = 1024
	// maxCommandBytes is the longest command line rules decide; a longer
	// one asks.
	maxCommandBytes = 64 << 10
)

// ParseTerminalRules reads a terminal rules object, VS Code's shape:
// each key a rule, each value true, false, null (no rule) or
// {"approve": bool, "matchCommandLine": bool}. The rules are returned in
// key order. A rule that cannot be read is an error naming it; an
// expression Go cannot run is not (see Unrunnable).
func ParseTerminalRules(v jsontext.Value) ([]TerminalRule, error) {
	var raw map[string]jsontext.Value
	if err := json.Unmarshal(v, &raw, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("terminal rules are an object of rules: %v", err)
	}
	if len(raw) > maxTerminalRules {
		return nil, fmt.Errorf("%d terminal rules; at most %d are taken", len(raw), maxTerminalRules)
	}
	out := make([]TerminalRule, 0, len(raw))
	for key, val := range raw {
		r, keep, err := parseTerminalRule(key, val)
		if err != nil {
			return nil, err
		}
		if keep {
			out = append(out, r)
		}
	}
	sortRules(out)
	return out, nil
}

func parseTerminalRule(key string, val jsontext.Value) (TerminalRule, bool, error) {
	name := key
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	if strings.TrimSpace(key) == "" || len(key) > maxTerminalRuleBytes {
		return TerminalRule{}, false, fmt.Errorf("terminal rule %q: a rule is a command or a /regular expression/ of 1 to %d bytes", name, maxTerminalRuleBytes)
	}
	r := TerminalRule{Key: key}
	switch s := strings.TrimSpace(string(val)); s {
	case "null":
		return TerminalRule{}, false, nil
	case "true", "false":
		r.Approve = s == "true"
	default:
		var obj struct {
			Approve          *bool `json:"approve"`
			MatchCommandLine bool  `json:"matchCommandLine"`
		}
		if err := json.Unmarshal(val, &obj, json.RejectUnknownMembers(true)); err != nil || obj.Approve == nil {
			return TerminalRule{}, false, fmt.Errorf("terminal rule %q: its value is true, false, null or {\"approve\": true|false, \"matchCommandLine\": true|false}", name)
		}
		r.Approve, r.CommandLine = *obj.Approve, obj.MatchCommandLine
	}
	if re, ok, err := ruleRegexp(key); err != nil {
		r.Unrunnable, r.word = true, leadingWord(key)
	} else if ok {
		r.re = re
	}
	return r, true, nil
}

// ruleRegexp reads a /re/flags key. JavaScript's flags i (ignore case),
// m, s and u are taken; g and y mean nothing for a test. An expression Go
// cannot take (a look-ahead, a back reference) is an error.
func ruleRegexp(key string) (*regexp.Regexp, bool, error) {
	if len(key) < 2 || key[0] != '/' {
		return nil, false, nil
	}
	end := strings.LastIndexByte(key, '/')
	if end == 0 {
		return nil, false, nil
	}
	expr, flags := key[1:end], key[end+1:]
	var goFlags string
	for _, f := range flags {
		switch f {
		case 'i', 'm', 's':
			if !strings.ContainsRune(goFlags, f) {
				goFlags += string(f)
			}
		case 'g', 'y', 'u':
		default:
			return nil, false, fmt.Errorf("unknown flag %q", f)
		}
	}
	if goFlags != "" {
		expr = "(?" + goFlags + ")" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, false, fmt.Errorf("not an expression ahpd can run: %v", err)
	}
	return re, true, nil
}

// leadingWord is the command word a /re/flags key's expression starts
// with ("/^yarn\\s+audit/" gives "yarn"), or "" when it starts with none
// it can tell.
func leadingWord(key string) string {
	expr := key[1:strings.LastIndexByte(key, '/')]
	if !strings.HasPrefix(expr, "^") {
		return ""
	}
	expr = expr[1:]
	end := 0
	for end < len(expr) {
		c := expr[end]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			end++
			continue
		}
		break
	}
	// A word followed by a quantifier or an alternation is not a word
	// the command must start with.
	if end == 0 || end < len(expr) && strings.ContainsRune("?*{|", rune(expr[end])) {
		return ""
	}
	if end < len(expr) && expr[end] == '+' {
		return ""
	}
	return expr[:end]
}

// sortRules orders rules by key, so a decision names the same rule every
// time whatever order a map gave them in.
func sortRules(rs []TerminalRule) {
	slices.SortFunc(rs, func(a, b TerminalRule) int { return strings.Compare(a.Key, b.Key) })
}

// matches reports whether the rule matches s, a command or (CommandLine)
// a command line.
func (r TerminalRule) matches(s string) bool {
	if r.re != nil {
		return r.re.MatchString(s)
	}
	k := strings.TrimSpace(r.Key)
	if r.Unrunnable {
		if r.Approve {
			return false
		}
		if r.word == "" {
			return true
		}
		// Case folded: the expression may have ignored case.
		w := r.word
		return len(s) >= len(w) && strings.EqualFold(s[:len(w)], w) && (len(s) == len(w) || s[len(w)] == ' ' || s[len(w)] == '\t')
	}
	return s == k || strings.HasPrefix(s, k) && (s[len(k)] == ' ' || s[len(k)] == '\t')
}

// DecideCommand decides a command line by rules, as VS Code does: no
// rule may keep the line or any of its commands asking; then either a
// command line rule approves the line, or a rule approves each of its
// commands. It returns the rule that approved (the first command's), or
// ok false when the line is to ask, also when it cannot be seen through.
func DecideCommand(rules []TerminalRule, line string) (rule string, ok bool) {
	line = strings.TrimSpace(line)
	if line == "" || len(line) > maxCommandBytes || len(rules) == 0 {
		return "", false
	}
	byLine := ""
	for _, r := range rules {
		if !r.CommandLine || !r.matches(line) {
			continue
		}
		if !r.Approve {
			return "", false
		}
		if byLine == "" {
			byLine = r.Key
		}
	}
	commands, clear := SplitCommands(line)
	if !clear || len(commands) == 0 {
		return "", false
	}
	first, all := "", true
	for _, c := range commands {
		approved := ""
		for _, r := range rules {
			if r.CommandLine || !r.matches(c) {
				continue
			}
			if !r.Approve {
				return "", false
			}
			if approved == "" {
				approved = r.Key
			}
		}
		if approved == "" {
			all = false
		} else if first == "" {
			first = approved
		}
	}
	switch {
	case byLine != "":
		return byLine, true
	case all:
		return first, true
	}
	return "", false
}

// SplitCommands splits a shell command line into the commands it chains,
// each trimmed, outside quotes. clear is false when the line holds what a
// rule on its commands cannot vouch for: a command substitution ($(…),
// backquotes, <(…), >(…)), an output redirection to a file, an unclosed
// quote.
func SplitCommands(line string) (commands []string, clear bool) {
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			commands = append(commands, s)
		}
		cur.Reset()
	}
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
			cur.WriteByte(c)
			continue
		case quote == '"':
			switch {
			case c == '\\' && i+1 < len(line):
				cur.WriteByte(c)
				i++
				c = line[i]
			case c == '"':
				quote = 0
			case c == '`', c == '$' && i+1 < len(line) && line[i+1] == '(':
				return nil, false
			}
			cur.WriteByte(c)
			continue
		}
		switch c {
		case '\\':
			cur.WriteByte(c)
			if i+1 < len(line) {
				i++
				cur.WriteByte(line[i])
			}
		case '\'', '"':
			quote = c
			cur.WriteByte(c)
		case '`':
			return nil, false
		case '$':
			if i+1 < len(line) && line[i+1] == '(' {
				return nil, false
			}
			cur.WriteByte(c)
		case '<':
			if i+1 < len(line) && line[i+1] == '(' {
				return nil, false
			}
			cur.WriteByte(c)
		case '>':
			n, ok := harmlessRedirect(line[i:])
			if !ok {
				return nil, false
			}
			cur.WriteString(line[i : i+n])
			i += n - 1
		case ';', '\n', '\r':
			flush()
		case '&', '|':
			if i+1 < len(line) && line[i+1] == c {
				i++
			}
			// "2>&1" was taken by harmlessRedirect; a lone & or | chains.
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	if quote != 0 {
		return nil, false
	}
	flush()
	return commands, true
}

// harmlessRedirect reports whether the output redirection s starts with
// writes no file (">&2", ">/dev/null", ">> /dev/null"), and its length.
func harmlessRedirect(s string) (int, bool) {
	n := 1
	if len(s) > 1 && s[1] == '>' {
		n = 2
	}
	if n < len(s) && s[n] == '(' {
		return 0, false
	}
	if n < len(s) && s[n] == '&' {
		m := n + 1
		for m < len(s) && s[m] >= '0' && s[m] <= '9' {
			m++
		}
		return m, m > n+1
	}
	m := n
	for m < len(s) && (s[m] == ' ' || s[m] == '\t') {
		m++
	}
	const null = "/dev/null"
	if strings.HasPrefix(s[m:], null) && (len(s) == m+len(null) || strings.ContainsRune(" \t;&|\n", rune(s[m+len(null)]))) {
		return m + len(null), true
	}
	return 0, false
}

// commandOf reads the command line a call runs from its input: a
// "command" member, a string or a list of words. "" when it has none.
func commandOf(call ToolCall) string {
	if call.Input == "" {
		return ""
	}
	var in struct {
		Command jsontext.Value `json:"command"`
	}
	if json.Unmarshal([]byte(call.Input), &in) != nil || len(in.Command) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(in.Command, &s) == nil {
		return s
	}
	var words []string
	if json.Unmarshal(in.Command, &words) == nil {
		return strings.Join(words, " ")
	}
	return ""
}
