package host

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// The host's config keys of permissions, offered for every backend (the
// policy is plugins', docs/PERMISSIONS.md): permissions, the older
// autoApprove, and inputTimeout. All three may change while a session
// runs. Their defaults are the daemon's (Options.Permissions,
// Options.InputTimeout).

const (
	keyPermissions  = plugins.ConfigPermissions
	keyAutoApprove  = plugins.ConfigAutoApprove
	keyInputTimeout = plugins.ConfigInputTimeout
)

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
		if _, ok := plugins.InputTimeoutOf(quoteJSON(d.String())); !ok {
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
		Enum:             []jsontext.Value{quoteJSON(string(plugins.ModeAsk)), quoteJSON(string(plugins.ModeAcceptEdits)), quoteJSON(string(plugins.ModeBypass))},
		EnumLabels:       []string{"Ask", "Accept edits", "Bypass"},
		EnumDescriptions: []string{"Ask before anything the lists do not allow", "Edit files inside the session's folder without asking; ask for the rest", "Allow everything deny does not name"},
		Default:          quoteJSON(string(plugins.ModeAsk)),
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
		{Key: keyPermissions, Schema: protocol.SessionConfigPropertySchema{
			Type:           "object",
			Title:          "Permissions",
			Description:    new("What the agent may do without asking a person."),
			Properties:     fields,
			Default:        h.opts.Permissions.Encode(),
			SessionMutable: mutable,
		}},
		{Key: keyAutoApprove, Schema: protocol.SessionConfigPropertySchema{
			Type:             "string",
			Title:            "Approve tools",
			Description:      new("Allow raises the permissions' mode to bypass: nothing deny does not name is asked."),
			Enum:             []jsontext.Value{quoteJSON("default"), quoteJSON("allow")},
			EnumLabels:       []string{"As the permissions say", "Allow all"},
			EnumDescriptions: []string{"Ask as the session's permissions say", "Never ask, but for what deny names"},
			Default:          quoteJSON("default"),
			SessionMutable:   mutable,
		}},
		{Key: keyInputTimeout, Schema: protocol.SessionConfigPropertySchema{
			Type:           "string",
			Title:          "Input timeout",
			Description:    new(`How long a turn waits for a person (a tool call to confirm, a question) before it is stopped, such as "10m"; "0" waits for ever.`),
			Default:        quoteJSON(timeout),
			SessionMutable: mutable,
		}},
	}
}

func isPermissionKey(k string) bool {
	return k == keyPermissions || k == keyAutoApprove || k == keyInputTimeout
}

// permissionValue returns a value of one of the keys in the form the
// session keeps (permissions trimmed and with its mode; autoApprove true
// and VS Code's "autoApprove" as "allow"; inputTimeout as a duration), or
// why it cannot be taken.
func permissionValue(key string, v jsontext.Value) (jsontext.Value, error) {
	switch key {
	case keyPermissions:
		p, err := plugins.ParsePermissions(v)
		if err != nil {
			return nil, err
		}
		return p.Encode(), nil
	case keyAutoApprove:
		switch string(bytes.TrimSpace(v)) {
		case `"default"`, `false`:
			return quoteJSON("default"), nil
		}
		if plugins.AutoApproves(v) {
			return quoteJSON("allow"), nil
		}
		return nil, fmt.Errorf(`want "default" or "allow" (or false, true)`)
	case keyInputTimeout:
		d, ok := plugins.InputTimeoutOf(v)
		if !ok {
			return nil, fmt.Errorf(`want a duration from 1s to 720h, such as "10m" or a number of seconds, or "0" for none`)
		}
		if d == 0 {
			return quoteJSON("0"), nil
		}
		return quoteJSON(plugins.FormatDuration(d)), nil
	}
	return v, nil
}

// badValue is what a session keeps for a value of key it could not take,
// when the caller did not ask to be refused: permissions that cannot be
// read ask, keeping the daemon's deny rules (never more than asked,
// whatever the default allows); the others keep their default.
func (h *Host) badValue(key string) (jsontext.Value, bool) {
	if key == keyPermissions {
		return h.opts.Permissions.Safe().Encode(), true
	}
	return nil, false
}

// valueProblem says why a config value does not fit its key, for a
// refusal: the permission keys say what is wrong, the others what they
// take.
func valueProblem(key string, p protocol.SessionConfigPropertySchema, v jsontext.Value) string {
	if isPermissionKey(key) {
		if _, err := permissionValue(key, v); err != nil {
			return err.Error()
		}
		return ""
	}
	var allowed []string
	if p.EnumDynamic == nil || !*p.EnumDynamic {
		for _, e := range p.Enum {
			allowed = append(allowed, string(e))
		}
	}
	switch {
	case len(allowed) > 0 && len(allowed) <= 20:
		return "want one of " + strings.Join(allowed, ", ")
	case p.Type != "":
		return "want a value of type " + p.Type
	}
	return "does not take that value"
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
		case isPermissionKey(k):
			why = valueProblem(k, p, given[k])
		case isHostKey(k):
			if _, ok := hostValue(k, p, given[k]); !ok {
				why = valueProblem(k, p, given[k])
			}
		case !fits(p, given[k]):
			why = valueProblem(k, p, given[k])
		}
		if why != "" {
			return fmt.Sprintf("config.%s: %s", k, why)
		}
	}
	return ""
}

// inputTimeoutLocked is how long a turn of the session may wait for a
// person: its inputTimeout, else the daemon's (chats.Options.InputTimeout).
// Called with s.mu held.
func (s *session) inputTimeoutLocked() time.Duration {
	if v, ok := s.configValuesLocked()[keyInputTimeout]; ok {
		if d, ok := plugins.InputTimeoutOf(v); ok {
			return d
		}
	}
	return s.h.opts.InputTimeout
}

// EmitBatch applies and publishes a run of a chat's actions, mirroring the
// chat into the session once, after the last (chats.Batcher): a call the
// session's permissions deny passes through pending-confirmation, which
// the session's inputNeeded and catalogue row must not show. Called with
// s.mu held.
func (s *session) EmitBatch(c *chats.Chat, as []protocol.Action) {
	s.mirrorHeld = true
	for _, a := range as {
		s.emitChatLocked(c, a, nil)
	}
	s.mirrorHeld = false
	s.mirrorChatLocked(c)
}

var _ chats.Batcher = (*session)(nil)
