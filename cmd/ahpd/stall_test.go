package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

var natsStall = flag.Duration("nats-stall", 7*time.Second, "how long TestNATSStallLosesNothing stops the NATS server")

// natsServerEnv, set in a test binary's environment to a store directory,
// makes it a NATS server on 127.0.0.1 instead (serveNATSForTest): a
// process of its own, which a test can stop with SIGSTOP.
const natsServerEnv = "AHPD_TEST_NATS_STORE"

// serveNATSForTest runs a JetStream server storing under dir until it is
// signalled, printing its client URL on stdout once it takes clients.
func serveNATSForTest(dir string) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv.Start()
	if !srv.ReadyForConnections(time.Minute) {
		fmt.Fprintln(os.Stderr, "the NATS server did not start")
		os.Exit(1)
	}
	fmt.Printf("nats://127.0.0.1:%d\n", srv.Addr().(*net.TCPAddr).Port)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	srv.Shutdown()
	srv.WaitForShutdown()
	os.Exit(0)
}

// startNATSProcess runs the test binary as a NATS server and returns it
// and its URL. It is ended when the test ends.
func startNATSProcess(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), natsServerEnv+"="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the NATS server printed no URL: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

// TestNATSStallLosesNothing stops the NATS server the daemon journals to
// (SIGSTOP) for -nats-stall while sessions stream, then lets it go on:
// the turns end whole, every action a client was sent is in the journal,
// and after a kill -9 and a restart the turns are as the client saw them.
func TestNATSStallLosesNothing(t *testing.T) {
	e := newEnv(t)
	nats, url := startNATSProcess(t)
	p := serveDaemon(t, e, "--nats", url)
	c := connect(t, p, e.token(t), "stall")
	const n = 5
	chats := make([]string, n)
	sessions := make([]string, n)
	// Each reply halts halfway, at a command waiting for the gate file,
	// which the test makes once NATS is stopped: the second halves stream
	// during the stall however slow the machine (a reply that ran through
	// before every session had started once missed it).
	gate := filepath.Join(e.root, "gate")
	for i := range n {
		sessions[i], chats[i] = newSessionWith(t, c, e, fmt.Sprintf("st%d", i), bypass) // the gate's command runs unasked
		var script strings.Builder
		for l := range 300 {
			if l == 150 {
				fmt.Fprintf(&script, "run while [ ! -e %s ]; do sleep 0.01; done\n", gate)
			}
			fmt.Fprintf(&script, "say session %d line %d of a reply that outlasts a stall\nwait 10ms\n", i, l)
		}
		startTurn(c, chats[i], "t1", script.String())
	}
	for i := range n {
		c.WaitState(chats[i], "the replies to stream to the gate", func(st protocol.ChannelState) bool {
			at := st.(*protocol.ChatState).ActiveTurn
			if at == nil || !strings.Contains(text(at.ResponseParts), "line 149 ") {
				return false
			}
			for _, part := range at.ResponseParts {
				if tp, ok := part.(*protocol.ToolCallResponsePart); ok {
					if _, ok := tp.ToolCall.(*protocol.ToolCallRunningState); ok {
						return true
					}
				}
			}
			return false
		})
	}
	if err := nats.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stalled := time.NewTimer(*natsStall) // the fault's length, not a wait for something
	<-stalled.C
	if err := nats.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for i := range n {
		cs := c.WaitState(chats[i], "the turns to end", func(st protocol.ChannelState) bool {
			cs := st.(*protocol.ChatState)
			return cs.ActiveTurn == nil && len(cs.Turns) == 1
		}).(*protocol.ChatState)
		got := text(cs.Turns[0].ResponseParts)
		if cs.Turns[0].State != protocol.TurnStateComplete || !strings.Contains(got, "line 299 ") {
			t.Errorf("session %d: the turn ended %s with %d bytes", i, cs.Turns[0].State, len(got))
		}
		seen[chats[i]] = got
	}

	msgs := c.Messages() // each was in the journal before it was sent
	j, err := journal.Open(context.Background(), journal.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close(context.Background())
	kept := map[int64]bool{}
	for _, s := range sessions {
		for after := uint64(0); ; {
			entries, err := j.Read(context.Background(), s, after, journal.MaxReadLimit)
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range entries {
				var env struct {
					ServerSeq int64 `json:"serverSeq"`
				}
				if json.Unmarshal(en.Data, &env) == nil {
					kept[env.ServerSeq] = true
				}
				after = en.Seq
			}
			if len(entries) < journal.MaxReadLimit {
				break
			}
		}
	}
	missing := 0
	for _, m := range msgs {
		if env := m.Envelope; env != nil && env.RejectionReason == nil && env.Channel != protocol.RootURI && !kept[env.ServerSeq] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the actions the client was sent are not in the journal", missing)
	}

	p.signal(syscall.SIGKILL)
	p.wait(exitTimeout)
	c.Close()
	p = serveDaemon(t, e, "--nats", url)
	c = connect(t, p, e.token(t), "stall2")
	for i := range n {
		c.Subscribe(sessions[i])
		cs := c.Subscribe(chats[i]).State.(*protocol.ChatState)
		if len(cs.Turns) != 1 || text(cs.Turns[0].ResponseParts) != seen[chats[i]] || cs.Turns[0].State != protocol.TurnStateComplete {
			t.Errorf("session %d after a kill: %d turns, the turn changed", i, len(cs.Turns))
		}
	}
}
