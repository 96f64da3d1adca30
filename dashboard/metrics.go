package dashboard

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the dashboard's own: what it refused, by why. The daemon
// serves them with the host's (host.Options.Collectors). A nil *Metrics
// counts nothing.
type Metrics struct {
	refused *prometheus.CounterVec
}

// The reasons a refusal is counted under.
const (
	refusedToken     = "token"      // a sign-in with a token the host does not take
	refusedLogins    = "logins"     // a sign-in the logins table had no room for
	refusedLivePages = "live_pages" // a live page past its person's or login's budget
)

// NewMetrics returns the dashboard's metrics, none counted yet.
func NewMetrics() *Metrics {
	m := &Metrics{refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ahpd_dashboard_refused_total",
		Help: "Dashboard requests refused, by reason: token (a sign-in with a token the host does not take), logins (every login the host keeps is another person's), live_pages (a person's or a login's live pages all open).",
	}, []string{"reason"})}
	for _, r := range []string{refusedToken, refusedLogins, refusedLivePages} {
		m.refused.WithLabelValues(r) // shown at 0 before the first
	}
	return m
}

// Collector is what a registry collects of them.
func (m *Metrics) Collector() prometheus.Collector { return m.refused }

func (m *Metrics) refuse(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}
