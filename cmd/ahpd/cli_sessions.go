package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

func init() {
	register(lsCommand, showCommand, cancelCommand, statusCommand, suspendCommand, resumeCommand, rmCommand)
}

func lsCommand() *cobra.Command {
	var cf connFlags
	var all, asJSON bool
	c := newCommand("ls [--all] [--json]", "list sessions (--all: archived ones too)", &cf, func(fs *pflag.FlagSet) {
		fs.BoolVar(&all, "all", false, "archived sessions too")
		fs.BoolVar(&asJSON, "json", false, "print the sessions' summaries as JSON")
	}, func(ctx context.Context, pos []string, io cliIO) int {
		return ls(ctx, io, cf, pos, all, asJSON)
	})
	c.SuggestFor = []string{"list", "sessions"}
	return c
}

func ls(ctx context.Context, io cliIO, cf connFlags, pos []string, all, asJSON bool) int {
	if len(pos) > 0 {
		return cmdUsageError(io, "ls", fmt.Errorf("unexpected argument %s", protocol.Quote(pos[0])))
	}
	c, err := dial(ctx, cf)
	if err != nil {
		return fail(io, "ls", err)
	}
	defer c.Close()
	rows, err := listAll(ctx, c)
	if err != nil {
		return fail(io, "ls", err)
	}
	shown := rows[:0]
	for _, r := range rows {
		if all || r.Status&protocol.StatusIsArchived == 0 {
			shown = append(shown, r)
		}
	}
	if asJSON {
		if shown == nil {
			shown = []protocol.SessionSummary{}
		}
		return writeJSON(io, "ls", shown)
	}
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPROVIDER\tMODIFIED\tTITLE")
	for _, r := range shown {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", sessionID(r.Resource), statusWord(r.Status), r.Provider, shortTime(r.ModifiedAt), oneLine(r.Title, 60))
	}
	_ = tw.Flush()
	return exitOK
}

// statusWord names a session's status for a person.
func statusWord(s protocol.SessionStatus) string {
	var w string
	switch s.Activity() {
	case protocol.StatusInputNeeded:
		w = "needs-input"
	case protocol.StatusInProgress:
		w = "running"
	case protocol.StatusError:
		w = "error"
	default:
		w = "idle"
	}
	if s&protocol.StatusIsArchived != 0 {
		w += ",archived"
	}
	return w
}

func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.Local().Format("2006-01-02 15:04")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func writeJSON(io cliIO, name string, v any) int {
	enc := json.NewEncoder(io.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(io, name, err)
	}
	return exitOK
}

func showCommand() *cobra.Command {
	var asJSON bool
	return sessionCommand("show [--json] SESSION", "show a session and its turns",
		func(fs *pflag.FlagSet) {
			fs.BoolVar(&asJSON, "json", false, "print the session's and its chat's state as JSON")
		},
		func(ctx context.Context, io cliIO, c *client.Client, session string) error {
			chat, err := watchSession(ctx, c, session)
			if err != nil {
				return err
			}
			ss, _ := c.State(session).(*protocol.SessionState)
			cs, _ := c.State(chat).(*protocol.ChatState)
			if ss == nil || cs == nil {
				return errors.New("the host sent no state for the session")
			}
			if asJSON {
				if writeJSON(io, "show", map[string]any{"session": ss, "chat": cs}) != exitOK {
					return errors.New("writing the session")
				}
				return nil
			}
			printSession(io.stdout, session, ss, cs)
			return nil
		})
}

// printSession writes a session and its default chat for a person.
func printSession(w io.Writer, uri string, ss *protocol.SessionState, cs *protocol.ChatState) {
	fmt.Fprintf(w, "session   %s\n", sessionID(uri))
	fmt.Fprintf(w, "title     %s\n", ss.Title)
	fmt.Fprintf(w, "provider  %s\n", ss.Provider)
	fmt.Fprintf(w, "status    %s\n", statusWord(ss.Status))
	for _, d := range ss.WorkingDirectories {
		fmt.Fprintf(w, "folder    %s\n", strings.TrimPrefix(d, "file://"))
	}
	for _, t := range cs.Turns {
		fmt.Fprintf(w, "\n> %s\n", t.Message.Text)
		printParts(w, t.ResponseParts)
		fmt.Fprintf(w, "[%s]\n", t.State)
	}
	if at := cs.ActiveTurn; at != nil {
		fmt.Fprintf(w, "\n> %s\n", at.Message.Text)
		printParts(w, at.ResponseParts)
		fmt.Fprintln(w, "[running]")
	}
}

