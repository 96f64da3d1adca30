package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/protocol"
)

// TestExternalClaudeSession runs the Claude Code CLI on its own, outside
// the daemon, in a directory of its own, then shows that the daemon lists
// that conversation as an external session once showExternalSessions asks
// for it, that a client can open it (its turns read from the CLI's
// transcript) and continue it (the CLI resumed from the conversation's own
// directory, with the earlier turns), which adopts it, and that no CLI
// outlives the daemon.
func TestExternalClaudeSession(t *testing.T) {
	t.Parallel()
	f := newClaudeFixture(t)

	// The conversation made outside the daemon: two runs of the bare CLI
	// in a directory that is not the daemon's, the second resuming the
	// first.
	dir := filepath.Join(f.e.root, "elsewhere")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // what the CLI records as its cwd
	}
	id := newTurnID()
	const (
		prompt1, reply1 = "remember the code word heron", "The code word is heron."
		prompt2, reply2 = "what is the code word?", "It is heron."
		prompt3, reply3 = "and now, from the daemon?", "Still heron."
	)
	f.mock.Enqueue(claudetest.Text(reply1))
	runExternalCLI(t, f, dir, reply1, "-p", prompt1, "--session-id", id, "--output-format", "json")
	f.mock.Enqueue(claudetest.Text(reply2))
	runExternalCLI(t, f, dir, reply2, "-p", prompt2, "--resume", id, "--output-format", "json")
	if reqs := f.mock.Requests(); len(reqs) != 2 {
		t.Fatalf("the bare CLI made %d model calls, want 2: %q", len(reqs), extRequestTexts(reqs))
	}
	transcript := filepath.Join(f.e.home, ".claude", "projects", extProjectName(dir), id+".jsonl")
	if _, err := os.Stat(transcript); err != nil {
		t.Fatalf("the CLI's transcript is not where the catalogue looks: %v", err)
	}

	p := f.serve(t, "--log-level", "debug")
	c := connect(t, p, f.e.token(t), "c1")
	session := protocol.ProviderSessionURI("claude", id).String()
	chat := protocol.DefaultChatURI(session)
	dirURI := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()

	// none, the default: the conversation is not listed.
	if v := string(c.State(protocol.RootURI).(*protocol.RootState).Config.Values["showExternalSessions"]); v != `"none"` {
		t.Errorf("showExternalSessions = %s, want \"none\"", v)
	}
	if row, ok := extListed(t, c, session); ok {
		t.Errorf("with showExternalSessions none, listSessions lists %+v", row)
	}

	// last7Days: it is listed as external, titled as the Agent SDK titles
	// it (by its last prompt, the CLI's last-prompt line), working where
	// the CLI ran.
	extSetMode(c, "last7Days")
	row := extWaitListed(t, c, session, "listed under last7Days")
	if string(row.Meta["vscode.external"]) != "true" {
		t.Errorf("the listed row's _meta is %s, want vscode.external true", row.Meta)
	}
	if row.Title != prompt2 {
		t.Errorf("the listed row's title is %q, want the last prompt %q", row.Title, prompt2)
	}
	if row.Provider != "claude" {
		t.Errorf("the listed row's provider is %q, want claude", row.Provider)
	}
	if !slices.Equal(row.WorkingDirectories, []protocol.URI{dirURI}) {
		t.Errorf("the listed row's working directories are %v, want [%s]", row.WorkingDirectories, dirURI)
	}
	// The catalogue has the row now, so none hiding it is no accident of
	// timing: back to none it goes (the listing after a dispatch sees it
	// applied), and it comes back with last7Days.
	extSetMode(c, "none")
	if row, ok := extListed(t, c, session); ok {
		t.Errorf("back in none, listSessions lists %+v", row)
	}
	c.Wait("root/sessionRemoved of "+session, func(msgs []hosttest.Message) bool {
		return slices.Contains(extRootNotes(msgs, "root/sessionRemoved"), session)
	})
	extSetMode(c, "last7Days")
	extWaitListed(t, c, session, "listed again under last7Days")

	// Opened: its state marks it external, and its chat holds the turns
	// of the transcript.
	st := c.Subscribe(session).State.(*protocol.SessionState)
	if string(st.Meta["vscode.external"]) != "true" {
		t.Errorf("the opened session's _meta is %s, want vscode.external true", st.Meta)
	}
	if st.Provider != "claude" || st.Title != prompt2 {
		t.Errorf("the opened session is provider %q titled %q, want claude and %q", st.Provider, st.Title, prompt2)
	}
	if !slices.Equal(st.WorkingDirectories, []protocol.URI{dirURI}) {
		t.Errorf("the opened session works in %v, want [%s]", st.WorkingDirectories, dirURI)
	}
	c.Subscribe(chat)
	cs := c.WaitState(chat, "the transcript's turns", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.ChatState).Turns) >= 2
	}).(*protocol.ChatState)
	wantTurns := []struct{ msg, reply string }{{prompt1, reply1}, {prompt2, reply2}}
	if len(cs.Turns) != len(wantTurns) {
		t.Errorf("the opened chat has %d turns, want %d", len(cs.Turns), len(wantTurns))
	}
	for i, w := range wantTurns {
		if i >= len(cs.Turns) {
			break
		}
		if turn := cs.Turns[i]; turn.Message.Text != w.msg || text(turn.ResponseParts) != w.reply || turn.State != protocol.TurnStateComplete {
			t.Errorf("the opened chat's turn %d is %s, want %q -> %q complete", i, turnSummary(turn), w.msg, w.reply)
		}
	}
	if cs.TurnsNextCursor != nil {
		t.Errorf("a chat of %d turns has turnsNextCursor %q", len(cs.Turns), *cs.TurnsNextCursor)
	}
	// fetchTurns: with every turn loaded there is no older page. The
	// answer comes on the queue of the chat's actions, so a page it
	// loaded would have come first.
	seen := len(c.Messages())
	res, rerr := c.Call("fetchTurns", map[string]any{"channel": chat})
	var got map[string]any
	if rerr != nil {
		t.Errorf("fetchTurns: %v", rerr)
	} else if err := json.Unmarshal(res, &got); err != nil || len(got) != 0 {
		t.Errorf("fetchTurns answered %s, want {}", res)
	}
	for _, m := range c.Messages()[seen:] {
		if m.Envelope != nil {
			if _, ok := m.Envelope.Action.(*protocol.ChatTurnsLoadedAction); ok {
				t.Errorf("fetchTurns of a chat with everything loaded loaded %s", m.Params)
			}
		}
	}
	if n := len(c.State(chat).(*protocol.ChatState).Turns); n != len(wantTurns) {
		t.Errorf("after fetchTurns the chat has %d turns, want %d", n, len(wantTurns))
	}
	if got := f.cliPIDs(t, dir); len(got) != 0 {
		t.Errorf("opening the session started CLI processes %v", got)
	}

	// Continued: the CLI resumes the conversation in its own directory,
	// the model gets the earlier turns, and the session is adopted.
	seen = len(c.Messages())
	f.mock.Enqueue(claudetest.Text(reply3))
	if turn := send(t, c, chat, newTurnID(), prompt3); turn.State != protocol.TurnStateComplete || text(turn.ResponseParts) != reply3 {
		t.Fatalf("the turn continuing the external session: %s", turnSummary(turn))
	}
	f.waitCLIs(t, dir, 1, "the CLI resumed in the conversation's directory")
	if got := f.cliPIDs(t, f.e.work); len(got) != 0 {
		t.Errorf("CLI processes %v run in the daemon's directory, not the conversation's", got)
	}
	reqs := f.mock.Requests()
	want := []string{"user: " + prompt1, "assistant: " + reply1, "user: " + prompt2, "assistant: " + reply2, "user: " + prompt3}
	if len(reqs) != 3 || !slices.Equal(reqs[len(reqs)-1].Texts(), want) {
		t.Errorf("the model calls carried %q, want 3, the last %q", extRequestTexts(reqs), want)
	}
	if n := f.mock.Pending(); n != 0 {
		t.Errorf("%d model replies were never asked for", n)
	}
	c.Wait("the adoption told to root", func(msgs []hosttest.Message) bool {
		return extAdoptionNoted(msgs[min(seen, len(msgs)):], session)
	})
	assertAdopted := func(when string) {
		t.Helper()
		var rows []protocol.SessionSummary
		for _, r := range listSessions(t, c) {
			if r.Resource == session {
				rows = append(rows, r)
			}
		}
		if len(rows) != 1 {
			t.Errorf("%s, listSessions has %d rows of %s, want 1: %+v", when, len(rows), session, rows)
			return
		}
		if v, ok := rows[0].Meta["vscode.external"]; ok && string(v) != "false" {
			t.Errorf("%s, the adopted session is listed with _meta %s", when, rows[0].Meta)
		}
	}
	assertAdopted("once adopted")
	// A client opening it now is not told it is external.
	c2 := connect(t, p, f.e.token(t), "c2")
	if st := c2.Subscribe(session).State.(*protocol.SessionState); string(st.Meta["vscode.external"]) == "true" {
		t.Errorf("the adopted session's state has _meta %s", st.Meta)
	}
	c2.Close()

	// Adopted, it is the host's own: listed in none too.
	extSetMode(c, "none")
	c.WaitState(protocol.RootURI, "showExternalSessions none", func(s protocol.ChannelState) bool {
		return string(s.(*protocol.RootState).Config.Values["showExternalSessions"]) == `"none"`
	})
	assertAdopted("back in none")

	c.Close()
	p.terminate()
	if got := f.cliPIDs(t, dir); len(got) != 0 {
		t.Errorf("CLI processes %v outlived the daemon", got)
	}
	if got := f.cliPIDs(t, f.e.work); len(got) != 0 {
		t.Errorf("CLI processes %v outlived the daemon", got)
	}
}

