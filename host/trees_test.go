package host_test

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// git runs git in dir with an identity of its own, failing the test on an
// error, and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.invalid",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository with one commit on main: a tracked file, a
// .gitignore, and the ignored .env and node_modules a project has.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "project")
	for name, content := range map[string]string{
		"README.md":                 "hello\n",
		".gitignore":                ".env\nnode_modules/\n",
		".env":                      "SECRET=1\n",
		"node_modules/dep/index.js": "module.exports = 1\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "README.md", ".gitignore")
	git(t, dir, "commit", "-q", "-m", "start")
	return dir
}

func resolveConfig(t *testing.T, c *hosttest.Client, dir string, config map[string]any) protocol.ResolveSessionConfigResult {
	t.Helper()
	raw := c.MustCall("resolveSessionConfig", map[string]any{
		"channel": protocol.RootURI, "provider": "script", "workingDirectory": "file://" + dir, "config": config,
	})
	var r protocol.ResolveSessionConfigResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestIsolationConfig checks the host's isolation keys: offered in their
// order for a repository, read-only folder isolation elsewhere, values
// taken only in their shape, and branches completed as they are typed.
func TestIsolationConfig(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	for _, b := range []string{"feature/login", "feature/logout", "fix/typo"} {
		git(t, repo, "branch", b)
	}

	r := resolveConfig(t, c, repo, map[string]any{"worktreeIncludeFiles": ".env", "isolation": 3, "branch": 7})
	var keys []string
	for k, p := range r.Schema.Properties.All() {
		keys = append(keys, k)
		// The permission keys may change on a running session; the
		// isolation keys may not.
		if mutable := p.SessionMutable != nil && *p.SessionMutable; mutable != (k == "permissions" || k == "autoApprove" || k == "inputTimeout") {
			t.Errorf("%s: sessionMutable %v", k, mutable)
		}
	}
	want := []string{"isolation", "permissions", "autoApprove", "inputTimeout", "branch", "worktreeBranchPrefix", "worktreeIncludeFiles",
		"worktreeSymlinkFolders", "worktreeCreateNewBranch", "worktreeBranchTrack"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	for k, v := range map[string]string{
		"isolation": `"folder"`, "branch": `"main"`, "worktreeIncludeFiles": `[".env"]`,
		"worktreeSymlinkFolders": `[]`, "worktreeCreateNewBranch": `true`, "worktreeBranchTrack": `false`,
	} {
		if got := string(r.Values[k]); got != v {
			t.Errorf("%s = %s, want %s", k, got, v)
		}
	}
	if b, _ := r.Schema.Properties.Get("branch"); b.EnumDynamic == nil || !*b.EnumDynamic {
		t.Error("branch is not enumDynamic")
	}

	raw := c.MustCall("sessionConfigCompletions", map[string]any{
		"channel": protocol.RootURI, "provider": "script", "workingDirectory": "file://" + repo, "property": "branch", "query": "LOG",
	})
	var comp protocol.SessionConfigCompletionsResult
	if err := json.Unmarshal(raw, &comp); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range comp.Items {
		got = append(got, it.Value)
	}
	if !slices.Equal(got, []string{"feature/login", "feature/logout"}) {
		t.Errorf("branches matching LOG: %v", got)
	}

	plain := t.TempDir()
	r = resolveConfig(t, c, plain, map[string]any{"isolation": "worktree"})
	iso, _ := r.Schema.Properties.Get("isolation")
	if iso.ReadOnly == nil || !*iso.ReadOnly || len(iso.Enum) != 1 || string(r.Values["isolation"]) != `"folder"` {
		t.Errorf("isolation outside a repository: %+v = %s", iso, r.Values["isolation"])
	}
	if _, ok := r.Schema.Properties.Get("branch"); ok {
		t.Error("a folder that is no repository is offered a branch")
	}
}

// worktreeSession makes a worktree session in repo, subscribed by c.
func worktreeSession(t *testing.T, c *hosttest.Client, id, repo string, config map[string]any) (session, chat string) {
	t.Helper()
	session = "ahp-session:/" + id
	values := map[string]any{"isolation": "worktree", "autoApprove": "allow"}
	for k, v := range config {
		values[k] = v
	}
	c.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script", "workingDirectories": []string{"file://" + repo}, "config": values,
	})
	c.Subscribe(session)
	chat = protocol.DefaultChatURI(session)
	c.Subscribe(chat)
	return session, chat
}

