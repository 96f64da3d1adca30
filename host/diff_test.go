package host_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

type diffAnswer struct {
	Kind  string
	Turn  *int
	From  string
	To    string
	Files []struct {
		Path                 string
		OldPath              string
		Additions, Deletions int
		Binary               bool
	}
	More   bool
	File   *struct{ Path string }
	Size   *int64
	Patch  string
	Offset int64
	Next   int64
	Total  int64
}

func diffOf(t *testing.T, c interface {
	MustCall(string, any) json.RawMessage
}, params map[string]any) diffAnswer {
	t.Helper()
	var res diffAnswer
	if err := json.Unmarshal(c.MustCall("ahpd/sessionDiff", params), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSessionDiff: ahpd/sessionDiff lists the files a turn's checkpoint
// changed and pages one file's unified diff; without a turn, the
// session's whole change (a folder session's own turns combined, a
// worktree session's branch); a file edit's absolute path names its file;
// paths outside the repository, unchanged files and unknown turns are
// refused.
func TestSessionDiff(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	session, chat := folderSession(t, c, "df", repo)
	send(t, c, chat, "t1", "write a.txt x\\ny\\nz")
	send(t, c, chat, "t2", "write README.md bye\nwrite a.txt x\\nY\\nz")
	c.WaitState(session, "two turns counted", func(s protocol.ChannelState) bool {
		f, a, _ := changes(t, s.(*protocol.SessionState))
		return f == 2 && a == 4
	})

	one := diffOf(t, c, map[string]any{"channel": session, "turn": 1})
	if one.Kind != "turn" || len(one.Files) != 1 || one.Files[0].Path != "a.txt" || one.Files[0].Additions != 3 || len(one.From) < 40 || len(one.To) < 40 {
		t.Fatalf("turn 1: %+v", one)
	}
	two := diffOf(t, c, map[string]any{"channel": session, "turn": 2})
	if len(two.Files) != 2 || two.Files[0].Path != "README.md" || two.Files[1].Path != "a.txt" || two.From != one.To {
		t.Fatalf("turn 2: %+v", two)
	}
	p := diffOf(t, c, map[string]any{"channel": session, "turn": 2, "path": "a.txt"})
	if p.File == nil || p.File.Path != "a.txt" || !strings.Contains(p.Patch, " x\n-y\n+Y\n z\n") || p.Next != 0 || p.Total != int64(len(p.Patch)) {
		t.Errorf("turn 2's a.txt: %+v", p)
	}
	// A file edit names its file by its absolute path.
	p = diffOf(t, c, map[string]any{"channel": session, "turn": 2, "path": filepath.Join(repo, "README.md")})
	if p.File == nil || p.File.Path != "README.md" || !strings.Contains(p.Patch, "-hello\n+bye\n") {
		t.Errorf("turn 2's README.md by its absolute path: %+v", p)
	}
	// Paged: a byte bound, cut at lines.
	p = diffOf(t, c, map[string]any{"channel": session, "turn": 2, "path": "a.txt", "lines": 3})
	if strings.Count(p.Patch, "\n") != 3 || p.Next != int64(len(p.Patch)) {
		t.Errorf("a page of 3 lines: %+v", p)
	}
	rest := diffOf(t, c, map[string]any{"channel": session, "turn": 2, "path": "a.txt", "offset": p.Next})
	if whole := diffOf(t, c, map[string]any{"channel": session, "turn": 2, "path": "a.txt"}); p.Patch+rest.Patch != whole.Patch || rest.Offset != p.Next {
		t.Errorf("two pages %q + %q, want %q", p.Patch, rest.Patch, whole.Patch)
	}

	// The whole session: a.txt once, as added with its final lines.
	all := diffOf(t, c, map[string]any{"channel": session})
	if all.Kind != "own" || len(all.Files) != 2 || all.Files[1].Path != "a.txt" || all.Files[1].Additions != 3 || all.Files[1].Deletions != 0 {
		t.Fatalf("the session: %+v", all)
	}
	if p = diffOf(t, c, map[string]any{"channel": session, "path": "a.txt"}); !strings.Contains(p.Patch, "+x\n+Y\n+z\n\\ No newline") {
		t.Errorf("the session's a.txt: %q", p.Patch)
	}
	if z := diffOf(t, c, map[string]any{"channel": session, "turn": 0}); z.Kind != "turn" || len(z.Files) != 0 {
		t.Errorf("turn 0: %+v", z)
	}

	for _, tc := range []struct {
		params map[string]any
		code   protocol.ErrorCode
	}{
		{map[string]any{"channel": session, "turn": 1, "path": "../etc/passwd"}, protocol.CodeInvalidParams},
		{map[string]any{"channel": session, "turn": 1, "path": "/etc/passwd"}, protocol.CodeInvalidParams},
		{map[string]any{"channel": session, "turn": 1, "path": "--output=x"}, protocol.CodeNotFound},
		{map[string]any{"channel": session, "turn": 1, "path": "README.md"}, protocol.CodeNotFound},
		{map[string]any{"channel": session, "turn": 9}, protocol.CodeNotFound},
		{map[string]any{"channel": session, "turn": -1}, protocol.CodeInvalidParams},
		{map[string]any{"channel": session, "turn": 1, "path": "a.txt", "limit": 2 << 20}, protocol.CodeInvalidParams},
		{map[string]any{"channel": session, "turn": 1, "path": "a.txt", "offset": -1}, protocol.CodeInvalidParams},
		{map[string]any{}, protocol.CodeInvalidParams},
	} {
		if _, err := c.Call("ahpd/sessionDiff", tc.params); err == nil || err.Code != int64(tc.code) {
			t.Errorf("%v: %v, want %d", tc.params, err, tc.code)
		}
	}
	plain, _ := th.newSession(c, "plain", nil)
	if res := diffOf(t, c, map[string]any{"channel": plain}); res.Kind != "none" || len(res.Files) != 0 {
		t.Errorf("a session out of any repository: %+v", res)
	}

	// A worktree session's whole change is its branch's.
	wt, wchat := worktreeSession(t, c, "dfw", repo, nil)
	send(t, c, wchat, "t1", "write notes.txt one\\ntwo")
	c.WaitState(wt, "the tree's counts", func(s protocol.ChannelState) bool {
		f, _, _ := changes(t, s.(*protocol.SessionState))
		return f == 1
	})
	br := diffOf(t, c, map[string]any{"channel": wt})
	if br.Kind != "branch" || len(br.Files) != 1 || br.Files[0].Path != "notes.txt" || br.Files[0].Additions != 2 {
		t.Errorf("the worktree session: %+v", br)
	}
}
