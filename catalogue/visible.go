package catalogue

import (
	"time"
)

// A row whose session this host never ran is external: a transcript a
// backend's CLI wrote on its own. The root config key showExternalSessions
// says which external rows a listing shows, as VS Code's agent host
// decides it. The host's own sessions are listed whatever the mode, from
// its own registry, so these functions deal in external rows only.

// ConfigKey is the root config key that holds a Mode.
const ConfigKey = "showExternalSessions"

// Mode is a value of showExternalSessions.
type Mode string

// The modes, and the default.
const (
	ShowNone        Mode = "none"
	ShowRecent      Mode = "recent"
	ShowLast24Hours Mode = "last24Hours"
	ShowLast7Days   Mode = "last7Days"
	ShowLast30Days  Mode = "last30Days"

	DefaultMode = ShowNone
)

// Modes lists every mode, in the order a client offers them.
func Modes() []Mode {
	return []Mode{ShowNone, ShowRecent, ShowLast24Hours, ShowLast7Days, ShowLast30Days}
}

// ParseMode reads a config value. Anything else is the default, and ok
// says whether s was a mode.
func ParseMode(s string) (m Mode, ok bool) {
	for _, m := range Modes() {
		if string(m) == s {
			return m, true
		}
	}
	return DefaultMode, false
}

// window is how far back a windowed mode reaches; recent looks at most
// this far back too.
func (m Mode) window() time.Duration {
	switch m {
	case ShowLast24Hours:
		return 24 * time.Hour
	case ShowRecent, ShowLast7Days:
		return 7 * 24 * time.Hour
	case ShowLast30Days:
		return 30 * 24 * time.Hour
	}
	return 0
}

// recentCount is how many external sessions recent shows.
const recentCount = 2

// OwnCutoff computes the cut-off recent applies: the second most recent
// modification time among the host's own sessions. The host computes it
// once, at its first listing, from its sessions as they were then, and
// passes the same value to every later Visible call; with fewer than two
// sessions of its own there is no cut-off, which is the zero time.
func OwnCutoff(ownModified []time.Time) time.Time {
	var first, second time.Time
	for _, t := range ownModified {
		switch {
		case t.After(first):
			first, second = t, first
		case t.After(second):
			second = t
		}
	}
	return second
}

// Visible returns the external rows among rows that a listing shows in
// mode at now, in the order given, and how many external rows it hides
// (for the log line a listing that hid any writes).
//
// isOwn tells the rows of sessions this host runs or ran, adopted ones
// included; those are never returned, nor counted as hidden. A nil isOwn
// takes every row as external.
//
// none shows nothing. recent shows the two most recently modified rows
// of the last seven days, leaving out any modified before ownCutoff (see
// OwnCutoff; the zero time leaves out none). last24Hours, last7Days and
// last30Days show the rows modified within that window before now.
//
// recent ranks rows against each other, so rows must be the whole
// catalogue, not a page of it.
func Visible(mode Mode, now time.Time, rows []Row, ownCutoff time.Time, isOwn func(Key) bool) (shown []Row, hidden int) {
	external := func(r *Row) bool { return isOwn == nil || !isOwn(r.Key()) }
	w := mode.window()
	if w == 0 {
		for i := range rows {
			if external(&rows[i]) {
				hidden++
			}
		}
		return nil, hidden
	}
	since := now.Add(-w)
	inWindow := func(r *Row) bool {
		return !r.ModifiedAt.Before(since) && (mode != ShowRecent || !r.ModifiedAt.Before(ownCutoff))
	}
	var top [recentCount]*Row // recent's picks so far, best first
	if mode == ShowRecent {
		for i := range rows {
			r := &rows[i]
			if !external(r) || !inWindow(r) {
				continue
			}
			for j := range top {
				if top[j] == nil || Compare(r, top[j]) < 0 {
					copy(top[j+1:], top[j:])
					top[j] = r
					break
				}
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		if !external(r) {
			continue
		}
		show := inWindow(r)
		if mode == ShowRecent {
			show = r == top[0] || r == top[1]
		}
		if show {
			shown = append(shown, *r)
		} else {
			hidden++
		}
	}
	return shown, hidden
}

// ModeChange returns what a change of mode from old to next shows that
// was hidden, and hides that was shown, so the host can tell every client
// root/sessionAdded and root/sessionRemoved. The arguments are Visible's.
func ModeChange(old, next Mode, now time.Time, rows []Row, ownCutoff time.Time, isOwn func(Key) bool) (nowShown, noLongerShown []Row) {
	before, _ := Visible(old, now, rows, ownCutoff, isOwn)
	after, _ := Visible(next, now, rows, ownCutoff, isOwn)
	return DiffShown(before, after)
}

// DiffShown compares two sets of shown rows by key. The host uses it
// after a catalogue change too: under recent, a row that becomes one of
// the two most recent pushes another out.
func DiffShown(before, after []Row) (nowShown, noLongerShown []Row) {
	had := make(map[Key]bool, len(before))
	for i := range before {
		had[before[i].Key()] = true
	}
	has := make(map[Key]bool, len(after))
	for i := range after {
		k := after[i].Key()
		has[k] = true
		if !had[k] {
			nowShown = append(nowShown, after[i])
		}
	}
	for i := range before {
		if !has[before[i].Key()] {
			noLongerShown = append(noLongerShown, before[i])
		}
	}
	return nowShown, noLongerShown
}
