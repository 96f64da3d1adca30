package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/internal/fulldisk"
	"github.com/ahpd/ahpd/protocol"
)

// TestFullDiskDaemon fills, to the last byte, the disk the daemon's state
// directory is on (a tmpfs of the test's own) while a turn streams: the
// turn ends at once with an error, new work is refused saying why, and
// reads go on; a daemon stopped on the full disk starts again on it and
// serves what it has; once there is room, work goes on.
func TestFullDiskDaemon(t *testing.T) {
	if !fulldisk.Run(t, "fulldisk_test.go") {
		return
	}
	e := newEnv(t)
	e.state = filepath.Join(fulldisk.Mount(t, 128<<20), "state")
	p := serveDaemon(t, e)
	c := connect(t, p, e.token(t), "full")
	sa, ca := newSession(t, c, e, "a")
	sb, cb := newSession(t, c, e, "b")
	if turn := send(t, c, cb, "b1", "say before"); turn.State != protocol.TurnStateComplete {
		t.Fatalf("a turn with room: %s", turn.State)
	}
	var script strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&script, "say line %d of a reply the full disk stops\nwait 5ms\n", i)
	}
	startTurn(c, ca, "a1", script.String())
	c.WaitState(ca, "the reply to stream", func(st protocol.ChannelState) bool {
		at := st.(*protocol.ChatState).ActiveTurn
		return at != nil && strings.Contains(text(at.ResponseParts), "line 5 ")
	})

	remove := fulldisk.Fill(t, filepath.Dir(e.state))
	filled := time.Now()
	cs := c.WaitState(ca, "the turn to end", func(st protocol.ChannelState) bool {
		cs := st.(*protocol.ChatState)
		return cs.ActiveTurn == nil && len(cs.Turns) == 1
	}).(*protocol.ChatState)
	ended := time.Since(filled)
	cut := cs.Turns[0]
	if cut.State != protocol.TurnStateError {
		t.Fatalf("the turn streaming when the disk filled ended %s", cut.State)
	}
	t.Logf("the turn ended %v after the disk filled, %s: %s", ended, errorType(cut), errorMessage(cut))

	// New work is refused, saying why.
	refusal := dispatchRefusal(t, c, cb, "b2")
	if !strings.Contains(refusal, "cannot record new work") || !strings.Contains(refusal, "full") {
		t.Errorf("a turn on a full disk was refused with %q", refusal)
	}
	// Reads go on.
	if _, err := c.Call("listSessions", map[string]any{"channel": protocol.RootURI}); err != nil {
		t.Errorf("listSessions on a full disk: %v", err)
	}
	if code := getSessions(t, p, e); code != http.StatusOK {
		t.Errorf("GET /v1/sessions on a full disk: %d", code)
	}
	c.Close()

	// Stopped on the full disk, the daemon starts again on it.
	p.terminate()
	began := time.Now()
	p = serveDaemon(t, e)
	t.Logf("started again on the full disk in %v", time.Since(began))
	c = connect(t, p, e.token(t), "full2")
	c.Subscribe(sa)
	if st := c.Subscribe(ca).State.(*protocol.ChatState); len(st.Turns) != 1 || text(st.Turns[0].ResponseParts) != text(cut.ResponseParts) {
		t.Errorf("after a start on the full disk: %d turns, the cut one changed", len(st.Turns))
	}
	c.Subscribe(sb)
	c.Subscribe(cb)

	// Room again: work goes on.
	remove()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the daemon's log:\n%s", p.stderr.String())
		}
	})
	for i := 3; ; i++ {
		id := fmt.Sprintf("b%d", i)
		if dispatchRefusal(t, c, cb, id) != "" {
			continue // the host has not appended since the room came back
		}
		if turn := awaitTurn(t, c, cb, id); turn.State == protocol.TurnStateComplete {
			break
		}
	}
}

// dispatchRefusal starts a turn and returns why the host refused it, ""
// when it took it.
func dispatchRefusal(t *testing.T, c *hosttest.Client, chat, turnID string) string {
	t.Helper()
	seq := c.Dispatch(chat, &protocol.ChatTurnStartedAction{
		TurnID: turnID, StartedAt: protocol.FormatTime(time.Now()),
		Message: protocol.Message{Text: "say after", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
	var reason string
	c.Wait("turn "+turnID+" taken or refused", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if env := m.Envelope; env != nil && env.Origin != nil && env.Origin.ClientSeq == seq && env.Channel == chat {
				if env.RejectionReason != nil {
					reason = *env.RejectionReason
				}
				return true
			}
		}
		return false
	})
	return reason
}

// awaitTurn waits for turn turnID of chat to end and returns it.
func awaitTurn(t *testing.T, c *hosttest.Client, chat, turnID string) protocol.Turn {
	t.Helper()
	cs := c.WaitState(chat, "turn "+turnID+" to end", func(st protocol.ChannelState) bool {
		cs := st.(*protocol.ChatState)
		return cs.ActiveTurn == nil && len(cs.Turns) > 0 && cs.Turns[len(cs.Turns)-1].ID == turnID
	}).(*protocol.ChatState)
	return cs.Turns[len(cs.Turns)-1]
}

// getSessions asks the daemon's HTTP API for its sessions and returns the
// status.
func getSessions(t *testing.T, p *proc, e *env) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.addr+"/v1/sessions", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func errorType(t protocol.Turn) string {
	for _, p := range t.ResponseParts {
		if ep, ok := p.(*protocol.ErrorResponsePart); ok {
			return ep.Error.ErrorType
		}
	}
	return ""
}

func errorMessage(t protocol.Turn) string {
	for _, p := range t.ResponseParts {
		if ep, ok := p.(*protocol.ErrorResponsePart); ok {
			return ep.Error.Message
		}
	}
	return ""
}
