package automations

import (
	"testing"
	"time"
)

// BenchmarkLatest is the catch-up after ahpd was down for 90 days with a
// schedule every minute in Europe/Berlin (about 130,000 occurrences
// missed, across the spring-forward of 2030-03-31): Latest finds the
// last of them without visiting the others, so the work of a catch-up
// does not grow with the time ahpd was down. ns/call is one Latest.
func BenchmarkLatest(b *testing.B) {
	s, err := ParseSchedule("* * * * *", "Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	// To 30 s past a minute, so that the answer is not to itself.
	to := time.Date(2030, 5, 20, 9, 41, 30, 0, time.UTC)
	from := to.Add(-90 * 24 * time.Hour)
	want := time.Date(2030, 5, 20, 9, 41, 0, 0, time.UTC)
	var got time.Time
	for b.Loop() {
		got = s.Latest(from, to)
	}
	if !got.Equal(want) {
		b.Fatalf("Latest(%s, %s) = %s, want %s", from, to, got, want)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/call")
}
