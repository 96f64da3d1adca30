package automations

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestMaxPerOwner: a person may have Options.MaxPerOwner automations;
// one more over the protocol is refused with a reason naming the count,
// and removing one makes room. The host itself is not limited, nor is
// the config file, and one person's count is not another's.
func TestMaxPerOwner(t *testing.T) {
	const most = 3
	def := protocol.AutomationDefinition{Title: "a", Message: protocol.Message{Text: "say a"}, Enabled: true}
	for _, tc := range []struct {
		name    string
		owner   string
		refused bool // the automation past the limit
	}{
		{"member", "user:ann", true},
		{"root", "root:box", false},
		{"nobody, on a host without users", "", false},
		{"plugin", "plugin:lint", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{MaxPerOwner: most})
			for i := range most {
				if _, err := h.e.Create(tc.owner, fmt.Sprintf("ahp-automation:/a%d", i), def); err != nil {
					t.Fatalf("automation %d of %d: %v", i+1, most, err)
				}
			}
			// Another person's are theirs.
			if _, err := h.e.Create("user:bob", "ahp-automation:/a0", def); err != nil {
				t.Fatalf("another person's first: %v", err)
			}
			_, err := h.e.Create(tc.owner, "ahp-automation:/more", def)
			if !tc.refused {
				if err != nil {
					t.Fatalf("the host's own past the limit: %v", err)
				}
				return
			}
			want := fmt.Sprintf("%s has %d automations, the most one person may have on this host; remove one before making another", tc.owner, most)
			if !errors.Is(err, ErrLimit) || !errors.Is(err, ErrInvalid) || err.Error() != want {
				t.Fatalf("past the limit: %v\nwant: %s", err, want)
			}
			if n := len(h.e.Entries(tc.owner)); n != most {
				t.Fatalf("%d automations kept, want %d", n, most)
			}
			// The config file's are not refused, though they count.
			if err := h.e.SetDeclared([]Declared{{Owner: tc.owner, Resource: "ahp-automation:/declared", Definition: def}}); err != nil {
				t.Fatalf("declared past the limit: %v", err)
			}
			if err := h.e.SetDeclared(nil); err != nil {
				t.Fatal(err)
			}
			if err := h.e.Remove(tc.owner, "ahp-automation:/a0"); err != nil {
				t.Fatal(err)
			}
			if _, err := h.e.Create(tc.owner, "ahp-automation:/more", def); err != nil {
				t.Fatalf("after removing one: %v", err)
			}
		})
	}
}

func TestIsHostOwner(t *testing.T) {
	for owner, want := range map[string]bool{"": true, "root:box": true, "user:ann": false, "user:root": false, "plugin:lint": false, "nobody": true} {
		if got := IsHostOwner(owner); got != want {
			t.Errorf("IsHostOwner(%q) = %v, want %v", owner, got, want)
		}
	}
}
