package main

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// TestFrozenHolderIsFenced: three daemons on a three-node NATS cluster. B
// holds a session and streams a long turn; B is stopped (SIGSTOP) past
// its lease, C takes the session over on the next message, and B is let
// go on (SIGCONT) with its turn still streaming. Nothing B does after C
// took the session reaches the journal or any client: A's client, which
// follows the session's journal, sees no action of B's turn after C's
// turn started, B's turn ended as C's takeover cut it, and B's own
// client is cut with a reason saying the session moved.
func TestFrozenHolderIsFenced(t *testing.T) {
	tr := startTrio(t)
	envs, procs := tr.envs, tr.procs
	ca, cb, session, chat := tr.sessionOnB(t, "fenced")

	freed := tr.freed(t)
	streamLong(ca, chat, "t2", 300, 10)
	procs["b"].signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			procs["b"].signal(syscall.SIGCONT) // for the cleanup to stop it
		}
	}()
	for id := range freed {
		if id == "fenced" {
			break
		}
	}
	send(t, ca, chat, "t3", "say three")
	if st, on := statusOf(t, ca, session); st != "active" || on != "c" {
		t.Fatalf("status after the takeover = %s on %q, want active on c", st, on)
	}

	// B wakes with its turn streaming and its lease gone.
	procs["b"].signal(syscall.SIGCONT)
	stopped = false
	select {
	case <-cb.Done():
	case <-time.After(40 * time.Second):
		t.Errorf("B's client was not told the session moved")
	}
	if err := cb.Err(); err == nil || !strings.Contains(err.Error(), "moved") {
		t.Errorf("B's client was cut with %v, want a reason saying the session moved", err)
	}
	// Whatever B got into the journal would reach A's client before the
	// next turn C runs.
	send(t, ca, chat, "t4", "say four")
	actions := chatActions(ca.Messages(), chat)
	third := slices.IndexFunc(actions, func(a string) bool {
		return strings.Contains(a, `"chat/turnStarted"`) && strings.Contains(a, `"turnId":"t3"`)
	})
	if third < 0 {
		t.Fatal("A's client never saw t3 start")
	}
	for _, a := range actions[third:] {
		if strings.Contains(a, `"turnId":"t2"`) && !strings.Contains(a, `"chat/turnComplete"`) && !strings.Contains(a, "hostStopped") {
			t.Errorf("an action of B's turn after C took the session: %s", a)
		}
	}
	cs := ca.State(chat).(*protocol.ChatState)
	var ids []string
	for _, turn := range cs.Turns {
		ids = append(ids, turn.ID+":"+string(turn.State))
	}
	if want := []string{"t1:complete", "t2:error", "t3:complete", "t4:complete"}; !slices.Equal(ids, want) {
		t.Fatalf("turns %v, want %v", ids, want)
	}
	cc := connect(t, procs["c"], envs["c"].token(t), "cc")
	cc.Subscribe(chat)
	if got := cc.State(chat).(*protocol.ChatState); text(got.Turns[1].ResponseParts) != text(cs.Turns[1].ResponseParts) {
		t.Errorf("C's client and A's differ on the cut turn:\nC %q\nA %q", text(got.Turns[1].ResponseParts), text(cs.Turns[1].ResponseParts))
	}
}
