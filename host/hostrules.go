package host

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// The root config keys of approvals ahpd applies: VS Code's own host
// declares them under these names, and VS Code (1.139) pushes a person's
// settings under them on every connection (permissions and mcpServers it
// has no setting for: an administrator sets them). An administrator
// (root/configChanged is HostConfigure) sets them for every session on
// the host; they lie over each session's permissions as plugins.HostRules.
const (
	// rootPermissions: {"allow": [...], "deny": [...]}, rules as a
	// session's permissions take them.
	rootPermissions = "permissions"
	// rootGlobalAutoApprove: VS Code's chat.tools.global.autoApprove.
	rootGlobalAutoApprove = "globalAutoApproveEnabled"
	// rootTerminalAutoApprove: VS Code's
	// chat.tools.terminal.enableAutoApprove; the rules apply only while
	// it is true (its default).
	rootTerminalAutoApprove = "terminalAutoApproveEnabled"
	// rootTerminalRules: VS Code's chat.tools.terminal.autoApprove.
	rootTerminalRules = "terminalAutoApproveRules"
	// rootAutoReply: VS Code's chat.autoReply: questions are answered at
	// once for a person who is not there (chats.AutoReplyAnswer).
	rootAutoReply = "autoReplyEnabled"
	// rootMCPServers: MCP servers every session's agents get, VS Code's
	// mcpServers (mcp.json's shape: name to server).
	rootMCPServers = "mcpServers"
)

// hostRuleProperties are the root config properties of the keys above.
func hostRuleProperties() []struct {
	key    string
	schema protocol.ConfigPropertySchema
} {
	rules := func(title string) protocol.ConfigPropertySchema {
		return protocol.ConfigPropertySchema{Type: "array", Title: title, Items: &protocol.ConfigPropertySchema{Type: "string", Title: "Rule"}}
	}
	perm := protocol.ConfigPropertySchema{
		Type:        "object",
		Title:       "Permissions",
		Description: new("Tool rules for every session on this host, over each session's own: deny refuses a call in every session, allow runs what a session would ask about. Rules as a session's permissions take them (\"execute\", \"Bash\", \"edit(src/**)\")."),
		Default:     jsontext.Value(`{"allow":[],"deny":[]}`),
		Properties:  protocol.NewMap[protocol.ConfigPropertySchema](),
	}
	perm.Properties.Set("allow", rules("Allowed tools"))
	perm.Properties.Set("deny", rules("Denied tools"))
	return []struct {
		key    string
		schema protocol.ConfigPropertySchema
	}{
		{rootPermissions, perm},
		{rootGlobalAutoApprove, protocol.ConfigPropertySchema{
			Type: "boolean", Title: "Global Auto Approve", Default: jsontext.Value("false"),
			Description: new("Run every tool call of every session without asking, except what a deny rule refuses."),
		}},
		{rootTerminalAutoApprove, protocol.ConfigPropertySchema{
			Type: "boolean", Title: "Terminal Auto Approve", Default: jsontext.Value("true"),
			Description: new("Whether the terminal auto-approve rules decide commands."),
		}},
		{rootAutoReply, protocol.ConfigPropertySchema{
			Type: "boolean", Title: "Auto Reply", Default: jsontext.Value("false"),
			Description: new("Answer the agents' questions at once, telling them nobody is there to answer and to choose by their own judgement."),
		}},
		{rootMCPServers, protocol.ConfigPropertySchema{
			Type: "object", Title: "MCP Servers", Default: jsontext.Value("{}"),
			Description: new("MCP servers every session's agent gets, beside its folder's own, by name: {\"type\": \"stdio\", \"command\", \"args\", \"env\"} or {\"type\": \"http\", \"url\", \"headers\"}. An agent takes a change when it next starts."),
		}},
		{rootTerminalRules, protocol.ConfigPropertySchema{
			Type: "object", Title: "Terminal Auto Approve Rules", Default: jsontext.Value("{}"),
			Description: new("Commands that run without asking: each key a command prefix (\"npm test\") or a /regular expression/, each value true (run), false (ask) or {\"approve\": bool, \"matchCommandLine\": bool}."),
		}},
	}
}

// declareHostRules adds the properties of the approval keys to a root
// config schema.
func declareHostRules(props *protocol.Map[protocol.ConfigPropertySchema]) {
	for _, p := range hostRuleProperties() {
		props.Set(p.key, p.schema)
	}
}

