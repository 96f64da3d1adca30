package automations

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// maxExpression bounds a cron expression and a time zone name: a longer
// one is refused, never parsed.
const maxExpression = 200

// Schedule is a parsed schedule trigger: the occurrences of a cron
// expression in a time zone.
//
// Occurrences are wall-clock times of the zone, each matching wall time
// run once, at one instant:
//
//   - a wall time the zone has once runs then;
//   - a wall time the zone skips that day (the spring-forward gap, 02:30
//     in Europe/Berlin on 2027-03-28) runs at the first instant after the
//     gap (03:00 local): every matching wall time of the gap, and the
//     first after it, are that one occurrence;
//   - a wall time the zone has twice (the repeated hour when clocks go
//     back, 02:30 in Europe/Berlin on 2026-10-25) runs at its first
//     occurrence only: "*/15 * * * *" runs 4 times in that hour, not 8.
//
// So an occurrence is never missed and never doubled by a clock change,
// and Next and Prev agree on the one list of instants.
type Schedule struct {
	cron *cronSpec
	loc  *time.Location
}

// ParseSchedule parses an AHP schedule: five cron fields (minute, hour,
// day of month, month, day of week) read in the IANA time zone tz. As an
// ahpd extension, six fields put a seconds field first. Macros (@daily),
// CRON_TZ= prefixes and Quartz extensions are refused, as AHP says, and
// so is an expression that matches no date at all.
func ParseSchedule(expr, tz string) (*Schedule, error) {
	if len(expr) > maxExpression {
		return nil, fmt.Errorf("cron expression is %d bytes; at most %d", len(expr), maxExpression)
	}
	if len(tz) > maxExpression {
		return nil, fmt.Errorf("time zone name is %d bytes; at most %d", len(tz), maxExpression)
	}
	if tz == "" {
		return nil, fmt.Errorf("schedule has no time zone: name one such as \"UTC\" or \"Europe/Berlin\"")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.EqualFold(tz, "local") {
		return nil, fmt.Errorf("unknown time zone %s: use an IANA name such as \"UTC\" or \"Europe/Berlin\"", protocol.Quote(tz))
	}
	fields := strings.Fields(expr)
	if len(fields) != 5 && len(fields) != 6 {
		return nil, fmt.Errorf("cron expression %s has %d fields; want 5 (minute hour day-of-month month day-of-week), or 6 with seconds first", protocol.Quote(expr), len(fields))
	}
	for _, f := range fields {
		if strings.ContainsAny(f, "@?LW#=") {
			return nil, fmt.Errorf("cron expression %s: field %s uses syntax AHP does not have (no macros, ?, L, W or #)", protocol.Quote(expr), protocol.Quote(f))
		}
	}
	c, err := parseCron(fields)
	if err != nil {
		return nil, fmt.Errorf("cron expression %s: %w", protocol.Quote(expr), err)
	}
	if !c.comesRound() {
		return nil, fmt.Errorf("cron expression %s never comes round", protocol.Quote(expr))
	}
	return &Schedule{cron: c, loc: loc}, nil
}

// Next returns the first occurrence strictly after t, or the zero time
// when there is none within nine years.
func (s *Schedule) Next(t time.Time) time.Time {
	// Occurrences fall on whole seconds, so after t is after its second
	// (Unix rounds towards the past).
	w, ok := s.cron.firstFrom(time.Unix(s.after(t.Unix()), 0).UTC())
	if !ok {
		return time.Time{}
	}
	return time.Unix(s.instant(w.Unix()), 0).In(s.loc)
}

// Prev returns the last occurrence strictly before t, or the zero time
// when there is none within nine years.
func (s *Schedule) Prev(t time.Time) time.Time {
	u := t.Unix()
	if t.Equal(time.Unix(u, 0)) {
		u-- // t is on a second, maybe an occurrence's: strictly before it
	}
	return s.atOrBefore(u)
}

// Latest returns the last occurrence after from and not after to, or the
// zero time when there is none: the one a catch-up runs.
func (s *Schedule) Latest(from, to time.Time) time.Time {
	t := s.atOrBefore(to.Unix())
	if t.IsZero() || !t.After(from) {
		return time.Time{}
	}
	return t
}

// atOrBefore is the last occurrence at or before the second u.
func (s *Schedule) atOrBefore(u int64) time.Time {
	w, ok := s.cron.lastUpTo(time.Unix(s.after(u)-1, 0).UTC())
	if !ok {
		return time.Time{}
	}
	return time.Unix(s.instant(w.Unix()), 0).In(s.loc)
}

// The zone arithmetic below holds wall times as "local seconds": the
// seconds since 1970-01-01 00:00:00 of the zone's clock, what Unix() of
// the wall time read as UTC is. An instant x reads wall x+offset(x); the
// instant of a wall time w, instant(w), is the first x that reads w, or,
// when none does (a gap), the first instant after the gap. instant is
// non-decreasing in w, which is what makes the rule above a list.

// period is a stretch of instants [start, end) with one UTC offset.
type period struct{ start, end, off int64 }

// wallStart and wallEnd are the walls the period reads, [wallStart, wallEnd).
func (p period) wallStart() int64 { return sat(p.start, p.off) }
func (p period) wallEnd() int64   { return sat(p.end, p.off) }

func sat(a, b int64) int64 {
	if a == math.MinInt64 || a == math.MaxInt64 {
		return a
	}
	return a + b
}

// reach bounds how far apart an instant and its wall time can be (UTC
// offsets run from about -16 to +16 hours, counting old local mean times),
// with room for the day some zones skipped or repeated.
const reach = 2 * 24 * 3600

// periods returns the zone's periods that hold an instant within reach
// of u, in order.
func (s *Schedule) periods(u int64) []period {
	var out []period
	x := u - reach
	for range 64 { // bounded: no zone changes offset 64 times in four days
		p := s.periodOf(x)
		out = append(out, p)
		if p.end == math.MaxInt64 || p.end > u+reach || p.end <= x {
			break
		}
		x = p.end
	}
	return out
}

// instant is the instant of wall time w (local seconds).
func (s *Schedule) instant(w int64) int64 {
	ps := s.periods(w)
	for _, p := range ps {
		if x := w - p.off; x >= p.start && x < p.end {
			return x // the first period that reads w: its first occurrence
		}
	}
	for _, p := range ps {
		if p.wallStart() > w {
			return p.start // w is in a gap: the first instant after it
		}
	}
	return w - ps[len(ps)-1].off // not reached for a zone as Go reads them
}

// after is the first wall time (local seconds) whose instant is after
// the second u: every wall time before it has come by u, every one from
// it on comes after.
//
// It is the wall of the second after u, but when u is in the second pass
// of a repeated hour, the walls still to come in that pass ran in the
// first, so it is the end of the repeat. (When u+1 starts a period after
// a gap, the wall of u plus one is where the gap starts, and the gap's
// walls come at u+1: that needs no case of its own.)
func (s *Schedule) after(u int64) int64 {
	w := sat(u, s.periodOf(u).off) + 1
	for range 64 { // bounded: one step per earlier period that reads w
		x := s.instant(w)
		if x > u {
			return w
		}
		// An earlier period reads w, before u: so it does every wall up
		// to its end.
		w = max(w+1, s.periodOf(x).wallEnd())
	}
	return w
}

// periodOf is the period holding instant x.
func (s *Schedule) periodOf(x int64) period {
	t := time.Unix(x, 0).In(s.loc)
	_, off := t.Zone()
	start, end := t.ZoneBounds()
	p := period{start: math.MinInt64, end: math.MaxInt64, off: int64(off)}
	if !start.IsZero() {
		p.start = start.Unix()
	}
	if !end.IsZero() {
		p.end = end.Unix()
	}
	return p
}
