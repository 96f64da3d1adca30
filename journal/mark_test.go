package journal

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestMark: the last mark set is the one read, across a reopen; the
// session's entries and Newest never show one; Delete takes it; one too
// large is refused.
func TestMark(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		if _, ok, err := j.Mark(ctx, s1); ok || err != nil {
			t.Fatalf("no mark yet: %v %v", ok, err)
		}
		appendOK(t, j, s1, "a", "b")
		for _, m := range []string{"one", "two", "three"} {
			if err := j.SetMark(ctx, s1, []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		j = h.restart(j, Config{})
		got, ok, err := j.Mark(ctx, s1)
		if err != nil || !ok || string(got) != "three" {
			t.Fatalf("mark %q %v %v, want three", got, ok, err)
		}
		if _, ok, _ := j.Mark(ctx, s2); ok {
			t.Fatal("another session's mark was read")
		}
		if read := readOK(t, j, []string{s1}, 0, 0); !equal(datas(read), []string{"a", "b"}) {
			t.Fatalf("entries %v: a mark was read as one", datas(read))
		}
		if e, _, _ := j.Newest(ctx); string(e.Data) != "b" {
			t.Fatalf("newest %q: a mark was taken for an entry", e.Data)
		}
		if err := j.SetMark(ctx, s1, []byte(strings.Repeat("x", MaxMarkBytes+1))); !errors.Is(err, ErrEntryTooLarge) {
			t.Fatalf("a mark too large: %v", err)
		}
		if err := j.Delete(ctx, s1); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := j.Mark(ctx, s1); ok {
			t.Fatal("Delete left the mark")
		}
	})
}

// TestCounts: each session's entries are counted, its mark and floor not;
// a session with none is left out; too many names are refused.
func TestCounts(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		appendOK(t, j, s1, "a", "b", "c")
		appendOK(t, j, s2, "d")
		if err := j.SetMark(ctx, s1, []byte("m")); err != nil {
			t.Fatal(err)
		}
		got, err := j.Counts(ctx, []string{s1, s2, "ahp-session:/none"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[s1] != 3 || got[s2] != 1 {
			t.Errorf("counts %v", got)
		}
		if _, err := j.Counts(ctx, make([]string, MaxCountSessions+1)); !errors.Is(err, ErrTooManySessions) {
			t.Errorf("too many: %v", err)
		}
	})
}
