package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// Answering from a shell what a turn waits on: a question, or a tool
// call to approve. The host checks them as it checks any client's answer
// (chat:answer, chat:tool), so these do nothing a person's grants do not
// allow wherever they answer from.

func init() {
	register(pendingCommand, answerCommand, func() *cobra.Command {
		return confirmCommand("approve", "approve a tool call waiting for approval (the open one when there is one)")
	}, func() *cobra.Command {
		return confirmCommand("deny", "deny a tool call waiting for approval")
	})
}

// pendingRow is one line of `ahpd pending`.
type pendingRow struct {
	Session string                        `json:"session"`
	Chat    string                        `json:"chat"`
	Turn    string                        `json:"turn"`
	ID      string                        `json:"id"`
	Kind    string                        `json:"kind"` // question, approval
	Text    string                        `json:"text"`
	Options []protocol.ConfirmationOption `json:"options,omitempty"`
	Request *protocol.ChatInputRequest    `json:"request,omitempty"`
}

func pendingCommand() *cobra.Command {
	var cf connFlags
	var asJSON bool
	return newCommand("pending [--json]", "list the questions and approvals waiting on you, across sessions", &cf,
		func(fs *pflag.FlagSet) {
			fs.BoolVar(&asJSON, "json", false, "print them as JSON, with each question's kinds and options")
		},
		func(ctx context.Context, pos []string, io cliIO) int {
			return pendingRun(ctx, io, cf, pos, asJSON)
		})
}

func pendingRun(ctx context.Context, io cliIO, cf connFlags, pos []string, asJSON bool) int {
	if len(pos) > 0 {
		return cmdUsageError(io, "pending", fmt.Errorf("unexpected argument %s", protocol.Quote(pos[0])))
	}
	c, err := dial(ctx, cf)
	if err != nil {
		return fail(io, "pending", err)
	}
	defer c.Close()
	rows, err := pending(ctx, c)
	if err != nil {
		return fail(io, "pending", err)
	}
	if asJSON {
		if rows == nil {
			rows = []pendingRow{}
		}
		return writeJSON(io, "pending", rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(io.stderr, "ahpd pending: nothing waits on you")
		return exitOK
	}
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tID\tKIND\tWAITS ON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sessionID(r.Session), r.ID, r.Kind, oneLine(r.Text, 80))
	}
	_ = tw.Flush()
	return exitOK
}

