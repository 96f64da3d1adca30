package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// Finding sessions: the sessions table searched, sorted, grouped and
// paged. The host lists its catalogue a page at a time, by owner, search,
// order and groups (listSessions' _meta "ahpd.owner", "ahpd.search",
// "ahpd.order", "ahpd.group"), sorting and grouping before it pages: that
// list is paged with the host's cursor, and its groups headed as the host
// counted them. A status the host does not know (idle and sleeping are
// told apart by asking about each session), so a list filtered by one the
// dashboard makes from every session the host lists in that order, read
// in the host's pages of 500, and pages by number. Either way it asks the
// host about each row's residency and owner only for the page it shows.

// The orders the table is sorted in.
const (
	sortActivity = "activity" // most recently active first, as the host lists
	sortCreated  = "created"  // newest first
	sortTitle    = "title"    // A to Z, untitled last
)

// groupRepo groups the table's rows by the repository they work in.
const groupRepo = "repo"

// sortChoice is one of the sort menu's entries.
type sortChoice struct{ Value, Label string }

var sorts = []sortChoice{{sortActivity, "last activity"}, {sortCreated, "created"}, {sortTitle, "title"}}

// The bounds of a search.
const (
	maxSearch = 200     // characters in the search box
	maxPageNo = 100_000 // the page number
	maxScan   = 50_000  // the sessions a search or sort reads
)

// repoMeta is the _meta key of a session's row naming the repository its
// worktree was made from.
const repoMeta = "ahpd.repo"

func readListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{Status: q.Get("status"), Mine: q.Get("mine") == "1", Archived: q.Get("archived") == "1",
		Q: strings.TrimSpace(q.Get("q")), Sort: q.Get("sort"), Group: q.Get("group"), Page: 1, Cursor: q.Get("cursor"), Limit: pageRows}
	if lq.Status != "" && !contains(statuses, lq.Status) {
		return lq, &pageError{Status: http.StatusBadRequest, Message: "status is one of running, needs input, idle, sleeping or failed."}
	}
	if len(lq.Cursor) > maxCursor {
		return lq, &pageError{Status: http.StatusBadRequest, Message: "That page cursor is not one this host gave: go back to the first page."}
	}
	if utf8.RuneCountInString(lq.Q) > maxSearch || !utf8.ValidString(lq.Q) {
		return lq, &pageError{Status: http.StatusBadRequest, Message: "The search is at most 200 characters."}
	}
	switch lq.Sort {
	case "":
		lq.Sort = sortActivity
	case sortActivity, sortCreated, sortTitle:
	default:
		return lq, &pageError{Status: http.StatusBadRequest, Message: "sort is one of activity, created or title."}
	}
	if lq.Group != "" && lq.Group != groupRepo {
		return lq, &pageError{Status: http.StatusBadRequest, Message: "group is repo, or nothing."}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 || n > maxPageRows {
			return lq, &pageError{Status: http.StatusBadRequest, Message: "limit is a whole number from 1 to 1000."}
		}
		lq.Limit = n
	}
	if s := q.Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPageNo {
			return lq, &pageError{Status: http.StatusBadRequest, Message: "page is a whole number from 1 to 100000."}
		}
		lq.Page = n
	}
	return lq, nil
}

// values is the query that asks for lq again, its page and cursor left
// out, for links and the live stream.
func (lq listQuery) values() url.Values {
	v := url.Values{}
	if lq.Q != "" {
		v.Set("q", lq.Q)
	}
	if lq.Status != "" {
		v.Set("status", lq.Status)
	}
	if lq.Mine {
		v.Set("mine", "1")
	}
	if lq.Archived {
		v.Set("archived", "1")
	}
	if lq.Sort != sortActivity && lq.Sort != "" {
		v.Set("sort", lq.Sort)
	}
	if lq.Group != "" {
		v.Set("group", lq.Group)
	}
	if lq.Limit != pageRows {
		v.Set("limit", strconv.FormatInt(lq.Limit, 10))
	}
	return v
}

// pageLink is the address of the table's page n, with lq's filters.
func (lq listQuery) pageLink(n int) string {
	v := lq.values()
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	return listLink(v)
}

func listLink(v url.Values) string {
	if len(v) == 0 {
		return "/ui/"
	}
	return "/ui/?" + v.Encode()
}

