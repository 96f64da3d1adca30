package dashboard

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// The statuses a session is shown with, and filtered by.
const (
	statusRunning    = "running"
	statusNeedsInput = "needs input"
	statusIdle       = "idle"
	statusSleeping   = "sleeping"
	statusFailed     = "failed"
)

var statuses = []string{statusRunning, statusNeedsInput, statusIdle, statusSleeping, statusFailed}

// row is one session in the sessions table.
type row struct {
	URI, Link      string
	Title          string
	Owner          string
	Provider       string
	Status         string
	StatusClass    string
	Folder         string
	Files          int64
	FilesText      string // "1 file", "3 files"
	Added, Removed int64
	HasChanges     bool
	Branch         string
	Repo           string     // the repository it works in, as grouped by
	Group          *groupHead // set on a group's first row on the page
	Events         int64      // its journal's entries; -1 when unknown
	Modified       string
	External       bool
	Archived       bool
}

// listQuery is the sessions table's filters, read from the query
// (find.go reads and writes it).
type listQuery struct {
	Status   string // one of statuses, or ""
	Mine     bool
	Archived bool
	Q        string // words each row's title, folder, branch or agent holds
	Sort     string // one of sorts; "" is sortActivity
	Group    string // "" or groupRepo
	Page     int    // 1 on, for a list the dashboard filters by status
	Cursor   string // the host's, for a list it pages itself
	Limit    int64
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sessionsBody is the sessions page's data.
type sessionsBody struct {
	Query      listQuery
	Statuses   []string
	Sorts      []sortChoice
	Caption    string
	Rows       []row
	NextCursor string
	NextLink   string
	PrevLink   string
	FirstLink  string // back to the first page, from a cursor's
	Shown      string // "51–100 of 312", for a list the dashboard made
	LiveSrc    string
}

func (d *Dashboard) sessionsPage(w http.ResponseWriter, r *http.Request) {
	lq, err := readListQuery(r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	body, err := d.listSessions(r.Context(), c, lq)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "sessions", d.pageFor(r, "Sessions", "sessions", body))
}

// listSessions reads a page of the sessions c may see, and each one's
// residency and owner.
func (d *Dashboard) listSessions(ctx context.Context, c *client.Client, lq listQuery) (*sessionsBody, error) {
	body := &sessionsBody{Query: lq, Statuses: statuses, Sorts: sorts, Caption: lq.caption()}
	var items []protocol.SessionSummary
	var f *found
	var groups []hostGroup // the host's, for a list it grouped
	if lq.scans() {
		var err error
		if f, err = find(ctx, c, lq); err != nil {
			return nil, err
		}
		items = f.items
		if lq.Page > 1 {
			body.PrevLink = lq.pageLink(lq.Page - 1)
		}
		from := int64(lq.Page-1) * lq.Limit
		if from+lq.Limit < int64(f.total) {
			body.NextLink = lq.pageLink(lq.Page + 1)
		}
		if len(items) > 0 {
			body.Shown = strconv.FormatInt(from+1, 10) + "–" + strconv.FormatInt(from+int64(len(items)), 10) + " of " + strconv.Itoa(f.total)
			if f.capped {
				body.Shown += " (of the newest " + strconv.Itoa(maxScan) + " sessions)"
			}
		}
	} else {
		var next string
		var err error
		if items, next, groups, err = listPage(ctx, c, lq); err != nil {
			return nil, err
		}
		if next != "" {
			body.NextCursor = next
			v := lq.values()
			v.Set("cursor", body.NextCursor)
			body.NextLink = listLink(v)
		}
		if lq.Cursor != "" {
			body.FirstLink = lq.pageLink(1)
		}
	}
	probes := d.probe(ctx, c, items)
	counts := eventCounts(ctx, c, items)
	body.Rows = make([]row, 0, len(items))
	for i, s := range items {
		rw := rowOf(s, probes[i])
		rw.Events = -1
		if n, ok := counts[s.Resource]; ok {
			rw.Events = int64(n)
		}
		if lq.Status == "" || rw.Status == lq.Status {
			body.Rows = append(body.Rows, rw)
		}
	}
	switch {
	case f != nil && lq.Group == groupRepo:
		headGroups(body.Rows, f.groups, f.continued)
	case lq.Group == groupRepo:
		counts := make(map[string]int, len(groups))
		for _, g := range groups {
			counts[g.Name] = g.Count
		}
		headGroups(body.Rows, counts, len(groups) > 0 && groups[0].Continued)
	}
	// The live stream asks for the same page.
	body.LiveSrc = "/ui/events"
	v := lq.values()
	if lq.Page > 1 {
		v.Set("page", strconv.Itoa(lq.Page))
	}
	if lq.Cursor != "" {
		v.Set("cursor", lq.Cursor)
	}
	if len(v) > 0 {
		body.LiveSrc += "?" + v.Encode()
	}
	return body, nil
}

// hostPage is the most sessions the host lists at once.
const hostPage = 500

// hostGroup is a group the host headed on a page it grouped
// (listSessions' result _meta "ahpd.groups").
type hostGroup struct {
	Name      string `json:"name"`
	Count     int    `json:"count"`
	Continued bool   `json:"continued"`
}

// listPage reads up to lq.Limit sessions from lq.Cursor, in lq's order and
// grouping, in as many of the host's pages as that takes, and the cursor
// after them ("" at the end), with the groups the host headed. Archived
// sessions are left out unless asked for.
func listPage(ctx context.Context, c *client.Client, lq listQuery) ([]protocol.SessionSummary, string, []hostGroup, error) {
	var items []protocol.SessionSummary
	var groups []hostGroup
	cursor := lq.Cursor
	for {
		limit := min(lq.Limit-int64(len(items)), hostPage)
		params := protocol.ListSessionsParams{Limit: &limit}
		if cursor != "" {
			params.Cursor = &cursor
		}
		params.Meta = protocol.Object{}
		if lq.Mine {
			params.Meta["ahpd.owner"] = jsontext.Value(`"me"`)
		}
		if lq.Q != "" {
			q, _ := json.Marshal(lq.Q)
			params.Meta["ahpd.search"] = jsontext.Value(q)
		}
		// The host sorts and groups before it pages (listSessions' _meta
		// "ahpd.order", "ahpd.group"): the dashboard reads one page.
		if lq.Sort != sortActivity && lq.Sort != "" {
			params.Meta["ahpd.order"] = jsontext.Value(`"` + lq.Sort + `"`)
		}
		if lq.Group != "" {
			params.Meta["ahpd.group"] = jsontext.Value(`"` + lq.Group + `"`)
		}
		var res protocol.ListSessionsResult
		if err := c.Call(ctx, "listSessions", params, &res); err != nil {
			return nil, "", nil, err
		}
		groups = appendGroups(groups, res.Extra)
		for _, s := range res.Items {
			if lq.Archived || s.Status&protocol.StatusIsArchived == 0 {
				items = append(items, s)
			}
		}
		cursor = ""
		if res.NextCursor != nil {
			cursor = *res.NextCursor
		}
		if cursor == "" || int64(len(items)) >= lq.Limit {
			return items, cursor, groups, nil
		}
	}
}

// appendGroups adds the groups a host's page headed to those of the pages
// before it, one group across two pages counted once.
func appendGroups(groups []hostGroup, extra protocol.Object) []hostGroup {
	var meta struct {
		Groups []hostGroup `json:"ahpd.groups"`
	}
	if raw, ok := extra["_meta"]; !ok || json.Unmarshal(raw, &meta) != nil {
		return groups
	}
	for _, g := range meta.Groups {
		if g.Continued && len(groups) > 0 && groups[len(groups)-1].Name == g.Name {
			continue
		}
		groups = append(groups, g)
	}
	return groups
}

// probeResult is what ahpd/sessionStatus says of a session.
type probeResult struct {
	Status  string `json:"status"` // active, inactive; "" when unknown
	Owner   string `json:"owner"`
	Sharing string `json:"sharing"`
}

// probe asks the host, a few at a time, whether each session is awake and
// whose it is. External sessions are not asked: they have no owner, and
// are asleep until opened.
func (d *Dashboard) probe(ctx context.Context, c *client.Client, items []protocol.SessionSummary) []probeResult {
	out := make([]probeResult, len(items))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(8, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				_ = c.Call(ctx, "ahpd/sessionStatus", map[string]string{"channel": items[i].Resource}, &out[i])
			}
		}()
	}
	for i, s := range items {
		if isExternal(s.Meta) {
			out[i].Status = "inactive"
			continue
		}
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// eventCounts reads how many entries each listed session's journal holds,
// in one ask of the host per thousand; nil when the host cannot say.
func eventCounts(ctx context.Context, c *client.Client, items []protocol.SessionSummary) map[string]uint64 {
	out := map[string]uint64{}
	for start := 0; start < len(items); start += maxCountAsk {
		var uris []string
		for _, s := range items[start:min(len(items), start+maxCountAsk)] {
			uris = append(uris, s.Resource)
		}
		var res struct {
			Counts map[string]uint64 `json:"counts"`
		}
		if err := c.Call(ctx, "ahpd/sessionEventCounts", map[string]any{"channels": uris}, &res); err != nil {
			return nil
		}
		maps.Copy(out, res.Counts)
	}
	return out
}

// maxCountAsk is the most sessions the host counts in one ask.
const maxCountAsk = 1000

func isExternal(meta protocol.Object) bool {
	return strings.TrimSpace(string(meta["vscode.external"])) == "true"
}

// statusOf is what a session is shown doing: its activity from the
// protocol's status bits, and sleeping for a quiet session the host let
// go of.
func statusOf(st protocol.SessionStatus, residency string) string {
	switch st.Activity() {
	case protocol.StatusInputNeeded:
		return statusNeedsInput
	case protocol.StatusInProgress:
		return statusRunning
	case protocol.StatusError:
		return statusFailed
	}
	if residency == "inactive" {
		return statusSleeping
	}
	return statusIdle
}

// rowOf is a listed session as the table shows it.
func rowOf(s protocol.SessionSummary, p probeResult) row {
	rw := row{URI: s.Resource, Link: sessionLink(s.Resource, nil), Title: s.Title, Owner: p.Owner,
		Provider: s.Provider, Status: statusOf(s.Status, p.Status), Modified: s.ModifiedAt,
		External: isExternal(s.Meta), Archived: s.Status&protocol.StatusIsArchived != 0}
	if rw.Title == "" {
		rw.Title = "(untitled)"
	}
	rw.StatusClass = strings.ReplaceAll(rw.Status, " ", "-")
	if len(s.WorkingDirectories) > 0 {
		rw.Folder = folderOf(s.WorkingDirectories[0])
	}
	rw.Branch, rw.Repo = branchOf(s), repoOf(s)
	if ch := s.Changes; ch != nil {
		rw.HasChanges = true
		rw.Files, rw.Added, rw.Removed = deref(ch.Files), deref(ch.Additions), deref(ch.Deletions)
		rw.FilesText = plural(rw.Files, "file", "files")
	}
	return rw
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// folderOf is a working directory's path.
func folderOf(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.Scheme == "file" {
		return u.Path
	}
	return uri
}

// sessionLink is the address of a session's page, with more of the
// query when given.
func sessionLink(uri string, more url.Values) string {
	v := url.Values{}
	for k, vs := range more {
		v[k] = vs
	}
	v.Set("uri", uri)
	return "/ui/session?" + v.Encode()
}
