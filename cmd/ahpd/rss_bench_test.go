package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// BenchmarkIdleSessionsRSS starts the daemon on a state directory holding
// 1,000 sessions, as after a restart, and reports its resident memory once
// it serves them.
func BenchmarkIdleSessionsRSS(b *testing.B) {
	const sessions = 1000
	for b.Loop() {
		e := newEnv(b)
		writeRecords(b, e, sessions)
		p := serveDaemon(b, e, "--log-level", "warn")
		c := connect(b, p, e.token(b), "rss")
		raw := c.MustCall("listSessions", map[string]any{"channel": protocol.RootURI})
		var r protocol.ListSessionsResult
		if err := json.Unmarshal(raw, &r); err != nil || len(r.Items) != sessions {
			b.Fatalf("listed %d sessions, %v", len(r.Items), err)
		}
		time.Sleep(200 * time.Millisecond) // let the start-up garbage go
		b.ReportMetric(rssMB(b, p.cmd.Process.Pid), "MB-RSS")
		c.Close()
		p.stop()
	}
}

// writeRecords stores n sessions in e's state directory, in the file
// store's format.
func writeRecords(tb testing.TB, e *env, n int) {
	tb.Helper()
	dir := filepath.Join(e.state, "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("s%04d", i)
		uri := "ahp-session:/" + id
		chat := protocol.DefaultChatURI(uri)
		at := protocol.FormatTime(time.Unix(1_700_000_000+int64(i), 0))
		data, _ := json.Marshal(map[string]any{
			"ahpd": 1, "uri": uri, "provider": "script", "title": "Session " + id,
			"createdAt": at, "modifiedAt": at, "workingDirectories": []string{e.work},
			"lifecycle": "ready", "defaultChat": chat,
			"chats": []map[string]any{{"uri": chat, "title": "Session " + id, "modifiedAt": at, "conversation": id, "started": true}},
		})
		if err := os.WriteFile(filepath.Join(dir, id+".json"), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkOversizedSubscribesRSS sends a daemon eight subscribes, each
// naming a session by a 30 MB URI (a guest can), and reports its peak and
// settled resident memory. It once peaked at 6.5 GB and kept 5.7 GB.
func BenchmarkOversizedSubscribesRSS(b *testing.B) {
	huge := "ahp-session:/" + strings.Repeat("x", 30<<20)
	for b.Loop() {
		e := newEnv(b)
		p := serveDaemon(b, e, "--log-level", "warn")
		c := connect(b, p, e.token(b), "rss")
		for range 8 {
			if _, err := c.Call("subscribe", map[string]any{"channel": huge}); err == nil || len(err.Message) > 512 {
				b.Fatalf("an oversized subscribe: %v", err)
			}
		}
		time.Sleep(200 * time.Millisecond) // the garbage collector's turn
		b.ReportMetric(statusMB(b, p.cmd.Process.Pid, "VmHWM:"), "MB-peak-RSS")
		b.ReportMetric(rssMB(b, p.cmd.Process.Pid), "MB-RSS")
		c.Close()
		p.stop()
	}
}

// rssMB reads a process's resident set size.
func rssMB(tb testing.TB, pid int) float64 { return statusMB(tb, pid, "VmRSS:") }

// statusMB reads a size field of a process's status, in MB.
func statusMB(tb testing.TB, pid int, field string) float64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				tb.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	tb.Fatal("no " + field)
	return 0
}
