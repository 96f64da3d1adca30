package host_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// writeScriptTranscript writes a script backend transcript of one finished
// turn that started at when: a session some other run of the backend had.
func writeScriptTranscript(t *testing.T, dir, id, prompt string, when time.Time) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf(`{"seq":1,"turn":{"id":"turn-1","startedAt":%q,"duration":5,"message":{"text":%q,"origin":{"kind":"user"}},"responseParts":[{"kind":"markdown","id":"p1","content":"done"}],"state":"complete"}}`+"\n",
		protocol.FormatTime(when), prompt)
	path := filepath.Join(dir, id+".jsonl")
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func withTranscripts(o *host.Options) {
	o.Transcripts = host.Transcripts{Listers: []plugins.TranscriptLister{script.New(filepath.Join(o.StateDir, "transcripts", "script"))}}
}

// listed returns the resources listSessions answers, and which of them
// are marked external.
func listed(t *testing.T, c *hosttest.Client) (all, external []string) {
	t.Helper()
	for _, s := range listSessions(t, c, nil).Items {
		all = append(all, s.Resource)
		if string(s.Meta["vscode.external"]) == "true" {
			external = append(external, s.Resource)
		}
	}
	slices.Sort(all)
	slices.Sort(external)
	return all, external
}

// waitListed waits for listSessions to answer want. The catalogue reads
// transcripts in the background and tells root's subscribers of each row
// it then shows or hides: a row missing from the first listing, or one too
// many, is waited for as that notification.
func waitListed(t *testing.T, c *hosttest.Client, want ...string) {
	t.Helper()
	slices.Sort(want)
	all, _ := listed(t, c)
	if slices.Equal(all, want) {
		return
	}
	var missing, extra []string
	for _, uri := range want {
		if !slices.Contains(all, uri) {
			missing = append(missing, uri)
		}
	}
	for _, uri := range all {
		if !slices.Contains(want, uri) {
			extra = append(extra, uri)
		}
	}
	c.Wait(fmt.Sprintf("%v shown and %v hidden", missing, extra), func(msgs []hosttest.Message) bool {
		added, removed := rootNotes(msgs, "root/sessionAdded"), rootNotes(msgs, "root/sessionRemoved")
		for _, uri := range missing {
			if !slices.Contains(added, uri) {
				return false
			}
		}
		for _, uri := range extra {
			if !slices.Contains(removed, uri) {
				return false
			}
		}
		return true
	})
	if all, _ = listed(t, c); !slices.Equal(all, want) {
		t.Fatalf("listed %v, want %v", all, want)
	}
}

func setMode(c *hosttest.Client, mode string) int64 {
	return c.Dispatch(protocol.RootURI, &protocol.RootConfigChangedAction{
		Config: protocol.Object{"showExternalSessions": jsontext.Value(`"` + mode + `"`)},
	})
}

func rootNotes(msgs []hosttest.Message, method string) []string {
	var out []string
	for _, m := range msgs {
		if m.Method != method {
			continue
		}
		var p struct {
			Session string
			Summary struct{ Resource string }
		}
		_ = json.Unmarshal(m.Params, &p)
		out = append(out, p.Session+p.Summary.Resource)
	}
	return out
}

