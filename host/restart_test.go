package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/protocol"
)

// TestRecordBehindTheJournal: a session's record that missed its latest
// changes (a crash before the write) is caught up from the journal's tail
// when the host starts: clients are given the state they were last told,
// and the record is written again.
func TestRecordBehindTheJournal(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	state := t.TempDir()
	th := startHost(t, state, withJournal(j))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "title First\nsay one")
	th.stop()
	file := filepath.Join(state, "sessions", "s1.json")
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	th = startHost(t, state, withJournal(j))
	c = th.client("c1")
	c.Subscribe(session)
	c.Subscribe(chat)
	live := send(t, c, chat, "t2", "title Second\nsay two")
	th.stop()
	// As after a crash: the record is behind, and no clean stop is marked.
	if err := os.WriteFile(file, old, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := j.SetMark(context.Background(), host.CleanKey, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}

	th = startHost(t, state, withJournal(j))
	c = th.client("c1")
	ss := c.Subscribe(session).State.(*protocol.SessionState)
	cs := c.Subscribe(chat).State.(*protocol.ChatState)
	if ss.Title != "Second" || cs.Title != live.Title || len(cs.Turns) != 2 {
		t.Errorf("after a restart on a stale record: session %q, chat %q with %d turns", ss.Title, cs.Title, len(cs.Turns))
	}
	th.stop()
	if data, err := os.ReadFile(file); err != nil || !strings.Contains(string(data), `"title": "Second"`) {
		t.Errorf("the record was not caught up: %s %v", data, err)
	}
}
