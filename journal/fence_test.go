package journal

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestFence: two journals on one server, as two hosts. Once b claims a
// session, every append of a's earlier claim is refused by the server
// (ErrFenced), small and chunked alike, and nothing of them is kept; b's
// go through, and a's again once a claims it back. A session never
// claimed is appended to unfenced, and a claim fences only its session.
func TestFence(t *testing.T) {
	h := &harness{t: t, url: true, dir: t.TempDir()}
	h.startServer()
	t.Cleanup(h.stopServer)
	ctx := context.Background()
	a, b := h.open(Config{}), h.open(Config{})

	appendOK(t, a, s1, "unclaimed")
	if _, err := a.Claim(ctx, s1, "a"); err != nil {
		t.Fatal(err)
	}
	appendOK(t, a, s1, "a holds it", "and goes on")
	if _, err := b.Claim(ctx, s1, "b"); err != nil {
		t.Fatal(err)
	}
	for _, e := range [][]byte{[]byte("a, frozen, wakes"), noise(3, 2<<20)} {
		if _, err := a.Append(ctx, s1, e, []byte("and more")); !errors.Is(err, ErrFenced) {
			t.Fatalf("a's append after b's claim: %v, want ErrFenced", err)
		}
	}
	appendOK(t, b, s1, "b holds it")
	appendOK(t, a, s2, "another session is a's own")
	if _, err := a.Claim(ctx, s1, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, s1, []byte("b, frozen")); !errors.Is(err, ErrFenced) {
		t.Fatalf("b's append after a's claim back: %v, want ErrFenced", err)
	}
	appendOK(t, a, s1, "a again")
	want := []string{"unclaimed", "a holds it", "and goes on", "b holds it", "a again"}
	if got := datas(readOK(t, b, []string{s1}, 0, 0)); !equal(got, want) {
		t.Fatalf("the session holds %q, want %q", got, want)
	}
	if n, err := b.Counts(ctx, []string{s1}); err != nil || n[s1] != uint64(len(want)) {
		t.Fatalf("Counts = %v, %v; want %d (a claim counted as an entry?)", n, err, len(want))
	}
	// Letting go stops the fence of this journal's appends: another
	// claim's holder may claim it later.
	a.Unclaim(s1)
	appendOK(t, a, s1, "unfenced")
}

// TestFenceClaimExpired: a holder whose claim the stream's age limit took
// (here purged, as the limit does) claims the session again at its next
// append, which is to be tried again and then goes through; a claim of
// another host meanwhile is not taken over.
func TestFenceClaimExpired(t *testing.T) {
	h := &harness{t: t, url: true, dir: t.TempDir()}
	h.startServer()
	t.Cleanup(h.stopServer)
	ctx := context.Background()
	a, b := h.open(Config{}), h.open(Config{})
	if _, err := a.Claim(ctx, s1, "a"); err != nil {
		t.Fatal(err)
	}
	expire := func() {
		t.Helper()
		if err := a.stream.Purge(ctx, jetstream.WithPurgeSubject(a.holderSubject(s1))); err != nil {
			t.Fatal(err)
		}
	}
	expire()
	_, err := a.Append(ctx, s1, []byte("after the claim expired"))
	if err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("the append as the claim had expired: %v, want an error to append again", err)
	}
	appendOK(t, a, s1, "after the claim expired")
	// Expired, and then another claimed it: that claim stands.
	expire()
	if _, err := b.Claim(ctx, s1, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, s1, []byte("a, stale")); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's append after b's claim: %v, want ErrFenced", err)
	}
	appendOK(t, b, s1, "b's")
	if got, want := datas(readOK(t, b, []string{s1}, 0, 0)), []string{"after the claim expired", "b's"}; !equal(got, want) {
		t.Fatalf("the session holds %q, want %q", got, want)
	}
}
