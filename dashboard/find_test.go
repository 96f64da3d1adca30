package dashboard_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// keptSession makes a session with no turn in folder, kept as it is made
// (as the HTTP API makes one), titled title.
func keptSession(t *testing.T, c *client.Client, id, title, folder string) {
	t.Helper()
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	uri := protocol.SessionScheme + ":/" + id
	provider := "script"
	if err := c.Call(t.Context(), "createSession", protocol.CreateSessionParams{Channel: uri, Provider: &provider,
		WorkingDirectories: []string{(&url.URL{Scheme: "file", Path: folder}).String()},
		Meta:               protocol.Object{"ahpd.keep": jsontext.Value("true")}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(t.Context(), uri); err != nil {
		t.Fatal(err)
	}
	if err := c.DispatchWait(t.Context(), uri, &protocol.SessionTitleChangedAction{Title: title}); err != nil {
		t.Fatal(err)
	}
	if err := c.Unsubscribe(t.Context(), uri); err != nil {
		t.Fatal(err)
	}
}

// titlesOf is the sessions table's rows' titles, in order.
var titleRE = regexp.MustCompile(`<tr data-session="[^"]*">\s*<th scope="row"><a href="[^"]*">([^<]*)</a>`)

func titlesOf(body string) []string {
	var out []string
	for _, m := range titleRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// linkOf is the href of the link whose rel is rel, unescaped.
func linkOf(body, rel string) string {
	m := regexp.MustCompile(`<a href="([^"]*)" rel="` + rel + `">`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

// TestSessionsFind checks the sessions list's search (title, folder,
// agent), its orders, its groups by repository and its pages, each
// keeping the others in its links and its form.
func TestSessionsFind(t *testing.T) {
	e := newEnv(t, envOptions{})
	root := e.conn("root")
	base := t.TempDir()
	alpha, beta := filepath.Join(base, "alpha"), filepath.Join(base, "beta")
	// Made in this order: the last is the most recently active and the
	// newest.
	for _, s := range []struct{ id, title, folder string }{
		{"s1", "Parser fix", alpha},
		{"s2", "docs pass", beta},
		{"s3", "Zebra release", alpha},
		{"s4", "another parser bug", beta},
		{"s5", "Migrate", alpha},
	} {
		keptSession(t, root, s.id, s.title, s.folder)
	}
	b := e.signIn("root")
	get := func(query string) string {
		t.Helper()
		r := b.get("/ui/" + query)
		if r.status != http.StatusOK {
			t.Fatalf("GET /ui/%s: %d %s", query, r.status, r.body)
		}
		return r.body
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"Migrate", "another parser bug", "Zebra release", "docs pass", "Parser fix"}},
		{"?q=parser", []string{"another parser bug", "Parser fix"}},
		{"?q=PARSER+fix", []string{"Parser fix"}},
		{"?q=" + url.QueryEscape(beta), []string{"another parser bug", "docs pass"}},
		{"?q=script+alpha", []string{"Migrate", "Zebra release", "Parser fix"}},
		{"?q=nothing+like+it", nil},
		{"?sort=title", []string{"another parser bug", "docs pass", "Migrate", "Parser fix", "Zebra release"}},
		{"?sort=created", []string{"Migrate", "another parser bug", "Zebra release", "docs pass", "Parser fix"}},
		{"?sort=title&q=parser", []string{"another parser bug", "Parser fix"}},
		{"?group=repo", []string{"Migrate", "Zebra release", "Parser fix", "another parser bug", "docs pass"}},
		// Groups come in the order of their first session.
		{"?group=repo&sort=title", []string{"another parser bug", "docs pass", "Migrate", "Parser fix", "Zebra release"}},
		{"?status=idle&sort=title", []string{"another parser bug", "docs pass", "Migrate", "Parser fix", "Zebra release"}},
		{"?status=running", nil},
	} {
		if got := titlesOf(get(tc.query)); !slices.Equal(got, tc.want) {
			t.Errorf("GET /ui/%s: %q, want %q", tc.query, got, tc.want)
		}
	}

	// Groups are headed by their repository and how many it holds.
	body := get("?group=repo")
	for _, want := range []string{`<span class="path">` + alpha + `</span> <span class="muted">3 sessions</span>`,
		`<span class="path">` + beta + `</span> <span class="muted">2 sessions</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the grouped list lacks %q", want)
		}
	}

	// Pages of three, grouped and sorted by the host, paged with its
	// cursor: each link keeps the filters, and so do the form and the
	// live stream.
	body = get("?sort=title&group=repo&limit=3")
	if got := titlesOf(body); !slices.Equal(got, []string{"another parser bug", "docs pass", "Migrate"}) {
		t.Fatalf("page 1: %q", got)
	}
	next := linkOf(body, "next")
	if !strings.Contains(next, "cursor=") || !strings.Contains(next, "group=repo&limit=3") || !strings.Contains(next, "sort=title") ||
		linkOf(body, "prev") != "" {
		t.Fatalf("page 1's links: next %q prev %q", next, linkOf(body, "prev"))
	}
	body = get(strings.TrimPrefix(next, "/ui/"))
	if got := titlesOf(body); !slices.Equal(got, []string{"Parser fix", "Zebra release"}) {
		t.Fatalf("page 2: %q", got)
	}
	// Its group began on page 1.
	if !strings.Contains(body, `3 sessions, continued`) || strings.Count(body, `<tr class="group">`) != 1 {
		t.Errorf("page 2's group heads: %s", body)
	}
	if !strings.Contains(body, `href="/ui/?group=repo&amp;limit=3&amp;sort=title">First page</a>`) || linkOf(body, "next") != "" {
		t.Errorf("page 2's links: %s", body)
	}
	if !strings.Contains(body, `data-live="/ui/events?cursor=`) || !strings.Contains(body, `group=repo&amp;limit=3&amp;sort=title"`) {
		t.Errorf("the live stream does not ask for page 2")
	}
	// A status is the dashboard's to filter by: it pages by number.
	body = get("?status=idle&sort=title&group=repo&limit=3")
	if got := titlesOf(body); !slices.Equal(got, []string{"another parser bug", "docs pass", "Migrate"}) || !strings.Contains(body, "1–3 of 5") {
		t.Fatalf("page 1 of the idle ones: %q", got)
	}
	if next := linkOf(body, "next"); next != "/ui/?group=repo&limit=3&page=2&sort=title&status=idle" {
		t.Errorf("page 1 of the idle ones links to %q", next)
	}
	body = get("?q=parser&sort=title&mine=1")
	for _, want := range []string{`name="q" type="search" value="parser"`, `<option value="title" selected>`, `name="mine" value="1" checked`} {
		if !strings.Contains(body, want) {
			t.Errorf("the form does not keep %q", want)
		}
	}
	// The host's own order is paged with its cursor, which the next page's
	// link carries with the search.
	body = get("?q=a&limit=2")
	if got := titlesOf(body); !slices.Equal(got, []string{"Migrate", "another parser bug"}) {
		t.Fatalf("the searched first page: %q", got)
	}
	next = linkOf(body, "next")
	if !strings.Contains(next, "cursor=") || !strings.Contains(next, "q=a") {
		t.Fatalf("the cursor's link: %q", next)
	}
	if got := titlesOf(get(strings.TrimPrefix(next, "/ui/"))); !slices.Equal(got, []string{"Zebra release", "docs pass"}) {
		t.Errorf("the searched second page: %q", got)
	}

	// What the live stream sends for a search is the same rows.
	ev := b.stream(t, "/ui/events?q=parser")
	if rows := ev.until(t, "rows", "rows", "Parser fix"); strings.Contains(rows, "Migrate") {
		t.Errorf("the searched stream's rows: %s", rows)
	}

	for _, bad := range []struct{ query, says string }{
		{"?sort=size", "sort is one of"},
		{"?group=owner", "group is repo"},
		{"?page=0", "page is a whole number"},
		{"?q=" + strings.Repeat("q", 201), "at most 200 characters"},
	} {
		if r := b.get("/ui/" + bad.query); r.status != http.StatusBadRequest || !strings.Contains(r.body, bad.says) {
			t.Errorf("GET /ui/%.40s: %d %.200s", bad.query, r.status, r.body)
		}
	}
}

// TestOneFile checks that a session that changed one file says so in
// the singular.
func TestOneFile(t *testing.T) {
	e := newEnv(t, envOptions{repo: true})
	mo := e.conn("mo")
	b := e.signIn("mo")
	ev := b.stream(t, "/ui/events")
	_, chat := e.startSessionWith(t, mo, "one", "one file", "run printf 'a\\n' > one.txt", bypass)
	waitChat(t, mo, chat, idle)
	// The turn's checkpoint counts its changes just after it ends.
	ev.until(t, "rows", "rows", "1 file <span")
	if r := b.get("/ui/"); !strings.Contains(r.body, "1 file <span") || strings.Contains(r.body, "1 files") {
		t.Errorf("the table: %s", r.body)
	}
}