// pending lists what waits on the caller: the open questions and tool
// calls of the sessions that wait on somebody, those the caller's grants
// let them answer (the host says which, ahpd/sessionStatus).
func pending(ctx context.Context, c *client.Client) ([]pendingRow, error) {
	sessions, err := listAll(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []pendingRow
	for _, s := range sessions {
		if s.Status.Activity() != protocol.StatusInputNeeded {
			continue
		}
		var probe struct {
			Operations []string `json:"operations"`
		}
		if err := c.Call(ctx, "ahpd/sessionStatus", map[string]any{"channel": s.Resource, "operations": true}, &probe); err != nil {
			continue // gone since it was listed
		}
		ws, err := c.SessionWaiting(ctx, s.Resource)
		if err != nil {
			return nil, fmt.Errorf("reading session %s: %w", sessionID(s.Resource), err)
		}
		for _, w := range ws {
			if !slices.Contains(probe.Operations, string(operationFor(w))) {
				continue
			}
			r := pendingRow{Session: s.Resource, Chat: w.Chat, Turn: w.TurnID, ID: w.ID, Kind: w.Kind(), Text: w.Text(), Request: w.Request}
			if w.Tool != nil {
				r.Options = w.Tool.Options
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// operationFor is the grant answering w needs: that of the action.
func operationFor(w client.Waiting) string {
	if w.Tool != nil {
		return "chat:tool"
	}
	return "chat:answer"
}

// openOne finds what the person names in a session: kind ("question" or
// "approval") with id or a unique prefix of one, or, with id "", the one
// open of that kind.
func openOne(ctx context.Context, c *client.Client, session, kind, id string) (client.Waiting, error) {
	ws, err := c.SessionWaiting(ctx, session)
	if err != nil {
		return client.Waiting{}, err
	}
	var match []client.Waiting
	for _, w := range ws {
		if w.Kind() == kind && (w.ID == id || strings.HasPrefix(w.ID, id)) {
			if w.ID == id && id != "" {
				return w, nil
			}
			match = append(match, w)
		}
	}
	sid := sessionID(session)
	switch {
	case len(match) == 1:
		return match[0], nil
	case len(match) > 1 && id == "":
		return client.Waiting{}, fmt.Errorf("session %s has %d open %ss: name one (`ahpd pending` lists them)", sid, len(match), kind)
	case len(match) > 1:
		return client.Waiting{}, fmt.Errorf("%s names %d open %ss of session %s: give more of the id", protocol.Quote(id), len(match), kind, sid)
	case id == "":
		return client.Waiting{}, fmt.Errorf("session %s has no open %s (`ahpd pending` lists what waits)", sid, kind)
	}
	// Not open: say whether it ever was.
	_, found, err := c.FindIn(ctx, session, id)
	if err != nil {
		return client.Waiting{}, err
	}
	return client.Waiting{}, notOpen(sid, kind, id, found)
}

func notOpen(sid, kind, id string, found client.Found) error {
	switch found {
	case client.FoundSettled:
		return fmt.Errorf("the %s %s of session %s was answered already", kind, protocol.Quote(id), sid)
	case client.FoundEnded:
		return fmt.Errorf("the %s %s of session %s belongs to a turn that has ended", kind, protocol.Quote(id), sid)
	}
	return fmt.Errorf("session %s has no %s %s (`ahpd pending` lists what waits)", sid, kind, protocol.Quote(id))
}

// respondError says why an answer was not taken.
func respondError(sid, kind string, w client.Waiting, err error) error {
	switch {
	case errors.Is(err, client.ErrSettled):
		return notOpen(sid, kind, w.ID, client.FoundSettled)
	case errors.Is(err, client.ErrTurnEnded):
		return notOpen(sid, kind, w.ID, client.FoundEnded)
	}
	var rej *client.RejectedError
	if errors.As(err, &rej) {
		return fmt.Errorf("the host refused: %s", rej.Reason)
	}
	return err
}

func answerCommand() *cobra.Command {
	var cf connFlags
	var decline bool
	given := client.Answers{}
	c := newCommand(`answer [--answer ID=VALUE]... [--decline] SESSION [REQUEST] ["TEXT"]`,
		"answer a question a turn asks (the open one when there is one)", &cf, func(fs *pflag.FlagSet) {
			fs.BoolVar(&decline, "decline", false, "decline the question")
			fs.Func("answer", "the answer to one of several questions, `ID=VALUE` (repeatable)", func(kv string) error {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--answer %s: give ID=VALUE", protocol.Quote(kv))
				}
				given[k] = append(given[k], v)
				return nil
			})
		}, func(ctx context.Context, pos []string, io cliIO) int {
			return answer(ctx, io, cf, pos, decline, given)
		})
	c.ValidArgsFunction = sessionArg(&cf)
	return c
}

func answer(ctx context.Context, io cliIO, cf connFlags, pos []string, decline bool, given client.Answers) int {
	var err error
	var session, id, text string
	switch {
	case len(pos) == 1 && (decline || len(given) > 0):
		session = pos[0]
	case len(pos) == 2 && (decline || len(given) > 0):
		session, id = pos[0], pos[1]
	case len(pos) == 2:
		session, text = pos[0], pos[1]
	case len(pos) == 3 && !decline && len(given) == 0:
		session, id, text = pos[0], pos[1], pos[2]
	default:
		err = errors.New(`name the session, the question when it has several open, and give the answer (quote it), --answer ID=VALUE for each of several questions, or --decline`)
	}
	if err != nil {
		return cmdUsageError(io, "answer", err)
	}
	c, err := dial(ctx, cf)
	if err != nil {
		return fail(io, "answer", err)
	}
	defer c.Close()
	uri, err := resolveSession(ctx, c, session)
	if err != nil {
		return fail(io, "answer", err)
	}
	w, err := openOne(ctx, c, uri, "question", id)
	if err != nil {
		return fail(io, "answer", err)
	}
	act, err := answerAction(w.Request, decline, given, text)
	if err != nil {
		return fail(io, "answer", err)
	}
	if err := c.Respond(ctx, w, act); err != nil {
		return fail(io, "answer", respondError(sessionID(uri), "question", w, err))
	}
	word := "answered"
	if decline {
		word = "declined"
	}
	fmt.Fprintf(io.stdout, "%s %s in %s: %s\n", word, w.ID, sessionID(uri), oneLine(w.Text(), 80))
	return exitOK
}

// answerAction is the chat/inputCompleted of what the person gave.
func answerAction(req *protocol.ChatInputRequest, decline bool, given client.Answers, text string) (*protocol.ChatInputCompletedAction, error) {
	if decline {
		return client.Decline(req), nil
	}
	if len(given) == 0 {
		var err error
		if given, err = client.Sole(req, text); err != nil {
			return nil, fmt.Errorf("%v: --answer ID=VALUE for each", err)
		}
	}
	return client.Accept(req, given)
}

// confirmCommand is `ahpd approve` and `ahpd deny`.
func confirmCommand(name, short string) *cobra.Command {
	var cf connFlags
	var option string
	c := newCommand(name+" [--option ID] SESSION [TOOLCALL]", short, &cf, func(fs *pflag.FlagSet) {
		fs.StringVar(&option, "option", "", "the confirmation option `ID` to pick, such as allow-session (docs/PERMISSIONS.md)")
	}, func(ctx context.Context, pos []string, io cliIO) int {
		return confirm(ctx, io, name, cf, pos, option)
	})
	c.ValidArgsFunction = sessionArg(&cf)
	return c
}

func confirm(ctx context.Context, io cliIO, name string, cf connFlags, pos []string, option string) int {
	if len(pos) < 1 || len(pos) > 2 {
		return cmdUsageError(io, name, errors.New("name the session, and the tool call when it has several waiting"))
	}
	id := ""
	if len(pos) == 2 {
		id = pos[1]
	}
	c, err := dial(ctx, cf)
	if err != nil {
		return fail(io, name, err)
	}
	defer c.Close()
	uri, err := resolveSession(ctx, c, pos[0])
	if err != nil {
		return fail(io, name, err)
	}
	w, err := openOne(ctx, c, uri, "approval", id)
	if err != nil {
		return fail(io, name, err)
	}
	act, err := client.Confirm(w.TurnID, w.Tool, name == "approve", option)
	if err != nil {
		return fail(io, name, err)
	}
	if err := c.Respond(ctx, w, act); err != nil {
		return fail(io, name, respondError(sessionID(uri), "approval", w, err))
	}
	word := map[string]string{"approve": "approved", "deny": "denied"}[name]
	fmt.Fprintf(io.stdout, "%s %s in %s: %s\n", word, w.ID, sessionID(uri), oneLine(w.Text(), 80))
	return exitOK
}
