package catalogue

import (
	"slices"
	"testing"
	"time"
)

func ids(rows []Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

func TestVisible(t *testing.T) {
	now := base.Add(90 * 24 * time.Hour)
	row := func(id string, ago time.Duration) Row {
		return Row{Provider: providerClaude, ID: id, ModifiedAt: now.Add(-ago)}
	}
	rows := []Row{
		row("own", time.Minute),
		row("h1", time.Hour),
		row("h12", 12*time.Hour),
		row("d2", 48*time.Hour),
		row("d6", 6*24*time.Hour),
		row("d8", 8*24*time.Hour),
		row("d29", 29*24*time.Hour),
		row("d40", 40*24*time.Hour),
	}
	isOwn := func(k Key) bool { return k.ID == "own" }
	cases := []struct {
		mode   Mode
		cutoff time.Time
		shown  []string
	}{
		{ShowNone, time.Time{}, nil},
		{ShowRecent, time.Time{}, []string{"h1", "h12"}},
		// none older than the host's own second most recent session
		{ShowRecent, now.Add(-2 * time.Hour), []string{"h1"}},
		{ShowRecent, now, nil},
		{ShowLast24Hours, time.Time{}, []string{"h1", "h12"}},
		{ShowLast7Days, time.Time{}, []string{"h1", "h12", "d2", "d6"}},
		{ShowLast30Days, now, []string{"h1", "h12", "d2", "d6", "d8", "d29"}},
	}
	for _, tc := range cases {
		shown, hidden := Visible(tc.mode, now, rows, tc.cutoff, isOwn)
		if got := ids(shown); !slices.Equal(got, tc.shown) {
			t.Errorf("%s cutoff %v: shown %v, want %v", tc.mode, tc.cutoff, got, tc.shown)
		}
		if hidden != 7-len(tc.shown) {
			t.Errorf("%s: hidden %d, want %d", tc.mode, hidden, 7-len(tc.shown))
		}
	}
	// recent looks back seven days at most.
	old := []Row{row("d8", 8*24*time.Hour), row("d9", 9*24*time.Hour)}
	if shown, _ := Visible(ShowRecent, now, old, time.Time{}, nil); len(shown) != 0 {
		t.Errorf("recent showed %v", ids(shown))
	}
	// recent ranks by modification whatever the order given.
	shuffled := []Row{row("d2", 48*time.Hour), row("d6", 6*24*time.Hour), row("h12", 12*time.Hour)}
	if shown, _ := Visible(ShowRecent, now, shuffled, time.Time{}, nil); !slices.Equal(ids(shown), []string{"d2", "h12"}) {
		t.Errorf("recent showed %v", ids(shown))
	}
}

func TestModeChange(t *testing.T) {
	now := base
	rows := []Row{
		{Provider: providerClaude, ID: "a", ModifiedAt: now.Add(-time.Hour)},
		{Provider: providerClaude, ID: "b", ModifiedAt: now.Add(-2 * time.Hour)},
		{Provider: providerClaude, ID: "c", ModifiedAt: now.Add(-3 * time.Hour)},
		{Provider: providerClaude, ID: "d", ModifiedAt: now.Add(-72 * time.Hour)},
	}
	shown, hidden := ModeChange(ShowNone, ShowLast24Hours, now, rows, time.Time{}, nil)
	if !slices.Equal(ids(shown), []string{"a", "b", "c"}) || hidden != nil {
		t.Errorf("none -> last24Hours: %v, %v", ids(shown), ids(hidden))
	}
	shown, hidden = ModeChange(ShowLast24Hours, ShowRecent, now, rows, time.Time{}, nil)
	if shown != nil || !slices.Equal(ids(hidden), []string{"c"}) {
		t.Errorf("last24Hours -> recent: %v, %v", ids(shown), ids(hidden))
	}
	shown, hidden = ModeChange(ShowRecent, ShowLast7Days, now, rows, time.Time{}, nil)
	if !slices.Equal(ids(shown), []string{"c", "d"}) || hidden != nil {
		t.Errorf("recent -> last7Days: %v, %v", ids(shown), ids(hidden))
	}
	shown, hidden = ModeChange(ShowLast7Days, ShowNone, now, rows, time.Time{}, nil)
	if shown != nil || len(hidden) != 4 {
		t.Errorf("last7Days -> none: %v, %v", ids(shown), ids(hidden))
	}
}

func TestOwnCutoff(t *testing.T) {
	if !OwnCutoff(nil).IsZero() || !OwnCutoff([]time.Time{base}).IsZero() {
		t.Error("fewer than two sessions should have no cut-off")
	}
	got := OwnCutoff([]time.Time{base, base.Add(3 * time.Hour), base.Add(time.Hour), base.Add(2 * time.Hour)})
	if !got.Equal(base.Add(2 * time.Hour)) {
		t.Errorf("cut-off %v", got)
	}
	if m, ok := ParseMode("last7Days"); !ok || m != ShowLast7Days {
		t.Error("last7Days")
	}
	if m, ok := ParseMode("always"); ok || m != ShowNone {
		t.Error("unknown mode")
	}
}

func TestSeek(t *testing.T) {
	rows := []Row{
		{Provider: "claude", ID: "c", ModifiedAt: base.Add(3 * time.Hour)},
		{Provider: "claude", ID: "a", ModifiedAt: base.Add(2 * time.Hour)},
		{Provider: "claude", ID: "b", ModifiedAt: base.Add(2 * time.Hour)},
		{Provider: "claude", ID: "d", ModifiedAt: base.Add(time.Hour)},
	}
	for _, tc := range []struct {
		after Row
		want  int
	}{
		{rows[0], 1},
		{rows[1], 2},
		{rows[3], 4},
		{Row{Provider: "claude", ID: "gone", ModifiedAt: base.Add(2 * time.Hour)}, 3},
		{Row{Provider: "claude", ID: "new", ModifiedAt: base.Add(9 * time.Hour)}, 0},
	} {
		if got := Seek(rows, &tc.after); got != tc.want {
			t.Errorf("Seek after %s = %d, want %d", tc.after.ID, got, tc.want)
		}
	}
}
