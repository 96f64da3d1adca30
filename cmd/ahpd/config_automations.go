package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// automationConfig is one automation of the config file's automations:
// list. It is the protocol's AutomationDefinition spelled for people who
// write YAML: a message as a string, folders as paths, a trigger as
// schedule or event, disable conditions as a map.
type automationConfig struct {
	// ID names it: its resource is ahp-automation:/<id>. Resource may
	// give the whole URI instead.
	ID       string `yaml:"id"`
	Resource string `yaml:"resource"`
	Title    string `yaml:"title"`
	Message  string `yaml:"message"`
	// Owner is a user of the users directory, by id; left out, the
	// automation is the host's root's.
	Owner    string              `yaml:"owner"`
	Enabled  *bool               `yaml:"enabled"` // default true
	Session  sessionYAML         `yaml:"session"`
	Triggers []automationTrigger `yaml:"triggers"`
	Disable  disableYAML         `yaml:"disable"`
}

type sessionYAML struct {
	Provider string         `yaml:"provider"`
	Folder   string         `yaml:"folder"`  // one absolute path
	Folders  []string       `yaml:"folders"` // or several; the first is the primary
	Config   map[string]any `yaml:"config"`
}

type automationTrigger struct {
	ID       string        `yaml:"id"` // default schedule-<i> or event-<i>
	Schedule *scheduleYAML `yaml:"schedule"`
	Event    *eventYAML    `yaml:"event"`
}

type scheduleYAML struct {
	Cron     string `yaml:"cron"`
	TimeZone string `yaml:"timeZone"`
	Misfire  string `yaml:"misfire"` // skip or runOnce (the default)
}

type eventYAML struct {
	Type   string            `yaml:"type"`
	Events []string          `yaml:"events"`
	Config map[string]string `yaml:"config"`
}

type disableYAML struct {
	AfterRuns *int64 `yaml:"afterRuns"`
	AfterDate string `yaml:"afterDate"`
}

// declaredAutomation is a config file automation, checked: its owner is
// a user id, or "" for the host's root, whose principal is known only
// once ahpd runs (declaredAutomations).
type declaredAutomation struct {
	user       string
	resource   protocol.URI
	definition protocol.AutomationDefinition
}

// checkAutomations turns the config file's automations into definitions,
// checked by the automation engine's own rules; an error names the
// automation and the field, e.g. automations[2].triggers[0].schedule.
// users is the users directory file ("" for none), where owners are.
func checkAutomations(list []automationConfig, users string) ([]declaredAutomation, error) {
	if len(list) == 0 {
		return nil, nil
	}
	var dir *grants.Directory
	seen := map[string]int{}
	out := make([]declaredAutomation, 0, len(list))
	for i, a := range list {
		where := fmt.Sprintf("automations[%d]", i)
		d, err := a.declared()
		if err != nil {
			return nil, fmt.Errorf("%s.%w", where, err)
		}
		if d.user != "" {
			if users == "" {
				return nil, fmt.Errorf("%s.owner: ahpd has no users directory (users:), so every automation is root's: leave owner out", where)
			}
			if dir == nil {
				if dir, err = grants.LoadFile(users); err != nil {
					return nil, fmt.Errorf("%s.owner: %w", where, err)
				}
			}
			if _, ok := dir.Lookup(d.user); !ok {
				return nil, fmt.Errorf("%s.owner: no user %s in the users directory %s (ahpd user add %s ...)", where, protocol.Quote(d.user), users, d.user)
			}
		}
		k := d.user + "\x00" + d.resource
		if j, dup := seen[k]; dup {
			return nil, fmt.Errorf("%s.id: %s is declared twice (also automations[%d])", where, d.resource, j)
		}
		seen[k] = i
		out = append(out, d)
	}
	return out, nil
}

