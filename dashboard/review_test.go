package dashboard_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// waitFiles waits until the session's counts say it changed files
// files: its newest turn's checkpoint is recorded.
func waitFiles(t *testing.T, c interface {
	WaitState(context.Context, string, func(protocol.ChannelState) bool) (protocol.ChannelState, error)
}, uri string, files int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if _, err := c.WaitState(ctx, uri, func(st protocol.ChannelState) bool {
		ss, ok := st.(*protocol.SessionState)
		return ok && len(ss.Chats) > 0 && ss.Chats[0].Changes != nil && ss.Chats[0].Changes.Files != nil && *ss.Chats[0].Changes.Files == files
	}); err != nil {
		t.Fatalf("waiting for %d files changed: %v", files, err)
	}
}

// bigScript is a write step of a file of n lines.
func bigScript(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "write %s ", name)
	for i := range n {
		fmt.Fprintf(&b, "line %d\\n", i)
	}
	return b.String()
}

// reviewSession runs a session of two turns in a repository: the first
// writes a.txt, a binary file and a large one, the second changes a.txt
// and writes b.txt.
func reviewSession(t *testing.T, e *env) (uri, chat string) {
	t.Helper()
	mo := e.conn("mo")
	uri, chat = e.startSessionWith(t, mo, "rv", "reviewed", "write a.txt hello\nrun printf '\\000\\001\\002' > img.bin\n"+bigScript("big.txt", 3000), bypass)
	waitChat(t, mo, chat, idle)
	waitFiles(t, mo, uri, 3)
	send(t, mo, chat, "t2", "write a.txt hello again\nwrite b.txt bee")
	waitFiles(t, mo, uri, 4)
	return uri, chat
}

var (
	addLine = regexp.MustCompile(`<span class="d-add">([^<]*)</span>`)
	delLine = regexp.MustCompile(`<span class="d-del">([^<]*)</span>`)
)

// linesOf reads the added and removed lines of the diffs on a page.
func linesOf(body string) (added, removed []string) {
	for _, m := range addLine.FindAllStringSubmatch(body, -1) {
		added = append(added, html.UnescapeString(m[1]))
	}
	for _, m := range delLine.FindAllStringSubmatch(body, -1) {
		removed = append(removed, html.UnescapeString(m[1]))
	}
	return added, removed
}

