package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

func init() {
	register(func() *cobra.Command {
		c := newGroup("automations ls|add|run|show|rm ...", "list, make, run, show and remove automations (ahpd automations --help)",
			`Automations: a message and a session template that ahpd runs on a
schedule, on an event, or when asked (see docs/AUTOMATIONS.md).

NAME is an automation's id, a unique prefix of one, or its URI.`,
			automationsLs(), automationsAdd(), automationsRun(), automationsShow(), automationsRm())
		c.SuggestFor = []string{"automation"}
		return c
	})
}

// automationsVerb is `ahpd automations VERB`, which takes npos
// arguments: run gets them and a client of the daemon.
func automationsVerb(use, short, long string, npos int, extra func(*pflag.FlagSet),
	run func(ctx context.Context, io cliIO, pos []string, c *client.Client) int) *cobra.Command {
	var cf connFlags
	name := "automations " + strings.Fields(use)[0]
	cmd := newCommand(use, short, &cf, extra, func(ctx context.Context, pos []string, io cliIO) int {
		if len(pos) != npos {
			if npos == 0 {
				return cmdUsageError(io, name, fmt.Errorf("unexpected argument %s", protocol.Quote(pos[0])))
			}
			return cmdUsageError(io, name, errors.New("name one automation"))
		}
		c, err := dial(ctx, cf)
		if err != nil {
			return fail(io, name, err)
		}
		defer c.Close()
		return run(ctx, io, pos, c)
	})
	cmd.Long = long
	return cmd
}

// catalogue subscribes to the automation catalogue and returns it.
func catalogue(ctx context.Context, c *client.Client) (*protocol.AutomationState, error) {
	st, err := c.Subscribe(ctx, automations.CatalogueURI)
	if err != nil {
		return nil, fmt.Errorf("reading the automations: %w", err)
	}
	as, ok := st.(*protocol.AutomationState)
	if !ok {
		return nil, fmt.Errorf("the daemon answered %T for the automation catalogue", st)
	}
	return as, nil
}

// automationID is the id part of an automation's URI.
func automationID(uri string) string {
	return strings.TrimPrefix(uri, automations.Scheme+":/")
}

// resolveAutomation turns what a person typed (an id, a unique prefix of
// one, or a URI) into the automation's entry.
func resolveAutomation(st *protocol.AutomationState, arg string) (protocol.AutomationEntry, error) {
	var found []protocol.AutomationEntry
	for _, e := range st.Entries {
		if e.Resource == arg || automationID(e.Resource) == arg {
			return e, nil
		}
		if strings.HasPrefix(automationID(e.Resource), arg) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return protocol.AutomationEntry{}, fmt.Errorf("no automation %s: `ahpd automations ls` lists them", protocol.Quote(arg))
	case 1:
		return found[0], nil
	}
	return protocol.AutomationEntry{}, fmt.Errorf("%s names %d automations: give more of the id", protocol.Quote(arg), len(found))
}

func automationsLs() *cobra.Command {
	var asJSON bool
	return automationsVerb("ls [--json]", "list the automations: ID, ENABLED, TRIGGERS, NEXT RUN, LAST RUN, TITLE", "", 0,
		func(fs *pflag.FlagSet) {
			fs.BoolVar(&asJSON, "json", false, "print the catalogue's entries, runs included, as JSON")
		},
		func(ctx context.Context, io cliIO, _ []string, c *client.Client) int {
			return listAutomations(ctx, io, c, asJSON)
		})
}

