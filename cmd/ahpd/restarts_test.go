package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

var (
	restartSessions = flag.Int("restart-sessions", 6, "sessions of TestRestartsKeepWhatClientsSaw (the issue's run had 24)")
	restartLoad     = flag.Int("restart-load", runtime.NumCPU(), "goroutines burning CPU beside the daemon in TestRestartsKeepWhatClientsSaw")
)

// seenTurn is a finished turn as a client last saw it.
type seenTurn struct {
	state     protocol.TurnState
	text      string
	reasoning string
	errorType string
}

func seenOf(t protocol.Turn) seenTurn {
	st := seenTurn{state: t.State, text: text(t.ResponseParts)}
	for _, p := range t.ResponseParts {
		switch p := p.(type) {
		case *protocol.ReasoningResponsePart:
			st.reasoning += p.Content
		case *protocol.ErrorResponsePart:
			st.errorType = p.Error.ErrorType
		}
	}
	return st
}

// burnCPU keeps n goroutines busy until the test ends, so the daemon runs
// on a loaded machine.
func burnCPU(t *testing.T, n int) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 1 << 16 {
					x += i * i
				}
			}
		})
	}
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
}

// TestRestartsKeepWhatClientsSaw runs sessions whose turns stream text and
// reasoning, or are cancelled by their client, on a loaded machine, and
// stops the daemon round after round, with SIGKILL and with SIGTERM, on
// one state directory. After each start every turn a client had seen end
// is there as it saw it (state, text, reasoning), a turn the stop cut is
// there ended with hostStopped holding all the text the client had seen,
// and none of them changes at a later start, nor once its session slept
// and woke. It logs how long each start took to listen.
func TestRestartsKeepWhatClientsSaw(t *testing.T) {
	e := newEnv(t)
	burnCPU(t, *restartLoad)
	n := *restartSessions
	chats := make([]string, n)
	sessions := make([]string, n)
	seen := make([]map[string]seenTurn, n) // by chat, by turn id
	for i := range seen {
		seen[i] = map[string]seenTurn{}
	}
	// script is turn k of session i: some end quickly, some stream until
	// the stop, some are cancelled mid-reply by their client.
	cancelled := func(i, k int) bool { return (i+k)%3 == 1 && k > 0 }
	script := func(i, k int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "think about turn %d of session %d\n", k, i)
		lines := 3
		if (i+k)%3 == 0 || cancelled(i, k) {
			lines = 400 // cut by the stop, or by the client
		}
		for l := range lines {
			fmt.Fprintf(&b, "say s%d t%d line %d with a few words more\nwait 5ms\n", i, k, l)
		}
		return b.String()
	}
	var starts []time.Duration
	rounds := *journalKills
	for round := range rounds + 1 {
		began := time.Now()
		// A stop cuts the turns still running at once.
		p := serveDaemon(t, e, "--shutdown-grace", "1ms")
		starts = append(starts, time.Since(began))
		// A client per session: a connection may watch 20 at most.
		cs := make([]*hosttest.Client, n)
		for i := range n {
			cs[i] = connect(t, p, e.token(t), fmt.Sprintf("r%d-%d", round, i))
		}
		for i := range n {
			c := cs[i]
			if round == 0 {
				sessions[i], chats[i] = newSession(t, c, e, fmt.Sprintf("r%d", i))
				continue
			}
			c.Subscribe(sessions[i])
			st := c.Subscribe(chats[i]).State.(*protocol.ChatState)
			checkSeen(t, fmt.Sprintf("round %d, session %d", round, i), st, seen[i])
		}
		if round == rounds {
			// Asleep and awake again, the turns come back from the journal
			// as they were, not from the backend's transcript.
			for i := range n {
				c := cs[i]
				c.MustCall("unsubscribe", map[string]any{"channel": chats[i]})
				c.MustCall("unsubscribe", map[string]any{"channel": sessions[i]})
				c.MustCall("ahpd/suspendSession", map[string]any{"channel": sessions[i]})
				st := c.Subscribe(chats[i]).State.(*protocol.ChatState)
				checkSeen(t, fmt.Sprintf("after sleeping, session %d", i), st, seen[i])
				c.Close()
			}
			p.terminate()
			break
		}
		turn := func(int) string { return fmt.Sprintf("t%d", round) }
		for i := range n {
			startTurn(cs[i], chats[i], turn(i), script(i, round))
		}
		for i := range n {
			if c := cs[i]; cancelled(i, round) {
				c.WaitState(chats[i], "a reply to cancel", func(st protocol.ChannelState) bool {
					at := st.(*protocol.ChatState).ActiveTurn
					return at != nil && strings.Contains(text(at.ResponseParts), "line 1 ")
				})
				c.Dispatch(chats[i], &protocol.ChatTurnCancelledAction{TurnID: turn(i), Duration: 1})
			}
		}
		// Every turn that ends on its own has ended, and every long one
		// has streamed some: then the daemon stops.
		for i := range n {
			cs[i].WaitState(chats[i], "the round's turns to end or stream", func(st protocol.ChannelState) bool {
				cs := st.(*protocol.ChatState)
				if at := cs.ActiveTurn; at != nil {
					return at.ID == turn(i) && strings.Contains(text(at.ResponseParts), "line 20 ")
				}
				return len(cs.Turns) > 0 && cs.Turns[len(cs.Turns)-1].ID == turn(i)
			})
		}
		kill := round%2 == 0
		if kill {
			p.signal(syscall.SIGKILL)
		} else {
			p.signal(syscall.SIGTERM)
		}
		p.wait(exitTimeout)
		for i := range n {
			st := cs[i].State(chats[i]).(*protocol.ChatState)
			for _, tr := range st.Turns {
				seen[i][tr.ID] = seenOf(tr)
			}
			if at := st.ActiveTurn; at != nil {
				// Cut: it comes back ended, with at least this text.
				seen[i][at.ID] = seenTurn{state: "cut", text: text(at.ResponseParts)}
			}
			cs[i].Close()
		}
	}
	var slowest time.Duration
	for _, d := range starts {
		slowest = max(slowest, d)
	}
	t.Logf("%d sessions, %d rounds: starts took %v (slowest %v)", n, rounds, starts, slowest)
}