// declared converts one automation and checks it; an error starts with
// the field's name (without the automations[i] prefix).
func (a automationConfig) declared() (declaredAutomation, error) {
	idField := "id"
	uri := automations.Scheme + ":/" + a.ID
	switch {
	case a.ID != "" && a.Resource != "":
		return declaredAutomation{}, errors.New("id: give id or resource, not both")
	case a.Resource != "":
		idField, uri = "resource", a.Resource
	case a.ID == "":
		return declaredAutomation{}, errors.New("id: give the automation an id, e.g. id: nightly-tests")
	}
	enabled := a.Enabled == nil || *a.Enabled
	def := protocol.AutomationDefinition{
		Title:   a.Title,
		Message: protocol.Message{Text: a.Message, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Enabled: enabled,
	}
	if err := a.Session.template(&def.Session); err != nil {
		return declaredAutomation{}, fmt.Errorf("session.%w", err)
	}
	def.Triggers = []protocol.AutomationTrigger{}
	for i, t := range a.Triggers {
		tr, err := t.trigger(i)
		if err != nil {
			return declaredAutomation{}, fmt.Errorf("triggers[%d]%w", i, err)
		}
		def.Triggers = append(def.Triggers, tr)
	}
	var kinds []string // the YAML key of each disable condition, in order
	if n := a.Disable.AfterRuns; n != nil {
		def.DisableConditions = append(def.DisableConditions, &protocol.AutomationAfterRunsCondition{Max: *n})
		kinds = append(kinds, "afterRuns")
	}
	if a.Disable.AfterDate != "" {
		def.DisableConditions = append(def.DisableConditions, &protocol.AutomationAfterDateCondition{Date: a.Disable.AfterDate})
		kinds = append(kinds, "afterDate")
	}
	if err := automations.Check(uri, def); err != nil {
		var fe *automations.FieldError
		if !errors.As(err, &fe) {
			return declaredAutomation{}, fmt.Errorf("%s: %w", idField, err)
		}
		return declaredAutomation{}, fmt.Errorf("%s: %s", a.yamlField(fe.Field, idField, kinds), fe.Reason())
	}
	return declaredAutomation{user: strings.TrimPrefix(a.Owner, "user:"), resource: uri, definition: def}, nil
}

var indexed = regexp.MustCompile(`^(triggers|disableConditions)\[(\d+)\](.*)$`)

// yamlField names, as this file spells it, the field the engine named as
// the protocol does.
func (a automationConfig) yamlField(field, idField string, kinds []string) string {
	if field == "resource" {
		return idField
	}
	m := indexed.FindStringSubmatch(field)
	if m == nil {
		return field
	}
	i, _ := strconv.Atoi(m[2])
	switch {
	case m[1] == "disableConditions" && i < len(kinds):
		return "disable." + kinds[i]
	case m[1] == "triggers" && m[3] == ".misfirePolicy":
		return fmt.Sprintf("triggers[%d].schedule.misfire", i)
	case m[1] == "triggers" && m[3] == "" && i < len(a.Triggers) && a.Triggers[i].Event != nil:
		return fmt.Sprintf("triggers[%d].event", i)
	}
	return field
}

// template fills the session template; an error starts with the field.
func (s sessionYAML) template(t *protocol.AutomationSessionTemplate) error {
	if s.Provider != "" {
		p := s.Provider
		t.Provider = &p
	}
	folders := s.Folders
	field := "folders"
	if s.Folder != "" {
		if len(s.Folders) > 0 {
			return errors.New("folder: give folder or folders, not both")
		}
		folders, field = []string{s.Folder}, "folder"
	}
	for i, f := range folders {
		name := field
		if field == "folders" {
			name = fmt.Sprintf("folders[%d]", i)
		}
		if !filepath.IsAbs(f) {
			return fmt.Errorf("%s: %s is not an absolute path", name, protocol.Quote(f))
		}
		t.WorkingDirectories = append(t.WorkingDirectories, (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Clean(f))}).String())
	}
	if len(s.Config) > 0 {
		t.Config = protocol.Object{}
		for k, v := range s.Config {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("config.%s: %v", k, err)
			}
			if err := checkPermissionValue(k, b); err != nil {
				return fmt.Errorf("config.%s: %w", k, err)
			}
			t.Config[k] = b
		}
	}
	return nil
}

// checkPermissionValue checks a template's permissions and inputTimeout
// as createSession would: a run's session is made without asking to be
// refused (the config is the owner's to fix), so a mistake here would
// leave the run's session asking for everything, or waiting for ever.
func checkPermissionValue(key string, v jsontext.Value) error {
	switch key {
	case plugins.ConfigPermissions:
		_, err := plugins.ParsePermissions(v)
		return err
	case plugins.ConfigInputTimeout:
		if _, ok := plugins.InputTimeoutOf(v); !ok {
			return fmt.Errorf("%s: want a duration from 1s to 720h, such as 30m or a number of seconds, or 0 for none", v)
		}
	}
	return nil
}

// trigger converts one trigger; an error starts with "" or ".field", to
// follow triggers[i].
func (t automationTrigger) trigger(i int) (protocol.AutomationTrigger, error) {
	switch {
	case (t.Schedule == nil) == (t.Event == nil):
		return nil, errors.New(": give one of schedule or event")
	case t.Schedule != nil:
		id := t.ID
		if id == "" {
			id = fmt.Sprintf("schedule-%d", i)
		}
		st := &protocol.AutomationScheduleTrigger{ID: id, Schedule: protocol.AutomationSchedule{Expression: t.Schedule.Cron, TimeZone: t.Schedule.TimeZone}}
		if t.Schedule.Misfire != "" {
			p := protocol.AutomationMisfirePolicy(t.Schedule.Misfire)
			st.MisfirePolicy = &p
		}
		return st, nil
	}
	id := t.ID
	if id == "" {
		id = fmt.Sprintf("event-%d", i)
	}
	et := &protocol.AutomationEventTrigger{ID: id, Type: t.Event.Type}
	for _, ev := range t.Event.Events {
		et.Events = append(et.Events, protocol.AutomationTriggerEventDefinition{ID: ev})
	}
	if len(t.Event.Config) > 0 {
		et.Config = protocol.Object{}
		for k, v := range t.Event.Config {
			b, _ := json.Marshal(v)
			et.Config[k] = b
		}
	}
	return et, nil
}

// declaredAutomations are the config file's automations for the host:
// each owned by its user, or by root, which is root:<host> on a host with
// a users directory and nobody (as the host names a root connection's
// owner) on one without.
func declaredAutomations(cfg *config, auth *grants.Authenticator) []automations.Declared {
	out := make([]automations.Declared, 0, len(cfg.declared))
	for _, d := range cfg.declared {
		owner := ""
		switch {
		case d.user != "":
			owner = grants.UserPrincipal(d.user).String()
		case cfg.Users != "":
			owner = auth.Root().String()
		}
		out = append(out, automations.Declared{Owner: owner, Resource: d.resource, Definition: d.definition})
	}
	return out
}
