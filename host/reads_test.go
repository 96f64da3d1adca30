package host

import (
	"context"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/grants"
)

// TestJournalReadsBudgeted: a person runs at most readsPerPerson reads
// at once, the next refused saying so; root is not counted; the host runs
// as many as it has slots, the next waiting for one; a read ended gives
// its slots back.
func TestJournalReadsBudgeted(t *testing.T) {
	r := journalReads{size: readsPerPerson + 2}
	ctx := context.Background()
	mo, root := grants.UserPrincipal("mo"), grants.RootPrincipal("h")
	begin := func(ctx context.Context, p grants.Principal) func() {
		t.Helper()
		release, err := r.begin(ctx, p, "ahpd/sessionEvents")
		if err != nil {
			t.Fatalf("%s's read: %v", p, err)
		}
		return release
	}
	var held []func()
	for range readsPerPerson {
		held = append(held, begin(ctx, mo))
	}
	if _, err := r.begin(ctx, mo, "ahpd/sessionEvents"); err == nil || !strings.Contains(err.Error(), "the most one person may at once") {
		t.Fatalf("mo's read past the budget: %v", err)
	}
	held = append(held, begin(ctx, root), begin(ctx, root))

	// The host is full: a read waits for a slot, gives up with its
	// context, and takes one as soon as a read ends.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.begin(gone, root, "ahpd/replaySession"); err == nil {
		t.Fatal("a read with every slot taken did not wait")
	}
	took := make(chan error, 1)
	go func() {
		release, err := r.begin(ctx, root, "ahpd/replaySession")
		if err == nil {
			release()
		}
		took <- err
	}()
	held[0]()
	if err := <-took; err != nil {
		t.Fatalf("the waiting read once one ended: %v", err)
	}
	for _, release := range held[1:] {
		release()
	}
	if n := len(r.per); n != 0 {
		t.Errorf("%d people still counted once every read ended", n)
	}
	begin(ctx, mo)()
}
