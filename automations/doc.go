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
// The host is shared: one owner may have Options.MaxPerOwner automations,
// and the folders the file and git ref triggers watch are a budget of the
// host's (Options.WatchBudget), each owner's triggers a share of it
// (Options.WatchShare), so one person's big tree cannot leave everyone
// else's triggers deaf. A trigger past its share is refused when it is
// made; a watch that fails later says why on its automation's entry
// (watch.go). The host itself (IsHostOwner) is bound by neither limit on
// one person.
//
// Cron expressions are parsed here (cron.go), and their occurrences are
// wall-clock times of the schedule's zone, each matching wall time run
// once across clock changes: see Schedule.
//
// It must not import host, reach the network, or start a session itself.
package automations
