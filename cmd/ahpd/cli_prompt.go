package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// answerer answers what a turn waits on: tool calls to approve and
// questions. On a terminal it asks the person. What it cannot answer
// (stdin is no terminal) it leaves open for somebody to answer from
// elsewhere (`ahpd answer`, the HTTP API, the dashboard): `ahpd run` then
// stops, saying how (exit 3), or with --wait goes on following the turn.
// It approves nothing itself: what runs unasked is the session's
// permissions' to say (--approve), which the host applies.
type answerer struct {
	io          cliIO
	v           view
	interactive bool // stdin is a terminal
	wait        bool // --wait: leave what cannot be answered here to others
	session     string
	handled     map[string]bool
	lines       chan string // stdin, a line at a time, once asked
}

func newAnswerer(io cliIO, v view, session string, interactive, wait bool) *answerer {
	return &answerer{io: io, v: v, session: session, interactive: interactive, wait: wait, handled: map[string]bool{}}
}

// answer deals with what the turn waits on. It returns what it could not
// answer and `ahpd run` stops for, or nil.
func (a *answerer) answer(ctx context.Context, c *client.Client, chat, turnID string, parts []protocol.ResponsePart) *client.Waiting {
	cs := &protocol.ChatState{Resource: chat, ActiveTurn: &protocol.ActiveTurn{ID: turnID, ResponseParts: parts}}
	for _, w := range client.WaitingIn(cs) {
		if a.handled[w.ID] {
			continue
		}
		a.handled[w.ID] = true
		switch {
		case w.Tool != nil && a.interactive:
			a.approve(ctx, c, chat, turnID, w.Tool)
		case a.interactive:
			a.reply(ctx, c, chat, w.Request)
		case a.wait:
			a.v.done()
			fmt.Fprintf(a.io.stderr, "ahpd run: waiting for somebody to %s\n", howToAnswer(a.session, w))
		default:
			return &w
		}
	}
	return nil
}

// needsInput is what `ahpd run` says as it stops for w (exit 3): what
// the turn waits on, how to answer it, and for a tool call how to have
// the session's permissions approve such calls so that no run stops.
func needsInput(session string, w *client.Waiting) string {
	what := fmt.Sprintf("the agent asks %s", protocol.Quote(w.Text()))
	avoid := ""
	if w.Tool != nil {
		what = fmt.Sprintf("the agent asks to run %s, which needs approval", protocol.Quote(w.Text()))
		avoid = "; to run without asking, give the session permissions: `ahpd run --approve all` (or --approve edits, --allow RULE; docs/PERMISSIONS.md)"
	}
	return fmt.Sprintf("%s, and stdin is no terminal to ask on. The turn waits: %s (or from the HTTP API or the dashboard); "+
		"`ahpd run --wait` waits for that, `ahpd cancel %s` gives up%s",
		what, howToAnswer(session, *w), sessionID(session), avoid)
}

// howToAnswer is the command that answers w.
func howToAnswer(session string, w client.Waiting) string {
	return answerHint(session, w.Kind(), w.ID, w.Text())
}

// answerHint is the command that answers what a session waits on: a
// question, or a tool call ("approval") of id.
func answerHint(session, kind, id, text string) string {
	sid := sessionID(session)
	if kind == "approval" {
		return fmt.Sprintf("approve %s: `ahpd approve %s %s` (or `ahpd deny %s %s`)", protocol.Quote(text), sid, id, sid, id)
	}
	return fmt.Sprintf("answer %s: `ahpd answer %s %s TEXT`", protocol.Quote(text), sid, id)
}

// approve answers a tool call waiting for approval by asking on the
// terminal.
func (a *answerer) approve(ctx context.Context, c *client.Client, chat, turnID string, tc *protocol.ToolCallPendingConfirmationState) {
	what := fmt.Sprintf("%s: %s", tc.DisplayName, tc.InvocationMessage.Text)
	a.v.done()
	fmt.Fprintf(a.io.stderr, "Allow %s? [y/N] ", what)
	line, got := a.readLine(ctx)
	if !got {
		return // interrupted: the turn is cancelled
	}
	ok := strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y")
	act, _ := client.Confirm(turnID, tc, ok, "")
	a.v.show(turnEvent{Event: "approval", ID: tc.ToolCallID, Tool: tc.DisplayName, Approved: &ok, By: "terminal"})
	sendAnswer(ctx, c, chat, act)
}

// reply answers a question, on the terminal.
func (a *answerer) reply(ctx context.Context, c *client.Client, chat string, r *protocol.ChatInputRequest) {
	a.v.done()
	answers := protocol.NewMap[protocol.ChatInputAnswer]()
	for _, pq := range r.Questions {
		q := client.QuestionOf(pq)
		for {
			fmt.Fprintf(a.io.stderr, "%s%s ", q.Message, questionHint(q))
			line, got := a.readLine(ctx)
			if !got {
				return
			}
			v, err := client.Answer(pq, []string{line})
			if err != nil {
				fmt.Fprintf(a.io.stderr, "  %v\n", err)
				continue
			}
			answers.Set(q.ID, v)
			break
		}
	}
	sendAnswer(ctx, c, chat, &protocol.ChatInputCompletedAction{RequestID: r.ID, Response: protocol.ChatInputResponseKindAccept, Answers: answers})
}

// sendAnswer dispatches an answer; a refusal (the turn moved on) is not ours to
// report: the turn's end says what happened.
func sendAnswer(ctx context.Context, c *client.Client, chat string, act protocol.Action) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = c.Dispatch(dctx, chat, act)
}

// readLine reads a line of stdin; false when ctx ended first or stdin
// did. The reader goroutine lives as long as stdin stays open, as a
// command's process does.
func (a *answerer) readLine(ctx context.Context) (string, bool) {
	if a.lines == nil {
		a.lines = make(chan string)
		go func() {
			defer close(a.lines)
			sc := bufio.NewScanner(a.io.stdin)
			for sc.Scan() {
				a.lines <- sc.Text()
			}
		}()
	}
	select {
	case line, ok := <-a.lines:
		return line, ok
	case <-ctx.Done():
		fmt.Fprintln(a.io.stderr)
		return "", false
	}
}

// questionHint says how to answer a question on one line.
func questionHint(q client.Question) string {
	switch q.Kind {
	case "boolean":
		return " [y/n]"
	case "single-select":
		return " [" + client.OptionList(q.Options) + "]"
	case "multi-select":
		return " [" + client.OptionList(q.Options) + "; several with commas]"
	}
	return ""
}
