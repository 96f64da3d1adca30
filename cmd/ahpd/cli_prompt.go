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

// answerer answers what a turn asks: tool calls waiting for approval and
// questions. On a terminal it asks the person; with --auto-approve it
// approves tool calls itself; otherwise it refuses, and the turn is
// cancelled with a message that says what to do.
type answerer struct {
	io          cliIO
	v           view
	interactive bool // stdin is a terminal
	autoApprove bool
	handled     map[string]bool
	lines       chan string // stdin, a line at a time, once asked
}

func newAnswerer(io cliIO, v view, interactive, autoApprove bool) *answerer {
	return &answerer{io: io, v: v, interactive: interactive, autoApprove: autoApprove, handled: map[string]bool{}}
}

// answer deals with what parts wait for. It returns why the turn cannot
// go on ("" when it can).
func (a *answerer) answer(ctx context.Context, c *client.Client, chat, turnID string, parts []protocol.ResponsePart) string {
	for _, p := range parts {
		switch p := p.(type) {
		case *protocol.ToolCallResponsePart:
			tc, ok := p.ToolCall.(*protocol.ToolCallPendingConfirmationState)
			if !ok || a.handled[tc.ToolCallID] {
				continue
			}
			a.handled[tc.ToolCallID] = true
			if why := a.approve(ctx, c, chat, turnID, tc); why != "" {
				return why
			}
		case *protocol.InputRequestResponsePart:
			if p.Response != nil || a.handled[p.Request.ID] {
				continue
			}
			a.handled[p.Request.ID] = true
			if why := a.reply(ctx, c, chat, &p.Request); why != "" {
				return why
			}
		}
	}
	return ""
}

// approve answers a tool call waiting for approval.
func (a *answerer) approve(ctx context.Context, c *client.Client, chat, turnID string, tc *protocol.ToolCallPendingConfirmationState) string {
	what := fmt.Sprintf("%s: %s", tc.DisplayName, tc.InvocationMessage.Text)
	by := "refused"
	ok := false
	switch {
	case a.autoApprove:
		by, ok = "auto-approve", true
	case a.interactive:
		a.v.done()
		fmt.Fprintf(a.io.stderr, "Allow %s? [y/N] ", what)
		line, got := a.readLine(ctx)
		if !got {
			return "" // interrupted: the turn is cancelled
		}
		by = "terminal"
		ok = strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y")
	}
	act := &protocol.ChatToolCallConfirmedAction{TurnID: turnID, ToolCallID: tc.ToolCallID, Approved: ok}
	if ok {
		reason := protocol.ToolCallConfirmationReasonUserAction
		if a.autoApprove {
			reason = protocol.ToolCallConfirmationReasonSetting
		}
		act.Confirmed = &reason
	} else {
		act.Reason = new(protocol.ToolCallCancellationReasonDenied)
	}
	a.v.show(turnEvent{Event: "approval", ID: tc.ToolCallID, Tool: tc.DisplayName, Approved: &ok, By: by})
	sendAnswer(ctx, c, chat, act)
	if by == "refused" {
		return fmt.Sprintf("the agent asked to run %s, which needs approval, and stdin is no terminal to ask on: rerun with --auto-approve, or from a terminal", what)
	}
	return ""
}

// reply answers a question, on the terminal.
func (a *answerer) reply(ctx context.Context, c *client.Client, chat string, r *protocol.ChatInputRequest) string {
	if !a.interactive {
		sendAnswer(ctx, c, chat, &protocol.ChatInputCompletedAction{RequestID: r.ID, Response: protocol.ChatInputResponseKindDecline})
		return fmt.Sprintf("the agent asked %q and stdin is no terminal to answer on: run it from a terminal, or give the agent what it needs in the message", client.RequestText(r))
	}
	a.v.done()
	answers := protocol.NewMap[protocol.ChatInputAnswer]()
	for _, pq := range r.Questions {
		q := client.QuestionOf(pq)
		for {
			fmt.Fprintf(a.io.stderr, "%s%s ", q.Message, questionHint(q))
			line, got := a.readLine(ctx)
			if !got {
				return ""
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
	return ""
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
