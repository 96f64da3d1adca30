package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

var journalKills = flag.Int("journal-kills", 3, "rounds of TestKillKeepsWhatClientsSaw (the issue asks for 20)")

// TestKillKeepsWhatClientsSaw kills the daemon with SIGKILL while a turn
// streams, round after round on the same state directory: every action a
// client had been sent is in the session's journal afterwards, under the
// serverSeq it was sent with, and the next daemon starts on the journal
// the last one left.
func TestKillKeepsWhatClientsSaw(t *testing.T) {
	e := newEnv(t)
	var script strings.Builder
	for i := range 300 {
		fmt.Fprintf(&script, "say line %d of a reply streamed word by word until the host is killed\nwait 10ms\n", i)
	}
	seen := map[string][]protocol.ActionEnvelope{} // by session
	for round := range *journalKills {
		p := serveDaemon(t, e)
		c := connect(t, p, e.token(t), fmt.Sprintf("k%d", round))
		session, chat := newSession(t, c, e, fmt.Sprintf("k%d", round))
		startTurn(c, chat, "t1", script.String())
		c.Wait("the reply to stream", func(msgs []hosttest.Message) bool {
			n := 0
			for _, m := range msgs {
				if m.Envelope != nil && m.Envelope.Channel == chat {
					n++
				}
			}
			return n >= 40
		})
		p.signal(syscall.SIGKILL)
		p.wait(exitTimeout)
		for _, m := range c.Messages() {
			if env := m.Envelope; env != nil && env.RejectionReason == nil && (env.Channel == session || env.Channel == chat) {
				seen[session] = append(seen[session], *env)
			}
		}
		c.Close()
	}

	j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(e.state, "journal")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close(context.Background())
	for session, envs := range seen {
		entries, err := j.Read(context.Background(), session, 0, journal.MaxReadLimit)
		if err != nil {
			t.Fatal(err)
		}
		kept := map[int64]protocol.ActionEnvelope{}
		for _, en := range entries {
			var probe struct {
				Snapshot, Residency json.RawMessage
			}
			if json.Unmarshal(en.Data, &probe) == nil && (probe.Snapshot != nil || probe.Residency != nil) {
				continue // a state the journal starts from, or the session sleeping or waking: not an action
			}
			var env protocol.ActionEnvelope
			if err := json.Unmarshal(en.Data, &env); err != nil {
				t.Fatalf("%s: entry %d: %v", session, en.Seq, err)
			}
			kept[env.ServerSeq] = env
		}
		for _, env := range envs {
			got, ok := kept[env.ServerSeq]
			if !ok || got.Channel != env.Channel || got.Action.Type() != env.Action.Type() {
				t.Errorf("%s: a client was sent %s at %d; the journal has %+v", session, env.Action.Type(), env.ServerSeq, got)
			}
		}
		t.Logf("%s: the client saw %d actions, the journal holds %d", session, len(envs), len(kept))
	}
}

