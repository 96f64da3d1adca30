package automations

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// This file is ahpd's own cron grammar: what a field may say, and which
// wall-clock times (in no particular zone) an expression matches. Turning
// those wall times into instants of a time zone is schedule.go's.

// set is a set of small numbers (0-63), one bit each.
type set uint64

func (s set) has(n int) bool { return n >= 0 && n < 64 && s&(1<<n) != 0 }

// from is the least member >= n, or -1.
func (s set) from(n int) int {
	if n < 0 {
		n = 0
	}
	if n > 63 {
		return -1
	}
	r := s >> n
	if r == 0 {
		return -1
	}
	return n + bits.TrailingZeros64(uint64(r))
}

// upTo is the greatest member <= n, or -1.
func (s set) upTo(n int) int {
	if n < 0 {
		return -1
	}
	if n < 63 {
		s &= 1<<(n+1) - 1
	}
	if s == 0 {
		return -1
	}
	return 63 - bits.LeadingZeros64(uint64(s))
}

// fieldSpec is what one field of an expression may hold.
type fieldSpec struct {
	name     string
	min, max int            // what a number may be
	starMax  int            // what * and a/n stop at (day of week: 6, though 7 may be named)
	names    map[string]int // month or weekday names, upper case
}

var (
	monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}
	dayNames   = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

	secondField = fieldSpec{name: "second", min: 0, max: 59, starMax: 59}
	minuteField = fieldSpec{name: "minute", min: 0, max: 59, starMax: 59}
	hourField   = fieldSpec{name: "hour", min: 0, max: 23, starMax: 23}
	domField    = fieldSpec{name: "day of month", min: 1, max: 31, starMax: 31}
	monthField  = fieldSpec{name: "month", min: 1, max: 12, starMax: 12, names: monthNames}
	dowField    = fieldSpec{name: "day of week", min: 0, max: 7, starMax: 6, names: dayNames}
)

// cronSpec is a parsed expression: the wall times it matches.
type cronSpec struct {
	second, minute, hour, dom, month, dow set
	// domStar and dowStar say the field was written * (or */1): only then
	// is it left out of the day rule. When both are restricted a day
	// matches either, as cron has always done ("0 0 1 * MON" is the 1st
	// and every Monday); when one is *, the other alone decides.
	domStar, dowStar bool
}

// parseCron parses the fields of an expression: five, or six with
// seconds first. The caller has counted them and refused what AHP does
// not have (macros, ?, L, W, #).
func parseCron(fields []string) (*cronSpec, error) {
	c := &cronSpec{second: 1} // five fields: at second 0
	specs := []fieldSpec{minuteField, hourField, domField, monthField, dowField}
	targets := []*set{&c.minute, &c.hour, &c.dom, &c.month, &c.dow}
	if len(fields) == 6 {
		specs = append([]fieldSpec{secondField}, specs...)
		targets = append([]*set{&c.second}, targets...)
	}
	for i, f := range fields {
		s, star, err := parseField(f, specs[i])
		if err != nil {
			return nil, err
		}
		*targets[i] = s
		switch specs[i].name {
		case domField.name:
			c.domStar = star
		case dowField.name:
			c.dowStar = star
		}
	}
	if c.dow.has(7) { // 7 is Sunday too
		c.dow = c.dow&^(1<<7) | 1
	}
	return c, nil
}

// parseField parses one field: a comma-separated list of terms, each *,
// a number or name, or a range a-b, optionally stepped (/n); a/n runs
// from a to the field's end. star says a term was * or */1.
func parseField(field string, spec fieldSpec) (set, bool, error) {
	var out set
	star := false
	for term := range strings.SplitSeq(field, ",") {
		rng, stepText, hasStep := strings.Cut(term, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, false, fmt.Errorf("%s: step %s is not a positive whole number", spec.name, protocol.Quote(stepText))
			}
			step = n
		}
		var lo, hi int
		switch {
		case rng == "*":
			lo, hi = spec.min, spec.starMax
			if step == 1 {
				star = true
			}
		default:
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if lo, err = spec.value(a); err != nil {
				return 0, false, err
			}
			switch {
			case isRange:
				if hi, err = spec.value(b); err != nil {
					return 0, false, err
				}
				if lo > hi {
					return 0, false, fmt.Errorf("%s: range %s runs backwards", spec.name, protocol.Quote(rng))
				}
			case hasStep:
				hi = max(lo, spec.starMax)
			default:
				hi = lo
			}
		}
		for v := lo; v <= hi; v += step {
			out |= 1 << v
		}
	}
	return out, star, nil
}