// changes reads the counts the session's default chat entry carries, or
// -1s when it carries none.
func changes(t *testing.T, s *protocol.SessionState) (files, additions, deletions int64) {
	t.Helper()
	for _, e := range s.Chats {
		if s.DefaultChat == nil || e.Resource != *s.DefaultChat {
			continue
		}
		if ch := e.Changes; ch != nil {
			return deref(ch.Files), deref(ch.Additions), deref(ch.Deletions)
		}
	}
	return -1, -1, -1
}

// TestWorktreeSession runs a worktree session: it works in its folder
// until its first send, which makes the tree (with the ignored files and
// folders it asked for), moves the session there in place, and runs the
// turn in it; the counts are the tree's branch changes, kept across a
// restart; dispose removes the clean tree and keeps its branch.
func TestWorktreeSession(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state)
	c := th.client("c1")
	repo := newRepo(t)
	session, chat := worktreeSession(t, c, "wt1", repo, map[string]any{
		"worktreeIncludeFiles": ".env", "worktreeSymlinkFolders": []string{"node_modules"}, "worktreeBranchPrefix": "agents/",
	})
	if dirs := c.State(session).(*protocol.SessionState).WorkingDirectories; len(dirs) != 1 || dirs[0] != "file://"+repo {
		t.Fatalf("before the first send the session works in %v", dirs)
	}

	send(t, c, chat, "t1", "write notes.txt one\\ntwo")
	tree := filepath.Join(filepath.Dir(repo), "project.worktrees", "wt1")
	st := c.WaitState(session, "the counts", func(s protocol.ChannelState) bool {
		f, _, _ := changes(t, s.(*protocol.SessionState))
		return f > 0
	}).(*protocol.SessionState)
	if len(st.WorkingDirectories) != 1 || st.WorkingDirectories[0] != "file://"+tree {
		t.Errorf("after the first send the session works in %v, want %s", st.WorkingDirectories, tree)
	}
	if f, a, d := changes(t, st); f != 1 || a != 2 || d != 0 {
		t.Errorf("changes %d files +%d -%d, want 1 +2 -0", f, a, d)
	}
	if data, err := os.ReadFile(filepath.Join(tree, "notes.txt")); err != nil || string(data) != "one\ntwo" {
		t.Errorf("notes.txt in the tree: %q %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(repo, "notes.txt")); !os.IsNotExist(err) {
		t.Errorf("the turn wrote into the folder: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(tree, ".env")); string(data) != "SECRET=1\n" {
		t.Errorf(".env was not copied: %q", data)
	}
	if fi, err := os.Lstat(filepath.Join(tree, "node_modules")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("node_modules is not linked: %v %v", fi, err)
	}
	if branch := git(t, tree, "branch", "--show-current"); branch != "agents/wt1" {
		t.Errorf("the tree is on %q", branch)
	}
	refs := git(t, repo, "for-each-ref", "--format=%(refname)", "refs/agents/")
	if refs != "refs/agents/wt1/checkpoints/turn/0\nrefs/agents/wt1/checkpoints/turn/1" {
		t.Errorf("checkpoints: %q", refs)
	}

	// A client of 0.8 was told of the move in one action.
	if moves := directoryMoves(c.Messages()); !slices.Equal(moves, []string{"session/workingDirectoryReplaced"}) {
		t.Errorf("a 0.8 client saw %v", moves)
	}

	// A fixed key cannot change now.
	seq := c.Dispatch(session, &protocol.SessionConfigChangedAction{Config: protocol.Object{"isolation": jsontext.Value(`"folder"`)}})
	if reason := rejection(t, c, seq); !strings.Contains(reason, "config key isolation is fixed once the session has started") {
		t.Errorf("changing isolation: %q", reason)
	}

	// The counts come back after a restart, with nothing running.
	c.Close()
	th.stop()
	th = startHost(t, state)
	c = th.client("c2")
	rows := listSessions(t, c, nil).Items
	if len(rows) != 1 || rows[0].Changes == nil || *rows[0].Changes.Files != 1 {
		t.Fatalf("after a restart: %+v", rows)
	}
	// The row names the branch the tree has checked out.
	if branch := git(t, tree, "branch", "--show-current"); branch == "" || string(rows[0].Meta["ahpd.branch"]) != `"`+branch+`"` {
		t.Errorf("the row's branch: %s, the tree's %q", rows[0].Meta["ahpd.branch"], branch)
	}
	// And the repository it was made from, which the dashboard groups by.
	if want, _ := json.Marshal(repo); string(rows[0].Meta["ahpd.repo"]) != string(want) {
		t.Errorf("the row's repository: %s, want %s", rows[0].Meta["ahpd.repo"], want)
	}
	// Dispose takes the clean tree away, keeps its branch, drops the refs.
	git(t, tree, "add", "notes.txt")
	git(t, tree, "commit", "-q", "-m", "notes")
	c.MustCall("disposeSession", map[string]any{"channel": session})
	if _, err := os.Stat(tree); !os.IsNotExist(err) {
		t.Errorf("the tree is still there: %v", err)
	}
	if out := git(t, repo, "branch", "--list", "agents/wt1"); out == "" {
		t.Error("the tree's branch went with it")
	}
	if refs := git(t, repo, "for-each-ref", "refs/agents/"); refs != "" {
		t.Errorf("refs left: %q", refs)
	}
}

func directoryMoves(msgs []hosttest.Message) []string {
	var moves []string
	for _, m := range msgs {
		if e := m.Envelope; e != nil && strings.HasPrefix(string(e.Action.Type()), "session/workingDirectory") {
			moves = append(moves, string(e.Action.Type()))
		}
	}
	return moves
}

// TestWorktreeKeptWithWork checks a disposed session's tree holding
// uncommitted work stays.
func TestWorktreeKeptWithWork(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	session, chat := worktreeSession(t, c, "wt2", repo, nil)
	send(t, c, chat, "t1", "write draft.txt unsaved")
	c.MustCall("disposeSession", map[string]any{"channel": session})
	if _, err := os.Stat(filepath.Join(filepath.Dir(repo), "project.worktrees", "wt2", "draft.txt")); err != nil {
		t.Errorf("the tree with uncommitted work was removed: %v", err)
	}
}

// TestWorktreesAtOnce starts two worktree sessions in one repository at
// once: both get their trees.
func TestWorktreesAtOnce(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	repo := newRepo(t)
	var wg sync.WaitGroup
	for _, id := range []string{"a1", "a2"} {
		c := th.client(id)
		_, chat := worktreeSession(t, c, id, repo, nil)
		wg.Go(func() {
			if cs := send(t, c, chat, "t1", "say hi"); cs.Turns[0].State != protocol.TurnStateComplete {
				t.Errorf("%s: %s %+v", id, cs.Turns[0].State, cs.Turns[0].ErrorPart())
			}
		})
	}
	wg.Wait()
	list := git(t, repo, "worktree", "list")
	if !strings.Contains(list, "project.worktrees/a1") || !strings.Contains(list, "project.worktrees/a2") {
		t.Errorf("worktrees:\n%s", list)
	}
}

// TestWorktreeGitRefuses checks a tree git cannot make fails the send with
// git's reason, and the session stays in its folder.
func TestWorktreeGitRefuses(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	session, chat := worktreeSession(t, c, "wt3", repo, map[string]any{"branch": "no-such-branch"})
	cs := send(t, c, chat, "t1", "say hi")
	if cs.Turns[0].State != protocol.TurnStateError || !strings.Contains(errorText(cs.Turns[0]), "no-such-branch") {
		t.Errorf("turn: %s %+v", cs.Turns[0].State, cs.Turns[0].ErrorPart())
	}
	if dirs := c.State(session).(*protocol.SessionState).WorkingDirectories; dirs[0] != "file://"+repo {
		t.Errorf("the session moved to %v", dirs)
	}
}

// TestFolderSessionChanges checks a folder session's Session Changes: a
// commit in the folder does not zero them, a cancelled turn gets no
// checkpoint, and dispose drops only the session's refs.
func TestFolderSessionChanges(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	session := "ahp-session:/f1"
	c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + repo}, "config": map[string]any{"autoApprove": "allow"}})
	c.Subscribe(session)
	chat := protocol.DefaultChatURI(session)
	c.Subscribe(chat)
	send(t, c, chat, "t1", "write a.txt x\\ny\\nz")
	git(t, repo, "add", "a.txt")
	git(t, repo, "commit", "-q", "-m", "the agent's work")
	send(t, c, chat, "t2", "write README.md bye")
	st := c.WaitState(session, "two turns counted", func(s protocol.ChannelState) bool {
		f, _, _ := changes(t, s.(*protocol.SessionState))
		return f == 2
	}).(*protocol.SessionState)
	if f, a, d := changes(t, st); f != 2 || a != 4 || d != 1 {
		t.Errorf("changes %d files +%d -%d, want 2 +4 -1", f, a, d)
	}
	startTurn(c, chat, "t3", "wait 30s")
	c.WaitState(chat, "t3 to run", func(s protocol.ChannelState) bool { return s.(*protocol.ChatState).ActiveTurn != nil })
	c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t3", Duration: 1})
	waitTurnEnd(t, c, chat, "t3")
	git(t, repo, "update-ref", "refs/agents/other/checkpoints/turn/0", "HEAD")
	refs := git(t, repo, "for-each-ref", "--format=%(refname)", "refs/agents/f1/")
	if strings.Count(refs, "\n")+1 != 3 {
		t.Errorf("checkpoints after a cancelled turn: %q", refs)
	}
	// The default chat's entry carries the session's counts.
	entry := c.State(session).(*protocol.SessionState).Chats[0]
	if raw, _ := json.Marshal(entry.Changes); !strings.Contains(string(raw), `"files":2`) {
		t.Errorf("the default chat's entry: %s", raw)
	}
	c.MustCall("disposeSession", map[string]any{"channel": session})
	if refs := git(t, repo, "for-each-ref", "--format=%(refname)", "refs/agents/"); refs != "refs/agents/other/checkpoints/turn/0" {
		t.Errorf("refs after dispose: %q", refs)
	}
}