// TestJournalSettings: the defaults, the file's values with --nats over
// them, and each setting that cannot work refused with what to change.
func TestJournalSettings(t *testing.T) {
	e := newEnv(t)
	cfg, err := parseConfig([]string{"--state-dir", e.state}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.URL != "" || cfg.Journal.MaxAge != 30*24*time.Hour || cfg.Journal.MaxBytesPerSession != 64<<20 {
		t.Errorf("defaults: %+v %+v", cfg.NATS, cfg.Journal)
	}
	file := writeConfig(t, e, "nats: {url: 'nats://a:4222', user: u, password: p}\njournal: {maxAge: 1h, maxBytesPerSession: 0}\n")
	cfg, err = parseConfig([]string{"--config", file, "--nats", "nats://b:4222,nats://c:4222"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.URL != "nats://b:4222,nats://c:4222" || cfg.NATS.User != "u" || cfg.Journal.MaxAge != time.Hour || cfg.Journal.MaxBytesPerSession != 0 {
		t.Errorf("file and flag: %+v %+v", cfg.NATS, cfg.Journal)
	}
	for _, tc := range []struct{ file, flag, want string }{
		{"nats: {token: t}\n", "", "credentials without a url"},
		{"", "::nope", "is not a NATS URL"},
		{"", "nats://ok:4222,", "is not a NATS URL"},
		{"journal: {maxAge: -1h}\n", "", "must not be negative"},
		{"journal: {maxBytesPerSession: -5}\n", "", "must not be negative"},
	} {
		args := []string{"--state-dir", e.state}
		if tc.file != "" {
			args = append(args, "--config", writeConfig(t, e, tc.file))
		}
		if tc.flag != "" {
			args = append(args, "--nats", tc.flag)
		}
		if _, err := parseConfig(args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want %q", tc.file, tc.flag, err, tc.want)
		}
	}
}

// TestMemorySessionsKeepNoJournal: a daemon that keeps no sessions keeps
// no journal either, and one that does makes it under the state directory.
func TestMemorySessionsKeepNoJournal(t *testing.T) {
	for _, sessions := range []string{"memory", "file"} {
		e := newEnv(t)
		p := serveDaemon(t, e, "--sessions", sessions)
		p.terminate()
		_, err := os.Stat(filepath.Join(e.state, "journal"))
		if kept := err == nil; kept != (sessions == "file") {
			t.Errorf("--sessions %s: journal made %v", sessions, kept)
		}
	}
}

// TestKillThenResume kills the daemon with SIGKILL while a turn streams,
// round after round on one session. After each restart the client starts
// again as VS Code does (the host does not know it: initialize, then
// subscribe): the turn the kill cut has ended with an error and holds all
// the text the client had seen, rebuilt from the session's record and its
// journal's tail, and the turns before it are all there.
func TestKillThenResume(t *testing.T) {
	e := newEnv(t)
	var script strings.Builder
	for i := range 300 {
		fmt.Fprintf(&script, "say line %d of a reply cut short by a kill\nwait 10ms\n", i)
	}
	var chat, seen string
	for round := range *journalKills + 1 {
		p := serveDaemon(t, e)
		c := hosttest.Dial(t, p.url(e.token(t)))
		c.Initialize("kr", protocol.RootURI)
		if round == 0 {
			_, chat = newSession(t, c, e, "kr")
		} else {
			c.Subscribe("ahp-session:/kr")
			cs := c.Subscribe(chat).State.(*protocol.ChatState)
			if cs.ActiveTurn != nil || len(cs.Turns) != round {
				t.Fatalf("round %d: %d turns, active %v", round, len(cs.Turns), cs.ActiveTurn != nil)
			}
			for i, turn := range cs.Turns {
				if turn.ID != fmt.Sprintf("t%d", i) || turn.State != protocol.TurnStateError {
					t.Errorf("round %d: turn %d is %s, %s", round, i, turn.ID, turn.State)
				}
			}
			cut := cs.Turns[round-1]
			if got := text(cut.ResponseParts); !strings.HasPrefix(got, seen) || len(seen) < 200 {
				t.Errorf("round %d: the cut turn holds %q; the client had seen %q", round, got, seen)
			}
			if ep, ok := cut.ResponseParts[len(cut.ResponseParts)-1].(*protocol.ErrorResponsePart); !ok || ep.Error.ErrorType != "hostStopped" {
				t.Errorf("round %d: the cut turn ends with %#v", round, cut.ResponseParts[len(cut.ResponseParts)-1])
			}
		}
		if round == *journalKills {
			// Asleep and awake again, the chat's turns are read back from
			// the backend, which has none of the cut ones: the record's
			// copies are put back.
			c.MustCall("unsubscribe", map[string]any{"channel": chat})
			c.MustCall("unsubscribe", map[string]any{"channel": "ahp-session:/kr"})
			if got := string(c.MustCall("ahpd/suspendSession", map[string]any{"channel": "ahp-session:/kr"})); !strings.Contains(got, `"inactive"`) {
				t.Fatalf("suspended: %s", got)
			}
			if cs := c.Subscribe(chat).State.(*protocol.ChatState); len(cs.Turns) != round {
				t.Errorf("after sleeping: %d turns, want %d", len(cs.Turns), round)
			}
			c.Close()
			p.terminate()
			break
		}
		turnID := fmt.Sprintf("t%d", round)
		startTurn(c, chat, turnID, script.String())
		c.WaitState(chat, "the reply to stream", func(st protocol.ChannelState) bool {
			at := st.(*protocol.ChatState).ActiveTurn
			return at != nil && at.ID == turnID && len(text(at.ResponseParts)) > 200
		})
		p.signal(syscall.SIGKILL)
		p.wait(exitTimeout)
		c.Close()
		seen = text(c.State(chat).(*protocol.ChatState).ActiveTurn.ResponseParts)
	}
}