// scans says whether lq's list is the dashboard's to make: one filtered
// by status. The host searches, sorts and groups the others.
func (lq listQuery) scans() bool {
	return lq.Status != ""
}

// caption says what the table lists.
func (lq listQuery) caption() string {
	s := "The sessions you may see"
	if lq.Q != "" {
		s += ` matching “` + lq.Q + `”`
	}
	switch lq.Sort {
	case sortCreated:
		s += ", newest first"
	case sortTitle:
		s += ", by title"
	default:
		s += ", most recently active first"
	}
	if lq.Group == groupRepo {
		s += ", grouped by repository"
	}
	return s + "."
}

// groupHead heads a group's first row on a page.
type groupHead struct {
	Name      string
	Count     string // "3 sessions"
	Continued bool   // its rows began on an earlier page
}

// plural is n with the noun, singular for one.
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// repoOf is the repository a session works in: the one its worktree
// was made from, else its working folder.
func repoOf(s protocol.SessionSummary) string {
	if raw, ok := s.Meta[repoMeta]; ok {
		if r := textOf(json.RawMessage(raw)); r != "" {
			return r
		}
	}
	if len(s.WorkingDirectories) > 0 {
		return folderOf(s.WorkingDirectories[0])
	}
	return "(no folder)"
}

// branchOf is the branch a session's worktree has checked out.
func branchOf(s protocol.SessionSummary) string {
	if raw, ok := s.Meta["ahpd.branch"]; ok {
		return textOf(json.RawMessage(raw))
	}
	return ""
}

// found is a page of a list the dashboard made.
type found struct {
	items  []protocol.SessionSummary
	total  int            // the sessions that match
	groups map[string]int // each group's sessions, when grouped
	capped bool           // the catalogue is larger than maxScan
	// continued says the page's first group began on an earlier page.
	continued bool
}

// find reads every session c may see (up to maxScan), keeps those lq
// matches, orders them and cuts out lq's page.
func find(ctx context.Context, c *client.Client, lq listQuery) (*found, error) {
	all := lq
	all.Cursor, all.Limit = "", maxScan
	items, next, _, err := listPage(ctx, c, all) // sorted and grouped by the host
	if err != nil {
		return nil, err
	}
	f := &found{capped: next != ""}
	kept := items[:0]
	for _, s := range items {
		if lq.matches(s) {
			kept = append(kept, s)
		}
	}
	if lq.Group == groupRepo {
		// In groups already: counted again, of the rows of that status.
		kept, f.groups = grouped(kept)
	}
	f.total = len(kept)
	from := min(int64(len(kept)), int64(lq.Page-1)*lq.Limit)
	f.items = kept[from:min(int64(len(kept)), from+lq.Limit)]
	f.continued = lq.Group == groupRepo && from > 0 && from < int64(len(kept)) && repoOf(kept[from-1]) == repoOf(kept[from])
	return f, nil
}

// matches says whether s may have lq's status. Idle and sleeping are
// told apart only on the page shown, where the host is asked.
func (lq listQuery) matches(s protocol.SessionSummary) bool {
	if lq.Status == "" {
		return true
	}
	want := lq.Status
	if want == statusSleeping {
		want = statusIdle
	}
	return statusOf(s.Status, "") == want && (lq.Status != statusIdle || !isExternal(s.Meta))
}

// grouped puts sorted items in groups by repository, each group in the
// order of its first session and keeping the order within it, and counts
// each group.
func grouped(items []protocol.SessionSummary) ([]protocol.SessionSummary, map[string]int) {
	rank := map[string]int{}
	repo := make([]string, len(items))
	for i, s := range items {
		repo[i] = repoOf(s)
		if _, ok := rank[repo[i]]; !ok {
			rank[repo[i]] = len(rank)
		}
	}
	counts := make(map[string]int, len(rank))
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
		counts[repo[i]]++
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(rank[repo[a]], rank[repo[b]]) })
	out := make([]protocol.SessionSummary, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, counts
}

// headGroups marks each group's first row on the page, the first row
// saying when its group began on an earlier page.
func headGroups(rows []row, counts map[string]int, continued bool) {
	for i := range rows {
		if i > 0 && rows[i].Repo == rows[i-1].Repo {
			continue
		}
		rows[i].Group = &groupHead{Name: rows[i].Repo, Count: plural(int64(counts[rows[i].Repo]), "session", "sessions"), Continued: i == 0 && continued}
	}
}
