package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the API's own: how long its requests took, by route and
// status. The daemon serves them with the host's (host.Options.Collectors).
type Metrics struct {
	seconds *prometheus.HistogramVec
}

// NewMetrics returns the API's metrics, none observed yet.
func NewMetrics() *Metrics {
	return &Metrics{seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ahpd_http_request_seconds",
		Help:    "How long HTTP API requests took to answer, by route and status (an event stream: how long it was open).",
		Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10), // 100 µs to 26 s
	}, []string{"route", "code"})}
}

// Collector is what a registry collects of them.
func (m *Metrics) Collector() prometheus.Collector { return m.seconds }

// instrument times h as the route's.
func (m *Metrics) instrument(route string, h http.HandlerFunc) http.HandlerFunc {
	if m == nil {
		return h
	}
	return promhttp.InstrumentHandlerDuration(m.seconds.MustCurryWith(prometheus.Labels{"route": route}), h)
}
