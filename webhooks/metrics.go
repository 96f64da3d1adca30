package webhooks

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the dispatcher's, labelled by webhook name (the config's
// names: a bounded set). The host serves them on /metrics with its own:
// a Dispatcher is a prometheus.Collector.
type metrics struct {
	deliveries *prometheus.CounterVec   // webhook, result: delivered, failed, dropped
	attempts   *prometheus.CounterVec   // webhook, result: ok, failed
	seconds    *prometheus.HistogramVec // webhook
	waiting    *prometheus.GaugeVec     // webhook
}

func newMetrics(hooks []*hook) *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahpd_webhook_deliveries_total",
			Help: "Deliveries of events to webhooks that ended, by result: delivered, failed (given up after retrying), dropped (too many waited).",
		}, []string{"webhook", "result"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahpd_webhook_attempts_total",
			Help: "Attempts to deliver to webhooks, by result: ok (a 2xx) or failed (another status, a timeout, a connection that failed).",
		}, []string{"webhook", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ahpd_webhook_attempt_seconds",
			Help:    "How long each attempt to deliver to a webhook took, failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 8), // 5 ms to 82 s
		}, []string{"webhook"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ahpd_webhook_pending",
			Help: "Deliveries to webhooks waiting or under way.",
		}, []string{"webhook"}),
	}
	for _, h := range hooks {
		for _, r := range []string{StatusDelivered, StatusFailed, StatusDropped} {
			m.deliveries.WithLabelValues(h.w.Name, r)
		}
		m.attempts.WithLabelValues(h.w.Name, "ok")
		m.attempts.WithLabelValues(h.w.Name, "failed")
		m.seconds.WithLabelValues(h.w.Name)
		m.waiting.WithLabelValues(h.w.Name).Set(0)
	}
	return m
}

func (m *metrics) finished(h *hook, status string) {
	m.deliveries.WithLabelValues(h.w.Name, status).Inc()
}

func (m *metrics) attempted(h *hook, took time.Duration, ok bool) {
	result := "failed"
	if ok {
		result = "ok"
	}
	m.attempts.WithLabelValues(h.w.Name, result).Inc()
	m.seconds.WithLabelValues(h.w.Name).Observe(took.Seconds())
}

// pending sets h's gauge. Called with the dispatcher's lock held.
func (m *metrics) pending(h *hook) {
	m.waiting.WithLabelValues(h.w.Name).Set(float64(h.waiting + h.inflight))
}

// Describe is prometheus.Collector's.
func (d *Dispatcher) Describe(ch chan<- *prometheus.Desc) {
	d.m.deliveries.Describe(ch)
	d.m.attempts.Describe(ch)
	d.m.seconds.Describe(ch)
	d.m.waiting.Describe(ch)
}

// Collect is prometheus.Collector's.
func (d *Dispatcher) Collect(ch chan<- prometheus.Metric) {
	d.m.deliveries.Collect(ch)
	d.m.attempts.Collect(ch)
	d.m.seconds.Collect(ch)
	d.m.waiting.Collect(ch)
}