// TestSharedFolderCounts runs two sessions in one git folder, as the chats
// of a VS Code workspace are: one writes a file, the other only talks,
// its turns before and after the write. The writer counts its file, the
// talker nothing (it counted the writer's when counts were the folder
// against its first checkpoint), and both keep that across a restart and
// the turns after it, which read the counts again from the refs.
func TestSharedFolderCounts(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state)
	c := th.client("c1")
	repo := newRepo(t)
	open := func(c *hosttest.Client, id string) (session, chat string) {
		session = "ahp-session:/" + id
		c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
			"workingDirectories": []string{"file://" + repo}, "config": map[string]any{"autoApprove": "allow"}})
		chat = protocol.DefaultChatURI(session)
		c.Subscribe(session)
		c.Subscribe(chat)
		return session, chat
	}
	writer, writerChat := open(c, "writer")
	talker, talkerChat := open(c, "talker")
	send(t, c, talkerChat, "t1", "say hello")
	send(t, c, writerChat, "t1", "write claude.txt hello")
	send(t, c, talkerChat, "t2", "say hello again")
	counts := func(c *hosttest.Client) map[string]string {
		t.Helper()
		for _, s := range []string{writer, talker} {
			if err := th.h.Settle(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]string{}
		for _, row := range listSessions(t, c, nil).Items {
			raw, _ := json.Marshal(row.Changes)
			got[row.Resource] = string(raw)
		}
		return got
	}
	want := map[string]string{
		writer: `{"additions":1,"deletions":0,"files":1}`,
		talker: `{"additions":0,"deletions":0,"files":0}`,
	}
	if got := counts(c); !maps.Equal(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	// The talker's second turn started after the write: its start is
	// recorded, and the turn follows it.
	if got, start := git(t, repo, "rev-parse", "refs/agents/talker/checkpoints/turn/2^"), git(t, repo, "rev-parse", "refs/agents/talker/checkpoints/start/2"); got != start {
		t.Errorf("the talker's turn 2 follows %s, not its start %s", got, start)
	}
	// And its per-turn counts leave the writer's file out too.
	var cps struct {
		Checkpoints []struct{ Turn, Files int } `json:"checkpoints"`
	}
	if err := json.Unmarshal(c.MustCall("ahpd/sessionCheckpoints", map[string]any{"channel": talker}), &cps); err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps.Checkpoints {
		if cp.Files != 0 {
			t.Errorf("the talker's turn %d counts %d files", cp.Turn, cp.Files)
		}
	}

	c.Close()
	th.stop()
	th = startHost(t, state)
	c = th.client("c2")
	if got := counts(c); !maps.Equal(got, want) {
		t.Errorf("after a restart: counts %v, want %v", got, want)
	}
	c.Subscribe(writerChat)
	c.Subscribe(talkerChat)
	send(t, c, talkerChat, "t3", "say still here")
	send(t, c, writerChat, "t2", "write second.txt a\\nb")
	want[writer] = `{"additions":3,"deletions":0,"files":2}`
	if got := counts(c); !maps.Equal(got, want) {
		t.Errorf("after a turn each since the restart: counts %v, want %v", got, want)
	}
}

// rejection waits for the echo of the client's action seq and returns its
// rejection reason.
func rejection(t *testing.T, c *hosttest.Client, seq int64) string {
	t.Helper()
	var reason string
	c.Wait("the echo", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq {
				if e.RejectionReason != nil {
					reason = *e.RejectionReason
				}
				return true
			}
		}
		return false
	})
	return reason
}

