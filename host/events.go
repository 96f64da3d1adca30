package host

import (
	"context"

	"github.com/creachadair/jrpc2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// Telling the world outside what happened (package events): a turn that
// waits on a person, a turn that ended, an automation run that ended, as
// Options.Events takes them. The host only makes the events, where they
// happen, and queues each in the session's outbox, so that it leaves with
// no lock held and in the order the session's changes did; the sink
// (webhooks, in the daemon) must take it without waiting.
//
// A sink may offer more through interfaces of its own: a log of what it
// did with the events (EventLog, served as ahpd/webhookLog) and its
// metrics (a prometheus.Collector, on /metrics with the host's).

// EventLog is what a sink that keeps a log of its deliveries offers:
// ahpd/webhookLog answers with it, encoded as JSON.
type EventLog interface {
	// EventLog returns the newest limit entries of the log (all of them
	// for 0), and whatever else the sink says of itself.
	EventLog(limit int) any
}

// emptyEventLog is ahpd/webhookLog's answer on a host with no sink that
// keeps a log: no webhooks, nothing delivered.
type emptyEventLog struct {
	Webhooks   []struct{} `json:"webhooks"`
	Deliveries []struct{} `json:"deliveries"`
}

// maxEventLog bounds the entries one ahpd/webhookLog asks for.
const maxEventLog = 1000

type eventLogParams struct {
	Limit int `json:"limit"`
}

// webhookLog is ahpd/webhookLog: the sink's log of deliveries. It shows
// every user's sessions, so it needs host:configure (admins).
func (h *Host) webhookLog(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p eventLogParams
	if raw := req.ParamString(); raw != "" {
		if err := jsonUnmarshal([]byte(raw), &p); err != nil {
			return nil, invalidParams(req.Method(), err)
		}
	}
	if p.Limit < 0 || p.Limit > maxEventLog {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: limit: %d: from 1 to %d, or 0 for the default", req.Method(), p.Limit, maxEventLog)
	}
	l, ok := h.opts.Events.(EventLog)
	if !ok {
		return emptyEventLog{Webhooks: []struct{}{}, Deliveries: []struct{}{}}, nil
	}
	return l.EventLog(p.Limit), nil
}

// eventCollectors are the sink's metrics, when it has any.
func (h *Host) eventCollectors() []prometheus.Collector {
	if c, ok := h.opts.Events.(prometheus.Collector); ok {
		return []prometheus.Collector{c}
	}
	return nil
}

// automationEvent tells the sink an automation's run ended, from the
// engine's change (automationChanged). A run's end comes after its
// turn's, which its session queued as the turn ended: told through the
// same session's outbox, the run's end leaves behind it.
func (h *Host) automationEvent(ch automations.Change) {
	lc, ok := ch.Action.(*protocol.AutomationRunLifecycleChangedAction)
	if h.opts.Events == nil || !ok || ch.Run == nil {
		return
	}
	run := &events.Run{URI: ch.Run.Resource, Automation: ch.Run.Automation}
	switch l := lc.Lifecycle.(type) {
	case *protocol.AutomationCompletedRunLifecycle:
		run.Outcome = "completed"
	case *protocol.AutomationCancelledRunLifecycle:
		run.Outcome = "cancelled"
	case *protocol.AutomationFailedRunLifecycle:
		run.Outcome, run.Error = "failed", l.Error.Message
	default:
		return // not ended
	}
	ev := events.Event{Kind: events.AutomationRunFinished, Time: h.now(), Run: run}
	if ch.Run.PrimarySession != nil {
		if s := h.held(*ch.Run.PrimarySession); s != nil {
			s.Tell(ev)
			return
		}
		ev.Session = events.Session{URI: *ch.Run.PrimarySession}
		if su, err := protocol.ParseSessionURI(*ch.Run.PrimarySession); err == nil {
			ev.Session.ID = su.ID
		}
	}
	h.opts.Events.Event(ev)
}
