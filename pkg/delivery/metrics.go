package delivery

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a dispatcher's Prometheus metrics; every series carries its lane.
type Metrics struct {
	batches       *prometheus.CounterVec
	messages      *prometheus.CounterVec
	sendSeconds   *prometheus.HistogramVec
	claimSize     *prometheus.HistogramVec
	flushSeconds  *prometheus.HistogramVec
	flushFailures *prometheus.CounterVec
	leaseReclaims *prometheus.CounterVec
	backlog       *prometheus.GaugeVec
	inFlight      *prometheus.GaugeVec
	reportFolded  prometheus.Counter
	reportPending prometheus.Gauge
	// marketingPaused and spamLimits are by number (phone number id).
	marketingPaused *prometheus.GaugeVec
	spamLimits      *prometheus.CounterVec
	heldReleased    prometheus.Counter
}

// NewMetrics registers the dispatcher metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_batches_total",
			Help: "Batches taken from the stream, by result: expanded, redelivered (already expanded), failed (could not be expanded), rejected (undecodable), retried (transient error).",
		}, []string{"lane", "result"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_messages_total",
			Help: "Message outcomes: sent, retry, failed, skipped_opt_out, deferred, released, hold (held by the template or the messaging limit), paced (waits for the pair rate).",
		}, []string{"lane", "outcome"}),
		sendSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_delivery_send_seconds",
			Help:    "Latency of one provider call.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"lane"}),
		claimSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_delivery_claim_size",
			Help:    "Messages taken by one claim.",
			Buckets: []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}, []string{"lane"}),
		flushSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_delivery_record_flush_seconds",
			Help:    "Latency of one recorder flush (outcomes, early statuses and batch completion in one transaction).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"lane"}),
		flushFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_record_flush_failures_total",
			Help: "Recorder flushes that failed and were retried (outcomes are kept until one succeeds).",
		}, []string{"lane"}),
		leaseReclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_lease_reclaims_total",
			Help: "Claims older than the lease returned to the queue (their dispatcher died or stalled).",
		}, []string{"lane"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "parley_delivery_backlog_messages",
			Help: "Messages of the lane not yet sent: queued, scheduled or deferred (due or not).",
		}, []string{"lane"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "parley_delivery_in_flight_messages",
			Help: "Messages claimed by this process and not yet recorded.",
		}, []string{"lane"}),
		reportFolded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_report_deltas_folded_total",
			Help: "Report counter rows folded into report_hours by this process's sweeps.",
		}),
		reportPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_report_deltas_pending",
			Help: "Report counter rows not folded yet after this process's last sweep (counted up to 1,000,000).",
		}),
		marketingPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "parley_delivery_marketing_paused",
			Help: "1 while a number's marketing (campaign lane) sends are paused after the provider's 131048 (spam rate limit), as this process last read it.",
		}, []string{"phone_number_id"}),
		spamLimits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_spam_rate_limits_total",
			Help: "The provider's 131048 (spam rate limit) answers, by number: each pauses the number's marketing sends. Alert on any increase.",
		}, []string{"phone_number_id"}),
		heldReleased: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_delivery_held_released_total",
			Help: "Messages held for the messaging limit sent again by this process's sweeps once room came.",
		}),
	}
	for _, c := range []prometheus.Collector{m.batches, m.messages, m.sendSeconds, m.claimSize, m.flushSeconds,
		m.flushFailures, m.leaseReclaims, m.backlog, m.inFlight, m.reportFolded, m.reportPending,
		m.marketingPaused, m.spamLimits, m.heldReleased} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
