package host_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/protocol"
)

// rootsPlace is a root to allow and places around it: a directory inside,
// one outside, and a symlink inside that leads outside.
type rootsPlace struct{ root, sub, outside, escape string }

func newRootsPlace(t *testing.T) rootsPlace {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := rootsPlace{
		root:    filepath.Join(base, "allowed"),
		sub:     filepath.Join(base, "allowed", "sub"),
		outside: filepath.Join(base, "elsewhere"),
		escape:  filepath.Join(base, "allowed", "escape"),
	}
	for _, d := range []string{p.sub, p.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(p.outside, p.escape); err != nil {
		t.Fatal(err)
	}
	return p
}

func withRoots(roots ...string) hostOption {
	return func(o *host.Options) { o.AllowedRoots = roots }
}

func fileURIs(dirs ...string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = "file://" + d
	}
	return out
}

// TestAllowedRootsOnCreate creates sessions in and out of the roots, as
// the people each host holds to them and as those it does not.
func TestAllowedRootsOnCreate(t *testing.T) {
	t.Parallel()
	p := newRootsPlace(t)
	dir := grants.NewDirectory()
	tokens := map[string]string{}
	for id, role := range map[string]grants.Role{"ada": grants.Admin, "mo": grants.Member} {
		if err := dir.Add(id, id, role); err != nil {
			t.Fatal(err)
		}
		if err := dir.SetMemberships(id, []grants.Membership{{Team: "core", Project: "ahpd", Primary: true}}); err != nil {
			t.Fatal(err)
		}
		tok, err := dir.IssueToken(id, "")
		if err != nil {
			t.Fatal(err)
		}
		tokens[id] = tok
	}
	withUsers := startHost(t, "", withRoots(p.root), func(o *host.Options) {
		o.Auth = &grants.Authenticator{Host: "test", ConnectionToken: "root-token", Users: dir}
	})
	alone := startHost(t, "", withRoots(p.root)) // one person's daemon
	outsideRoots := "outside the allowed roots: " + p.root
	tests := []struct {
		name  string
		th    *testHost
		token string
		dirs  []string // none: the host's default
		want  string   // a part of the -32009 refusal, or "" for none
	}{
		{name: "member, the root", th: withUsers, token: tokens["mo"], dirs: []string{p.root}},
		{name: "member, inside", th: withUsers, token: tokens["mo"], dirs: []string{p.sub}},
		{name: "member, the default", th: withUsers, token: tokens["mo"]},
		{name: "member, outside", th: withUsers, token: tokens["mo"], dirs: []string{p.outside},
			want: protocol.Quote(p.outside) + " is " + outsideRoots},
		{name: "member, a symlink out", th: withUsers, token: tokens["mo"], dirs: []string{p.escape},
			want: "(which is " + protocol.Quote(p.outside) + ") is " + outsideRoots},
		{name: "member, dot-dot out", th: withUsers, token: tokens["mo"], dirs: []string{p.root + "/../elsewhere"}, want: outsideRoots},
		{name: "member, the second outside", th: withUsers, token: tokens["mo"], dirs: []string{p.sub, p.outside}, want: outsideRoots},
		{name: "admin, outside", th: withUsers, token: tokens["ada"], dirs: []string{p.outside}},
		{name: "root, outside", th: withUsers, token: "root-token", dirs: []string{p.outside}},
		{name: "alone, inside", th: alone, dirs: []string{p.sub}},
		{name: "alone, outside", th: alone, dirs: []string{p.outside}, want: outsideRoots},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "roots-" + string(rune('a'+i))
			c := dialAs(t, tt.th, tt.token, id)
			session := "ahp-session:/" + id
			params := map[string]any{"channel": session, "provider": "script"}
			if tt.dirs != nil {
				params["workingDirectories"] = fileURIs(tt.dirs...)
			}
			_, err := c.Call("createSession", params)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || err.Code != -32009 || !strings.Contains(err.Message, tt.want)):
				t.Fatalf("createSession = %v, want -32009 saying %s", err, tt.want)
			case tt.want != "":
				return
			}
			// A default outside the roots gives way to the first root.
			want := tt.dirs
			if want == nil {
				want = []string{p.root}
			}
			st := c.Subscribe(session).State.(*protocol.SessionState)
			if strings.Join(st.WorkingDirectories, " ") != strings.Join(fileURIs(want...), " ") {
				t.Errorf("the session works in %v, want %v", st.WorkingDirectories, want)
			}
		})
	}

	// The config of a folder outside is not read for a member either.
	mo := dialAs(t, withUsers, tokens["mo"], "mo")
	ask := map[string]any{"channel": protocol.RootURI, "provider": "script", "workingDirectory": "file://" + p.outside}
	if _, err := mo.Call("resolveSessionConfig", ask); err == nil || err.Code != -32009 || !strings.Contains(err.Message, outsideRoots) {
		t.Errorf("resolveSessionConfig outside, as a member: %v", err)
	}
	if _, err := dialAs(t, withUsers, tokens["ada"], "ada").Call("resolveSessionConfig", ask); err != nil {
		t.Errorf("resolveSessionConfig outside, as an admin: %v", err)
	}
}

