package host

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// The host's config keys of permissions, offered for every backend (the
// policy is plugins', docs/PERMISSIONS.md): permissions, the older
// autoApprove, and inputTimeout. All three may change while a session
// runs. Their defaults are the daemon's (Options.Permissions,
// Options.InputTimeout).

// strictMeta is the createSession _meta key by which a caller asks that
// its config be taken as it is or refused: a key the session does not
// have, or a value its key does not take, is -32602 naming it. The HTTP
// API and the command line ask for it; VS Code, which sends keys of its
// own (mode, autoApprove values of its own), does not, and has what it
// sends that does not fit left at the default.
const strictMeta = "ahpd.strictConfig"

func strictConfig(meta protocol.Object) bool {
	return string(bytes.TrimSpace(meta[strictMeta])) == "true"
}

// checkPermissionOptions checks the daemon's defaults.
func checkPermissionOptions(opts *Options) error {
	if err := opts.Permissions.Validate(); err != nil {
		return fmt.Errorf("host: permissions: %w", err)
	}
	if d := opts.InputTimeout; d != 0 {
		if _, ok := plugins.InputTimeoutOf(session.QuoteJSON(d.String())); !ok {
			return fmt.Errorf("host: inputTimeout %v: want 1s to 720h, or 0 for none", d)
		}
	}
	return nil
}

// permissionProperties are the keys, in the order a client draws them,
// after the backend's own.
func (h *Host) permissionProperties() []plugins.Property {
	mutable := new(true)
	fields := protocol.NewMap[protocol.ConfigPropertySchema]()
	fields.Set("mode", protocol.ConfigPropertySchema{
		Type: "string", Title: "Mode",
		Enum:             []jsontext.Value{session.QuoteJSON(string(plugins.ModeAsk)), session.QuoteJSON(string(plugins.ModeAcceptEdits)), session.QuoteJSON(string(plugins.ModeBypass))},
		EnumLabels:       []string{"Ask", "Accept edits", "Bypass"},
		EnumDescriptions: []string{"Ask before anything the lists do not allow", "Edit files inside the session's folder without asking; ask for the rest", "Allow everything deny does not name"},
		Default:          session.QuoteJSON(string(plugins.ModeAsk)),
	})
	rules := func(title, desc string) protocol.ConfigPropertySchema {
		return protocol.ConfigPropertySchema{Type: "array", Title: title, Description: new(desc),
			Items: &protocol.ConfigPropertySchema{Type: "string", Title: "Rule"}}
	}
	fields.Set("allow", rules("Allow", `Tools allowed without asking: a kind ("edit", "execute", "read") or a tool's name ("Bash"), optionally with a glob the paths must match ("edit(src/**)").`))
	fields.Set("deny", rules("Deny", "Tools never allowed, in the same form; deny wins over allow and every mode."))
	timeout := "0"
	if d := h.opts.InputTimeout; d > 0 {
		timeout = plugins.FormatDuration(d)
	}
	return []plugins.Property{
		{Key: session.KeyPermissions, Schema: protocol.SessionConfigPropertySchema{
			Type:           "object",
			Title:          "Permissions",
			Description:    new("What the agent may do without asking a person."),
			Properties:     fields,
			Default:        h.opts.Permissions.Encode(),
			SessionMutable: mutable,
		}},
		{Key: session.KeyAutoApprove, Schema: protocol.SessionConfigPropertySchema{
			Type:             "string",
			Title:            "Approve tools",
			Description:      new("Allow raises the permissions' mode to bypass: nothing deny does not name is asked."),
			Enum:             []jsontext.Value{session.QuoteJSON("default"), session.QuoteJSON("allow")},
			EnumLabels:       []string{"As the permissions say", "Allow all"},
			EnumDescriptions: []string{"Ask as the session's permissions say", "Never ask, but for what deny names"},
			Default:          session.QuoteJSON("default"),
			SessionMutable:   mutable,
		}},
		{Key: session.KeyInputTimeout, Schema: protocol.SessionConfigPropertySchema{
			Type:           "string",
			Title:          "Input timeout",
			Description:    new(`How long a turn waits for a person (a tool call to confirm, a question) before it is stopped, such as "10m"; "0" waits for ever.`),
			Default:        session.QuoteJSON(timeout),
			SessionMutable: mutable,
		}},
	}
}

// badValue is what a session keeps for a value of key it could not take,
// when the caller did not ask to be refused: permissions that cannot be
// read ask, keeping the daemon's deny rules (never more than asked,
// whatever the default allows); the others keep their default.
func (h *Host) badValue(key string) (jsontext.Value, bool) {
	if key == session.KeyPermissions {
		return h.opts.Permissions.Safe().Encode(), true
	}
	return nil, false
}

// strictRefusal says why createSession refuses config given under
// strictness, or "": keys the session does not have, named with those it
// has, and values their keys do not take, named with why.
func strictRefusal(state protocol.SessionConfigState, given protocol.Object, provider string) string {
	var unknown []string
	for k := range given {
		if _, ok := state.Schema.Properties.Get(k); !ok {
			unknown = append(unknown, protocol.Quote(k))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		if len(unknown) > 5 {
			unknown = append(unknown[:5], fmt.Sprintf("and %d more", len(unknown)-5))
		}
		word := "key"
		if len(unknown) > 1 {
			word = "keys"
		}
		return fmt.Sprintf("config: unknown %s %s; a %s session's keys are %s", word, strings.Join(unknown, ", "), provider, strings.Join(state.Schema.Properties.Keys(), ", "))
	}
	keys := make([]string, 0, len(given))
	for k := range given {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p, _ := state.Schema.Properties.Get(k)
		var why string
		switch {
		case session.IsPermissionKey(k):
			why = session.ValueProblem(k, p, given[k])
		case session.IsHostKey(k):
			if _, ok := session.HostValue(k, p, given[k]); !ok {
				why = session.ValueProblem(k, p, given[k])
			}
		case !session.Fits(p, given[k]):
			why = session.ValueProblem(k, p, given[k])
		}
		if why != "" {
			return fmt.Sprintf("config.%s: %s", k, why)
		}
	}
	return ""
}

var _ chats.Batcher = (*session.Session)(nil)
