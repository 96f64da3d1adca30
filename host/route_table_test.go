package host

import (
	"maps"
	"slices"
	"testing"

	"github.com/ahpd/ahpd/host/shared"
)

// TestEveryMethodRoutedOrLocal checks the cluster part's route table
// (package host/shared) against the method table: every method a
// connection may call runs where its session is held (routed) or is
// declared answered by any host (hostLocal), never both; neither table
// names a method that does not exist; and the read-only routed methods
// (asked) are routed.
func TestEveryMethodRoutedOrLocal(t *testing.T) {
	t.Parallel()
	for _, m := range slices.Sorted(maps.Keys(methods)) {
		local := shared.HostLocal(m) != ""
		switch {
		case shared.Routed(m) && local:
			t.Errorf("%s is both routed and host-local", m)
		case !shared.Routed(m) && !local:
			t.Errorf("%s is neither routed nor declared host-local: say where it runs in a cluster (host/shared/route.go)", m)
		}
	}
	table := shared.RouteTable()
	if len(table["routed"]) == 0 || len(table["hostLocal"]) == 0 || len(table["asked"]) == 0 {
		t.Fatalf("the route table lists %v, want every table non-empty", table)
	}
	for name, keys := range table {
		for _, m := range keys {
			if _, ok := methods[m]; !ok {
				t.Errorf("%s names %s, which is not a method", name, m)
			}
		}
	}
	for _, m := range table["asked"] {
		if !shared.Routed(m) {
			t.Errorf("asked names %s, which is not routed", m)
		}
	}
}
