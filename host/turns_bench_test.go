package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// BenchmarkConcurrentTurns runs five turns in each of 200 sessions at
// once, over one real WebSocket, as a client driving many agents does:
// each session is sent its next turn as soon as its last is seen to end.
// Each turn writes a file. In git folders (each session its own
// repository of 200 files) a session snapshots the tree it starts from on
// its first send, and records a checkpoint and reads its counts as each
// turn ends; in plain folders none of that. plain-journal is plain with
// every action written to an embedded journal before it is sent: the
// difference is what the journal costs a turn.
//
//   - turns/s: the turns ended (chat/turnComplete received) over the time
//     from the first send to the last end.
//   - turns/s-first: the sessions' first turns over the time until the
//     last of them ended.
//   - s/counted: from the first send until every session's row shows the
//     five files its turns wrote (git only): the checkpoints' work,
//     however it is scheduled, is all done by then.
//   - s/counted-after-end: from the last turn's end until then (git
//     only): how long the last counts trail the turns.
//   - s/counted-lag-max: the longest any session's counts came after its
//     own last turn ended (git only).
func BenchmarkConcurrentTurns(b *testing.B) {
	const sessions, turns = 200, 5
	for _, kind := range []string{"git", "plain", "plain-journal"} {
		b.Run(kind, func(b *testing.B) {
			template := turnsTemplate(b, kind == "git")
			var all, first, counted, lag time.Duration
			n := 0
			for b.Loop() {
				n++
				a, f, c, l := concurrentTurns(b, template, sessions, turns, kind == "git", kind == "plain-journal")
				all, first, counted, lag = all+a, first+f, counted+c, max(lag, l)
			}
			b.ReportMetric(float64(sessions*turns*n)/all.Seconds(), "turns/s")
			b.ReportMetric(float64(sessions*n)/first.Seconds(), "turns/s-first")
			if kind == "git" {
				b.ReportMetric(counted.Seconds()/float64(n), "s/counted")
				b.ReportMetric((counted-all).Seconds()/float64(n), "s/counted-after-end")
				b.ReportMetric(lag.Seconds(), "s/counted-lag-max")
			}
		})
	}
}

// concurrentTurns runs the turns on a host of its own, closed before it
// returns, and times them: until the last turn ended, until the last
// first turn ended, until the last counts came, and the longest a
// session's counts came after its last turn ended.
func concurrentTurns(b *testing.B, template string, sessions, turns int, git, journaled bool) (all, first, counted, lag time.Duration) {
	state := b.TempDir()
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts", "script"))); err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := host.Options{StateDir: state, Backends: backends, Logger: logger, DefaultDirectory: state}
	if journaled {
		j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(state, "journal")})
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close(context.Background()) // after the host's Close, deferred below
		opts.Journal = j
	}
	h, err := host.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(false, ""))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			b.Error(err)
		}
		srv.Close()
	}()
	c := &turnsClient{rawClient: dialRaw(b, "ws"+strings.TrimPrefix(srv.URL, "http"), protocol.RootURI),
		ended: map[string]int{}, files: map[string]int64{}, lastEnd: map[string]time.Time{}, want: int64(turns)}
	defer c.ws.CloseNow()
	chats := make([]string, sessions)
	for i := range chats {
		dir := filepath.Join(state, "work", fmt.Sprintf("p%03d", i))
		copyTree(b, template, dir)
		if git {
			benchGit(b, dir, "update-index", "-q", "--refresh")
		}
		session := fmt.Sprintf("ahp-session:/t%03d", i)
		c.roundTrip(b, "createSession", map[string]any{"channel": session, "provider": "script",
			"workingDirectories": []string{"file://" + dir}, "config": map[string]any{"autoApprove": "allow"}})
		chats[i] = protocol.DefaultChatURI(session)
		c.roundTrip(b, "subscribe", map[string]any{"channel": chats[i]})
	}
	start := time.Now()
	firsts := 0
	c.next = func(chat string, turn int) {
		if turn == turns {
			c.lastEnd[chat] = time.Now()
		}
		if turn == 1 {
			if firsts++; firsts == sessions {
				first = time.Since(start)
			}
		}
		if turn < turns {
			c.send(b, chat, turn+1)
		}
	}
	for _, chat := range chats {
		c.send(b, chat, 1)
	}
	c.until(b, "the turns", func() bool { return c.total == sessions*turns })
	all = time.Since(start)
	if git {
		c.until(b, "the counts", func() bool {
			for _, n := range c.files {
				if n != int64(turns) {
					return false
				}
			}
			return len(c.files) == sessions
		})
		counted = time.Since(start)
		lag = c.lag
	}
	return all, first, counted, lag
}

