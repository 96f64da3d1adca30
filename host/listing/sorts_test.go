package listing

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// fixed is a session whose row does not change.
type fixed struct{ r *session.ListRow }

func (f fixed) URI() string           { return f.r.Summary.Resource }
func (f fixed) Row() *session.ListRow { return f.r }

// TestPageSorted pages the listing sorted by title and by creation, and
// grouped by repository, through every page size, and checks the rows,
// the groups each page heads and their counts.
func TestPageSorted(t *testing.T) {
	t.Parallel()
	o := NewOrder()
	// uri, title, created minute, modified minute, repo (a worktree's, or
	// a folder's).
	for _, s := range []struct {
		uri, title string
		created    int
		modified   int
		repo       string
	}{
		{"ahpd:/a", "beta", 1, 9, "meta:/r/one"},
		{"ahpd:/b", "Alpha", 2, 8, "dir:/r/two"},
		{"ahpd:/c", "", 3, 7, "meta:/r/one"},
		{"ahpd:/d", "alpha", 4, 6, "dir:/r/two"},
		{"ahpd:/e", "gamma", 5, 5, "meta:/r/three"},
	} {
		sum := protocol.SessionSummary{Resource: s.uri, Title: s.title, CreatedAt: minute(s.created), ModifiedAt: minute(s.modified)}
		if repo, ok := strings.CutPrefix(s.repo, "meta:"); ok {
			sum.Meta = protocol.Object{"ahpd.repo": jsontext.Value(`"` + repo + `"`)}
		} else {
			sum.WorkingDirectories = []string{"file://" + strings.TrimPrefix(s.repo, "dir:")}
		}
		o.Add(fixed{session.NewListRow(sum)})
	}
	v := viewOf(t, "claude/x@10", "claude/y@0") // no folder
	tests := []struct {
		name   string
		by     Sorting
		want   []string
		groups []string // name=count, as the pages head them, the page's first marked + when continued
	}{
		{"activity", Sorting{}, []string{"claude:/x", "ahpd:/a", "ahpd:/b", "ahpd:/c", "ahpd:/d", "ahpd:/e", "claude:/y"}, nil},
		// Alpha and alpha tie: the more recently active first. Untitled
		// last (the external rows are titled by their ids).
		{"title", Sorting{Sort: SortTitle}, []string{"ahpd:/b", "ahpd:/d", "ahpd:/a", "ahpd:/e", "claude:/x", "claude:/y", "ahpd:/c"}, nil},
		{"created", Sorting{Sort: SortCreated}, []string{"ahpd:/e", "ahpd:/d", "ahpd:/c", "ahpd:/b", "ahpd:/a", "claude:/x", "claude:/y"}, nil},
		{"title/repo", Sorting{Sort: SortTitle, Group: GroupRepo},
			[]string{"ahpd:/b", "ahpd:/d", "ahpd:/a", "ahpd:/c", "ahpd:/e", "claude:/x", "claude:/y"},
			[]string{"/r/two=2", "/r/one=2", "/r/three=1", "(no folder)=2"}},
		{"activity/repo", Sorting{Group: GroupRepo},
			[]string{"claude:/x", "claude:/y", "ahpd:/a", "ahpd:/c", "ahpd:/b", "ahpd:/d", "ahpd:/e"},
			[]string{"(no folder)=2", "/r/one=2", "/r/two=2", "/r/three=1"}},
	}
	for _, tt := range tests {
		for limit := 1; limit <= len(tt.want)+1; limit++ {
			t.Run(fmt.Sprintf("%s/limit=%d", tt.name, limit), func(t *testing.T) {
				var got, heads []string
				q := Query{Me: "ann", Limit: limit, By: tt.by}
				for range len(tt.want) + 1 {
					p := Page(o, v, q)
					for _, r := range p.Rows {
						got = append(got, r.Summary.Resource)
					}
					for i, g := range p.Groups {
						if g.Continued != (i == 0 && len(heads) > 0 && strings.TrimSuffix(heads[len(heads)-1], "+") == fmt.Sprintf("%s=%d", g.Name, g.Count)) {
							t.Fatalf("group %s on a page after %v: continued %v", g.Name, heads, g.Continued)
						}
						if !g.Continued {
							heads = append(heads, fmt.Sprintf("%s=%d", g.Name, g.Count))
						}
					}
					if p.Last.Order != tt.by.Name() {
						t.Fatalf("the page's cursor is of order %q, want %q", p.Last.Order, tt.by.Name())
					}
					if !p.More {
						break
					}
					q.After = &p.Last
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("pages list\n%v\nwant\n%v", got, tt.want)
				}
				if !slices.Equal(heads, tt.groups) {
					t.Fatalf("pages head the groups\n%v\nwant\n%v", heads, tt.groups)
				}
			})
		}
	}
}

// TestParseSorting checks the orders a listing takes, and that one it
// does not is refused saying what it takes.
func TestParseSorting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ order, group, name string }{
		{"", "", ""}, {"activity", "", ""}, {"title", "", "title"}, {"created", "repo", "created/repo"}, {"", "repo", "/repo"},
	} {
		if s, err := ParseSorting(c.order, c.group); err != nil || s.Name() != c.name {
			t.Errorf("ParseSorting(%q, %q) = %q, %v; want %q", c.order, c.group, s.Name(), err, c.name)
		}
	}
	for _, c := range [][2]string{{"newest", ""}, {"", "owner"}, {"Title", ""}} {
		if _, err := ParseSorting(c[0], c[1]); err == nil || !strings.Contains(err.Error(), `"`) {
			t.Errorf("ParseSorting(%q, %q) = %v: want a refusal naming what it takes", c[0], c[1], err)
		}
	}
}
