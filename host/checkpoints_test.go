package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestSessionCheckpoints: ahpd/sessionCheckpoints answers a session's
// checkpoints newest first, each with what its turn changed; a limit
// leaves the oldest out and says so; bad params are refused; a session
// in a folder that is no repository has none.
func TestSessionCheckpoints(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	session, chat := folderSession(t, c, "cp", repo)
	send(t, c, chat, "t1", "write a.txt x\\ny\\nz")
	send(t, c, chat, "t2", "write README.md bye")
	c.WaitState(session, "two turns counted", func(s protocol.ChannelState) bool {
		f, _, _ := changes(t, s.(*protocol.SessionState))
		return f == 2
	})
	type entry struct {
		Turn                        int
		Commit                      string
		Files, Additions, Deletions int
	}
	var res struct {
		Checkpoints []entry
		More        bool
	}
	if err := json.Unmarshal(c.MustCall("ahpd/sessionCheckpoints", map[string]any{"channel": session}), &res); err != nil {
		t.Fatal(err)
	}
	want := []entry{{Turn: 2, Files: 1, Additions: 1, Deletions: 1}, {Turn: 1, Files: 1, Additions: 3}, {Turn: 0}}
	if len(res.Checkpoints) != len(want) || res.More {
		t.Fatalf("checkpoints %+v, more %v", res.Checkpoints, res.More)
	}
	for i, got := range res.Checkpoints {
		w := want[i]
		w.Commit = got.Commit
		if got != w || len(got.Commit) < 40 {
			t.Errorf("checkpoint %d: %+v, want %+v", i, got, w)
		}
	}
	if err := json.Unmarshal(c.MustCall("ahpd/sessionCheckpoints", map[string]any{"channel": session, "limit": 1}), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Checkpoints) != 1 || res.Checkpoints[0].Turn != 2 || !res.More {
		t.Errorf("limit 1: %+v, more %v", res.Checkpoints, res.More)
	}
	for _, params := range []map[string]any{{}, {"channel": session, "limit": -1}, {"channel": session, "limit": 201}} {
		if _, err := c.Call("ahpd/sessionCheckpoints", params); err == nil || err.Code != int64(protocol.CodeInvalidParams) {
			t.Errorf("%v: %v", params, err)
		}
	}
	plain, _ := th.newSession(c, "plain", nil)
	if err := json.Unmarshal(c.MustCall("ahpd/sessionCheckpoints", map[string]any{"channel": plain}), &res); err != nil || len(res.Checkpoints) != 0 {
		t.Errorf("a session out of any repository: %+v %v", res, err)
	}
}

// TestSessionEventCounts: the entries each session's journal holds, asked
// for many at once; a session the host does not know is left out, and
// too many names are refused.
func TestSessionEventCounts(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	th := startHost(t, "", withJournal(j))
	c := th.client("c1")
	s1, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one two three")
	s2, chat2 := th.newSession(c, "s2", nil)
	send(t, c, chat2, "t1", "say four")
	want, err := j.Counts(context.Background(), []string{s1, s2})
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Counts map[string]uint64 }
	if err := json.Unmarshal(c.MustCall("ahpd/sessionEventCounts", map[string]any{"channels": []string{s1, s2, "ahp-session:/nobody"}}), &res); err != nil {
		t.Fatal(err)
	}
	// A turn's checkpoint may still add its change counts after the turn
	// ended: the host answers the journal's count at some moment between
	// the reads before and after it.
	after, err := j.Counts(context.Background(), []string{s1, s2})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{s1, s2} {
		if got := res.Counts[s]; got < want[s] || got > after[s] {
			t.Errorf("%s: count %d, the journal's %d before and %d after", s, got, want[s], after[s])
		}
	}
	if len(res.Counts) != 2 || want[s1] < 5 {
		t.Errorf("counts %v, the journal's %v", res.Counts, want)
	}
	if _, err := c.Call("ahpd/sessionEventCounts", map[string]any{"channels": make([]string, 1001)}); err == nil || err.Code != int64(protocol.CodeInvalidParams) {
		t.Errorf("1,001 sessions: %v", err)
	}
}
