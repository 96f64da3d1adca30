package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// runView is a run as `ahpd automations show` shows it: its summary, and
// what its session waits on a person for while it runs.
type runView struct {
	Run        protocol.AutomationRunSummary `json:"run"`
	WaitingFor []pendingRow                  `json:"waitingFor"`
}

func automationsShow() *cobra.Command {
	var asJSON bool
	return automationsVerb("show [--json] NAME", "the automation and its recent runs: what a running one waits on", "", 1,
		func(fs *pflag.FlagSet) {
			fs.BoolVar(&asJSON, "json", false, "print {automation, runs: [{run, waitingFor}]} as JSON")
		},
		func(ctx context.Context, io cliIO, pos []string, c *client.Client) int {
			return showAutomation(ctx, io, c, pos, asJSON)
		})
}

func showAutomation(ctx context.Context, io cliIO, c *client.Client, pos []string, asJSON bool) int {
	st, err := catalogue(ctx, c)
	if err != nil {
		return fail(io, "automations show", err)
	}
	entry, err := resolveAutomation(st, pos[0])
	if err != nil {
		return fail(io, "automations show", err)
	}
	runs := make([]runView, 0, len(entry.Runs))
	for _, r := range entry.Runs {
		v := runView{Run: r, WaitingFor: []pendingRow{}}
		if _, running := r.Lifecycle.(*protocol.AutomationRunningRunLifecycle); running && r.PrimarySession != nil {
			ws, _ := c.SessionWaiting(ctx, *r.PrimarySession) // a session gone waits on nobody
			for _, w := range ws {
				v.WaitingFor = append(v.WaitingFor, pendingRow{Session: *r.PrimarySession, Chat: w.Chat, Turn: w.TurnID, ID: w.ID, Kind: w.Kind(), Text: w.Text()})
			}
		}
		runs = append(runs, v)
	}
	if asJSON {
		return writeJSON(io, "automations show", map[string]any{"automation": entry, "runs": runs})
	}
	printAutomation(io, entry, runs)
	return exitOK
}

// printAutomation writes an automation and its recent runs for a person.
func printAutomation(io cliIO, e protocol.AutomationEntry, runs []runView) {
	d := e.Definition
	w := io.stdout
	fmt.Fprintf(w, "automation  %s\n", automationID(e.Resource))
	fmt.Fprintf(w, "title       %s\n", d.Title)
	fmt.Fprintf(w, "enabled     %s\n", yesNo(d.Enabled))
	fmt.Fprintf(w, "triggers    %s\n", triggersText(d.Triggers))
	if info, ok := automations.WatchErrorOf(e); ok {
		fmt.Fprintf(w, "watching    no (%s): %s\n", info.ErrorType, info.Message)
	}
	if e.NextRunAt != nil {
		fmt.Fprintf(w, "next run    %s\n", shortTime(*e.NextRunAt))
	}
	provider := "the daemon's default agent"
	if d.Session.Provider != nil {
		provider = *d.Session.Provider
	}
	fmt.Fprintf(w, "provider    %s\n", provider)
	for _, f := range d.Session.WorkingDirectories {
		fmt.Fprintf(w, "folder      %s\n", strings.TrimPrefix(f, "file://"))
	}
	fmt.Fprintf(w, "message     %s\n", oneLine(d.Message.Text, 80))
	if len(runs) == 0 {
		fmt.Fprintln(w, "\nno runs yet")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tCREATED\tSESSION\tNOTE")
	for _, r := range runs {
		session := "-"
		if r.Run.PrimarySession != nil {
			session = sessionID(*r.Run.PrimarySession)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", strings.TrimPrefix(r.Run.Resource, automations.RunScheme+":/"),
			automations.StateOf(r.Run.Lifecycle), shortTime(createdAt(r.Run.Lifecycle)), session, runNote(r))
	}
	_ = tw.Flush()
}

// runNote says why a run failed, or what it waits on.
func runNote(r runView) string {
	if f, ok := r.Run.Lifecycle.(*protocol.AutomationFailedRunLifecycle); ok {
		return oneLine(f.Error.Message, 80)
	}
	var notes []string
	for _, p := range r.WaitingFor {
		notes = append(notes, "waits for somebody to "+answerHint(p.Session, p.Kind, p.ID, p.Text))
	}
	return strings.Join(notes, "; ")
}

// createdAt is when a run was made, whatever its state.
func createdAt(l protocol.AutomationRunLifecycle) string {
	switch l := l.(type) {
	case *protocol.AutomationPendingRunLifecycle:
		return l.CreatedAt
	case *protocol.AutomationRunningRunLifecycle:
		return l.CreatedAt
	case *protocol.AutomationCompletedRunLifecycle:
		return l.CreatedAt
	case *protocol.AutomationFailedRunLifecycle:
		return l.CreatedAt
	case *protocol.AutomationCancelledRunLifecycle:
		return l.CreatedAt
	}
	return ""
}
