package journal

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// appenderEnv names the store directory for the test binary run as an
// appender process.
const appenderEnv = "AHPD_JOURNAL_TEST_APPENDER"

// runAppender appends to four sessions from four goroutines until it is
// killed, printing "session seq data" for every entry once its append
// has returned, that is once the server has acked it.
func runAppender(dir string) {
	j, err := Open(context.Background(), Config{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for s := range 4 {
		wg.Go(func() {
			session := fmt.Sprintf("kill/%d", s)
			for n := 0; ; n += 5 {
				batch := make([][]byte, 5)
				for i := range batch {
					batch[i] = fmt.Appendf(nil, "e%d", n+i)
				}
				seqs, err := j.Append(context.Background(), session, batch...)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				for i, seq := range seqs {
					fmt.Fprintf(out, "%s %d %s\n", session, seq, batch[i])
				}
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// An appender process killed with SIGKILL in the middle of streaming
// loses nothing it had been told was appended, and the sequence goes on
// from past it.
func TestKillKeepsAckedEntries(t *testing.T) {
	dir := t.TempDir()
	var before uint64 // the greatest sequence acked in earlier rounds
	for round := range 3 {
		acked := killAppender(t, dir, 400)
		j, err := Open(context.Background(), Config{Dir: dir})
		if err != nil {
			t.Fatalf("round %d: Open after kill: %v", round, err)
		}
		var maxSeq uint64
		for session, want := range acked {
			got := map[uint64]string{}
			for after := uint64(0); ; {
				page := readOK(t, j, []string{session}, after, MaxReadLimit)
				for _, e := range page {
					got[e.Seq] = string(e.Data)
				}
				if len(page) < MaxReadLimit {
					break
				}
				after = page[len(page)-1].Seq
			}
			for seq, data := range want {
				if seq <= before {
					t.Fatalf("round %d: sequence %d handed out again (had reached %d)", round, seq, before)
				}
				if got[seq] != data {
					t.Fatalf("round %d: %s seq %d acked as %q, journal has %q", round, session, seq, data, got[seq])
				}
				maxSeq = max(maxSeq, seq)
			}
		}
		if last, err := j.LastSeq(context.Background()); err != nil || last < maxSeq {
			t.Fatalf("round %d: LastSeq %d, %v after kill; an append was acked with %d", round, last, err, maxSeq)
		}
		closeJournal(t, j)
		before = maxSeq
	}
}

// killAppender runs the appender on dir, kills it once it has printed n
// acked entries, and returns what it printed: session, seq, data.
func killAppender(t *testing.T, dir string, n int) map[string]map[uint64]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), appenderEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]map[uint64]string{}
	lines := bufio.NewReader(stdout)
	count := 0
	for {
		line, err := lines.ReadString('\n')
		if err != nil {
			break // the end, or a line the kill cut short: not acked as printed
		}
		var session, data string
		var seq uint64
		if _, err := fmt.Sscanf(line, "%s %d %s", &session, &seq, &data); err != nil {
			t.Fatalf("appender printed %q: %v", line, err)
		}
		if acked[session] == nil {
			acked[session] = map[uint64]string{}
		}
		acked[session][seq] = data
		if count++; count == n {
			// Lines printed after this are acked too, and read on.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = cmd.Wait() // killed: the error is expected
	if len(acked) == 0 {
		t.Fatal("the appender acked nothing before it was killed")
	}
	return acked
}
