package dashboard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// describeSchedule says in words when a schedule trigger runs, for the
// common shapes of a cron expression (five fields, or six with seconds
// first, as package automations reads them): "every 10 seconds", "every
// 5 minutes", "every hour at :15", "every 6 hours at :00 (UTC)", "at
// 02:30 Europe/Berlin", "at 09:00 UTC on weekdays". A time of day is
// followed by its zone; an interval names its zone, in parentheses, only
// when the zone changes what it means (hours counted from the zone's
// midnight, days, or a zone whose offset is not whole hours). Any other
// expression is shown as it is, with its zone: "cron: 0 3 1 * *
// (Europe/Berlin)". The words are only ever a reading of the fields;
// what runs is what package automations makes of the expression.
func describeSchedule(expr, tz string) string {
	fields := strings.Fields(expr)
	if s, ok := scheduleWords(fields, tz); ok {
		return s
	}
	s := "cron: " + strings.Join(fields, " ")
	if tz != "" {
		s += " (" + tz + ")"
	}
	return s
}

// scheduleWords is describeSchedule for the shapes it puts in words.
func scheduleWords(fields []string, tz string) (string, bool) {
	sec := "0"
	switch len(fields) {
	case 6:
		sec, fields = fields[0], fields[1:]
	case 5:
	default:
		return "", false
	}
	minute, hour, dom, month, dow := fields[0], fields[1], fields[2], fields[3], fields[4]
	if dom != "*" || month != "*" {
		return "", false
	}
	days, ok := dayWords(dow)
	if !ok {
		return "", false
	}
	zone := func(s string, always bool) string {
		if tz == "" || !(always || days != "" || oddOffset(tz)) {
			return s
		}
		return s + " (" + tz + ")"
	}
	withDays := func(s string) string {
		if days != "" {
			s += " " + days
		}
		return s
	}
	// Every few seconds.
	if n, ok := stepEvery(sec, 60); ok {
		if cronStar(minute) && cronStar(hour) && days == "" {
			return everyN(n, "second"), true
		}
		return "", false
	}
	secs, ok := plainNumbers(sec, 0, 59)
	if !ok || len(secs) != 1 {
		return "", false
	}
	s := secs[0]
	if s != 0 && (!cronNumberList(minute) || !cronNumberList(hour)) {
		return "", false
	}
	// Every few minutes.
	if n, ok := stepEvery(minute, 60); ok {
		if !cronStar(hour) {
			return "", false
		}
		return zone(withDays(everyN(n, "minute")), false), true
	}
	mins, ok := plainNumbers(minute, 0, 59)
	if !ok {
		return "", false
	}
	past := make([]string, len(mins))
	for i, m := range mins {
		past[i] = fmt.Sprintf(":%02d", m)
	}
	// Every few hours, at some minutes past.
	if n, ok := stepEvery(hour, 24); ok && len(mins) <= 4 {
		return zone(withDays(everyN(n, "hour")+" at "+wordList(past)), n > 1), true
	}
	// At times of day.
	hours, ok := plainNumbers(hour, 0, 23)
	if !ok || len(hours)*len(mins) > 6 {
		return "", false
	}
	var times []string
	for _, h := range hours {
		for _, m := range mins {
			t := fmt.Sprintf("%02d:%02d", h, m)
			if s != 0 {
				t += fmt.Sprintf(":%02d", s)
			}
			times = append(times, t)
		}
	}
	out := "at " + wordList(times)
	if tz != "" {
		out += " " + tz
	}
	return withDays(out), true
}

// stepEvery reads a field that steps through its whole range, "*" or "*/n"
// (or "0/n"), with n dividing the range evenly: only then is it "every n"
// of the unit, and not also a short gap where the range wraps round.
func stepEvery(field string, size int) (int, bool) {
	if field == "*" {
		return 1, true
	}
	start, step, ok := strings.Cut(field, "/")
	if !ok || (start != "*" && start != "0") {
		return 0, false
	}
	n, err := strconv.Atoi(step)
	if err != nil || n < 1 || n >= size || size%n != 0 {
		return 0, false
	}
	return n, true
}

func cronStar(field string) bool { return field == "*" || field == "*/1" }

func cronNumberList(field string) bool { _, ok := plainNumbers(field, 0, 59); return ok }

// plainNumbers reads a list of plain numbers ("5", "0,30") within lo..hi,
// sorted; anything else (a range, a step, a name) is not one.
func plainNumbers(field string, lo, hi int) ([]int, bool) {
	var out []int
	for part := range strings.SplitSeq(field, ",") {
		if part == "" || strings.Trim(part, "0123456789") != "" || len(part) > 2 {
			return nil, false
		}
		n, _ := strconv.Atoi(part)
		if n < lo || n > hi {
			return nil, false
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, true
}

var weekdayNames = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// dayWords reads a day-of-week field: "" for every day, else "on
// weekdays", "on weekends", "on Mondays", "on Mondays and Thursdays",
// "from Monday to Thursday". Steps are not read.
func dayWords(field string) (string, bool) {
	if cronStar(field) {
		return "", true
	}
	var in [7]bool
	for part := range strings.SplitSeq(field, ",") {
		a, b, isRange := strings.Cut(part, "-")
		from, ok := dayNumber(a)
		if !ok {
			return "", false
		}
		to := from
		if isRange {
			if to, ok = dayNumber(b); !ok || to < from {
				return "", false
			}
		}
		for d := from; d <= to; d++ {
			in[d%7] = true
		}
	}
	// Monday first, Sunday last, as a week is read.
	var list []int
	for i := 1; i <= 7; i++ {
		if in[i%7] {
			list = append(list, i%7)
		}
	}
	switch {
	case len(list) == 7:
		return "", true
	case len(list) == 5 && !in[0] && !in[6]:
		return "on weekdays", true
	case len(list) == 2 && in[0] && in[6]:
		return "on weekends", true
	}
	// A run of three or more days in a row, Monday first.
	if len(list) >= 3 {
		first, last := (list[0]+6)%7, (list[len(list)-1]+6)%7
		if last-first == len(list)-1 {
			return "from " + weekdayNames[list[0]] + " to " + weekdayNames[list[len(list)-1]], true
		}
	}
	names := make([]string, len(list))
	for i, d := range list {
		names[i] = weekdayNames[d] + "s"
	}
	return "on " + wordList(names), true
}

var dayAbbrevs = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

// dayNumber reads one day of the week: 0-7 (both 0 and 7 Sunday) or a
// three-letter name in any case.
func dayNumber(s string) (int, bool) {
	if n, ok := dayAbbrevs[strings.ToUpper(s)]; ok {
		return n, true
	}
	if len(s) != 1 || s[0] < '0' || s[0] > '7' {
		return 0, false
	}
	return int(s[0] - '0'), true
}

// everyN is "every second", "every 10 seconds".
func everyN(n int, unit string) string {
	if n == 1 {
		return "every " + unit
	}
	return "every " + strconv.Itoa(n) + " " + unit + "s"
}

// wordList is "a", "a and b", "a, b and c".
func wordList(list []string) string {
	if len(list) <= 1 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}

// oddOffset says whether a zone's offset from UTC is not a whole number
// of hours (Asia/Kolkata, +05:30), in winter or summer: there the minutes
// past an hour are not those of UTC.
func oddOffset(tz string) bool {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return false
	}
	for _, m := range []time.Month{time.January, time.July} {
		if _, off := time.Date(2025, m, 1, 12, 0, 0, 0, loc).Zone(); off%3600 != 0 {
			return true
		}
	}
	return false
}