func listAutomations(ctx context.Context, io cliIO, c *client.Client, asJSON bool) int {
	st, err := catalogue(ctx, c)
	if err != nil {
		return fail(io, "automations ls", err)
	}
	if asJSON {
		entries := st.Entries
		if entries == nil {
			entries = []protocol.AutomationEntry{}
		}
		return writeJSON(io, "automations ls", entries)
	}
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tENABLED\tTRIGGERS\tNEXT RUN\tLAST RUN\tTITLE")
	for _, e := range st.Entries {
		next := "-"
		if e.NextRunAt != nil {
			next = shortTime(*e.NextRunAt)
		}
		last := "-"
		if len(e.Runs) > 0 {
			last = automations.StateOf(e.Runs[0].Lifecycle)
		}
		triggers := oneLine(triggersText(e.Definition.Triggers), 40)
		if _, ok := automations.WatchErrorOf(e); ok {
			triggers += " (not watching: ahpd automations show)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", automationID(e.Resource), yesNo(e.Definition.Enabled),
			triggers, next, last, oneLine(e.Definition.Title, 60))
	}
	_ = tw.Flush()
	return exitOK
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// triggersText says what starts an automation, briefly.
func triggersText(ts []protocol.AutomationTrigger) string {
	var out []string
	for _, t := range ts {
		switch t := t.(type) {
		case *protocol.AutomationScheduleTrigger:
			out = append(out, fmt.Sprintf("cron %s %s", t.Schedule.Expression, t.Schedule.TimeZone))
		case *protocol.AutomationEventTrigger:
			for _, ev := range t.Events {
				out = append(out, "on "+kebab(ev.ID))
			}
		}
	}
	if len(out) == 0 {
		return "by hand"
	}
	return strings.Join(out, ", ")
}

// kebab spells a catalogue event id (turnCompleted) as a flag value
// (turn-completed).
func kebab(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('-')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// addOptions are `ahpd automations add`'s flags.
type addOptions struct {
	id, title, message, provider, misfire, tz, until string
	crons, folders, on, with                         []string
	afterRuns                                        int64
	disabled                                         bool
	permissions                                      permissionFlags
}

func automationsAdd() *cobra.Command {
	var o addOptions
	return automationsVerb(`add --title T --message M [--id ID] [--cron EXPR [--tz ZONE] [--misfire runOnce|skip]]
        [--on EVENT [--with KEY=VALUE]...] [--provider P] [--folder DIR]... [--after-runs N] [--until DATE] [--disabled]
        [--approve ask|edits|all] [--allow RULE]... [--deny RULE]... [--input-timeout D]`,
		"make an automation, and print its URI",
		`add makes an automation and prints its URI. --approve, --allow and --deny
are its sessions' permissions (what runs without asking a person),
--input-timeout how long a run's turn waits for one. EVENT is one of the
host's trigger events: turn-completed, session-failed, file-changed,
ref-updated (file-changed needs --with folder=DIR, ref-updated --with
repository=DIR).`, 0, func(fs *pflag.FlagSet) {
			fs.StringVar(&o.id, "id", "", "its id, `ID` (ahp-automation:/ID; default a random one)")
			fs.StringVar(&o.title, "title", "", "its title, `T` (default the message's first 60 characters)")
			fs.StringVar(&o.message, "message", "", "what each run sends, `M` (required)")
			fs.StringVar(&o.provider, "provider", "", "the agent, `P` (default the daemon's default agent as each run starts)")
			fs.StringVar(&o.tz, "tz", "UTC", "the schedules' IANA time `ZONE`")
			fs.StringVar(&o.misfire, "misfire", "", "what a schedule does about occurrences missed while ahpd was down: `runOnce|skip` (default runOnce)")
			fs.StringVar(&o.until, "until", "", "stop triggering after this ISO 8601 `DATE`")
			fs.Int64Var(&o.afterRuns, "after-runs", 0, "stop triggering after `N` automatic runs")
			fs.BoolVar(&o.disabled, "disabled", false, "make it with its triggers off (it can still be run by hand)")
			fs.StringArrayVar(&o.crons, "cron", nil, "a schedule trigger: five cron fields, or six with seconds first, `EXPR` (repeatable)")
			fs.StringArrayVar(&o.folders, "folder", nil, "a working directory, `DIR` (repeatable; default the current directory)")
			fs.StringArrayVar(&o.on, "on", nil, "an event trigger, `EVENT`: turn-completed, session-failed, file-changed, ref-updated (repeatable)")
			fs.StringArrayVar(&o.with, "with", nil, "config for the --on triggers, `KEY=VALUE`: automation, provider, folder, pattern, repository, ref (repeatable)")
			o.permissions.bind(fs, false)
		}, func(ctx context.Context, io cliIO, _ []string, c *client.Client) int {
			return addAutomation(ctx, io, c, o)
		})
}

func addAutomation(ctx context.Context, io cliIO, c *client.Client, o addOptions) int {
	uri, def, err := o.definition(ctx, c)
	if err != nil {
		return fail(io, "automations add", err)
	}
	if _, err := catalogue(ctx, c); err != nil {
		return fail(io, "automations add", err)
	}
	err = c.DispatchWait(ctx, automations.CatalogueURI, &protocol.AutomationCreateRequestedAction{Resource: uri, Definition: def})
	var refused *client.RejectedError
	if errors.As(err, &refused) {
		return fail(io, "automations add", errors.New(refused.Reason))
	}
	if err != nil {
		return fail(io, "automations add", err)
	}
	fmt.Fprintln(io.stdout, uri)
	return exitOK
}

// definition builds the automation the flags describe. The host checks
// it (cron, time zone, trigger config, folders inside your roots) and
// says what is wrong.
func (o addOptions) definition(ctx context.Context, c *client.Client) (string, protocol.AutomationDefinition, error) {
	var def protocol.AutomationDefinition
	if strings.TrimSpace(o.message) == "" {
		return "", def, errors.New("--message is required: it is what each run sends")
	}
	if o.title == "" {
		o.title = oneLine(o.message, 60)
	}
	id := o.id
	if id == "" {
		id = randomID()
	}
	def = protocol.AutomationDefinition{
		Title:    o.title,
		Message:  protocol.Message{Text: o.message, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Enabled:  !o.disabled,
		Triggers: []protocol.AutomationTrigger{},
	}
	if o.provider != "" {
		def.Session.Provider = &o.provider
	}
	config, err := o.permissions.config()
	if err != nil {
		return "", def, err
	}
	def.Session.Config = config
	folders := o.folders
	if len(folders) == 0 {
		folders = []string{"."}
	}
	for _, f := range folders {
		abs, err := filepath.Abs(f)
		if err != nil {
			return "", def, fmt.Errorf("--folder %s: %w", f, err)
		}
		def.Session.WorkingDirectories = append(def.Session.WorkingDirectories, (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String())
	}
	for i, expr := range o.crons {
		st := &protocol.AutomationScheduleTrigger{ID: fmt.Sprintf("schedule-%d", i), Schedule: protocol.AutomationSchedule{Expression: expr, TimeZone: o.tz}}
		if o.misfire != "" {
			p := protocol.AutomationMisfirePolicy(o.misfire)
			st.MisfirePolicy = &p
		}
		def.Triggers = append(def.Triggers, st)
	}
	if len(o.on) > 0 {
		events, err := o.eventTriggers(ctx, c)
		if err != nil {
			return "", def, err
		}
		def.Triggers = append(def.Triggers, events...)
	} else if len(o.with) > 0 {
		return "", def, errors.New("--with configures an --on trigger: give --on EVENT")
	}
	if o.afterRuns != 0 {
		def.DisableConditions = append(def.DisableConditions, &protocol.AutomationAfterRunsCondition{Max: o.afterRuns})
	}
	if o.until != "" {
		def.DisableConditions = append(def.DisableConditions, &protocol.AutomationAfterDateCondition{Date: o.until})
	}
	return automations.Scheme + ":/" + id, def, nil
}

// eventTriggers makes the --on triggers from the host's trigger
// catalogue: each event by its id in kebab case, with the --with config
// the catalogue's schema takes (relative paths made absolute).
func (o addOptions) eventTriggers(ctx context.Context, c *client.Client) ([]protocol.AutomationTrigger, error) {
	var defs protocol.ListAutomationTriggerDefinitionsResult
	if err := c.Call(ctx, "listAutomationTriggerDefinitions", protocol.ListAutomationTriggerDefinitionsParams{}, &defs); err != nil {
		return nil, fmt.Errorf("reading the trigger catalogue: %w", err)
	}
	with := map[string]string{}
	for _, kv := range o.with {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--with %s: give KEY=VALUE", protocol.Quote(kv))
		}
		if (k == "folder" || k == "repository") && v != "" {
			abs, err := filepath.Abs(v)
			if err != nil {
				return nil, fmt.Errorf("--with %s: %w", k, err)
			}
			v = abs
		}
		with[k] = v
	}
	var out []protocol.AutomationTrigger
	var known []string
	used := map[string]bool{}
	for i, name := range o.on {
		var tt *protocol.AutomationTriggerDefinition
		var ev protocol.AutomationTriggerEventDefinition
		known = known[:0]
		for j := range defs.Items {
			for _, e := range defs.Items[j].Events {
				known = append(known, kebab(e.ID))
				if kebab(e.ID) == name || e.ID == name {
					tt, ev = &defs.Items[j], e
				}
			}
		}
		if tt == nil {
			return nil, fmt.Errorf("--on %s: the daemon offers %s", protocol.Quote(name), strings.Join(known, ", "))
		}
		config := protocol.Object{}
		if tt.ConfigSchema != nil {
			for k, v := range with {
				if _, ok := tt.ConfigSchema.Properties.Get(k); ok {
					b, _ := json.Marshal(v)
					config[k] = b
					used[k] = true
				}
			}
		}
		out = append(out, &protocol.AutomationEventTrigger{ID: "event-" + strconv.Itoa(i), Type: tt.Type, Title: tt.Title,
			Events: []protocol.AutomationTriggerEventDefinition{ev}, Config: config})
	}
	for k := range with {
		if !used[k] {
			return nil, fmt.Errorf("--with %s: no --on event takes it (see listAutomationTriggerDefinitions, or docs/AUTOMATIONS.md)", protocol.Quote(k))
		}
	}
	return out, nil
}

func automationsRun() *cobra.Command {
	var noWait, asJSON bool
	return automationsVerb("run [--no-wait] [--json] NAME", "run an automation now, and wait for the run",
		`run starts a run and waits for it: exit 0 completed, 1 failed or
cancelled, 130 interrupted (the run is cancelled). While its turn waits on
a person it says on what, and how to answer. --no-wait prints the run's
URI and returns.`, 1, func(fs *pflag.FlagSet) {
			fs.BoolVar(&noWait, "no-wait", false, "print the run's URI and return")
			fs.BoolVar(&asJSON, "json", false, "print the run's final state as JSON")
		}, func(ctx context.Context, io cliIO, pos []string, c *client.Client) int {
			return runAutomation(ctx, io, c, pos, noWait, asJSON)
		})
}

func runAutomation(ctx context.Context, io cliIO, c *client.Client, pos []string, noWait, asJSON bool) int {
	st, err := catalogue(ctx, c)
	if err != nil {
		return fail(io, "automations run", err)
	}
	entry, err := resolveAutomation(st, pos[0])
	if err != nil {
		return fail(io, "automations run", err)
	}
	var res protocol.RunAutomationResult
	if err := c.Call(ctx, "runAutomation", protocol.RunAutomationParams{Automation: entry.Resource, RequestID: "cli-" + randomID()}, &res); err != nil {
		return fail(io, "automations run", err)
	}
	if noWait {
		fmt.Fprintln(io.stdout, res.Resource)
		return exitOK
	}
	fmt.Fprintf(io.stderr, "ahpd automations run: run %s of %s\n", strings.TrimPrefix(res.Resource, automations.RunScheme+":/"), automationID(entry.Resource))
	run, interrupted, err := waitRun(ctx, c, res.Resource, io)
	if err != nil {
		return fail(io, "automations run", err)
	}
	code := exitFailed
	switch l := run.Lifecycle.(type) {
	case *protocol.AutomationCompletedRunLifecycle:
		code = exitOK
	case *protocol.AutomationFailedRunLifecycle:
		fmt.Fprintf(io.stderr, "ahpd automations run: the run failed: %s\n", l.Error.Message)
	case *protocol.AutomationCancelledRunLifecycle:
		fmt.Fprintln(io.stderr, "ahpd automations run: the run was cancelled")
	}
	if interrupted {
		code = exitInterrupt
	}
	if asJSON {
		if c := writeJSON(io, "automations run", run); c != exitOK {
			return c
		}
	} else if run.PrimarySession != nil {
		fmt.Fprintf(io.stderr, "ahpd automations run: session %s (`ahpd show %s`)\n", sessionID(*run.PrimarySession), sessionID(*run.PrimarySession))
	}
	return code
}

// waitRun watches a run until it ends, saying on stderr (once each) what
// its session waits on a person for. When ctx ends first it cancels the
// run and waits a little for it to say so; interrupted is then true.
func waitRun(ctx context.Context, c *client.Client, run string, io cliIO) (protocol.AutomationRunState, bool, error) {
	// The run exists now: an interrupt from here on cancels it, so
	// watching it is not cut short by one.
	sub, cancelSub := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	_, err := c.Subscribe(sub, run)
	cancelSub()
	if err != nil {
		return protocol.AutomationRunState{}, false, fmt.Errorf("watching the run: %w", err)
	}
	told := map[string]bool{}
	for ctx.Err() == nil {
		changed := c.Changed()
		rs, _ := c.State(run).(*protocol.AutomationRunState)
		if rs != nil && runEnded(rs) {
			return *rs, false, nil
		}
		if rs != nil && rs.PrimarySession != nil {
			// A session gone or not readable waits on nobody here.
			ws, _ := c.SessionWaiting(ctx, *rs.PrimarySession)
			for _, w := range ws {
				if !told[w.ID] {
					told[w.ID] = true
					fmt.Fprintf(io.stderr, "ahpd automations run: the run waits for somebody to %s\n", howToAnswer(*rs.PrimarySession, w))
				}
			}
		}
		select {
		case <-changed:
		case <-c.Disconnected():
			return protocol.AutomationRunState{}, false, errors.New("lost the connection to ahpd; the run goes on: `ahpd automations show` follows it")
		case <-ctx.Done():
		}
	}
	// Interrupted: the run goes with it.
	stop, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := c.Dispatch(stop, run, &protocol.AutomationRunCancelRequestedAction{}); err != nil {
		return protocol.AutomationRunState{}, true, fmt.Errorf("cancelling the run: %w", err)
	}
	st, err := c.WaitState(stop, run, func(s protocol.ChannelState) bool {
		rs, ok := s.(*protocol.AutomationRunState)
		return ok && runEnded(rs)
	})
	if err != nil {
		return protocol.AutomationRunState{}, true, fmt.Errorf("the run did not end after it was cancelled: %w", err)
	}
	return *st.(*protocol.AutomationRunState), true, nil
}

// runEnded reports whether a run has ended.
func runEnded(rs *protocol.AutomationRunState) bool {
	switch rs.Lifecycle.(type) {
	case *protocol.AutomationCompletedRunLifecycle, *protocol.AutomationFailedRunLifecycle, *protocol.AutomationCancelledRunLifecycle:
		return true
	}
	return false
}

func automationsRm() *cobra.Command {
	return automationsVerb("rm NAME", "remove an automation (not one the config file declares)", "", 1, nil,
		func(ctx context.Context, io cliIO, pos []string, c *client.Client) int {
			return removeAutomation(ctx, io, c, pos)
		})
}

func removeAutomation(ctx context.Context, io cliIO, c *client.Client, pos []string) int {
	st, err := catalogue(ctx, c)
	if err != nil {
		return fail(io, "automations rm", err)
	}
	entry, err := resolveAutomation(st, pos[0])
	if err != nil {
		return fail(io, "automations rm", err)
	}
	err = c.DispatchWait(ctx, automations.CatalogueURI, &protocol.AutomationRemovedAction{Resource: entry.Resource})
	var refused *client.RejectedError
	if errors.As(err, &refused) {
		return fail(io, "automations rm", errors.New(refused.Reason))
	}
	if err != nil {
		return fail(io, "automations rm", err)
	}
	return exitOK
}