// runExternalCLI runs the Claude Code CLI once in dir, as a person would,
// against the fixture's mock and home, and checks its JSON result says
// reply.
func runExternalCLI(t *testing.T, f *claudeFixture, dir, reply string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.cli, args...)
	cmd.Dir = dir
	// claudetest's environment: an entry without "=" removes a variable.
	drop := map[string]bool{"PWD": true}
	var extra []string
	for _, kv := range f.mock.Env(f.e.home) {
		k, _, ok := strings.Cut(kv, "=")
		drop[k] = true
		if ok {
			extra = append(extra, kv)
		}
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// The configuration directory the daemon's CLI is given, so that
	// both CLIs share one configuration; the transcripts are in
	// $HOME/.claude/projects either way.
	cmd.Env = append(append(cmd.Env, extra...), "PWD="+dir, "CLAUDE_CONFIG_DIR="+filepath.Join(f.e.home, ".claude"))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = exitTimeout // what it wrote is copied out after it exits
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("claude %q: %v; stdout %s; stderr:\n%s", args, err, out, stderr.String())
	}
	var res struct {
		Type      string `json:"type"`
		IsError   bool   `json:"is_error"`
		Result    string `json:"result"`
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.IsError || res.Result != reply {
		t.Fatalf("claude %q answered %s (%v), want the result %q", args, out, err, reply)
	}
}

