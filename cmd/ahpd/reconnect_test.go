package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

var reconnectKills = flag.Int("reconnect-kills", 2, "rounds of kill -9 in TestReconnectAcrossRestarts before its clean one (the issue asks for 10)")

// TestReconnectAcrossRestarts: four clients watch six sessions streaming
// turns; ahpd is killed with SIGKILL (and, last, stopped with SIGTERM) and
// started again on the same state; each client reconnects with the last
// serverSeq it saw and is replayed (not sent snapshots) what it missed,
// in order, nothing twice, and then holds what a fresh snapshot holds.
func TestReconnectAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	const clients, sessions = 4, 6
	p := serveDaemon(t, e, "--shutdown-grace", "1ms")
	token := e.token(t)
	cs := make([]*hosttest.Client, clients)
	for i := range cs {
		cs[i] = connect(t, p, token, fmt.Sprintf("watcher-%d", i))
	}
	var watched []string
	chats := make([]string, sessions)
	for s := range sessions {
		var session string
		session, chats[s] = newSession(t, cs[0], e, fmt.Sprintf("k%d", s))
		watched = append(watched, session, chats[s])
		// A session is its creator's alone until a turn goes out in it.
		startTurn(cs[0], chats[s], "hello", "say hello")
		cs[0].WaitState(chats[s], "the first turn", func(st protocol.ChannelState) bool {
			return len(st.(*protocol.ChatState).Turns) == 1
		})
		for _, c := range cs[1:] {
			c.Subscribe(session)
			c.Subscribe(chats[s])
		}
	}
	script := func(round, s int) string {
		var b strings.Builder
		for l := range 400 {
			fmt.Fprintf(&b, "say r%d s%d line %d with a few words more\nwait 5ms\n", round, s, l)
		}
		return b.String()
	}
	rounds := *reconnectKills + 1
	for round := range rounds {
		turn := fmt.Sprintf("t%d", round)
		for s := range sessions {
			startTurn(cs[s%clients], chats[s], turn, script(round, s))
		}
		for s := range sessions {
			cs[s%clients].WaitState(chats[s], "the turn to stream", func(st protocol.ChannelState) bool {
				at := st.(*protocol.ChatState).ActiveTurn
				return at != nil && at.ID == turn && strings.Contains(text(at.ResponseParts), "line 5 ")
			})
		}
		// The last round stops cleanly, its clients cut first so that
		// the turns' endings the stop sends are a gap to replay.
		clean := round == rounds-1
		if clean {
			for _, c := range cs {
				c.Close()
			}
			p.signal(syscall.SIGTERM)
		} else {
			p.signal(syscall.SIGKILL)
		}
		p.wait(exitTimeout)
		for _, c := range cs {
			c.Close()
		}
		p = serveDaemon(t, e, "--shutdown-grace", "1ms")
		for i, old := range cs {
			where := fmt.Sprintf("round %d (clean %v), client %d", round, clean, i)
			seen := old.LastSeq()
			again := hosttest.Dial(t, p.url(token))
			res := again.Resume(old, fmt.Sprintf("watcher-%d", i))
			replay, ok := res.(*protocol.ReconnectReplayResult)
			if !ok {
				t.Fatalf("%s: reconnect answered %T, want a replay", where, res)
			}
			last := seen
			for _, env := range replay.Actions {
				if env.ServerSeq <= last {
					t.Fatalf("%s: replayed serverSeq %d after %d (seen up to %d)", where, env.ServerSeq, last, seen)
				}
				last = env.ServerSeq
			}
			if len(replay.Actions) == 0 {
				t.Errorf("%s: replayed nothing, though the turns it watched were cut", where)
			}
			agreeWithFresh(t, where, p.url(token), again, watched)
			cs[i] = again
		}
	}
	p.terminate()
}

// agreeWithFresh fails t unless c's states of channels, kept by applying
// what it was sent, are what a fresh client is given; actions sent
// before the fresh snapshot may still be on their way to c.
func agreeWithFresh(t *testing.T, where, url string, c *hosttest.Client, channels []string) {
	t.Helper()
	fresh := hosttest.Dial(t, url)
	fresh.Initialize("fresh")
	defer fresh.Close()
	for _, ch := range channels {
		want := comparableState(t, fresh.Subscribe(ch).State)
		same := false
		c.WaitOrNot("the actions before the snapshot of "+ch, func([]hosttest.Message) bool {
			same = reflect.DeepEqual(comparableState(t, c.State(ch)), want)
			return same
		})
		if !same {
			got, _ := json.Marshal(comparableState(t, c.State(ch)))
			w, _ := json.Marshal(want)
			t.Errorf("%s: %s differs from a fresh snapshot:\nclient: %.2000s\n fresh: %.2000s", where, ch, got, w)
		}
	}
}

// comparableState is a state as JSON values, without a session's activity
// bits, which come from its chats and which no session action carries.
func comparableState(t *testing.T, s protocol.ChannelState) any {
	t.Helper()
	if st, ok := s.(*protocol.SessionState); ok {
		c := *st
		c.Status &^= 0x1f
		s = &c
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
