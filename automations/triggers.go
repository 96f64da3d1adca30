package automations

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// The event trigger types ahpd offers, and their events.
const (
	TriggerSession = "ahpd.session"     // a session's turn completed or the session failed
	TriggerFiles   = "ahpd.fileChanged" // a file changed under a watched folder
	TriggerGitRef  = "ahpd.gitRef"      // a git ref was updated

	EventTurnCompleted = "turnCompleted"
	EventSessionFailed = "sessionFailed"
	EventFileChanged   = "fileChanged"
	EventRefUpdated    = "refUpdated"
)

// maxConfigValue bounds one string in a trigger's config.
const maxConfigValue = 4096

// Event is something that happened which event triggers may match. The
// host sends session events; the file and ref watchers send the others.
type Event struct {
	Type string // TriggerSession, TriggerFiles or TriggerGitRef
	Name string // the event's id, e.g. EventTurnCompleted

	// Session events.
	Owner    string       // the session's owner: only their automations see it
	Session  protocol.URI // the session
	Provider string       // the session's provider
	Run      protocol.URI // the automation run that made the session, if one did

	// File and ref events.
	Path string // the file that changed, or the repository whose ref moved
	Ref  string // the full ref name, e.g. refs/heads/main
}

// provenance is what a run started by e shows of it (no secrets: names and
// paths the owner configured).
func (e Event) provenance() protocol.Object {
	o := protocol.Object{}
	put := func(k, v string) {
		if v != "" {
			b, _ := json.Marshal(v)
			o[k] = jsontext.Value(b)
		}
	}
	put("type", e.Type)
	put("event", e.Name)
	put("session", e.Session)
	put("path", e.Path)
	put("ref", e.Ref)
	return o
}

// triggerType is one entry of the catalogue.
type triggerType struct {
	def    protocol.AutomationTriggerDefinition
	keys   []string // the config keys it takes
	needed []string // those it must have
}

func strp(s string) *string { return &s }

func stringProp(title, desc string) protocol.ConfigPropertySchema {
	return protocol.ConfigPropertySchema{Type: "string", Title: title, Description: strp(desc)}
}

func schema(required []string, props ...any) *protocol.ConfigSchema {
	m := protocol.NewMap[protocol.ConfigPropertySchema]()
	for i := 0; i < len(props); i += 2 {
		m.Set(props[i].(string), props[i+1].(protocol.ConfigPropertySchema))
	}
	return &protocol.ConfigSchema{Properties: m, Required: required}
}

var catalogue = []triggerType{
	{
		def: protocol.AutomationTriggerDefinition{
			Type:        TriggerSession,
			Title:       "Session",
			Description: strp("A session of yours finished a turn or failed."),
			Events: []protocol.AutomationTriggerEventDefinition{
				{ID: EventTurnCompleted, Title: "Turn completed", Description: strp("A turn of the session ended successfully.")},
				{ID: EventSessionFailed, Title: "Session failed", Description: strp("A turn ended in an error, or the session could not start.")},
			},
			ConfigSchema: schema(nil,
				"automation", stringProp("From automation", "Only sessions made by runs of this automation (its ahp-automation: URI)."),
				"provider", stringProp("Provider", "Only sessions of this provider."),
			),
		},
		keys: []string{"automation", "provider"},
	},
	{
		def: protocol.AutomationTriggerDefinition{
			Type:        TriggerFiles,
			Title:       "File changed",
			Description: strp("A file was created, written, renamed or removed under a folder."),
			Events: []protocol.AutomationTriggerEventDefinition{
				{ID: EventFileChanged, Title: "File changed"},
			},
			ConfigSchema: schema([]string{"folder"},
				"folder", stringProp("Folder", "Absolute path of the folder to watch, with its subfolders."),
				"pattern", stringProp("Pattern", "Only files whose name matches this glob, e.g. *.go."),
			),
		},
		keys:   []string{"folder", "pattern"},
		needed: []string{"folder"},
	},
	{
		def: protocol.AutomationTriggerDefinition{
			Type:        TriggerGitRef,
			Title:       "Git ref updated",
			Description: strp("A branch or tag of a git repository moved."),
			Events: []protocol.AutomationTriggerEventDefinition{
				{ID: EventRefUpdated, Title: "Ref updated"},
			},
			ConfigSchema: schema([]string{"repository"},
				"repository", stringProp("Repository", "Absolute path of the repository's working tree."),
				"ref", stringProp("Ref", "Only this ref, or refs matching this glob, e.g. refs/heads/main or refs/tags/*."),
			),
		},
		keys:   []string{"repository", "ref"},
		needed: []string{"repository"},
	},
}

// TriggerDefinitions returns the event trigger types ahpd offers, for
// listAutomationTriggerDefinitions.
func TriggerDefinitions() []protocol.AutomationTriggerDefinition {
	out := make([]protocol.AutomationTriggerDefinition, len(catalogue))
	for i, t := range catalogue {
		out[i] = t.def
	}
	return out
}

func lookupType(name string) (triggerType, bool) {
	i := slices.IndexFunc(catalogue, func(t triggerType) bool { return t.def.Type == name })
	if i < 0 {
		return triggerType{}, false
	}
	return catalogue[i], true
}