// checkHostRule says why v cannot be the value of the approval key k, or
// "" when it can (or k is not one of them).
func checkHostRule(k string, v jsontext.Value) string {
	switch k {
	case rootPermissions:
		p, err := plugins.ParsePermissions(v)
		if err != nil {
			return fmt.Sprintf("%s: %v", k, err)
		}
		if p.Mode != plugins.ModeAsk {
			return fmt.Sprintf("%s: a mode is each session's own; the host's permissions take allow and deny", k)
		}
	case rootGlobalAutoApprove, rootTerminalAutoApprove, rootAutoReply:
		if s := string(bytes.TrimSpace(v)); s != "true" && s != "false" {
			return fmt.Sprintf("%s takes true or false", k)
		}
	case rootTerminalRules:
		if _, err := plugins.ParseTerminalRules(v); err != nil {
			return fmt.Sprintf("%s: %v", k, err)
		}
	case rootMCPServers:
		if _, err := plugins.ParseMCPServers(v); err != nil {
			return fmt.Sprintf("%s: %v", k, err)
		}
	}
	return ""
}

// hostRulesOf reads the host's rules from root config values, checked
// as they were kept (checkHostRule). Nil when they decide nothing.
func hostRulesOf(values protocol.Object) *plugins.HostRules {
	var r plugins.HostRules
	if v, ok := values[rootPermissions]; ok {
		if p, err := plugins.ParsePermissions(v); err == nil {
			r.Allow, r.Deny = slices.Clone(p.Allow), slices.Clone(p.Deny)
		}
	}
	r.AllowAll = string(bytes.TrimSpace(values[rootGlobalAutoApprove])) == "true"
	if string(bytes.TrimSpace(values[rootTerminalAutoApprove])) != "false" {
		if v, ok := values[rootTerminalRules]; ok {
			if rules, err := plugins.ParseTerminalRules(v); err == nil && len(rules) > 0 {
				r.Terminal = bytes.Clone(v)
			}
		}
	}
	if r.IsZero() {
		return nil
	}
	return &r
}

// hostRulesChanged takes the approval keys of the root config as it now
// is and hands them to every agent that runs. The caller holds no lock.
func (h *Host) hostRulesChanged() {
	h.rootMu.Lock()
	r := hostRulesOf(h.root.Config.Values)
	h.autoReply.Store(string(bytes.TrimSpace(h.root.Config.Values[rootAutoReply])) == "true")
	servers := mcpServersOf(h.root.Config.Values)
	h.unlockRoot()
	var was jsontext.Value
	if old := h.mcpServers.Swap(&servers); old != nil {
		was = *old
	}
	if old := h.hostRules.Swap(r); sameRules(old, r) && bytes.Equal(was, servers) {
		return
	}
	if r != nil && len(r.Terminal) > 0 {
		h.logUnrunnable(r.Terminal)
	}
	for _, s := range h.sessionList() {
		s.HostRulesChanged()
	}
}

// mcpServersOf is root config's MCP servers as agents take them: the
// value as kept (checked when it was), none when it names no server.
func mcpServersOf(values protocol.Object) jsontext.Value {
	v, ok := values[rootMCPServers]
	if !ok {
		return nil
	}
	if s, err := plugins.ParseMCPServers(v); err != nil || len(s) == 0 {
		return nil
	}
	return bytes.Clone(v)
}

// logUnrunnable says which terminal rules Go cannot run, once per change
// of the rules: VS Code's defaults hold some.
func (h *Host) logUnrunnable(v jsontext.Value) {
	rules, err := plugins.ParseTerminalRules(v)
	if err != nil {
		return
	}
	var approve, ask []string
	for _, r := range rules {
		switch {
		case !r.Unrunnable:
		case r.Approve:
			approve = append(approve, r.Key)
		default:
			ask = append(ask, r.Key)
		}
	}
	if len(approve)+len(ask) > 0 {
		h.log.Info("terminal rules with expressions Go cannot run: those approving approve nothing, those asking ask for every command they could match",
			"approving", approve, "asking", ask)
	}
}

func sameRules(a, b *plugins.HostRules) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Allow, b.Allow) && slices.Equal(a.Deny, b.Deny) && a.AllowAll == b.AllowAll && bytes.Equal(a.Terminal, b.Terminal)
}

func (sh *sessionHost) HostRules() *plugins.HostRules { return sh.h().hostRules.Load() }

func (sh *sessionHost) AutoReply() bool { return sh.h().autoReply.Load() }

func (sh *sessionHost) MCPServers() jsontext.Value {
	if v := sh.h().mcpServers.Load(); v != nil {
		return *v
	}
	return nil
}

var _ session.Host = (*sessionHost)(nil)
