package automations

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ahpd/ahpd/protocol"
)

// Bounds on what a client may put in a definition.
const (
	maxTitle     = 500
	maxMessage   = 64 << 10
	maxTriggers  = 32
	maxTriggerID = 200
	maxIDBytes   = 200
)

// Scheme is the scheme of an automation's resource URI.
const (
	Scheme    = "ahp-automation"
	RunScheme = "ahp-automation-run"
	// CatalogueURI is the automation catalogue channel.
	CatalogueURI = "ahp-automations://"
)

// ErrInvalid marks an error in what a client asked for: the host answers
// it as bad input, not as its own failure.
var ErrInvalid = errors.New("invalid automation")

// ErrNotFound marks an automation or run that does not exist (for the
// owner asking).
var ErrNotFound = errors.New("not found")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ErrLimit marks a request refused because it would take its owner past
// a limit of the host's on one person (Options.MaxPerOwner,
// Options.WatchShare). Such an error is ErrInvalid too: the request, not
// the host, is at fault.
var ErrLimit = errors.New("over a limit of the host's")

// limitError is an ErrLimit whose text is the reason alone: a person
// reads it as the rejection and can act on it, and "invalid automation"
// would misname an automation that is fine in itself.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

func (e *limitError) Is(target error) bool { return target == ErrLimit || target == ErrInvalid }

func limited(format string, args ...any) error {
	return &limitError{msg: fmt.Sprintf(format, args...)}
}

