package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestNotes: the last note set under a name is the one read, across a
// reopen; sets are apart; no session read, mark or Newest sees a note;
// DeleteNote drops one, DropNotes a set; bad sets, names and sizes are refused.
func TestNotes(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		appendOK(t, j, s1, "a", "b")
		for _, n := range []struct{ set, name, data string }{
			{"clients", "c1", "one"}, {"clients", "c1", "two"}, {"clients", "c.2 *>", "x"}, {"others", "c1", "other"},
		} {
			if err := j.SetNote(ctx, n.set, n.name, []byte(n.data)); err != nil {
				t.Fatal(err)
			}
		}
		j = h.restart(j, Config{})
		got := notesOf(t, j, "clients")
		if want := []string{"c.2 *>=x", "c1=two"}; !slices.Equal(got, want) {
			t.Fatalf("notes %v, want %v", got, want)
		}
		if got := notesOf(t, j, "others"); !slices.Equal(got, []string{"c1=other"}) {
			t.Fatalf("other set %v", got)
		}
		if read := readOK(t, j, []string{s1}, 0, 0); !equal(datas(read), []string{"a", "b"}) {
			t.Fatalf("entries %v: a note was read as one", datas(read))
		}
		if e, _, _ := j.Newest(ctx); string(e.Data) != "b" {
			t.Fatalf("newest %q: a note was taken for an entry", e.Data)
		}
		if n, ok, err := j.GetNote(ctx, "clients", "c1"); err != nil || !ok || string(n.Data) != "two" {
			t.Fatalf("GetNote: %q %v %v, want two", n.Data, ok, err)
		}
		if err := j.DeleteNote(ctx, "clients", "c1"); err != nil {
			t.Fatal(err)
		}
		if err := j.DeleteNote(ctx, "clients", "never"); err != nil {
			t.Fatalf("deleting a note never set: %v", err)
		}
		if _, ok, err := j.GetNote(ctx, "clients", "c1"); ok || err != nil {
			t.Fatalf("GetNote after delete: %v %v", ok, err)
		}
		if got := notesOf(t, j, "clients"); !slices.Equal(got, []string{"c.2 *>=x"}) {
			t.Fatalf("after delete %v", got)
		}
		if err := j.DropNotes(ctx, "others"); err != nil {
			t.Fatal(err)
		}
		if got := notesOf(t, j, "others"); len(got) != 0 {
			t.Fatalf("others after DropNotes: %v", got)
		}
		if got := notesOf(t, j, "clients"); !slices.Equal(got, []string{"c.2 *>=x"}) {
			t.Fatalf("DropNotes of another set dropped clients: %v", got)
		}
		if err := j.SetNote(ctx, "clients", "big", []byte(strings.Repeat("x", MaxNoteBytes))); err != nil {
			t.Fatalf("a note of MaxNoteBytes: %v", err)
		}
		if err := j.SetNote(ctx, "clients", "c1", []byte(strings.Repeat("x", MaxNoteBytes+1))); !errors.Is(err, ErrEntryTooLarge) {
			t.Fatalf("a note too large: %v", err)
		}
		for _, set := range []string{"", "Clients", "a.b", "a*"} {
			if err := j.SetNote(ctx, set, "c1", nil); err == nil {
				t.Errorf("set %q taken", set)
			}
		}
		if err := j.SetNote(ctx, "clients", "", nil); err == nil {
			t.Error("empty name taken")
		}
	})
}

func notesOf(t *testing.T, j *Journal, set string) []string {
	t.Helper()
	notes, err := j.Notes(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range notes {
		out = append(out, n.Name+"="+string(n.Data))
	}
	slices.Sort(out)
	return out
}

// TestSeek: the first whole entry of a session at or after a sequence,
// passing over other sessions' and the session's marks; none past the end.
func TestSeek(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		a := appendOK(t, j, s1, "a0", "a1")
		appendOK(t, j, s2, "b0")
		if err := j.SetMark(ctx, s1, []byte("m")); err != nil {
			t.Fatal(err)
		}
		c := appendOK(t, j, s1, "a2")
		for _, tc := range []struct {
			from uint64
			want string
		}{{0, "a0"}, {a[0], "a0"}, {a[1], "a1"}, {a[1] + 1, "a2"}, {c[0], "a2"}, {c[0] + 1, ""}} {
			e, ok, err := j.Seek(ctx, s1, tc.from)
			if err != nil {
				t.Fatal(err)
			}
			if got := map[bool]string{true: string(e.Data)}[ok]; got != tc.want {
				t.Errorf("Seek(%d) = %q, want %q", tc.from, got, tc.want)
			}
		}
	})
}

// TestRaiseNote: hosts racing to raise one note to the same value: one
// wins each value, a lower value loses to a higher one held, and a raise
// retried by its winner is still its win.
func TestRaiseNote(t *testing.T) {
	h := &harness{t: t, url: true, dir: t.TempDir()}
	h.startServer()
	t.Cleanup(h.stopServer)
	ctx := context.Background()
	hosts := []*Journal{h.open(Config{}), h.open(Config{}), h.open(Config{})}
	for value := int64(1); value <= 20; value++ {
		wins := make(chan int, len(hosts))
		var wg sync.WaitGroup
		for i, j := range hosts {
			wg.Go(func() {
				won, err := j.RaiseNote(ctx, "schedules", "a/t", value, fmt.Sprint("host", i))
				if err != nil {
					t.Error(err)
				}
				if won {
					wins <- i
				}
			})
		}
		wg.Wait()
		close(wins)
		var winners []int
		for i := range wins {
			winners = append(winners, i)
		}
		if len(winners) != 1 {
			t.Fatalf("value %d: won by %v, want one host", value, winners)
		}
		if won, _ := hosts[winners[0]].RaiseNote(ctx, "schedules", "a/t", value, fmt.Sprint("host", winners[0])); !won {
			t.Fatalf("value %d: its winner's retry lost", value)
		}
	}
	if won, err := hosts[0].RaiseNote(ctx, "schedules", "a/t", 5, "host0"); won || err != nil {
		t.Fatalf("a lower value: %v, %v", won, err)
	}
	if n, err := hosts[0].Notes(ctx, "schedules"); err != nil || len(n) != 1 || string(n[0].Data[:2]) != "20" {
		t.Fatalf("notes %v, %v: want the one at 20", n, err)
	}
}
