package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
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

// BenchmarkSleepingSessionsRSS runs a turn in each of 1,000 script sessions
// (AHPD_BENCH_SLEEPERS=n another number),
// then puts them all to sleep, and reports the daemon's resident memory
// (VmRSS) at three points: before they ran (after ten sessions did the
// same, so that what any first turn sets up is counted in it), while they
// are resident, and once they sleep. A sleeping session holds its
// record and its chats without their turns, which are in its transcript:
// MB-kept, what sleep leaves of the run, should be a few MB at most;
// MB-heap-kept is the live heap's part of it (go_memstats_heap_alloc_bytes
// on the daemon's /metrics). Each sleeping reading is taken once the
// daemon has returned the heap the sessions left
// (ahpd_memory_released_total moved releasesPerWave times), as it does a
// moment after sessions fall asleep and again once its journal's caches
// expire; ms-cpu-releasing is the daemon's CPU from its next to last
// release to its last: what the last costs, with the daemon's idle ticks
// and the scrapes that wait for it, ten a second. %-kept is MB-kept against MB-before, and %-returned how
// much of what the run grew the daemon by (MB-running - MB-before) sleep
// gave back. AHPD_BENCH_AHPD names another daemon binary to measure (one
// built from another commit, for figures against it in the same run).
func BenchmarkSleepingSessionsRSS(b *testing.B) {
	const warm = 10
	sessions := 1000
	if n, err := strconv.Atoi(os.Getenv("AHPD_BENCH_SLEEPERS")); err == nil && n > 0 {
		sessions = n
	}
	if bin := os.Getenv("AHPD_BENCH_AHPD"); bin != "" {
		ahpdBin = bin
	}
	// AHPD_BENCH_PROFILE=dir writes the daemon's heap and goroutine
	// profiles there once the sessions sleep.
	profiles := os.Getenv("AHPD_BENCH_PROFILE")
	for b.Loop() {
		e := newEnv(b)
		args := []string{"--log-level", "warn", "--session-residency-limit", "0"}
		pprofAddr := ""
		if profiles != "" {
			pprofAddr = freeAddr(b)
			args = append(args, "--pprof", "--metrics-listen", pprofAddr)
		}
		p := serveDaemon(b, e, args...)
		token := e.token(b)
		runAndSleep(b, p, e, token, 0, warm)
		// A wave is given back twice: a moment after it, and once the
		// journal's caches of it expire (host/memory.go).
		releases := float64(releasesPerWave)
		if os.Getenv("AHPD_BENCH_AHPD") != "" {
			releases = 1 // a daemon from before the second release
		}
		heapBefore := awaitRelease(b, p, token, releases-1)["go_memstats_heap_alloc_bytes"]
		before := settledRSS(b, p.cmd.Process.Pid)
		if profiles != "" {
			saveProfile(b, "http://"+pprofAddr+"/debug/pprof/heap?tkn="+token, filepath.Join(profiles, "heap-before.pprof"))
		}
		running := runAndSleep(b, p, e, token, warm, warm+sessions)
		awaitRelease(b, p, token, 2*releases-2)
		cpu := cpuSeconds(b, p.cmd.Process.Pid)
		heapAsleep := awaitRelease(b, p, token, 2*releases-1)["go_memstats_heap_alloc_bytes"]
		cpu = cpuSeconds(b, p.cmd.Process.Pid) - cpu
		asleep := settledRSS(b, p.cmd.Process.Pid)
		if profiles != "" {
			for _, name := range []string{"heap", "goroutine"} {
				saveProfile(b, "http://"+pprofAddr+"/debug/pprof/"+name+"?tkn="+token, filepath.Join(profiles, name+".pprof"))
			}
		}
		b.ReportMetric(before, "MB-before")
		b.ReportMetric(running, "MB-running")
		b.ReportMetric(asleep, "MB-asleep")
		b.ReportMetric(asleep-before, "MB-kept")
		b.ReportMetric(100*(asleep-before)/before, "%-kept")
		b.ReportMetric(100*(running-asleep)/(running-before), "%-returned")
		b.ReportMetric((heapAsleep-heapBefore)/(1<<20), "MB-heap-kept")
		b.ReportMetric(cpu*1000, "ms-cpu-releasing")
		p.stop()
	}
}

// releasesPerWave is how many times a daemon with a journal gives memory
// back after a burst of work.
const releasesPerWave = 2

// cpuSeconds is the CPU a process has used, user and system, from
// /proc/<pid>/stat.
func cpuSeconds(tb testing.TB, pid int) float64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses:
	// utime and stime are the 14th and 15th of the line.
	_, rest, _ := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return (utime + stime) / 100 // USER_HZ
}

// runAndSleep runs a turn in sessions from to to (exclusive), each of a
// few steps (reasoning, text, a tool call), with a client that then
// leaves; reads the daemon's resident memory with them all resident; puts
// them to sleep, and returns the reading.
func runAndSleep(b *testing.B, p *proc, e *env, token string, from, to int) float64 {
	b.Helper()
	c := connect(b, p, token, fmt.Sprintf("run%d", from))
	say := strings.Repeat("All work and no play makes a dull agent. ", 50)
	var uris []string
	for i := from; i < to; i++ {
		session := fmt.Sprintf("ahp-session:/m%04d", i)
		// Its run step needs the approval a person would give.
		c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
			"workingDirectories": []string{"file://" + e.work}, "config": bypass, "_meta": map[string]any{"ahpd.strictConfig": true}})
		chat := protocol.DefaultChatURI(session)
		c.Subscribe(chat)
		msg := fmt.Sprintf("think about turn %d\nsay %s\nrun seq %d %d", i, say, i, i+4000)
		if turn := sendTB(b, c, chat, "t1", msg); turn.State != protocol.TurnStateComplete {
			b.Fatalf("session %d: %s", i, turnSummary(turn))
		}
		uris = append(uris, session)
	}
	c.Close()
	resident := settledRSS(b, p.cmd.Process.Pid)
	c = connect(b, p, token, fmt.Sprintf("sleep%d", from))
	defer c.Close()
	for _, session := range uris {
		// The client that ran it may be seen to leave a moment later.
		deadline := time.Now().Add(hosttest.Timeout)
		for string(c.MustCall("ahpd/suspendSession", map[string]any{"channel": session})) != `{"status":"inactive"}` {
			if time.Now().After(deadline) {
				b.Fatalf("%s never went to sleep", session)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return resident
}

// awaitRelease waits until the daemon has returned the heap of sessions
// that fell asleep more than released times, and returns its metrics
// right after: of the heap just collected, with nothing but the scrape
// before it allocated since. (The scrape that sees the count may have
// read the runtime's figures a moment before the collection: a
// registry's collectors run at once.)
func awaitRelease(tb testing.TB, p *proc, token string, released float64) map[string]float64 {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if m := metrics(tb, p, token); m["ahpd_memory_released_total"] > released {
			return metrics(tb, p, token)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the daemon did not release memory after %v times", released)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metrics scrapes the daemon's /metrics once and returns the samples that
// have no labels.
func metrics(tb testing.TB, p *proc, token string) map[string]float64 {
	tb.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics?tkn=" + token)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// freeAddr is a loopback address no listener has now.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// saveProfile writes what url answers to path.
func saveProfile(tb testing.TB, url, path string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
}