// extProjectName is the folder under ~/.claude/projects the CLI keeps
// the transcripts of dir's sessions in, for a short path of ASCII.
func extProjectName(dir string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, dir)
}

// extRequestTexts describes model calls for failure messages.
func extRequestTexts(reqs []*claudetest.Request) [][]string {
	var out [][]string
	for _, r := range reqs {
		out = append(out, r.Texts())
	}
	return out
}

// extSetMode dispatches root/configChanged setting
// showExternalSessions.
func extSetMode(c *hosttest.Client, mode string) {
	c.Dispatch(protocol.RootURI, &protocol.RootConfigChangedAction{
		Config: protocol.Object{"showExternalSessions": jsontext.Value(`"` + mode + `"`)},
	})
}

// extListed returns the row of session that listSessions answers.
func extListed(t *testing.T, c *hosttest.Client, session string) (protocol.SessionSummary, bool) {
	t.Helper()
	for _, r := range listSessions(t, c) {
		if r.Resource == session {
			return r, true
		}
	}
	return protocol.SessionSummary{}, false
}

// extWaitListed polls listSessions until it lists session.
func extWaitListed(t *testing.T, c *hosttest.Client, session, what string) protocol.SessionSummary {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		if row, ok := extListed(t, c, session); ok {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: listSessions does not list %s after %v: %+v", what, session, startTimeout, listSessions(t, c))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// extRootNotes returns the session each root notification of method names.
func extRootNotes(msgs []hosttest.Message, method string) []string {
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

// extAdoptionNoted reports whether msgs tell root that session is no longer
// external: a root/sessionSummaryChanged whose changes set
// _meta["vscode.external"] to false, or a root/sessionAdded of it without
// the mark.
func extAdoptionNoted(msgs []hosttest.Message, session string) bool {
	for _, m := range msgs {
		var p struct {
			Session string
			Changes struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			Summary struct {
				Resource string
				Meta     map[string]json.RawMessage `json:"_meta"`
			}
		}
		if json.Unmarshal(m.Params, &p) != nil {
			continue
		}
		switch m.Method {
		case "root/sessionSummaryChanged":
			if v, ok := p.Changes.Meta["vscode.external"]; p.Session == session && ok && string(v) == "false" {
				return true
			}
		case "root/sessionAdded":
			if p.Summary.Resource == session && string(p.Summary.Meta["vscode.external"]) != "true" {
				return true
			}
		}
	}
	return false
}