// checkSeen compares a chat's turns after a start with what its client
// last saw, and takes what a cut turn came back as for what was seen.
func checkSeen(t *testing.T, where string, cs *protocol.ChatState, seen map[string]seenTurn) {
	t.Helper()
	if cs.ActiveTurn != nil {
		t.Errorf("%s: turn %s still runs after the start", where, cs.ActiveTurn.ID)
	}
	got := map[string]protocol.Turn{}
	for _, tr := range cs.Turns {
		got[tr.ID] = tr
	}
	for id, want := range seen {
		tr, ok := got[id]
		if !ok {
			t.Errorf("%s: turn %s, seen %s, is gone", where, id, want.state)
			continue
		}
		have := seenOf(tr)
		if want.state == "cut" {
			// It ended as the journal has it: with hostStopped where the
			// stop cut it, or as it ended before the client heard.
			if have.state == "" || !strings.HasPrefix(have.text, want.text) {
				t.Errorf("%s: turn %s, cut with %d bytes seen, came back %s (%s) with %d bytes", where, id, len(want.text), have.state, have.errorType, len(have.text))
			}
			seen[id] = have
			continue
		}
		if have != want {
			t.Errorf("%s: turn %s came back changed:\n have %s %q, %d bytes of text, reasoning %q\n want %s %q, %d bytes of text, reasoning %q",
				where, id, have.state, have.errorType, len(have.text), have.reasoning, want.state, want.errorType, len(want.text), want.reasoning)
		}
	}
}

// TestBigMessageSurvivesKill: a turn whose message is 2 MB, over the
// NATS message bound, is journaled (in chunks) and after a kill -9 comes
// back with its message whole.
func TestBigMessageSurvivesKill(t *testing.T) {
	e := newEnv(t)
	p := serveDaemon(t, e)
	c := connect(t, p, e.token(t), "big")
	session, chat := newSession(t, c, e, "big")
	big := "say the end\n" + strings.Repeat("x", 2<<20)
	turn := send(t, c, chat, "t1", big)
	if turn.State != protocol.TurnStateComplete || turn.Message.Text != big {
		t.Fatalf("the turn ended %s with a message of %d bytes", turn.State, len(turn.Message.Text))
	}
	p.signal(syscall.SIGKILL)
	p.wait(exitTimeout)
	c.Close()

	// The journal holds the turn's start, message and all.
	j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(e.state, "journal")})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := j.Read(context.Background(), session, 0, journal.MaxReadLimit)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, en := range entries {
		var env protocol.ActionEnvelope
		if json.Unmarshal(en.Data, &env) != nil {
			continue
		}
		if a, ok := env.Action.(*protocol.ChatTurnStartedAction); ok && a.TurnID == "t1" {
			found = a.Message.Text == big
		}
	}
	if err := j.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("the journal does not hold the turn's start with its message")
	}

	p = serveDaemon(t, e)
	c = connect(t, p, e.token(t), "big2")
	c.Subscribe(session)
	cs := c.Subscribe(chat).State.(*protocol.ChatState)
	if len(cs.Turns) != 1 || cs.Turns[0].Message.Text != big || seenOf(cs.Turns[0]) != seenOf(turn) {
		t.Fatalf("after a kill: %d turns; the message came back with %d bytes", len(cs.Turns), len(cs.Turns[0].Message.Text))
	}
}
