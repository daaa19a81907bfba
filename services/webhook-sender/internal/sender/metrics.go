package sender

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the sender's Prometheus metrics.
type Metrics struct {
	relayed       prometheus.Counter
	relayFailures prometheus.Counter
	fannedOut     *prometheus.CounterVec
	deliveries    *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	oldestOutbox  prometheus.Gauge
	oldestPending prometheus.Gauge
	pending       prometheus.Gauge
	disabled      prometheus.Counter
	flushFailures prometheus.Counter
}

// NewMetrics registers the sender's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		relayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_webhooks_events_relayed_total",
			Help: "Events moved from the outbox to the EVENTS stream (acked by JetStream)."}),
		relayFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_webhooks_relay_failures_total",
			Help: "Relay passes that failed (PostgreSQL or NATS unavailable); retried."}),
		fannedOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_webhooks_events_fanned_out_total",
			Help: "Events taken from the stream, by result: delivered (one delivery per subscribed endpoint created), unsubscribed (no endpoint wants it)."}, []string{"result"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_webhooks_deliveries_total",
			Help: "Delivery attempts per endpoint by outcome: succeeded, retry (failed, will be retried), failed (given up)."}, []string{"endpoint", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "parley_webhooks_attempt_seconds",
			Help:    "Duration of delivery attempts per endpoint.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"endpoint"}),
		oldestOutbox: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_webhooks_oldest_outbox_event_seconds",
			Help: "Age of the oldest event not yet relayed to the stream (0 when none)."}),
		oldestPending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_webhooks_oldest_pending_delivery_seconds",
			Help: "Age of the oldest pending delivery, from when it was queued (0 when none)."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_webhooks_pending_deliveries",
			Help: "Deliveries pending (waiting, in flight or to be retried)."}),
		disabled: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_webhooks_endpoints_disabled_total",
			Help: "Endpoints the sender disabled because they kept failing."}),
		flushFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_webhooks_record_flush_failures_total",
			Help: "Failed writes of attempt outcomes; retried."}),
	}
	for _, c := range []prometheus.Collector{m.relayed, m.relayFailures, m.fannedOut, m.deliveries, m.latency,
		m.oldestOutbox, m.oldestPending, m.pending, m.disabled, m.flushFailures} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
