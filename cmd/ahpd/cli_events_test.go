package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/timeline"
)

// TestCLIEvents prints a session's timeline, as text and as JSON lines,
// and with --follow goes on printing what happens next until interrupted.
func TestCLIEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	run := cli(t, e, "run", "--provider", "script", "say hello")
	m := sessionLine.FindStringSubmatch(run.stderr)
	if run.code != 0 || m == nil {
		t.Fatalf("run: %d %q", run.code, run.stderr)
	}
	session := m[1]

	text := cli(t, e, "events", session)
	if text.code != 0 || !strings.Contains(text.stdout, "turn_started") || !strings.Contains(text.stdout, "turn_completed") {
		t.Fatalf("events: %d %q %q", text.code, text.stdout, text.stderr)
	}

	cmd := cliCmd(e, "events", "--follow", "--json", session)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan timeline.Event, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev timeline.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("not one JSON event a line: %q", sc.Text())
				continue
			}
			lines <- ev
		}
	}()
	next := func(kind timeline.Kind, after int64) timeline.Event {
		t.Helper()
		for {
			select {
			case ev, ok := <-lines:
				if !ok {
					t.Fatalf("the events ended before a %s", kind)
				}
				if ev.Seq < after {
					t.Fatalf("event %d came after %d", ev.Seq, after)
				}
				if ev.Kind == kind {
					return ev
				}
			case <-time.After(startTimeout):
				t.Fatalf("no %s in time", kind)
			}
		}
	}
	first := next(timeline.TurnCompleted, 0)
	if send := cli(t, e, "send", session, "say again"); send.code != 0 {
		t.Fatalf("send: %d %q", send.code, send.stderr)
	}
	started := next(timeline.TurnStarted, first.Seq)
	next(timeline.TurnCompleted, started.Seq)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("events --follow ended with %v after an interrupt", err)
	}
	if bad := cli(t, e, "events", "--follow"); bad.code != 2 {
		t.Errorf("no session named: exit %d", bad.code)
	}
}