func printParts(w io.Writer, parts []protocol.ResponsePart) {
	v := newTextView(w, io.Discard, false)
	for _, ev := range newDiffer().diff(parts) {
		v.show(ev)
	}
	if e := (&protocol.Turn{ResponseParts: parts}).ErrorPart(); e != nil {
		v.newline()
		fmt.Fprintf(w, "error: %s\n", e.Error.Message)
	}
	v.newline()
}

func cancelCommand() *cobra.Command {
	return sessionCommand("cancel SESSION", "cancel the turn a session runs", nil, func(ctx context.Context, io cliIO, c *client.Client, session string) error {
		chat, err := watchSession(ctx, c, session)
		if err != nil {
			return err
		}
		cs, _ := c.State(chat).(*protocol.ChatState)
		if cs == nil || cs.ActiveTurn == nil {
			return fmt.Errorf("session %s runs no turn: nothing to cancel", sessionID(session))
		}
		id := cs.ActiveTurn.ID
		started, _ := time.Parse(time.RFC3339Nano, cs.ActiveTurn.StartedAt)
		if err := c.DispatchWait(ctx, chat, &protocol.ChatTurnCancelledAction{TurnID: id, Duration: max(0, time.Since(started).Milliseconds())}); err != nil {
			return err
		}
		if _, err := c.WaitState(ctx, chat, func(s protocol.ChannelState) bool {
			at := s.(*protocol.ChatState).ActiveTurn
			return at == nil || at.ID != id
		}); err != nil {
			return err
		}
		fmt.Fprintf(io.stdout, "cancelled %s\n", id)
		return nil
	})
}

// residencyParams are the params of ahpd's extension commands.
type residencyParams struct {
	Channel string `json:"channel"`
	IfIdle  bool   `json:"ifIdle,omitempty"`
}

type residencyResult struct {
	Status string `json:"status"`
	// Meta names, in a cluster, the host holding the session.
	Meta struct {
		Host string `json:"ahpd.host"`
	} `json:"_meta"`
}

func statusCommand() *cobra.Command {
	return sessionCommand("status SESSION", "active (in memory) or inactive (asleep), and on which host in a cluster", nil,
		printResidency("ahpd/sessionStatus", nil))
}

func suspendCommand() *cobra.Command {
	var ifIdle bool
	return sessionCommand("suspend [--if-idle] SESSION", "put a session to sleep now",
		func(fs *pflag.FlagSet) { fs.BoolVar(&ifIdle, "if-idle", false, "leave a session running a turn alone") },
		printResidency("ahpd/suspendSession", &ifIdle))
}

func resumeCommand() *cobra.Command {
	return sessionCommand("resume SESSION", "wake a sleeping session", nil, printResidency("ahpd/resumeSession", nil))
}

// printResidency runs an extension command and prints the status it
// answers.
func printResidency(method string, ifIdle *bool) func(ctx context.Context, io cliIO, c *client.Client, session string) error {
	return func(ctx context.Context, io cliIO, c *client.Client, session string) error {
		p := residencyParams{Channel: session}
		if ifIdle != nil {
			p.IfIdle = *ifIdle
		}
		var res residencyResult
		err := c.Call(ctx, method, p, &res)
		if client.ErrorCode(err) == protocol.CodeTurnInProgress {
			return fmt.Errorf("session %s is running a turn: `ahpd cancel %s` first, or pass --if-idle", sessionID(session), sessionID(session))
		}
		if err != nil {
			return err
		}
		if res.Meta.Host != "" {
			fmt.Fprintf(io.stdout, "%s on host %s\n", res.Status, res.Meta.Host) // a host id: letters, digits, - and _
			return nil
		}
		fmt.Fprintln(io.stdout, res.Status)
		return nil
	}
}

func rmCommand() *cobra.Command {
	return sessionCommand("rm SESSION", "dispose of a session and its conversation", nil, func(ctx context.Context, io cliIO, c *client.Client, session string) error {
		if err := c.Call(ctx, "disposeSession", protocol.DisposeSessionParams{Channel: session}, nil); err != nil {
			return err
		}
		fmt.Fprintf(io.stdout, "removed %s\n", sessionID(session))
		return nil
	})
}
