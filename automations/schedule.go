package automations

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/ahpd/ahpd/protocol"
)

// maxExpression bounds a cron expression and a time zone name: a longer
// one is refused, never parsed.
const maxExpression = 200

// Schedule is a parsed schedule trigger: the occurrences of a cron
// expression in a time zone.
type Schedule struct {
	spec *cron.SpecSchedule
	loc  *time.Location
}

var (
	minuteParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	secondParser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
)

// ParseSchedule parses an AHP schedule: five cron fields (minute, hour,
// day of month, month, day of week) read in the IANA time zone tz. As an
// ahpd extension, six fields put a seconds field first. Macros (@daily),
// CRON_TZ= prefixes and Quartz extensions are refused, as AHP says.
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
	parser := minuteParser
	switch len(fields) {
	case 5:
	case 6:
		parser = secondParser
	default:
		return nil, fmt.Errorf("cron expression %s has %d fields; want 5 (minute hour day-of-month month day-of-week), or 6 with seconds first", protocol.Quote(expr), len(fields))
	}
	for _, f := range fields {
		if strings.ContainsAny(f, "@?LW#=") {
			return nil, fmt.Errorf("cron expression %s: field %s uses syntax AHP does not have (no macros, ?, L, W or #)", protocol.Quote(expr), protocol.Quote(f))
		}
	}
	dow, err := sundayAsZero(fields[len(fields)-1])
	if err != nil {
		return nil, fmt.Errorf("cron expression %s: day of week: %w", protocol.Quote(expr), err)
	}
	fields[len(fields)-1] = dow
	s, err := parser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, fmt.Errorf("cron expression %s: %w", protocol.Quote(expr), err)
	}
	spec := s.(*cron.SpecSchedule)
	spec.Location = loc
	sched := &Schedule{spec: spec, loc: loc}
	if sched.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("cron expression %s never comes round", protocol.Quote(expr))
	}
	return sched, nil
}

// Next returns the first occurrence strictly after t, or the zero time
// when there is none within five years.
func (s *Schedule) Next(t time.Time) time.Time { return s.spec.Next(t) }

// Latest returns the last occurrence after from and not after to, or the
// zero time when there is none. It walks the occurrences, so it stops
// after a bound and answers the last it reached: a catch-up needs one
// missed occurrence, not all of them.
func (s *Schedule) Latest(from, to time.Time) time.Time {
	var last time.Time
	for i, t := 0, s.Next(from); i < 100000 && !t.IsZero() && !t.After(to); i, t = i+1, s.Next(t) {
		last = t
	}
	return last
}

// sundayAsZero rewrites a day-of-week field so 7 means Sunday, as AHP
// says, for a parser that knows only 0-6: a numeric term naming 7 is
// spelled out as a list.
func sundayAsZero(field string) (string, error) {
	terms := strings.Split(field, ",")
	for i, term := range terms {
		rng, step, hasStep := strings.Cut(term, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || b != 7 {
			continue // names, *, and terms without 7 are the parser's
		}
		if a < 0 || a > 7 || a > b {
			return "", fmt.Errorf("range %s is not within 0-7", protocol.Quote(term))
		}
		if hasStep && !isRange {
			b = 7 // "7/2" reads as 7-7 stepping
		}
		n := 1
		if hasStep {
			var err error
			if n, err = strconv.Atoi(step); err != nil || n < 1 {
				return "", fmt.Errorf("step %s is not a positive integer", protocol.Quote(step))
			}
		}
		var days []string
		for d := a; d <= b; d += n {
			days = append(days, strconv.Itoa(d%7))
		}
		terms[i] = strings.Join(days, ",")
	}
	return strings.Join(terms, ","), nil
}
