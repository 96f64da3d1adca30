package host

import (
	"maps"
	"slices"
	"testing"
)

// TestEveryMethodRoutedOrLocal checks the route table against the method
// table: every method a connection may call runs where its session is held
// (routed) or is declared answered by any host (hostLocal), never both;
// neither table names a method that does not exist; and the read-only
// routed methods (asked) are routed.
func TestEveryMethodRoutedOrLocal(t *testing.T) {
	t.Parallel()
	for _, m := range slices.Sorted(maps.Keys(methods)) {
		_, local := hostLocal[m]
		switch {
		case routed[m] && local:
			t.Errorf("%s is both routed and host-local", m)
		case !routed[m] && !local:
			t.Errorf("%s is neither routed nor declared host-local: say where it runs in a cluster (route.go)", m)
		}
	}
	for name, keys := range map[string][]string{
		"routed":    slices.Collect(maps.Keys(routed)),
		"hostLocal": slices.Collect(maps.Keys(hostLocal)),
		"asked":     slices.Collect(maps.Keys(asked)),
	} {
		for _, m := range keys {
			if _, ok := methods[m]; !ok {
				t.Errorf("%s names %s, which is not a method", name, m)
			}
		}
	}
	for m := range asked {
		if !routed[m] {
			t.Errorf("asked names %s, which is not routed", m)
		}
	}
}
