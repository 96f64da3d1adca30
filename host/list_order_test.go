package host_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestListSessionsOrdered lists stored sessions searched, sorted by
// title and grouped, a page at a time with the host's cursor, and checks
// that orders, groups and cursors the host does not take are refused with
// -32602 saying why.
func TestListSessionsOrdered(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	const n = 12
	storeSessions(t, state, filepath.Join(state, "work"), n) // "Session s00000", the oldest, …
	th := startHost(t, state)
	c := th.client("c1")
	type page struct {
		Items      []protocol.SessionSummary `json:"items"`
		NextCursor *string                   `json:"nextCursor"`
		Meta       struct {
			Groups []struct {
				Name      string `json:"name"`
				Count     int    `json:"count"`
				Continued bool   `json:"continued"`
			} `json:"ahpd.groups"`
		} `json:"_meta"`
	}
	list := func(meta map[string]any) (titles []string, groups []string) {
		t.Helper()
		params := map[string]any{"channel": protocol.RootURI, "limit": 5, "_meta": meta}
		for range n {
			var p page
			if err := json.Unmarshal(c.MustCall("listSessions", params), &p); err != nil {
				t.Fatal(err)
			}
			for _, s := range p.Items {
				titles = append(titles, s.Title)
			}
			for _, g := range p.Meta.Groups {
				groups = append(groups, fmt.Sprintf("%s=%d,%v", filepath.Base(g.Name), g.Count, g.Continued))
			}
			if p.NextCursor == nil {
				return titles, groups
			}
			params["cursor"] = *p.NextCursor
		}
		t.Fatal("paging does not end")
		return nil, nil
	}
	var byTitle []string
	for i := range n {
		byTitle = append(byTitle, fmt.Sprintf("Session s%05d", i))
	}
	if got, _ := list(map[string]any{"ahpd.order": "title"}); !slices.Equal(got, byTitle) {
		t.Errorf("by title: %v, want %v", got, byTitle)
	}
	newest := slices.Clone(byTitle)
	slices.Reverse(newest)
	if got, _ := list(map[string]any{"ahpd.order": "created"}); !slices.Equal(got, newest) {
		t.Errorf("newest first: %v", got)
	}
	// One repository (the folder they all work in): headed on each page,
	// continued on the later ones.
	got, groups := list(map[string]any{"ahpd.order": "title", "ahpd.group": "repo", "ahpd.search": "s0000"})
	if !slices.Equal(got, byTitle[:10]) || !slices.Equal(groups, []string{"work=10,false", "work=10,true"}) {
		t.Errorf("searched and grouped: %v with groups %v", got, groups)
	}

	for _, bad := range []struct {
		meta map[string]any
		says string
	}{
		{map[string]any{"ahpd.order": "newest"}, `"activity", "created" or "title"`},
		{map[string]any{"ahpd.group": "owner"}, `"repo"`},
		{map[string]any{"ahpd.order": 3}, `a string`},
	} {
		_, err := c.Call("listSessions", map[string]any{"channel": protocol.RootURI, "_meta": bad.meta})
		if err == nil || err.Code != -32602 || !strings.Contains(err.Message, bad.says) {
			t.Errorf("listSessions with _meta %v: %v, want -32602 saying %s", bad.meta, err, bad.says)
		}
	}
	var p page
	if err := json.Unmarshal(c.MustCall("listSessions", map[string]any{"channel": protocol.RootURI, "limit": 2,
		"_meta": map[string]any{"ahpd.order": "title"}}), &p); err != nil || p.NextCursor == nil {
		t.Fatalf("a first page by title: %v", err)
	}
	_, err := c.Call("listSessions", map[string]any{"channel": protocol.RootURI, "cursor": *p.NextCursor})
	if err == nil || err.Code != -32602 || !strings.Contains(err.Message, "another order") {
		t.Errorf("a title page's cursor in the listing's own order: %v, want -32602", err)
	}
}