// chatChanges reads the counts a chat's entry in the session carries.
func chatChanges(s *protocol.SessionState, chat string) string {
	for _, e := range s.Chats {
		if e.Resource == chat {
			raw, _ := json.Marshal(e.Changes)
			return string(raw)
		}
	}
	return ""
}

// TestEditsCounted checks a folder that is no repository counts the files
// its tools were seen to write, and a second chat carries its own edits.
func TestEditsCounted(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "e1", map[string]any{"autoApprove": "allow"})
	send(t, c, chat, "t1", "write a.txt x\\ny\nwrite b.txt z")
	st := c.WaitState(session, "the counts", func(s protocol.ChannelState) bool {
		f, _, _ := changes(t, s.(*protocol.SessionState))
		return f == 2
	}).(*protocol.SessionState)
	if f, a, d := changes(t, st); f != 2 || a != 3 || d != 0 {
		t.Errorf("changes %d files +%d -%d, want 2 +3 -0", f, a, d)
	}

	second := protocol.ChatURIFor(session, "second")
	c.MustCall("createChat", map[string]any{"channel": session, "chat": second})
	c.Subscribe(second)
	send(t, c, second, "t1", "write a.txt only")
	st = c.WaitState(session, "both chats' counts", func(s protocol.ChannelState) bool {
		_, a, _ := changes(t, s.(*protocol.SessionState))
		return chatChanges(s.(*protocol.SessionState), second) != "" && a > 3
	}).(*protocol.SessionState)
	if got := chatChanges(st, second); got != `{"additions":1,"deletions":2,"files":1}` {
		t.Errorf("the second chat's counts: %s", got)
	}
	// The session's: a.txt twice (+2 -0, then +1 -2) and b.txt.
	if f, a, d := changes(t, st); f != 2 || a != 4 || d != 2 {
		t.Errorf("session changes %d files +%d -%d, want 2 +4 -2", f, a, d)
	}
}