// TestReview: a session's review pages show each turn's files with their
// diffs, the whole session's change, a binary file by its size, a large
// diff in pages; a file edit in the conversation and on the timeline
// links to its diff; a person who may not read the session sees none of
// it; bad queries are refused.
func TestReview(t *testing.T) {
	e := newEnv(t, envOptions{repo: true})
	uri, _ := reviewSession(t, e)
	b := e.signIn("mo")
	get := func(link string) string {
		t.Helper()
		r := b.get(link)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", link, r.status, r.body)
		}
		return r.body
	}
	review := "/ui/session/review?" + url.Values{"uri": {uri}}.Encode()

	// Turn 2 changed a.txt and b.txt.
	body := get(review + "&turn=2")
	added, removed := linesOf(body)
	if strings.Join(added, "|") != "+hello again|+bee" || strings.Join(removed, "|") != "-hello" || !strings.Contains(body, `data-path="a.txt"`) ||
		strings.Contains(body, `data-path="big.txt"`) || !strings.Contains(body, "What turn 2 changed: write a.txt hello again") {
		t.Fatalf("turn 2: %v %v\n%s", added, removed, body)
	}
	// Turn 1: three files; the binary one named with its size; the large
	// one's first page, and a link to the rest.
	body = get(review + "&turn=1")
	if !strings.Contains(body, "Binary file, 3 bytes: not shown.") || !strings.Contains(body, `data-path="img.bin"`) {
		t.Errorf("turn 1 names no binary file: %s", body)
	}
	added, _ = linesOf(body)
	if !slices.Contains(added, "+hello") || !slices.Contains(added, "+line 0") || slices.Contains(added, "+line 2999") {
		t.Errorf("turn 1's lines: %d, %.200v", len(added), added)
	}
	more := regexp.MustCompile(`<a href="([^"]+)" class="more">`).FindStringSubmatch(body)
	if more == nil {
		t.Fatalf("the large diff has no more link: %s", body)
	}
	// Page through it to its end: every line, once, in order.
	var all []string
	all = append(all, added[max(0, slices.Index(added, "+line 0")):]...)
	for link := html.UnescapeString(more[1]); link != ""; {
		page := get(link)
		a, _ := linesOf(page)
		all = append(all, a...)
		link = ""
		if m := regexp.MustCompile(`<a href="([^"]+)" class="more">`).FindStringSubmatch(page); m != nil {
			link = html.UnescapeString(m[1])
		}
	}
	if len(all) != 3000 || all[0] != "+line 0" || all[2999] != "+line 2999" {
		t.Errorf("big.txt in pages: %d lines, %v … %v", len(all), all[:min(2, len(all))], all[max(0, len(all)-2):])
	}
	// The whole session: a.txt as added with its last text.
	body = get(review)
	added, removed = linesOf(body)
	if !slices.Contains(added, "+hello again") || slices.Contains(added, "+hello") || len(removed) != 0 || !strings.Contains(body, "What the session changed") ||
		!strings.Contains(body, `aria-current="page">The whole session</a>`) {
		t.Errorf("the whole session: %v %v", added[:min(3, len(added))], removed)
	}

	// The session page links each file edit to its diff: the second
	// turn's write of a.txt to that turn's diff of it.
	page := get("/ui/session?" + url.Values{"uri": {uri}}.Encode())
	links := regexp.MustCompile(`<a href="([^"]+)" class="diff-link" title="[^"]*a\.txt">a\.txt</a>`).FindAllStringSubmatch(page, -1)
	if len(links) != 2 {
		t.Fatalf("%d edit links to a.txt, want 2: %s", len(links), page)
	}
	body = get(html.UnescapeString(links[1][1]))
	added, removed = linesOf(body)
	if strings.Join(added, "|") != "+hello again" || strings.Join(removed, "|") != "-hello" || !strings.Contains(body, "What turn 2 changed") {
		t.Errorf("the second edit's diff: %v %v", added, removed)
	}
	body = get(html.UnescapeString(links[0][1]))
	if added, _ = linesOf(body); strings.Join(added, "|") != "+hello" {
		t.Errorf("the first edit's diff: %v", added)
	}
	// And the timeline's file edits to their turn's.
	if tl := regexp.MustCompile(`<a href="([^"]+)" class="diff-link">diff</a>`).FindAllStringSubmatch(page, -1); len(tl) == 0 {
		t.Error("the timeline links no file edit to its diff")
	} else if body = get(html.UnescapeString(tl[0][1])); !strings.Contains(body, "What turn 2 changed") {
		t.Errorf("the newest file edit on the timeline links to: %s", body)
	}
	// The checkpoints link to their turns' review.
	if !strings.Contains(page, `class="review-turn">2</a>`) || !strings.Contains(page, `class="review-all"`) {
		t.Error("the checkpoints do not link to their review")
	}

	// Somebody who may not read the session sees none of it.
	gus := e.signIn("gus")
	for _, link := range []string{review, review + "&turn=1", review + "&turn=2&path=a.txt"} {
		if r := gus.get(link); (r.status != http.StatusForbidden && r.status != http.StatusNotFound) || strings.Contains(r.body, "hello") || strings.Contains(r.body, "a.txt") {
			t.Errorf("the guest's %s: %d %s", link, r.status, r.body)
		}
	}
	for _, tc := range []struct {
		query  string
		status int
	}{
		{"&turn=x", http.StatusBadRequest},
		{"&turn=-1", http.StatusBadRequest},
		{"&offset=-3", http.StatusBadRequest},
		{"&turn=1&path=../../etc/passwd", http.StatusBadRequest},
		{"&turn=1&path=/etc/passwd", http.StatusBadRequest},
		{"&turn=2&path=big.txt", http.StatusNotFound},
		{"&turn=9", http.StatusNotFound},
	} {
		if r := b.get(review + tc.query); r.status != tc.status {
			t.Errorf("%s: %d, want %d: %.300s", tc.query, r.status, tc.status, r.body)
		}
	}
	if r := b.get("/ui/session/review?uri=nonsense"); r.status != http.StatusBadRequest {
		t.Errorf("a bad URI: %d", r.status)
	}
}