// FieldError is an invalid definition's error with the field at fault,
// named as the protocol spells it ("title", "triggers[2].schedule",
// "disableConditions[0]"), so that a config file can point at its own
// line. Its text is Err's: the protocol's rejection reason is unchanged.
type FieldError struct {
	Field string
	Err   error // wraps ErrInvalid
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Reason is the error without the ErrInvalid prefix, to follow a field
// name.
func (e *FieldError) Reason() string {
	return strings.TrimPrefix(e.Err.Error(), ErrInvalid.Error()+": ")
}

// at names the field an error of compile is about.
func at(field string, err error) error {
	return &FieldError{Field: field, Err: err}
}

// Check validates an automation as Create would, without making it: the
// resource is an ahp-automation:/<id> URI and the definition checks. An
// invalid one's error is a *FieldError.
func Check(uri protocol.URI, def protocol.AutomationDefinition) error {
	if _, err := idOf(uri); err != nil {
		return at("resource", err)
	}
	_, err := compile(def)
	return err
}

// idOf returns the id of an ahp-automation:/<id> URI.
func idOf(uri protocol.URI) (string, error) {
	id, ok := strings.CutPrefix(uri, Scheme+":/")
	if !ok || id == "" || strings.HasPrefix(id, "/") {
		return "", invalid("resource %s is not an %s:/<id> URI", protocol.Quote(uri), Scheme)
	}
	if len(id) > maxIDBytes || strings.ContainsAny(id, "/?#") || !utf8.ValidString(id) {
		return "", invalid("automation id %s must be at most %d bytes, without / ? or #", protocol.Quote(id), maxIDBytes)
	}
	return id, nil
}

// compiled is a definition checked and ready: its schedules parsed.
type compiled struct {
	def       protocol.AutomationDefinition
	schedules map[string]*Schedule // by trigger id
	afterRuns int64                // 0: none
	afterDate time.Time            // zero: none
}

// compile checks def and returns it normalized: event triggers carry the
// catalogue's titles, the message's origin is "automation".
func compile(def protocol.AutomationDefinition) (*compiled, error) {
	c := &compiled{def: def, schedules: map[string]*Schedule{}}
	d := &c.def
	if d.Title == "" || len(d.Title) > maxTitle {
		return nil, at("title", invalid("title must be 1 to %d bytes", maxTitle))
	}
	if strings.TrimSpace(d.Message.Text) == "" {
		return nil, at("message", invalid("the message is empty: it is what each run sends"))
	}
	if len(d.Message.Text) > maxMessage {
		return nil, at("message", invalid("the message is %d bytes; at most %d", len(d.Message.Text), maxMessage))
	}
	switch d.Message.Origin.Kind {
	case "":
		d.Message.Origin.Kind = protocol.MessageKindAutomation
	case protocol.MessageKindAutomation:
	default:
		return nil, at("message", invalid("the message's origin kind is %s; an automation's message has kind \"automation\"", protocol.Quote(string(d.Message.Origin.Kind))))
	}
	if len(d.Triggers) > maxTriggers {
		return nil, at("triggers", invalid("%d triggers; at most %d", len(d.Triggers), maxTriggers))
	}
	seen := map[string]bool{}
	d.Triggers = append([]protocol.AutomationTrigger(nil), d.Triggers...)
	for i, t := range d.Triggers {
		field := fmt.Sprintf("triggers[%d]", i)
		id, err := triggerID(t)
		if err != nil {
			return nil, at(field, err)
		}
		if seen[id] {
			return nil, at(field+".id", invalid("two triggers have the id %s; each needs its own", protocol.Quote(id)))
		}
		seen[id] = true
		switch t := t.(type) {
		case *protocol.AutomationScheduleTrigger:
			s, err := ParseSchedule(t.Schedule.Expression, t.Schedule.TimeZone)
			if err != nil {
				return nil, at(field+".schedule", invalid("trigger %s: %v", protocol.Quote(id), err))
			}
			if p := t.MisfirePolicy; p != nil && *p != protocol.AutomationMisfirePolicySkip && *p != protocol.AutomationMisfirePolicyRunOnce {
				return nil, at(field+".misfirePolicy", invalid("trigger %s: misfire policy %s is neither \"skip\" nor \"runOnce\"", protocol.Quote(id), protocol.Quote(string(*p))))
			}
			c.schedules[id] = s
		case *protocol.AutomationEventTrigger:
			n, err := normalizeEvent(t)
			if err != nil {
				return nil, at(field, fmt.Errorf("%w: %v", ErrInvalid, err))
			}
			d.Triggers[i] = n
		}
	}
	kinds := map[string]bool{}
	for i, dc := range d.DisableConditions {
		field := fmt.Sprintf("disableConditions[%d]", i)
		switch dc := dc.(type) {
		case *protocol.AutomationAfterRunsCondition:
			if kinds["afterRuns"] {
				return nil, at(field, invalid("disable condition afterRuns appears twice; each kind may appear once"))
			}
			kinds["afterRuns"] = true
			if dc.Max < 1 {
				return nil, at(field, invalid("disable condition afterRuns: max is %d; it must be at least 1", dc.Max))
			}
			c.afterRuns = dc.Max
		case *protocol.AutomationAfterDateCondition:
			if kinds["afterDate"] {
				return nil, at(field, invalid("disable condition afterDate appears twice; each kind may appear once"))
			}
			kinds["afterDate"] = true
			date, err := time.Parse(time.RFC3339, dc.Date)
			if err != nil {
				return nil, at(field, invalid("disable condition afterDate: %s is not an ISO 8601 date and time such as 2030-01-31T18:00:00Z", protocol.Quote(dc.Date)))
			}
			c.afterDate = date
		default:
			return nil, at(field, invalid("unknown disable condition; ahpd knows afterRuns and afterDate"))
		}
	}
	return c, nil
}

func triggerID(t protocol.AutomationTrigger) (string, error) {
	var id string
	switch t := t.(type) {
	case *protocol.AutomationScheduleTrigger:
		id = t.ID
	case *protocol.AutomationEventTrigger:
		id = t.ID
	default:
		return "", invalid("unknown trigger kind; ahpd knows schedule and event triggers")
	}
	if id == "" || len(id) > maxTriggerID {
		return "", invalid("a trigger id must be 1 to %d bytes", maxTriggerID)
	}
	return id, nil
}

// applyPatch returns def with p's fields replaced.
func applyPatch(def protocol.AutomationDefinition, p protocol.AutomationDefinitionPatch) protocol.AutomationDefinition {
	if p.Title != nil {
		def.Title = *p.Title
	}
	if p.Message != nil {
		def.Message = *p.Message
	}
	if p.Session != nil {
		def.Session = *p.Session
	}
	if p.Enabled != nil {
		def.Enabled = *p.Enabled
	}
	if p.Triggers != nil {
		def.Triggers = p.Triggers
	}
	if p.DisableConditions != nil {
		def.DisableConditions = p.DisableConditions
	}
	if p.Meta != nil {
		def.Meta = p.Meta
	}
	return def
}
