package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// permissionFlags are the flags that give a session its permissions and
// inputTimeout (docs/PERMISSIONS.md): `ahpd run`'s and `ahpd automations
// add`'s. The host decides every tool call by them, before anybody is
// asked; the command line approves nothing itself.
type permissionFlags struct {
	approve      string // ask, edits or all; "" when not given
	autoApprove  bool   // --auto-approve, the older spelling of --approve all
	allow, deny  []string
	inputTimeout string
	timeoutSet   bool
}

// approveModes are --approve's values, by the mode each is: the short
// words, and the protocol's own names.
var approveModes = map[string]plugins.PermissionMode{
	"ask": plugins.ModeAsk, "edits": plugins.ModeAcceptEdits, "all": plugins.ModeBypass,
	"acceptEdits": plugins.ModeAcceptEdits, "bypass": plugins.ModeBypass,
}

// bind adds the flags to fs; --auto-approve only with autoApprove.
func (p *permissionFlags) bind(fs *pflag.FlagSet, autoApprove bool) {
	fs.StringVar(&p.approve, "approve", "", "the permissions' `MODE`: ask, edits or all (docs/PERMISSIONS.md)")
	if autoApprove {
		fs.BoolVar(&p.autoApprove, "auto-approve", false, "the older spelling of --approve all")
	}
	fs.StringArrayVar(&p.allow, "allow", nil, "a tool call `RULE` names runs without asking: execute, Bash, edit(src/**) (repeatable)")
	fs.StringArrayVar(&p.deny, "deny", nil, "a tool call `RULE` names is refused without asking, whatever the mode (repeatable)")
	fs.Func("input-timeout", "how long a turn may wait for a person: `D` as 30m, 1h30m, seconds, or 0 for ever",
		func(v string) error { p.inputTimeout, p.timeoutSet = v, true; return nil })
}

// config returns the session config the flags give: permissions when
// any of --approve, --auto-approve, --allow and --deny is given (the mode
// ask when --approve is not), inputTimeout when --input-timeout is; nil
// for none, which leaves the session the daemon's. A value that does not
// fit is an error naming its flag, for a usage error: the host would
// refuse it too, later and less plainly.
func (p *permissionFlags) config() (protocol.Object, error) {
	out := protocol.Object{}
	mode := plugins.ModeAsk
	if p.approve != "" {
		m, ok := approveModes[p.approve]
		if !ok {
			return nil, fmt.Errorf("--approve %s: want ask, edits or all", protocol.Quote(p.approve))
		}
		mode = m
	}
	if p.autoApprove {
		if p.approve != "" && mode != plugins.ModeBypass {
			return nil, fmt.Errorf("--auto-approve is --approve all: give one of --auto-approve and --approve %s", p.approve)
		}
		mode = plugins.ModeBypass
	}
	if p.approve != "" || p.autoApprove || len(p.allow) > 0 || len(p.deny) > 0 {
		perms := plugins.Permissions{Mode: mode, Allow: p.allow, Deny: p.deny}
		if err := checkRules("allow", p.allow); err != nil {
			return nil, err
		}
		if err := checkRules("deny", p.deny); err != nil {
			return nil, err
		}
		if err := perms.Validate(); err != nil { // more rules than a list takes
			return nil, fmt.Errorf("--%v", err)
		}
		out[plugins.ConfigPermissions] = perms.Encode()
	}
	if p.timeoutSet {
		v, err := inputTimeoutValue(p.inputTimeout)
		if err != nil {
			return nil, err
		}
		out[plugins.ConfigInputTimeout] = v
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// checkRules checks each rule of --allow or --deny (list) as the host
// reads it, the error naming the flag and the rule.
func checkRules(list string, rules []string) error {
	for _, r := range rules {
		one := plugins.Permissions{Allow: []string{r}}
		if list == "deny" {
			one = plugins.Permissions{Deny: []string{r}}
		}
		if err := one.Validate(); err != nil {
			// "deny[0]: "Bash(git *": a glob ends with ")"" as the flag.
			return fmt.Errorf("--%s %s", list, strings.TrimPrefix(err.Error(), list+"[0]: "))
		}
	}
	return nil
}

// inputTimeoutValue is --input-timeout as the config value: a duration
// (30m, 1h30m), a number of seconds, or 0 for none.
func inputTimeoutValue(s string) (jsontext.Value, error) {
	v := jsontext.Value(strconv.Quote(s))
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		v = jsontext.Value(s)
	}
	if _, ok := plugins.InputTimeoutOf(v); !ok {
		return nil, fmt.Errorf("--input-timeout %s: want a duration from 1s to 720h (30m, 1h30m) or a number of seconds, or 0 to wait for ever", protocol.Quote(s))
	}
	return v, nil
}