// turnsClient reads a benchmark's frames: the turns ended in each chat
// and, per session, the files its row was last told it changed.
type turnsClient struct {
	*rawClient
	ended map[string]int // by chat
	total int
	files map[string]int64 // by session
	next  func(chat string, ended int)
	seq   atomic.Int64 // the clientSeqs used: one numbering for all its chats

	lastEnd map[string]time.Time // by chat: when its last turn was seen to end
	want    int64                // the files a session's row shows once all is counted
	lag     time.Duration        // the longest from a chat's last end to its session's full counts
}

// send starts turn n of a chat.
func (c *turnsClient) send(b *testing.B, chat string, n int) {
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "dispatchAction", "params": map[string]any{
		"channel": chat, "clientSeq": c.seq.Add(1),
		"action": &protocol.ChatTurnStartedAction{
			TurnID: fmt.Sprintf("turn%d", n), StartedAt: protocol.FormatTime(time.Now()),
			Message: protocol.Message{Text: fmt.Sprintf("write turn%d.txt written by turn %d", n, n),
				Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
		},
	}})
	if err := c.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
}

// until reads frames until done holds, failing on a turn's error.
func (c *turnsClient) until(b *testing.B, what string, done func() bool) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for !done() {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			b.Fatalf("waiting for %s (%d turns ended): %v", what, c.total, err)
		}
		switch {
		case bytes.Contains(data, []byte(`"type":"chat/error"`)):
			b.Fatalf("%s", data)
		case bytes.Contains(data, []byte(`"type":"chat/turnComplete"`)):
			var m struct {
				Params struct {
					Channel string `json:"channel"`
				} `json:"params"`
			}
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
			c.total++
			c.ended[m.Params.Channel]++
			if c.next != nil {
				c.next(m.Params.Channel, c.ended[m.Params.Channel])
			}
		case bytes.Contains(data, []byte(`"root/sessionSummaryChanged"`)):
			var m struct {
				Params protocol.SessionSummaryChangedParams `json:"params"`
			}
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
			if ch := m.Params.Changes.Changes; ch != nil && ch.Files != nil {
				c.files[m.Params.Session] = *ch.Files
				if end, ok := c.lastEnd[protocol.DefaultChatURI(m.Params.Session)]; ok && *ch.Files == c.want {
					c.lag = max(c.lag, time.Since(end))
				}
			}
		}
	}
}

// turnsTemplate makes the folder every session's is copied from: 200
// small files in 10 folders, committed when it is a repository.
func turnsTemplate(b *testing.B, repo bool) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "template")
	for i := range 200 {
		path := filepath.Join(dir, fmt.Sprintf("pkg%d", i%10), fmt.Sprintf("file%03d.go", i))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, bytes.Repeat([]byte(fmt.Sprintf("// line of file %d\n", i)), 50), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if !repo {
		return dir
	}
	for _, args := range [][]string{{"init", "-q", "--template="}, {"add", "-A"}, {"commit", "-q", "-m", "start"}} {
		benchGit(b, dir, args...)
	}
	return dir
}

func benchGit(b *testing.B, dir string, args ...string) {
	b.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Bench", "-c", "user.email=bench@example.invalid",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// copyTree copies a folder, its repository with it: making 200 from one
// is much quicker than running git 200 times. The copy's files have
// other inodes and change times than its index records: refresh it, as
// a checkout would have it.
func copyTree(b *testing.B, from, to string) {
	b.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, info.Mode().Perm())
	})
	if err != nil {
		b.Fatal(err)
	}
}
