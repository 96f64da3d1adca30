package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// textView shows a turn for a person: the agent's text as it streams, a
// line for each tool call, and, on a terminal (tty), a progress line
// under them with the turn's activity and elapsed time. Off a terminal
// the same shows as plain lines, nothing redrawn. The turn's end goes to
// errw, so stdout holds what the agent said and did.
type textView struct {
	w, errw   io.Writer
	tty       bool
	lineStart bool // the last thing written ended a line
	status    bool // a progress line is drawn
}

func newTextView(w, errw io.Writer, tty bool) *textView {
	return &textView{w: w, errw: errw, tty: tty, lineStart: true}
}

// clear takes the progress line away before anything is written.
func (v *textView) clear() {
	if v.status {
		fmt.Fprint(v.w, "\r\033[K")
		v.status = false
	}
}

// newline ends a line of the agent's text before a line of our own.
func (v *textView) newline() {
	if !v.lineStart {
		fmt.Fprintln(v.w)
		v.lineStart = true
	}
}

func (v *textView) show(ev turnEvent) {
	v.clear()
	switch ev.Event {
	case "text":
		fmt.Fprint(v.w, ev.Text)
		v.lineStart = strings.HasSuffix(ev.Text, "\n")
	case "reasoning":
		// Shown only on a terminal, dimmed: a script wants the answer.
		if v.tty {
			fmt.Fprintf(v.w, "\033[2m%s\033[0m", ev.Text)
			v.lineStart = strings.HasSuffix(ev.Text, "\n")
		}
	case "tool":
		v.newline()
		mark := map[string]string{"running": "→", "pending-confirmation": "?", "completed": "✓", "failed": "✗", "cancelled": "–"}[ev.State]
		fmt.Fprintf(v.w, "%s %s: %s\n", mark, ev.Tool, ev.Message)
	case "input":
		v.newline()
		fmt.Fprintf(v.w, "? %s\n", ev.Message)
	case "approval":
		approved := ev.Approved != nil && *ev.Approved
		if approved && ev.By == "permissions" {
			// What the session's permissions let run is what was asked
			// for (--approve): only --json shows it.
			return
		}
		v.newline()
		word := "denied"
		if approved {
			word = "approved"
		}
		by := ev.By
		if ev.Message != "" {
			by += ": " + ev.Message
		}
		fmt.Fprintf(v.w, "  %s %s (%s)\n", word, ev.Tool, by)
	case "end":
		v.newline()
		d := time.Duration(0)
		if ev.DurationMs != nil {
			d = time.Duration(*ev.DurationMs) * time.Millisecond
		}
		switch {
		case ev.Message == "interrupted":
			fmt.Fprintf(v.errw, "ahpd run: interrupted: the turn was cancelled after %s\n", d.Round(time.Millisecond))
		case ev.Message != "":
			fmt.Fprintf(v.errw, "ahpd run: %s\n", ev.Message)
		case ev.State == "complete":
			if v.tty {
				fmt.Fprintf(v.errw, "✓ done in %s\n", d.Round(time.Millisecond))
			}
		case ev.Error != "":
			fmt.Fprintf(v.errw, "ahpd run: the turn failed: %s\n", ev.Error)
		default:
			fmt.Fprintf(v.errw, "ahpd run: the turn ended %s\n", ev.State)
		}
	}
}

func (v *textView) tick(activity string) {
	if !v.tty || !v.lineStart {
		return // a line of text is being written: no room for progress
	}
	fmt.Fprintf(v.w, "\r\033[K\033[2m… %s\033[0m", activity)
	v.status = true
}

func (v *textView) done() { v.clear() }

// jsonView prints each event as one JSON object a line.
type jsonView struct {
	enc *json.Encoder
}

func newJSONView(w io.Writer) *jsonView { return &jsonView{enc: json.NewEncoder(w)} }

func (v *jsonView) show(ev turnEvent) { _ = v.enc.Encode(ev) }
func (v *jsonView) tick(string)       {}
func (v *jsonView) done()             {}
