package session

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

const (
	KeyPermissions  = plugins.ConfigPermissions
	KeyAutoApprove  = plugins.ConfigAutoApprove
	KeyInputTimeout = plugins.ConfigInputTimeout
)

func IsPermissionKey(k string) bool {
	return k == KeyPermissions || k == KeyAutoApprove || k == KeyInputTimeout
}

// permissionValue returns a value of one of the keys in the form the
// session keeps (permissions trimmed and with its mode; autoApprove true
// and VS Code's "autoApprove" as "allow"; inputTimeout as a duration), or
// why it cannot be taken.
func permissionValue(key string, v jsontext.Value) (jsontext.Value, error) {
	switch key {
	case KeyPermissions:
		p, err := plugins.ParsePermissions(v)
		if err != nil {
			return nil, err
		}
		return p.Encode(), nil
	case KeyAutoApprove:
		switch string(bytes.TrimSpace(v)) {
		case `"default"`, `false`:
			return QuoteJSON("default"), nil
		}
		if plugins.AutoApproves(v) {
			return QuoteJSON("allow"), nil
		}
		return nil, fmt.Errorf(`want "default" or "allow" (or false, true)`)
	case KeyInputTimeout:
		d, ok := plugins.InputTimeoutOf(v)
		if !ok {
			return nil, fmt.Errorf(`want a duration from 1s to 720h, such as "10m" or a number of seconds, or "0" for none`)
		}
		if d == 0 {
			return QuoteJSON("0"), nil
		}
		return QuoteJSON(plugins.FormatDuration(d)), nil
	}
	return v, nil
}

// ValueProblem says why a config value does not fit its key, for a
// refusal: the permission keys say what is wrong, the others what they
// take.
func ValueProblem(key string, p protocol.SessionConfigPropertySchema, v jsontext.Value) string {
	if IsPermissionKey(key) {
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

// inputTimeoutLocked is how long a turn of the session may wait for a
// person: its inputTimeout, else the daemon's (chats.Options.InputTimeout).
// Called with s.mu held.
func (s *Session) inputTimeoutLocked() time.Duration {
	if v, ok := s.configValuesLocked()[KeyInputTimeout]; ok {
		if d, ok := plugins.InputTimeoutOf(v); ok {
			return d
		}
	}
	return s.h.InputTimeout
}

// EmitBatch applies and publishes a run of a chat's actions, mirroring the
// chat into the session once, after the last (chats.Batcher): a call the
// session's permissions deny passes through pending-confirmation, which
// the session's inputNeeded and catalogue row must not show. Called with
// s.mu held.
func (s *Session) EmitBatch(c *chats.Chat, as []protocol.Action) {
	s.mirrorHeld = true
	for _, a := range as {
		s.emitChatLocked(c, a, nil)
	}
	s.mirrorHeld = false
	s.mirrorChatLocked(c)
}

// PolicyLocked returns the session's permissions as its config says them
// now, bound to the folder its agents work in (chats.Granter): what a
// confirmation's options are worked out from. Called with s.mu held.
func (s *Session) PolicyLocked() *plugins.Policy {
	return plugins.PolicyOf(s.configValuesLocked(), s.WorkDir())
}

// AllowLocked adds rule to the session's allow rules, for a person who
// allowed a call in this session (chats.Granter). It is a
// session/configChanged of the permissions key, checked as a client's is
// and then applied, journaled, broadcast and kept as one, so every
// client sees the rule in the session's config and it outlives a
// restart. The function it returns, run holding no lock, tells the
// chats' agents; nil when nothing changed (the rule was there, the list
// is full, the session cannot change its permissions now). Called with
// s.mu held.
func (s *Session) AllowLocked(c *chats.Chat, rule string) func() {
	cfg := s.state.Config
	if s.disposed || cfg == nil {
		return nil
	}
	prop, ok := cfg.Schema.Properties.Get(KeyPermissions)
	if !ok {
		return nil
	}
	v, ok := cfg.Values[KeyPermissions]
	if !ok {
		v = prop.Default
	}
	p, err := plugins.ParsePermissions(v)
	if err != nil {
		return nil
	}
	grown, ok := p.WithAllow(rule)
	if !ok {
		return nil
	}
	a := &protocol.SessionConfigChangedAction{Config: protocol.Object{KeyPermissions: grown.Encode()}}
	config, reason := configChange(cfg, a, !s.provisional)
	if reason != "" {
		s.h.Log.Warn("a rule allowed in a session could not be kept", "session", s.uri, "rule", rule, "reason", reason)
		return nil
	}
	a.Config = config
	if !s.emitSessionLocked(a, nil) {
		return nil
	}
	s.h.Log.Info("a person allowed a tool in the session", "session", s.uri, "chat", c.URI(), "rule", rule)
	entries := s.afterSessionActionLocked(a)
	return func() { s.configureChats(entries) }
}

var _ chats.Granter = (*Session)(nil)
