package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSystemd starts ahpd as systemd starts the Type=notify service of
// contrib/systemd with its socket unit: the listening socket passed as fd
// 3 (LISTEN_FDS, LISTEN_PID) and a notify socket. ahpd serves the socket
// it was given, not --listen, tells READY=1 once it serves and
// STOPPING=1 when it begins to stop.
func TestSystemd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	passed, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer passed.Close()
	addr := ln.Addr().String()
	ln.Close() // the copy passed stays open
	sock := filepath.Join(e.root, "notify")
	notes, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notes.Close()
	told := make(chan string, 8)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := notes.ReadFromUnix(buf)
			if err != nil {
				close(told)
				return
			}
			told <- string(buf[:n])
		}
	}()
	await := func(want string) {
		t.Helper()
		select {
		case got, ok := <-told:
			if !ok || got != want {
				t.Fatalf("systemd was told %q (open %v), want %q", got, ok, want)
			}
		case <-time.After(exitTimeout):
			t.Fatalf("systemd was never told %q", want)
		}
	}

	e.extraFiles = []*os.File{passed}
	e.extraEnv = append(e.extraEnv, "LISTEN_FDS=1", "NOTIFY_SOCKET="+sock)
	// LISTEN_PID is ahpd's own pid, as systemd sets it: sh's, which exec
	// keeps.
	p := launchBin(t, e, "/bin/sh", 0, "-c", `LISTEN_PID=$$ exec "$0" "$@"`, ahpdBin,
		"--listen", "127.0.0.1:1", "--state-dir", e.state)
	p.awaitListening()
	if p.addr != addr {
		t.Fatalf("ahpd listens on %s, want the socket passed, %s", p.addr, addr)
	}
	await("READY=1")
	c := connect(t, p, e.token(t), "c1")
	_, chat := newSession(t, c, e, "s1")
	if got := text(send(t, c, chat, "t1", "say over the passed socket").ResponseParts); !strings.Contains(got, "over the passed socket") {
		t.Errorf("a turn over the passed socket says %q", got)
	}
	c.Close()
	p.terminate()
	await("STOPPING=1")
}
