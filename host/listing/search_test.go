package listing

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// TestSearch checks that a search keeps the rows holding every word, in
// any case, in their title, folders, branch or agent.
func TestSearch(t *testing.T) {
	t.Parallel()
	row := session.NewListRow(protocol.SessionSummary{Title: "Fix the Parser", Provider: "claude", WorkingDirectories: []string{"file:///src/ahpd"},
		Meta: protocol.Object{"ahpd.branch": jsontext.Value(`"agents/fix-1"`)}})
	if Search("") != nil || Search("  ") != nil {
		t.Error("an empty search filters")
	}
	for q, want := range map[string]bool{
		"parser": true, "PARSER fix": true, "/src/ahpd": true, "agents/fix": true, "claude": true,
		"parser codex": false, "file://": false, "branch": false,
	} {
		if got := Search(q)(row); got != want {
			t.Errorf("Search(%q) = %v, want %v", q, got, want)
		}
	}
}
