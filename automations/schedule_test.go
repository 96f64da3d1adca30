package automations

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func mustSchedule(t *testing.T, expr, tz string) *Schedule {
	t.Helper()
	s, err := ParseSchedule(expr, tz)
	if err != nil {
		t.Fatalf("%s in %s: %v", expr, tz, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// occurrences lists s's occurrences in [from, to) by Next.
func occurrences(s *Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	for t := s.Next(from.Add(-time.Nanosecond)); !t.IsZero() && t.Before(to); t = s.Next(t) {
		out = append(out, t)
	}
	return out
}

// occurrencesBack lists them by Prev, from to back to from, oldest first.
func occurrencesBack(s *Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	for t := s.Prev(to); !t.IsZero() && !t.Before(from); t = s.Prev(t) {
		out = append([]time.Time{t}, out...)
	}
	return out
}

// reference lists the occurrences in [from, to) as the rule says them,
// walking every second of the window rather than the wall times: a
// second runs when it reads a matching wall time not read before, or
// when it ends a gap in which a matching wall time was skipped.
func reference(s *Schedule, from, to time.Time) []time.Time {
	wall := func(x time.Time) time.Time {
		l := x.In(s.loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
	}
	matches := func(w time.Time) bool {
		c := s.cron
		return c.dayMatches(w.Month(), w.Day(), w.Weekday()) && c.hour.has(w.Hour()) && c.minute.has(w.Minute()) && c.second.has(w.Second())
	}
	// The latest wall read before from: that of from's second before, or
	// of the last second before a clock change of the hours before it.
	seen := wall(from.Add(-time.Second))
	for x := from.Add(-3 * time.Hour); ; {
		_, end := x.In(s.loc).ZoneBounds()
		if end.IsZero() || !end.Before(from) {
			break
		}
		if w := wall(end.Add(-time.Second)); w.After(seen) {
			seen = w
		}
		x = end
	}
	var out []time.Time
	prev := wall(from.Add(-time.Second))
	for x := from; x.Before(to); x = x.Add(time.Second) {
		w := wall(x)
		run := w.After(seen) && matches(w)
		for g := prev.Add(time.Second); !run && g.Before(w); g = g.Add(time.Second) {
			run = matches(g) // a wall the gap skipped
		}
		if run {
			out = append(out, x)
		}
		if w.After(seen) {
			seen = w
		}
		prev = w
	}
	return out
}

func stamps(ts []time.Time) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.UTC().Format("01-02T15:04:05"))
	}
	return b.String()
}

// TestScheduleAcrossDST: each matching wall time runs once; one the
// spring-forward gap skips runs as the gap ends, one the fall-back
// repeats runs at its first pass only.
func TestScheduleAcrossDST(t *testing.T) {
	for _, tc := range []struct {
		name, expr, tz string
		from, to       string // the window, UTC
		want           string // the occurrences, UTC (when few)
		count          int    // how many
	}{
		// Europe/Berlin springs forward at 01:00Z on 2027-03-28: 02:00 CET is 03:00 CEST.
		{"berlin spring 02:30", "30 2 * * *", "Europe/Berlin", "2027-03-27T00:00:00Z", "2027-03-30T00:00:00Z",
			"03-27T01:30:00 03-28T01:00:00 03-29T00:30:00", 3},
		{"berlin spring 02:00", "0 2 * * *", "Europe/Berlin", "2027-03-27T00:00:00Z", "2027-03-30T00:00:00Z",
			"03-27T01:00:00 03-28T01:00:00 03-29T00:00:00", 3},
		{"berlin spring hourly", "0 * * * *", "Europe/Berlin", "2027-03-27T23:00:00Z", "2027-03-28T03:00:00Z",
			"03-27T23:00:00 03-28T00:00:00 03-28T01:00:00 03-28T02:00:00", 4},
		{"berlin spring hourly, the day", "0 * * * *", "Europe/Berlin", "2027-03-27T23:00:00Z", "2027-03-28T22:00:00Z", "", 23},
		{"berlin spring quarters", "*/15 * * * *", "Europe/Berlin", "2027-03-28T00:30:00Z", "2027-03-28T01:30:00Z",
			"03-28T00:30:00 03-28T00:45:00 03-28T01:00:00 03-28T01:15:00", 4},
		{"berlin spring quarters, the day", "*/15 * * * *", "Europe/Berlin", "2027-03-27T23:00:00Z", "2027-03-28T22:00:00Z", "", 92},
		{"berlin spring every second", "* * * * * *", "Europe/Berlin", "2027-03-28T00:59:00Z", "2027-03-28T01:01:00Z", "", 120},
		// It falls back at 01:00Z on 2026-10-25: 03:00 CEST is 02:00 CET, 02:00-02:59 twice.
		{"berlin fall 02:30", "30 2 * * *", "Europe/Berlin", "2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z",
			"10-24T00:30:00 10-25T00:30:00 10-26T01:30:00", 3},
		{"berlin fall 02:00", "0 2 * * *", "Europe/Berlin", "2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z",
			"10-24T00:00:00 10-25T00:00:00 10-26T01:00:00", 3},
		{"berlin fall hourly", "0 * * * *", "Europe/Berlin", "2026-10-24T23:00:00Z", "2026-10-25T03:00:00Z",
			"10-24T23:00:00 10-25T00:00:00 10-25T02:00:00", 3},
		{"berlin fall hourly, the day", "0 * * * *", "Europe/Berlin", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", "", 24},
		{"berlin fall quarters, the repeat", "*/15 * * * *", "Europe/Berlin", "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z",
			"10-25T00:00:00 10-25T00:15:00 10-25T00:30:00 10-25T00:45:00", 4},
		{"berlin fall quarters, the day", "*/15 * * * *", "Europe/Berlin", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", "", 96},
		{"berlin fall every second", "* * * * * *", "Europe/Berlin", "2026-10-25T00:59:00Z", "2026-10-25T02:01:00Z", "", 120},
		// America/New_York springs forward at 07:00Z on 2027-03-14: 02:00 EST is 03:00 EDT.
		{"new york spring 02:30", "30 2 * * *", "America/New_York", "2027-03-13T00:00:00Z", "2027-03-16T00:00:00Z",
			"03-13T07:30:00 03-14T07:00:00 03-15T06:30:00", 3},
		{"new york spring 02:00", "0 2 * * *", "America/New_York", "2027-03-13T00:00:00Z", "2027-03-16T00:00:00Z",
			"03-13T07:00:00 03-14T07:00:00 03-15T06:00:00", 3},
		{"new york spring hourly", "0 * * * *", "America/New_York", "2027-03-14T05:30:00Z", "2027-03-14T08:30:00Z",
			"03-14T06:00:00 03-14T07:00:00 03-14T08:00:00", 3},
		{"new york spring quarters, the day", "*/15 * * * *", "America/New_York", "2027-03-14T05:00:00Z", "2027-03-15T04:00:00Z", "", 92},
		{"new york spring every second", "* * * * * *", "America/New_York", "2027-03-14T06:59:00Z", "2027-03-14T07:01:00Z", "", 120},
		// It falls back at 06:00Z on 2026-11-01: 02:00 EDT is 01:00 EST, 01:00-01:59 twice.
		{"new york fall 01:30", "30 1 * * *", "America/New_York", "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z",
			"10-31T05:30:00 11-01T05:30:00 11-02T06:30:00", 3},
		{"new york fall 02:30", "30 2 * * *", "America/New_York", "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z",
			"10-31T06:30:00 11-01T07:30:00 11-02T07:30:00", 3},
		{"new york fall 02:00", "0 2 * * *", "America/New_York", "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z",
			"10-31T06:00:00 11-01T07:00:00 11-02T07:00:00", 3},
		{"new york fall hourly", "0 * * * *", "America/New_York", "2026-11-01T04:30:00Z", "2026-11-01T07:30:00Z",
			"11-01T05:00:00 11-01T07:00:00", 2},
		{"new york fall quarters, the day", "*/15 * * * *", "America/New_York", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", "", 96},
		{"new york fall every second", "* * * * * *", "America/New_York", "2026-11-01T05:59:00Z", "2026-11-01T07:01:00Z", "", 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSchedule(t, tc.expr, tc.tz)
			from, to := utc(tc.from), utc(tc.to)
			got := occurrences(s, from, to)
			if len(got) != tc.count || (tc.want != "" && stamps(got) != tc.want) {
				t.Fatalf("%d occurrences %s; want %d %s", len(got), stamps(got), tc.count, tc.want)
			}
			if back := occurrencesBack(s, from, to); stamps(back) != stamps(got) {
				t.Fatalf("by Prev: %s\nby Next: %s", stamps(back), stamps(got))
			}
			if ref := reference(s, from, to); stamps(ref) != stamps(got) {
				t.Fatalf("reference: %s\nby Next:   %s", stamps(ref), stamps(got))
			}
		})
	}
}

// TestScheduleNextPrevAgree: on random times, in zones with and without
// clock changes, Next and Prev walk the one list of occurrences, and
// Latest answers the last of it.
func TestScheduleNextPrevAgree(t *testing.T) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo", "Asia/Kolkata", "Pacific/Apia", "Australia/Sydney"}
	exprs := []string{"30 2 * * *", "0 2 * * *", "0 * * * *", "*/15 * * * *", "*/7 * * * * *", "0 0 * * *", "30 1 * * 0",
		"0 9 * * MON-FRI", "0 0 1 * 1", "0 0 29 2 *", "15,45 1-3 * * *", "0 */5 1-7 * *", "59 23 31 * *"}
	// Times near the clock changes of the years around now, and anywhere.
	var near []time.Time
	for _, tz := range zones {
		loc, _ := time.LoadLocation(tz)
		for x := time.Date(2017, 1, 1, 0, 0, 0, 0, loc); x.Year() < 2032; {
			_, end := x.ZoneBounds()
			if end.IsZero() {
				break
			}
			near = append(near, end)
			x = end
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for i := range 4000 {
		tz, expr := zones[rng.IntN(len(zones))], exprs[rng.IntN(len(exprs))]
		s := mustSchedule(t, expr, tz)
		var at time.Time
		if i%2 == 0 && len(near) > 0 {
			at = near[rng.IntN(len(near))].Add(time.Duration(rng.Int64N(int64(6*time.Hour))) - 3*time.Hour)
		} else {
			at = time.Unix(lo+rng.Int64N(hi-lo), 0)
		}
		at = at.Add(time.Duration(1 + rng.IntN(int(time.Second)-1))) // never on a second: never an occurrence
		n, p := s.Next(at), s.Prev(at)
		if n.IsZero() || p.IsZero() || !n.After(at) || !p.Before(at) {
			t.Fatalf("%s in %s at %s: next %s prev %s", expr, tz, at, n, p)
		}
		if pn := s.Prev(n); !pn.Equal(p) {
			t.Fatalf("%s in %s at %s: next %s, its prev %s; want prev %s", expr, tz, at, n, pn, p)
		}
		if np := s.Next(p); !np.Equal(n) {
			t.Fatalf("%s in %s at %s: prev %s, its next %s; want next %s", expr, tz, at, p, np, n)
		}
		if l := s.Latest(p.Add(-time.Nanosecond), at); !l.Equal(p) {
			t.Fatalf("%s in %s: latest up to %s = %s, want %s", expr, tz, at, l, p)
		}
		if l := s.Latest(p, at); !l.IsZero() {
			t.Fatalf("%s in %s: latest after %s up to %s = %s, want none", expr, tz, p, at, l)
		}
		if l := s.Latest(p, n); !l.Equal(n) {
			t.Fatalf("%s in %s: latest after %s up to %s = %s, want it", expr, tz, p, n, l)
		}
	}
}

// TestScheduleAroundEveryChange checks Next against the reference in a
// window around each clock change of a few zones from 2017 to 2029,
// including São Paulo's, whose gap was at midnight (a daily 0 0 ran at
// 01:00 on those days).
func TestScheduleAroundEveryChange(t *testing.T) {
	for _, tz := range []string{"Europe/Berlin", "America/New_York", "America/Sao_Paulo", "Australia/Lord_Howe"} {
		loc, _ := time.LoadLocation(tz)
		for _, expr := range []string{"0 0 * * *", "*/20 * * * *", "30 1,2 * * *"} {
			s := mustSchedule(t, expr, tz)
			for x := time.Date(2017, 1, 1, 0, 0, 0, 0, loc); x.Year() < 2030; {
				_, end := x.ZoneBounds()
				if end.IsZero() {
					break
				}
				from, to := end.Add(-2*time.Hour), end.Add(2*time.Hour)
				if got, ref := occurrences(s, from, to), reference(s, from, to); stamps(got) != stamps(ref) {
					t.Fatalf("%s in %s around %s:\nby Next:   %s\nreference: %s", expr, tz, end, stamps(got), stamps(ref))
				}
				x = end
			}
		}
	}
}

func TestParseSchedule(t *testing.T) {
	sat := time.Date(2030, 1, 5, 12, 0, 0, 0, time.UTC) // a Saturday
	for _, tc := range []struct{ expr, tz, want string }{
		{"0 0 * * 7", "UTC", "2030-01-06T00:00:00Z"},   // 7 is Sunday
		{"0 0 * * 0", "UTC", "2030-01-06T00:00:00Z"},   // and so is 0
		{"0 0 * * 5-7", "UTC", "2030-01-06T00:00:00Z"}, // Fri-Sun
		{"0 0 * * 7/2", "UTC", "2030-01-06T00:00:00Z"}, // 7 stepping: Sunday alone
		{"0 9 * * MON", "UTC", "2030-01-07T09:00:00Z"}, // names
		{"0 9 * * mon-fri", "UTC", "2030-01-07T09:00:00Z"},
		{"0 9 * * Sat", "UTC", "2030-01-12T09:00:00Z"},
		{"0 0 1 feb *", "UTC", "2030-02-01T00:00:00Z"},
		{"0 0 1 JAN-MAR/2 *", "UTC", "2030-03-01T00:00:00Z"},
		{"30 8 * * *", "Europe/Berlin", "2030-01-06T07:30:00Z"},
		{"*/15 * * * *", "UTC", "2030-01-05T12:15:00Z"},
		{"1-59/2 * * * *", "UTC", "2030-01-05T12:01:00Z"},
		{"5/20 * * * *", "UTC", "2030-01-05T12:05:00Z"},
		{"7,3,50 12 * * *", "UTC", "2030-01-05T12:03:00Z"},
		{"0 0 1 * 1", "UTC", "2030-01-07T00:00:00Z"},      // day of month OR day of week
		{"0 0 10 * *", "UTC", "2030-01-10T00:00:00Z"},     // day of week *: the day of month alone
		{"0 0 * * 1", "UTC", "2030-01-07T00:00:00Z"},      // day of month *: the day of week alone
		{"0 0 */2 * 1", "UTC", "2030-01-07T00:00:00Z"},    // */2 restricts: OR, and the 7th is odd but Monday
		{"0 0 30 2 1", "UTC", "2030-02-04T00:00:00Z"},     // never the 30th of February, but its Mondays
		{"0 0 29 2 *", "UTC", "2032-02-29T00:00:00Z"},     // leap days
		{"*/10 * * * * *", "UTC", "2030-01-05T12:00:10Z"}, // seconds first
		{"  0   0 *  *  * ", "UTC", "2030-01-06T00:00:00Z"},
	} {
		s, err := ParseSchedule(tc.expr, tc.tz)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if got := s.Next(sat).UTC().Format(time.RFC3339); got != tc.want {
			t.Errorf("%q in %s: next = %s, want %s", tc.expr, tc.tz, got, tc.want)
		}
	}
	for _, tc := range []struct{ expr, tz, want string }{
		{"61 * * * *", "UTC", "minute: 61 is not within 0-59"},
		{"* 24 * * *", "UTC", "hour: 24 is not within 0-23"},
		{"* * 0 * *", "UTC", "day of month: 0 is not within 1-31"},
		{"* * * 13 *", "UTC", "month: 13 is not within 1-12"},
		{"* * * * 8", "UTC", "day of week: 8 is not within 0-7"},
		{"60 * * * * *", "UTC", "second: 60 is not within 0-59"},
		{"* * * *", "UTC", "has 4 fields"},
		{"* * * * * * *", "UTC", "has 7 fields"},
		{"", "UTC", "has 0 fields"},
		{"@daily", "UTC", "has 1 fields"},
		{"@every 5m * * * *", "UTC", "syntax AHP does not have"},
		{"0 0 ? * *", "UTC", "syntax AHP does not have"},
		{"0 0 L * *", "UTC", "syntax AHP does not have"},
		{"0 0 15W * *", "UTC", "syntax AHP does not have"},
		{"0 0 * * 1#2", "UTC", "syntax AHP does not have"},
		{"CRON_TZ=UTC 0 0 * *", "UTC", "syntax AHP does not have"},
		{"*/0 * * * *", "UTC", "step \"0\" is not a positive whole number"},
		{"*/x * * * *", "UTC", "step \"x\""},
		{"5-1 * * * *", "UTC", "range \"5-1\" runs backwards"},
		{"1,,2 * * * *", "UTC", "minute: \"\" is not a number"},
		{"-1 * * * *", "UTC", "minute: \"\" is not a number"},
		{"+1 * * * *", "UTC", "minute: \"+1\" is not a number"},
		{"99999999999999999999 * * * *", "UTC", "is not a number"},
		{"0 0 * JANUARY *", "UTC", "month: \"JANUARY\" is neither a number nor a name"},
		{"0 0 * * MON-XYZ", "UTC", "day of week: \"XYZ\""},
		{"0 MON * * *", "UTC", "hour: \"MON\" is not a number"},
		{"0 0 30 2 *", "UTC", "never comes round"},
		{"0 0 31 2,4,6,9,11 *", "UTC", "never comes round"},
		{"0 0 " + strings.Repeat("1,", 100) + "1 * *", "UTC", "at most 200"},
		{"0 0 * * *", strings.Repeat("A", 201), "at most 200"},
		{"0 0 * * *", "", "no time zone"},
		{"0 0 * * *", "Local", "unknown time zone"},
		{"0 0 * * *", "Mars/Olympus_Mons", "unknown time zone \"Mars/Olympus_Mons\""},
	} {
		_, err := ParseSchedule(tc.expr, tc.tz)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q in %q: err = %v, want one saying %q", tc.expr, tc.tz, err, tc.want)
		}
	}
}
