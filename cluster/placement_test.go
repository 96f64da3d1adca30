package cluster

import (
	"errors"
	"slices"
	"testing"
)

func TestReaches(t *testing.T) {
	for _, tc := range []struct {
		repos, folder string
		want          bool
	}{
		{"/srv/repos", "/srv/repos", true},
		{"/srv/repos", "/srv/repos/app", true},
		{"/srv/repos/", "/srv/repos/app/sub", true},
		{"/srv/repos", "/srv/repos2", false},
		{"/srv/repos", "/srv", false},
		{"/srv/repos", "/srv/repos/../etc", false},
		{"/a, /b", "/b/x", true},
		{"/a,/b", "/c", false},
		{"/", "/anything/at/all", true},
		{"", "/a", false},
		{"relative", "relative/x", false},
		{"/a", "a/x", false},
		{"/a/./b", "/a/b/c", true},
	} {
		h := Host{ID: "h", Labels: map[string]string{LabelRepos: tc.repos}}
		if got := h.Reaches(tc.folder); got != tc.want {
			t.Errorf("repos=%q Reaches(%q) = %v, want %v", tc.repos, tc.folder, got, tc.want)
		}
	}
}

func TestPlace(t *testing.T) {
	host := func(id string, load int, repos string) Host {
		return Host{ID: id, Load: load, Labels: map[string]string{LabelRepos: repos}}
	}
	hosts := []Host{
		host("c", 3, "/srv/repos"),
		host("a", 5, "/srv/repos,/home/ci"),
		host("b", 3, "/srv/repos"),
		host("d", 0, "/home/ci"),
		{ID: "e", Load: 0}, // no labels: reaches no folder
	}
	for _, tc := range []struct {
		name    string
		hosts   []Host
		folders []string
		want    string
	}{
		{"least loaded of those reaching", hosts, []string{"/srv/repos/app"}, "b"},
		{"tie broken by id", hosts[:3], []string{"/srv/repos/x"}, "b"},
		{"every folder must be reached", hosts, []string{"/srv/repos/app", "/home/ci/job"}, "a"},
		{"only one reaches", hosts, []string{"/home/ci/job"}, "d"},
		{"no folders: any host", hosts, nil, "d"},
		{"no host reaches", hosts, []string{"/elsewhere"}, ""},
		{"no hosts", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.hosts)
			got, err := Place(tc.hosts, tc.folders)
			if tc.want == "" {
				if !errors.Is(err, ErrNoHost) {
					t.Fatalf("Place = %+v, %v, want ErrNoHost", got, err)
				}
				return
			}
			if err != nil || got.ID != tc.want {
				t.Fatalf("Place = %q, %v, want %q", got.ID, err, tc.want)
			}
			for i := range before {
				if before[i].ID != tc.hosts[i].ID || before[i].Load != tc.hosts[i].Load {
					t.Fatal("Place changed its input")
				}
			}
		})
	}
	// Stable: any order of the same hosts gives the same choice.
	rev := slices.Clone(hosts)
	slices.Reverse(rev)
	a, _ := Place(hosts, []string{"/srv/repos/app"})
	b, _ := Place(rev, []string{"/srv/repos/app"})
	if a.ID != b.ID {
		t.Errorf("order changed the choice: %s vs %s", a.ID, b.ID)
	}
}