// TestWorktreeHostileNames checks names that could be read as options or
// climb out of place: a branch that looks like an option fails the send
// and reaches no git command as one; a session id with spaces, unicode
// and dots still gets a tree of a tidy name beside the repository.
// (Session URIs hold no white space; the checkpoints and worktree packages
// test ids with it.)
func TestWorktreeHostileNames(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	_, chat := worktreeSession(t, c, "h1", repo, map[string]any{"branch": "--upload-pack=touch pwned"})
	cs := send(t, c, chat, "t1", "say hi")
	if cs.Turns[0].State != protocol.TurnStateError {
		t.Errorf("a branch that looks like an option: %s", cs.Turns[0].State)
	}
	if _, err := os.Stat(filepath.Join(repo, "pwned")); !os.IsNotExist(err) {
		t.Errorf("git ran the option: %v", err)
	}
	_, chat = worktreeSession(t, c, "h2", repo, map[string]any{"worktreeBranchPrefix": "../"})
	cs = send(t, c, chat, "t1", "say hi")
	if cs.Turns[0].State == protocol.TurnStateComplete {
		t.Errorf("a prefix climbing out of refs was taken")
	}
	_, chat = worktreeSession(t, c, "Über-mein.projekt", repo, nil)
	if cs := send(t, c, chat, "t1", "say hi"); cs.Turns[0].State != protocol.TurnStateComplete {
		t.Fatalf("a session id with unicode and a dot: %s %+v", cs.Turns[0].State, cs.Turns[0].ErrorPart())
	}
	entries, _ := os.ReadDir(filepath.Join(filepath.Dir(repo), "project.worktrees"))
	if len(entries) != 1 || strings.ContainsAny(entries[0].Name(), " /:") || strings.Contains(entries[0].Name(), "..") {
		t.Errorf("trees: %v", entries)
	}
	// The turn's checkpoint follows its end; closing, the host waits for
	// the captures in flight.
	th.stop()
	out := git(t, repo, "for-each-ref", "--format=%(refname)", "refs/agents/")
	if !strings.HasPrefix(out, "refs/agents/") || strings.Contains(out, "..") || strings.Contains(out, ":") {
		t.Errorf("checkpoint refs: %q", out)
	}
}

// TestWorktreeKeptThroughFolderChanges checks a session that takes other
// folders keeps its tree, and its dispose still removes it.
func TestWorktreeKeptThroughFolderChanges(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	session, chat := worktreeSession(t, c, "mv1", repo, nil)
	send(t, c, chat, "t1", "say hi")
	tree := filepath.Join(filepath.Dir(repo), "project.worktrees", "mv1")
	other := t.TempDir()
	c.Dispatch(session, &protocol.SessionWorkingDirectorySetAction{Directory: "file://" + other})
	c.WaitState(session, "the other folder", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.SessionState).WorkingDirectories) == 2
	})
	send(t, c, chat, "t2", "say still here")
	if _, err := os.Stat(tree); err != nil {
		t.Fatalf("the tree went: %v", err)
	}
	c.MustCall("disposeSession", map[string]any{"channel": session})
	if _, err := os.Stat(tree); !os.IsNotExist(err) {
		t.Errorf("the clean tree outlived its session: %v", err)
	}
}

// deref reads an optional count, -1 when absent.
func deref(n *int64) int64 {
	if n == nil {
		return -1
	}
	return *n
}
