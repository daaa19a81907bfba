package whatsappsim

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the simulator's Prometheus series. The counters never go
// back (Reset clears the Stats, not these), as Prometheus expects.
type metrics struct {
	requests       prometheus.Counter
	sends          prometheus.Counter
	hung           prometheus.Counter
	errors         *prometheus.CounterVec
	byCode         map[int]prometheus.Counter
	callbackPosts  *prometheus.CounterVec
	callbackStatus *prometheus.CounterVec
	callbackDrops  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_provider_sim_requests_total", Help: "Send requests received.",
		}),
		sends: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_provider_sim_sends_total", Help: "Sends accepted (answered 200 with a wamid).",
		}),
		hung: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_provider_sim_timeouts_total", Help: "Sends held without an answer (simulated timeouts).",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_provider_sim_errors_total", Help: "Error answers by Cloud API error code.",
		}, []string{"code"}),
		callbackPosts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_provider_sim_callback_posts_total", Help: "Status webhook POSTs by result (ok, error).",
		}, []string{"result"}),
		callbackStatus: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_provider_sim_callback_statuses_total", Help: "Statuses delivered to the webhook receiver, by status.",
		}, []string{"status"}),
		callbackDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_provider_sim_callback_drops_total", Help: "Statuses dropped, by reason (queue_full, gave_up).",
		}, []string{"reason"}),
	}
	// Resolve the label values the hot path uses once.
	m.byCode = make(map[int]prometheus.Counter, len(codesAnswered))
	for _, c := range codesAnswered {
		m.byCode[c] = m.errors.WithLabelValues(strconv.Itoa(c))
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.sends, m.hung, m.errors, m.callbackPosts, m.callbackStatus, m.callbackDrops} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("whatsappsim: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) errorCode(code int) {
	if c, ok := m.byCode[code]; ok {
		c.Inc()
		return
	}
	m.errors.WithLabelValues(strconv.Itoa(code)).Inc()
}

// registerQueue exposes the callback queue's length as a gauge.
func (m *metrics) registerQueue(reg prometheus.Registerer, length func() int) error {
	if reg == nil {
		return nil
	}
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "parley_provider_sim_callback_queue", Help: "Statuses waiting to be posted.",
	}, func() float64 { return float64(length()) })); err != nil {
		return fmt.Errorf("whatsappsim: register metrics: %w", err)
	}
	return nil
}
