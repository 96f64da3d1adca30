package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/webhooks"
)

func init() {
	register(command{name: "webhooks", run: webhooksCommand,
		usage: "webhooks log [--json] [--limit N]   the webhooks and their recent deliveries (docs/WEBHOOKS.md)"})
}

const webhooksUsage = `Webhooks: receivers the daemon's config file names, posted what happens
in sessions (see docs/WEBHOOKS.md).

Usage:
  ahpd webhooks log [--json] [--limit N]
      the webhooks, and their recent deliveries, newest first (at most N;
      all the daemon keeps, 500, by default): when, to which webhook,
      which event of which session, how it went, how many attempts, and
      why the last failed. --json prints the daemon's answer whole.
      Admins only: it shows every user's sessions.

`

// webhooksCommand runs `ahpd webhooks VERB ...`.
func webhooksCommand(ctx context.Context, args []string, io cliIO) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(io.stdout, webhooksUsage, connUsage)
		return exitOK
	}
	if args[0] != "log" {
		return cmdUsageError(io, "webhooks", fmt.Errorf("unknown command %s: log", protocol.Quote(args[0])))
	}
	return webhooksLog(ctx, args[1:], io)
}

func webhooksLog(ctx context.Context, args []string, io cliIO) int {
	const name = "webhooks log"
	var cf connFlags
	fs := newFlags(name, &cf)
	asJSON := fs.Bool("json", false, "")
	limit := fs.Int("limit", 0, "")
	pos, err := parseArgs(fs, args)
	switch {
	case err != nil:
	case len(pos) > 0:
		err = fmt.Errorf("unexpected argument %s", protocol.Quote(pos[0]))
	case *limit < 0 || *limit > 1000:
		err = fmt.Errorf("--limit %d: from 1 to 1000", *limit)
	}
	if err != nil {
		fmt.Fprintf(io.stderr, "ahpd %s: %v (usage: ahpd %s)\n", name, err, commands["webhooks"].usage)
		return exitUsage
	}
	c, err := dial(ctx, cf)
	if err != nil {
		return fail(io, name, err)
	}
	defer c.Close()
	var log webhooks.Log
	if err := c.Call(ctx, "ahpd/webhookLog", map[string]any{"limit": *limit}, &log); err != nil {
		switch client.ErrorCode(err) {
		case protocol.CodePermissionDenied:
			err = fmt.Errorf("%w: the webhooks' log is for admins, for it shows every user's sessions", err)
		case protocol.CodeMethodNotFound:
			err = fmt.Errorf("%w: this daemon is older than webhooks", err)
		}
		return fail(io, name, err)
	}
	if *asJSON {
		return writeJSON(io, name, log)
	}
	if len(log.Webhooks) == 0 {
		fmt.Fprintln(io.stderr, "ahpd webhooks log: the daemon has no webhooks: declare them in its config file (webhooks:, see docs/WEBHOOKS.md)")
		return exitOK
	}
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WEBHOOK\tURL\tEVENTS\tSIGNED\tPENDING\tDELIVERED\tFAILED\tDROPPED")
	for _, w := range log.Webhooks {
		var kinds []string
		for _, k := range w.Events {
			kinds = append(kinds, string(k))
		}
		signed := "yes"
		if !w.Signed {
			signed = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", w.Name, w.URL, strings.Join(kinds, ","), signed, w.Pending, w.Delivered, w.Failed, w.Dropped)
	}
	if err := tw.Flush(); err != nil {
		return fail(io, name, err)
	}
	fmt.Fprintln(io.stdout)
	if len(log.Deliveries) == 0 {
		fmt.Fprintln(io.stdout, "no deliveries yet")
		return exitOK
	}
	tw = tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWEBHOOK\tEVENT\tSESSION\tSTATUS\tATTEMPTS\tLAST ERROR")
	for _, d := range log.Deliveries {
		session := "-"
		if d.Session != "" {
			session = sessionID(d.Session)
		}
		why := oneLine(d.Error, 100)
		if !d.Next.IsZero() {
			why = strings.TrimSpace(why + " (next " + d.Next.Local().Format(time.TimeOnly) + ")")
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d", d.Time.Local().Format(time.DateTime), d.Webhook, d.Event, session, d.Status, d.Attempts)
		if why != "" {
			line += "\t" + why // a line without one ends with no padding
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fail(io, name, err)
	}
	return exitOK
}
