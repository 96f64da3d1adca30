// Package automations owns AHP automations: their definitions, triggers
// (cron schedules in a time zone, and events from the catalogue ahpd
// offers), disable conditions, runs and the history of runs, and keeping
// all of it across restarts in a directory it is given.
//
// It speaks the protocol's types where they are the wire shape
// (protocol.AutomationDefinition, AutomationEntry, AutomationRunState) but
// knows nothing of the host or of the transport: the host hands it
// requests (Create, Update, Remove, Run, CancelRun), events (Event), and a
// Runner that starts a run's session and turn; the engine tells the host
// what changed through Options.OnChange. Time comes from a Clock, so tests
// drive schedules with a FakeClock instead of waiting.
//
// Cron expressions are parsed here (cron.go), and their occurrences are
// wall-clock times of the schedule's zone, each matching wall time run
// once across clock changes: see Schedule.
//
// It must not import host, reach the network, or start a session itself.
package automations
