package dashboard

import (
	"testing"

	"github.com/ahpd/ahpd/automations"
)

// TestDescribeSchedule: the common cron shapes read as words, in the
// automation's zone where it matters; the rest is shown as written.
func TestDescribeSchedule(t *testing.T) {
	for _, c := range []struct{ expr, tz, want string }{
		{"*/10 * * * * *", "UTC", "every 10 seconds"},
		{"* * * * * *", "UTC", "every second"},
		{"*/1 * * * * *", "UTC", "every second"},
		{"0/15 * * * * *", "UTC", "every 15 seconds"},
		{"*/7 * * * * *", "UTC", "cron: */7 * * * * * (UTC)"}, // 56 s then 4 s: not every 7
		{"* * * * *", "UTC", "every minute"},
		{"0 * * * * *", "UTC", "every minute"},
		{"*/5 * * * *", "Europe/Berlin", "every 5 minutes"},
		{"0 */5 * * * *", "UTC", "every 5 minutes"},
		{"*/15 * * * 1-5", "UTC", "every 15 minutes on weekdays (UTC)"},
		{"15 * * * *", "UTC", "every hour at :15"},
		{"0 * * * *", "Europe/Berlin", "every hour at :00"},
		{"0,30 * * * *", "UTC", "every hour at :00 and :30"},
		{"15 * * * *", "Asia/Kolkata", "every hour at :15 (Asia/Kolkata)"},
		{"0 */6 * * *", "UTC", "every 6 hours at :00 (UTC)"},
		{"30 2 * * *", "Europe/Berlin", "at 02:30 Europe/Berlin"},
		{"0 30 2 * * *", "Europe/Berlin", "at 02:30 Europe/Berlin"},
		{"15 30 2 * * *", "UTC", "at 02:30:15 UTC"},
		{"0 9 * * 1-5", "UTC", "at 09:00 UTC on weekdays"},
		{"0 9 * * MON-FRI", "UTC", "at 09:00 UTC on weekdays"},
		{"0 2 * * mon-fri", "Europe/Berlin", "at 02:00 Europe/Berlin on weekdays"},
		{"0 10 * * 0,6", "UTC", "at 10:00 UTC on weekends"},
		{"0 10 * * SAT,7", "UTC", "at 10:00 UTC on weekends"},
		{"0 8 * * 1", "UTC", "at 08:00 UTC on Mondays"},
		{"0 8 * * 1,4", "UTC", "at 08:00 UTC on Mondays and Thursdays"},
		{"0 8 * * 1,3,5", "UTC", "at 08:00 UTC on Mondays, Wednesdays and Fridays"},
		{"0 8 * * 2-4", "UTC", "at 08:00 UTC from Tuesday to Thursday"},
		{"0 8 * * 0-6", "UTC", "at 08:00 UTC"},
		{"0 9,17 * * *", "America/New_York", "at 09:00 and 17:00 America/New_York"},
		{"0,30 9 * * *", "UTC", "at 09:00 and 09:30 UTC"},
		// The rest, as written.
		{"0 3 1 * *", "Europe/Berlin", "cron: 0 3 1 * * (Europe/Berlin)"},
		{"0 0 * JAN *", "UTC", "cron: 0 0 * JAN * (UTC)"},
		{"0 9-17 * * *", "UTC", "cron: 0 9-17 * * * (UTC)"},
		{"*/15 9-17 * * 1-5", "UTC", "cron: */15 9-17 * * 1-5 (UTC)"},
		{"30 */5 * * * *", "UTC", "cron: 30 */5 * * * * (UTC)"},
		{"30 15 * * * *", "UTC", "cron: 30 15 * * * * (UTC)"},
		{"0 8 * * */2", "UTC", "cron: 0 8 * * */2 (UTC)"},
		{"0 0,4,8,12,16,20,22 * * *", "UTC", "cron: 0 0,4,8,12,16,20,22 * * * (UTC)"},
		{"0  0 1 1 *", "", "cron: 0 0 1 1 *"},
	} {
		if _, err := automations.ParseSchedule(c.expr, c.tz); err != nil && c.tz != "" {
			t.Errorf("%q: the automations package refuses it: %v", c.expr, err)
		}
		if got := describeSchedule(c.expr, c.tz); got != c.want {
			t.Errorf("describeSchedule(%q, %q) = %q, want %q", c.expr, c.tz, got, c.want)
		}
	}
}