// eventConfig is an event trigger's config, read.
type eventConfig map[string]string

// normalizeEvent checks an event trigger against the catalogue and
// returns it with the catalogue's titles and descriptions.
func normalizeEvent(t *protocol.AutomationEventTrigger) (*protocol.AutomationEventTrigger, error) {
	tt, ok := lookupType(t.Type)
	if !ok {
		return nil, fmt.Errorf("trigger %s: unknown event trigger type %s; listAutomationTriggerDefinitions names those offered", protocol.Quote(t.ID), protocol.Quote(t.Type))
	}
	if len(t.Events) == 0 {
		return nil, fmt.Errorf("trigger %s: choose at least one event of %s", protocol.Quote(t.ID), tt.def.Type)
	}
	out := *t
	out.Title = tt.def.Title
	out.Description = tt.def.Description
	out.Events = nil
	for _, ev := range t.Events {
		i := slices.IndexFunc(tt.def.Events, func(d protocol.AutomationTriggerEventDefinition) bool { return d.ID == ev.ID })
		if i < 0 {
			return nil, fmt.Errorf("trigger %s: %s has no event %s", protocol.Quote(t.ID), tt.def.Type, protocol.Quote(ev.ID))
		}
		if !slices.ContainsFunc(out.Events, func(d protocol.AutomationTriggerEventDefinition) bool { return d.ID == ev.ID }) {
			out.Events = append(out.Events, tt.def.Events[i])
		}
	}
	if _, err := readConfig(tt, t.Config); err != nil {
		return nil, fmt.Errorf("trigger %s: %w", protocol.Quote(t.ID), err)
	}
	return &out, nil
}

// readConfig checks a trigger's config against its type's schema.
func readConfig(tt triggerType, config protocol.Object) (eventConfig, error) {
	c := eventConfig{}
	for k, raw := range config {
		if !slices.Contains(tt.keys, k) {
			return nil, fmt.Errorf("config: %s takes no key %s (it takes %s)", tt.def.Type, protocol.Quote(k), strings.Join(tt.keys, ", "))
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("config: %s must be a string", k)
		}
		if len(s) > maxConfigValue {
			return nil, fmt.Errorf("config: %s is %d bytes; at most %d", k, len(s), maxConfigValue)
		}
		if s != "" {
			c[k] = s
		}
	}
	for _, k := range tt.needed {
		if c[k] == "" {
			return nil, fmt.Errorf("config: %s needs %s", tt.def.Type, k)
		}
	}
	for _, k := range []string{"folder", "repository"} {
		if p, ok := c[k]; ok {
			if !filepath.IsAbs(p) {
				return nil, fmt.Errorf("config: %s %s is not an absolute path", k, protocol.Quote(p))
			}
			c[k] = filepath.Clean(p)
		}
	}
	for _, k := range []string{"pattern", "ref"} {
		if p, ok := c[k]; ok {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("config: %s %s is not a valid glob", k, protocol.Quote(p))
			}
		}
	}
	return c, nil
}

// configOf reads a normalized trigger's config; it was checked on the way
// in, so a failure reads as a config matching nothing.
func configOf(t *protocol.AutomationEventTrigger) eventConfig {
	tt, ok := lookupType(t.Type)
	if !ok {
		return nil
	}
	c, err := readConfig(tt, t.Config)
	if err != nil {
		return nil
	}
	return c
}

// matches reports whether trigger t of an automation at uri fires on ev.
func matches(t *protocol.AutomationEventTrigger, uri protocol.URI, ev Event, runOf func(protocol.URI) protocol.URI) bool {
	if t.Type != ev.Type || !slices.ContainsFunc(t.Events, func(d protocol.AutomationTriggerEventDefinition) bool { return d.ID == ev.Name }) {
		return false
	}
	c := configOf(t)
	if c == nil {
		return false
	}
	switch ev.Type {
	case TriggerSession:
		from := runOf(ev.Run)
		if from == uri {
			return false // an automation never starts itself from its own runs
		}
		if a := c["automation"]; a != "" && a != from {
			return false
		}
		if p := c["provider"]; p != "" && p != ev.Provider {
			return false
		}
		return true
	case TriggerFiles:
		rel, err := filepath.Rel(c["folder"], ev.Path)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return false
		}
		if p := c["pattern"]; p != "" {
			ok, _ := path.Match(p, filepath.Base(ev.Path))
			return ok
		}
		return true
	case TriggerGitRef:
		if filepath.Clean(ev.Path) != c["repository"] {
			return false
		}
		if p := c["ref"]; p != "" {
			ok, _ := path.Match(p, ev.Ref)
			return ok
		}
		return true
	}
	return false
}

// WatchedPaths returns the folders and repositories def's event triggers
// watch, for the host to check against the owner's roots.
func WatchedPaths(def protocol.AutomationDefinition) []string {
	var out []string
	for _, t := range def.Triggers {
		if et, ok := t.(*protocol.AutomationEventTrigger); ok {
			if tt, ok := lookupType(et.Type); ok {
				if c, err := readConfig(tt, et.Config); err == nil {
					for _, k := range []string{"folder", "repository"} {
						if p := c[k]; p != "" {
							out = append(out, p)
						}
					}
				}
			}
		}
	}
	return out
}