// TestAllowedRootsOnActions adds and replaces working directories, and
// sends turns in a session an admin made outside the roots.
func TestAllowedRootsOnActions(t *testing.T) {
	t.Parallel()
	p := newRootsPlace(t)
	dir := grants.NewDirectory()
	tokens := map[string]string{}
	for id, role := range map[string]grants.Role{"ada": grants.Admin, "mo": grants.Member} {
		if err := dir.Add(id, id, role); err != nil {
			t.Fatal(err)
		}
		if err := dir.SetMemberships(id, []grants.Membership{{Team: "core", Project: "ahpd", Primary: true}}); err != nil {
			t.Fatal(err)
		}
		tok, err := dir.IssueToken(id, "")
		if err != nil {
			t.Fatal(err)
		}
		tokens[id] = tok
	}
	th := startHost(t, "", withRoots(p.root), func(o *host.Options) {
		o.Auth = &grants.Authenticator{Host: "test", Users: dir}
	})
	mo := dialAs(t, th, tokens["mo"], "mo")
	ada := dialAs(t, th, tokens["ada"], "ada")
	session := "ahp-session:/mine"
	mo.MustCall("createSession", map[string]any{"channel": session, "provider": "script", "workingDirectories": fileURIs(p.root)})
	mo.Subscribe(session)
	chat := protocol.DefaultChatURI(session)
	mo.Subscribe(chat)

	outsideRoots := "outside the allowed roots: " + p.root
	for _, tc := range []struct {
		name    string
		channel string
		action  protocol.Action
		want    string // a part of the rejection, or "" for none
	}{
		{"set inside", session, &protocol.SessionWorkingDirectorySetAction{Directory: "file://" + p.sub}, ""},
		{"set outside", session, &protocol.SessionWorkingDirectorySetAction{Directory: "file://" + p.outside}, outsideRoots},
		{"set through a symlink out", session, &protocol.SessionWorkingDirectorySetAction{Directory: "file://" + p.escape}, outsideRoots},
		{"replaced by one outside", session, &protocol.SessionWorkingDirectoryReplacedAction{Directory: "file://" + p.sub, Replacement: "file://" + p.outside}, outsideRoots},
		{"a chat's, outside", chat, &protocol.ChatWorkingDirectorySetAction{Directory: "file://" + p.outside}, outsideRoots},
	} {
		seq := mo.Dispatch(tc.channel, tc.action)
		if got := rejection(t, mo, seq); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: rejected with %q, want %q", tc.name, got, tc.want)
		}
	}

	// An admin's session outside, shared with the team: the admin's turns
	// run, a member's do not.
	theirs := "ahp-session:/theirs"
	ada.MustCall("createSession", map[string]any{"channel": theirs, "provider": "script", "workingDirectories": fileURIs(p.outside), "config": map[string]any{"sharing": "team"}})
	ada.Subscribe(theirs)
	theirChat := protocol.DefaultChatURI(theirs)
	ada.Subscribe(theirChat)
	send(t, ada, theirChat, "t1", "say hi")
	mo.Subscribe(theirChat)
	message := protocol.Message{Text: "run cat ~/.ssh/id_ed25519", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
	worksOutside := "this session works in " + protocol.Quote(p.outside) + ", " + outsideRoots
	for name, a := range map[string]protocol.Action{
		"a turn":            &protocol.ChatTurnStartedAction{TurnID: "t2", StartedAt: protocol.FormatTime(time.Now()), Message: message},
		"a queued message":  &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindQueued, ID: "q1", Message: message},
		"resuming the turn": &protocol.ChatTurnResumeAction{TurnID: "t1"},
	} {
		if got := rejection(t, mo, mo.Dispatch(theirChat, a)); !strings.Contains(got, worksOutside) {
			t.Errorf("%s in a session outside, as a member: rejected with %q, want %q", name, got, worksOutside)
		}
	}
	_, err := mo.Call("createChat", map[string]any{"channel": theirs, "chat": protocol.ChatURIFor(theirs, "side"), "initialMessage": message})
	if err == nil || err.Code != -32009 || !strings.Contains(err.Message, worksOutside) {
		t.Errorf("createChat with a message in a session outside, as a member: %v", err)
	}
	if st := ada.State(theirChat).(*protocol.ChatState); len(st.Turns) != 1 {
		t.Errorf("the admin's chat has %d turns, want the admin's one", len(st.Turns))
	}
}

// TestAllowedRootsKeepWorktrees allows a repository alone: a worktree
// session made in it still gets its tree, which the host makes beside the
// repository, and its turns run there.
func TestAllowedRootsKeepWorktrees(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	th := startHost(t, "", withRoots(repo))
	c := th.client("c1")
	session, chat := worktreeSession(t, c, "wt-roots", repo, nil)
	send(t, c, chat, "t1", "write notes.txt in the tree")
	tree := filepath.Join(filepath.Dir(repo), "project.worktrees", "wt-roots")
	c.WaitState(session, "the move into the tree", func(s protocol.ChannelState) bool {
		dirs := s.(*protocol.SessionState).WorkingDirectories
		return len(dirs) == 1 && dirs[0] == "file://"+tree
	})
	if _, err := os.Stat(filepath.Join(tree, "notes.txt")); err != nil {
		t.Errorf("the turn did not write in the tree: %v", err)
	}
	st := send(t, c, chat, "t2", "say still here")
	if got := text(st.Turns[len(st.Turns)-1].ResponseParts); !strings.Contains(got, "still here") {
		t.Errorf("the second turn said %q", got)
	}
}