// TestExternalSessions lists sessions found in transcripts this host never
// ran by the showExternalSessions mode, opens one, continues it (which
// adopts it), and keeps the mode and the adoption across a restart.
func TestExternalSessions(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	scripts := filepath.Join(state, "transcripts", "script")
	now := time.Now()
	writeScriptTranscript(t, scripts, "ext1", "fix the build", now.Add(-time.Hour))
	writeScriptTranscript(t, scripts, "ext2", "write the docs", now.Add(-72*time.Hour))
	writeScriptTranscript(t, scripts, "ext3", "an old one", now.Add(-40*24*time.Hour))
	th := startHost(t, state, withTranscripts)
	c := th.client("c1")
	_, chat := th.newSession(c, "own1", nil)
	send(t, c, chat, "t1", "say mine")

	// none, the default: the host's own only, its transcript not external.
	waitListed(t, c, "ahp-session:/own1")
	if v := string(c.State(protocol.RootURI).(*protocol.RootState).Config.Values["showExternalSessions"]); v != `"none"` {
		t.Errorf("showExternalSessions = %s", v)
	}

	setMode(c, "last7Days")
	c.Wait("the rows now shown", func(msgs []hosttest.Message) bool {
		return len(rootNotes(msgs, "root/sessionAdded")) >= 3 // own1, then ext1 and ext2
	})
	if added := rootNotes(c.Messages(), "root/sessionAdded"); !slices.Contains(added, "script:/ext1") || !slices.Contains(added, "script:/ext2") || slices.Contains(added, "script:/ext3") {
		t.Errorf("added %v", added)
	}
	all, external := listed(t, c)
	if !slices.Equal(all, []string{"ahp-session:/own1", "script:/ext1", "script:/ext2"}) || !slices.Equal(external, []string{"script:/ext1", "script:/ext2"}) {
		t.Errorf("last7Days lists %v, external %v", all, external)
	}
	if seq := setMode(c, "sometimes"); !strings.Contains(rejection(t, c, seq), "showExternalSessions takes one of") {
		t.Error("a mode that is none of them was taken")
	}

	// The status probe knows it without opening it.
	if raw := c.MustCall("ahpd/sessionStatus", map[string]any{"channel": "script:/ext2"}); string(raw) != `{"status":"inactive"}` {
		t.Errorf("the status of an external session: %s", raw)
	}
	if th.h.Held("script:/ext2") {
		t.Error("the status probe opened the session")
	}

	// Opened, it is read from its transcript and stays external.
	snap := c.Subscribe("script:/ext1")
	if st := snap.State.(*protocol.SessionState); string(st.Meta["vscode.external"]) != "true" {
		t.Errorf("the opened session's state: %s", st.Meta)
	}
	extChat := protocol.DefaultChatURI("script:/ext1")
	cs := c.Subscribe(extChat).State.(*protocol.ChatState)
	if len(cs.Turns) != 1 || cs.Turns[0].Message.Text != "fix the build" {
		t.Fatalf("the external chat's turns: %+v", cs.Turns)
	}
	all, external = listed(t, c)
	if !slices.Equal(external, []string{"script:/ext1", "script:/ext2"}) || len(all) != 3 {
		t.Errorf("after opening, listed %v, external %v", all, external)
	}

	// A person's turn adopts it: listed in every mode, mark gone.
	if cs := send(t, c, extChat, "t2", "say continued"); cs.Turns[len(cs.Turns)-1].State != protocol.TurnStateComplete {
		t.Fatalf("continuing: %+v", cs.Turns[len(cs.Turns)-1])
	}
	c.WaitState("script:/ext1", "the mark to go", func(s protocol.ChannelState) bool {
		_, marked := s.(*protocol.SessionState).Meta["vscode.external"]
		return !marked
	})
	setMode(c, "none")
	c.Wait("ext2 no longer shown", func(msgs []hosttest.Message) bool {
		return slices.Contains(rootNotes(msgs, "root/sessionRemoved"), "script:/ext2")
	})
	all, external = listed(t, c)
	if !slices.Equal(all, []string{"ahp-session:/own1", "script:/ext1"}) || len(external) != 0 {
		t.Errorf("after adoption, in none: %v, external %v", all, external)
	}

	// Both the mode and the adoption outlive a restart.
	c.Close()
	th.stop()
	th = startHost(t, state, withTranscripts)
	c = th.client("c2")
	waitListed(t, c, "ahp-session:/own1", "script:/ext1")
	if v := string(c.State(protocol.RootURI).(*protocol.RootState).Config.Values["showExternalSessions"]); v != `"none"` {
		t.Errorf("showExternalSessions after a restart = %s", v)
	}
}

// TestExternalRowChanges checks a transcript that grows is told to clients
// as a summary change, and one that appears as an added session.
func TestExternalRowChanges(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	scripts := filepath.Join(state, "transcripts", "script")
	now := time.Now()
	path := writeScriptTranscript(t, scripts, "ext1", "first", now.Add(-time.Hour))
	th := startHost(t, state, withTranscripts)
	c := th.client("c1")
	setMode(c, "last30Days")
	waitListed(t, c, "script:/ext1")

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"seq":2,"turn":{"id":"turn-2","startedAt":%q,"duration":5,"message":{"text":"more","origin":{"kind":"user"}},"responseParts":[],"state":"complete"}}`+"\n", protocol.FormatTime(now))
	f.Close()
	c.Wait("the summary change", func(msgs []hosttest.Message) bool {
		return slices.Contains(rootNotes(msgs, "root/sessionSummaryChanged"), "script:/ext1")
	})
	writeScriptTranscript(t, scripts, "ext2", "new one", now)
	c.Wait("the new session", func(msgs []hosttest.Message) bool {
		return slices.Contains(rootNotes(msgs, "root/sessionAdded"), "script:/ext2")
	})
	os.Remove(path)
	c.Wait("the session gone", func(msgs []hosttest.Message) bool {
		return slices.Contains(rootNotes(msgs, "root/sessionRemoved"), "script:/ext1")
	})
}

// TestAdoptionOwner checks the person whose turn adopts an external
// session becomes its owner.
func TestAdoptionOwner(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	writeScriptTranscript(t, filepath.Join(state, "transcripts", "script"), "ext1", "fix it", time.Now().Add(-time.Hour))
	th, tokens := usersHost(t, state, withTranscripts)
	mo := dialAs(t, th, tokens["mo"], "mo")
	chat := protocol.DefaultChatURI("script:/ext1")
	mo.Subscribe("script:/ext1")
	mo.Subscribe(chat)
	send(t, mo, chat, "t2", "say mine now")
	raw := mo.MustCall("listSessions", map[string]any{"channel": protocol.RootURI, "_meta": map[string]any{"ahpd.owner": "me"}})
	if !strings.Contains(string(raw), `"resource":"script:/ext1"`) {
		t.Errorf("mo's own sessions after adopting: %s", raw)
	}
}
