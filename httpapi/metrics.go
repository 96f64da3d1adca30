package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the API's own: how long its requests took, by route and
// status, and its event streams. The daemon serves them with the host's
// (host.Options.Collectors).
type Metrics struct {
	seconds        *prometheus.HistogramVec
	streams        prometheus.Gauge
	streamsRefused prometheus.Counter
}

// NewMetrics returns the API's metrics, none observed yet.
func NewMetrics() *Metrics {
	return &Metrics{
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ahpd_http_request_seconds",
			Help:    "How long HTTP API requests took to answer, by route and status (an event stream: how long it was open).",
			Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10), // 100 µs to 26 s
		}, []string{"route", "code"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ahpd_http_event_streams",
			Help: "HTTP API event streams open now.",
		}),
		streamsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ahpd_http_event_streams_refused_total",
			Help: "HTTP API event streams refused with 429: their person held as many open as one may.",
		}),
	}
}

// Collector is what a registry collects of them.
func (m *Metrics) Collector() prometheus.Collector {
	return collectors{m.seconds, m.streams, m.streamsRefused}
}

// collectors are several collected as one, so that the daemon registers
// the API's metrics by the one Collector however many there are.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// instrument times h as the route's.
func (m *Metrics) instrument(route string, h http.HandlerFunc) http.HandlerFunc {
	if m == nil {
		return h
	}
	return promhttp.InstrumentHandlerDuration(m.seconds.MustCurryWith(prometheus.Labels{"route": route}), h)
}

func (m *Metrics) streamOpened() {
	if m != nil {
		m.streams.Inc()
	}
}

func (m *Metrics) streamClosed() {
	if m != nil {
		m.streams.Dec()
	}
}

func (m *Metrics) streamRefused() {
	if m != nil {
		m.streamsRefused.Inc()
	}
}
