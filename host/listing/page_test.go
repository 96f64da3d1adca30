package listing

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// owned is a session as a listing sees it, owned by someone.
type owned struct {
	uri, owner, modified string
}

func (o *owned) URI() string { return o.uri }

func (o *owned) Row() *session.ListRow {
	return session.NewOwnedListRow(protocol.SessionSummary{Resource: o.uri, ModifiedAt: o.modified}, o.owner, false)
}

// viewOf is the View a catalogue of these rows would show, each row
// "provider/id@minute".
func viewOf(t *testing.T, rows ...string) *View {
	t.Helper()
	v := &View{byURI: map[string]bool{}}
	for _, r := range rows {
		var p, id string
		var m int
		if _, err := fmt.Sscanf(strings.NewReplacer("/", " ", "@", " ").Replace(r), "%s %s %d", &p, &id, &m); err != nil {
			t.Fatalf("row %q: %v", r, err)
		}
		row := &catalogue.Row{Provider: p, ID: id, ModifiedAt: time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC)}
		v.keys = append(v.keys, entry{Key: Key{ModifiedAt: protocol.FormatTime(row.ModifiedAt), Resource: row.URI()},
			row: session.NewListRow(summary(row)), ext: true})
		v.byURI[row.URI()] = true
	}
	slices.SortFunc(v.keys, func(a, b entry) int { return a.Compare(b.Key) })
	return v
}

func minute(m int) string { return protocol.FormatTime(time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC)) }

// TestPage merges the host's own sessions with the external rows shown,
// newest first, through every page size, and checks the owner filter and
// that an external row whose session the host holds is listed once.
func TestPage(t *testing.T) {
	t.Parallel()
	o := NewOrder()
	for _, s := range []*owned{
		{"ahpd:/a", "ann", minute(5)},
		{"ahpd:/b", "bob", minute(3)},
		{"ahpd:/c", "ann", minute(1)},
		{"claude:/opened", "", minute(4)}, // an external session a client opened
	} {
		o.Add(s)
	}
	v := viewOf(t, "claude/x@6", "claude/y@2", "claude/opened@4", "claude/z@0")
	tests := []struct {
		name string
		q    Query
		v    *View
		want []string
	}{
		{"all", Query{Me: "ann"}, v, []string{"claude:/x", "ahpd:/a", "claude:/opened", "ahpd:/b", "claude:/y", "ahpd:/c", "claude:/z"}},
		{"mine", Query{Me: "ann", Mine: true}, v, []string{"ahpd:/a", "ahpd:/c"}},
		{"no view", Query{Me: "bob"}, nil, []string{"ahpd:/a", "claude:/opened", "ahpd:/b", "ahpd:/c"}},
		{"matched", Query{Me: "ann", Match: func(r *session.ListRow) bool {
			return strings.ContainsAny(r.Summary.Resource[len(r.Summary.Resource)-1:], "xbz")
		}},
			v, []string{"claude:/x", "ahpd:/b", "claude:/z"}},
		{"none matched", Query{Me: "ann", Match: func(*session.ListRow) bool { return false }}, v, nil},
	}
	for _, tt := range tests {
		for limit := 1; limit <= len(tt.want)+1; limit++ {
			t.Run(fmt.Sprintf("%s/limit=%d", tt.name, limit), func(t *testing.T) {
				var got []string
				q := tt.q
				q.Limit = limit
				for range len(tt.want) + 1 {
					p := Page(o, tt.v, q)
					if len(p.Rows) > limit {
						t.Fatalf("a page of %d rows, limit %d", len(p.Rows), limit)
					}
					for _, r := range p.Rows {
						got = append(got, r.Summary.Resource)
					}
					if !p.More {
						break
					}
					q.After = &p.Last
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("pages list\n%v\nwant\n%v", got, tt.want)
				}
			})
		}
	}
}

// TestCursors checks that a cursor opens to where its page ended, and that
// one another key sealed, or altered, or garbage, is refused.
func TestCursors(t *testing.T) {
	t.Parallel()
	k, other := NewCursors(), NewCursors()
	at := Key{ModifiedAt: minute(3), Resource: "ahpd:/b"}
	c := k.Seal(at)
	if got, err := k.Open(c); err != nil || got != at {
		t.Fatalf("Open(Seal(%v)) = %v, %v", at, got, err)
	}
	altered := []byte(c)
	altered[len(altered)-2] ^= 1
	for name, cursor := range map[string]string{
		"another host's": other.Seal(at),
		"altered":        string(altered),
		"garbage":        "not a cursor",
		"empty":          "",
	} {
		if _, err := k.Open(cursor); !errors.Is(err, ErrForeignCursor) {
			t.Errorf("%s cursor: Open = %v, want ErrForeignCursor", name, err)
		}
	}
}
