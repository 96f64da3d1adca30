package journal

import (
	"context"
	"testing"
	"time"
)

// The stream keeps the least deduplication window, since the journal sets
// no message ids: a server starting reads back the entries of the whole
// window to rebuild it. A stream made with the server's default window
// (two minutes, as before) is brought down to it on Open.
func TestStreamKeepsNoDedupeWindow(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		window := func(j *Journal) time.Duration {
			t.Helper()
			info, err := j.stream.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return info.Config.Duplicates
		}
		j := h.open(Config{MaxAge: time.Hour})
		if got := window(j); got != minDuplicates {
			t.Fatalf("deduplication window %v, want %v", got, minDuplicates)
		}
		info, err := j.stream.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		cfg := info.Config
		cfg.Duplicates = 2 * time.Minute
		if _, err := j.js.UpdateStream(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		appendOK(t, j, s1, "kept")
		j = h.restart(j, Config{MaxAge: time.Hour})
		if got := window(j); got != minDuplicates {
			t.Fatalf("deduplication window %v after reopening, want %v", got, minDuplicates)
		}
		if got := readOK(t, j, []string{s1}, 0, 0); !equal(datas(got), []string{"kept"}) {
			t.Fatalf("read %v", datas(got))
		}
	})
}