// value reads a number or a name of the field, within its bounds.
func (spec fieldSpec) value(text string) (int, error) {
	if n, ok := spec.names[strings.ToUpper(text)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(text)
	if err != nil || strings.HasPrefix(text, "+") {
		if spec.names != nil {
			return 0, fmt.Errorf("%s: %s is neither a number nor a name", spec.name, protocol.Quote(text))
		}
		return 0, fmt.Errorf("%s: %s is not a number", spec.name, protocol.Quote(text))
	}
	if n < spec.min || n > spec.max {
		return 0, fmt.Errorf("%s: %d is not within %d-%d", spec.name, n, spec.min, spec.max)
	}
	return n, nil
}

// dayMatches says whether the expression's day rule takes this date.
func (c *cronSpec) dayMatches(month time.Month, day int, wd time.Weekday) bool {
	if !c.month.has(int(month)) {
		return false
	}
	d, w := c.dom.has(day), c.dow.has(int(wd))
	if c.domStar || c.dowStar {
		return d && w
	}
	return d || w
}

// comesRound says whether some date matches at all: only a day of month
// that no month of the expression has ("0 0 30 2 *") never does, since a
// restricted day of week matches every month.
func (c *cronSpec) comesRound() bool {
	if !c.dowStar && !c.domStar {
		return true // either: the weekdays come every month
	}
	if c.dow == 0 {
		return false
	}
	if c.domStar {
		return true
	}
	longest := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if c.month.has(m) && c.dom.upTo(longest[m]) >= 1 {
			return true
		}
	}
	return false
}

// The wall-time search below works on civil times held as time.Time in
// UTC: UTC has no gaps or repeats, so adding a day or a second is plain
// arithmetic there. searchYears bounds it: the rarest date an expression
// may match, 29 February, can be eight years from the last (2096, 2104).
const searchYears = 9

// firstFrom is the first wall time at or after w (whole seconds) that the
// expression matches, and whether there is one within searchYears.
func (c *cronSpec) firstFrom(w time.Time) (time.Time, bool) {
	end := w.AddDate(searchYears, 0, 0)
	day := time.Date(w.Year(), w.Month(), w.Day(), 0, 0, 0, 0, time.UTC)
	h, m, s := w.Hour(), w.Minute(), w.Second()
	for !day.After(end) {
		if !c.month.has(int(day.Month())) {
			day = time.Date(day.Year(), day.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			h, m, s = 0, 0, 0
			continue
		}
		if c.dayMatches(day.Month(), day.Day(), day.Weekday()) {
			if hh, mm, ss, ok := c.timeFrom(h, m, s); ok {
				return day.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute + time.Duration(ss)*time.Second), true
			}
		}
		day = day.AddDate(0, 0, 1)
		h, m, s = 0, 0, 0
	}
	return time.Time{}, false
}

// timeFrom is the first time of day at or after h:m:s the expression has.
func (c *cronSpec) timeFrom(h, m, s int) (int, int, int, bool) {
	for hh := c.hour.from(h); hh >= 0; hh = c.hour.from(hh + 1) {
		m0 := 0
		if hh == h {
			m0 = m
		}
		for mm := c.minute.from(m0); mm >= 0; mm = c.minute.from(mm + 1) {
			s0 := 0
			if hh == h && mm == m {
				s0 = s
			}
			if ss := c.second.from(s0); ss >= 0 {
				return hh, mm, ss, true
			}
		}
	}
	return 0, 0, 0, false
}

// lastUpTo is the last wall time at or before w that the expression
// matches, and whether there is one within searchYears.
func (c *cronSpec) lastUpTo(w time.Time) (time.Time, bool) {
	end := w.AddDate(-searchYears, 0, 0)
	day := time.Date(w.Year(), w.Month(), w.Day(), 0, 0, 0, 0, time.UTC)
	h, m, s := w.Hour(), w.Minute(), w.Second()
	for !day.Before(end) {
		if !c.month.has(int(day.Month())) {
			day = time.Date(day.Year(), day.Month(), 0, 0, 0, 0, 0, time.UTC) // the last of the month before
			h, m, s = 23, 59, 59
			continue
		}
		if c.dayMatches(day.Month(), day.Day(), day.Weekday()) {
			if hh, mm, ss, ok := c.timeUpTo(h, m, s); ok {
				return day.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute + time.Duration(ss)*time.Second), true
			}
		}
		day = day.AddDate(0, 0, -1)
		h, m, s = 23, 59, 59
	}
	return time.Time{}, false
}

// timeUpTo is the last time of day at or before h:m:s the expression has.
func (c *cronSpec) timeUpTo(h, m, s int) (int, int, int, bool) {
	for hh := c.hour.upTo(h); hh >= 0; hh = c.hour.upTo(hh - 1) {
		m0 := 59
		if hh == h {
			m0 = m
		}
		for mm := c.minute.upTo(m0); mm >= 0; mm = c.minute.upTo(mm - 1) {
			s0 := 59
			if hh == h && mm == m {
				s0 = s
			}
			if ss := c.second.upTo(s0); ss >= 0 {
				return hh, mm, ss, true
			}
		}
	}
	return 0, 0, 0, false
}
