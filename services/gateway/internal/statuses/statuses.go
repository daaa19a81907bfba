// Package statuses is the gateway's group commit of status callbacks: the
// webhook POSTs that arrive together hand their statuses to an Applier,
// which applies them in one call of the record (record.ApplyStatuses, one
// transaction) instead of one transaction per POST, a few groups at once,
// and answers each POST only once its group is committed, so that the
// provider's retry still covers a group that failed.
package statuses

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// ErrUnavailable is the answer of a POST whose statuses were not recorded:
// its group failed, the queue was full, the gateway is stopping, or the
// caller gave up. The provider retries it.
var ErrUnavailable = errors.New("status callbacks not recorded")

// groupTimeout bounds one group's transaction; the provider waits for its
// answer meanwhile.
const groupTimeout = 10 * time.Second

// Store applies statuses in one transaction, all or nothing
// (record.ApplyStatuses).
type Store interface {
	ApplyStatuses(ctx context.Context, updates []whatsapp.StatusUpdate) error
}

// Options size the groups.
type Options struct {
	// MaxStatuses closes a group once it holds this many statuses. A POST
	// is never split: one with more is a group of its own.
	MaxStatuses int
	// Wait is how long a group's first POST waits for others once an
	// applier is free for it; while every applier is busy, POSTs gather
	// anyway (up to MaxStatuses a group).
	Wait time.Duration
	// Appliers is how many groups are applied at once (each holds a
	// database connection while it is).
	Appliers int
}

// queuedGroups is how many full groups per applier may wait: past that a
// POST is refused at once (503) rather than queued behind seconds of work.
const queuedGroups = 4

// Applier is the group commit. Apply hands it a POST's statuses; Run
// applies them until its context ends, then applies what is queued.
type Applier struct {
	store Store
	o     Options
	m     metrics

	mu      sync.Mutex
	queue   []*entry
	queued  int // statuses in queue
	closing bool
	// wake tells the gathering applier that the queue changed.
	wake chan struct{}
	// gathering lets one applier at a time gather the next group, so that
	// the others, once free, find the POSTs that arrived meanwhile.
	gathering sync.Mutex
}

// entry is one POST's statuses waiting for their group's commit.
type entry struct {
	updates []whatsapp.StatusUpdate
	at      time.Time
	done    chan struct{}
	// sealed is set under the Applier's lock when the entry joins a
	// group; err is set before done is closed.
	sealed bool
	err    error
}

type metrics struct {
	sizes   prometheus.Histogram
	groups  *prometheus.CounterVec
	refused prometheus.Counter
	queued  prometheus.GaugeFunc
}

// New returns an Applier; Run starts it.
func New(store Store, o Options) *Applier {
	o.MaxStatuses, o.Appliers = max(o.MaxStatuses, 1), max(o.Appliers, 1)
	a := &Applier{store: store, o: o, wake: make(chan struct{}, 1), m: metrics{
		sizes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_gateway_status_group_statuses",
			Help:    "Statuses applied per group (one transaction) by the gateway's group commit of status callbacks.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		groups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_status_groups_total",
			Help: "Groups of status callbacks applied, by outcome (committed, failed: every POST in it answered 503).",
		}, []string{"outcome"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_status_posts_refused_total",
			Help: "Status webhooks answered 503 at once because the group commit's queue was full or stopping.",
		}),
	}}
	a.m.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "parley_gateway_status_queued",
		Help: "Statuses waiting for a group of the group commit of status callbacks.",
	}, func() float64 {
		a.mu.Lock()
		defer a.mu.Unlock()
		return float64(a.queued)
	})
	return a
}

// Collectors are the Applier's metrics.
func (a *Applier) Collectors() []prometheus.Collector {
	return []prometheus.Collector{a.m.sizes, a.m.groups, a.m.refused, a.m.queued}
}

// Apply queues one POST's statuses and returns once their group is
// committed, or with ErrUnavailable when it is not (the group failed, the
// queue is full, the Applier is stopping, or ctx ended first: the statuses
// may then still be committed with their group).
func (a *Applier) Apply(ctx context.Context, updates []whatsapp.StatusUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	e := &entry{updates: updates, at: time.Now(), done: make(chan struct{})}
	a.mu.Lock()
	if a.closing || a.queued > 0 && a.queued+len(updates) > queuedGroups*a.o.Appliers*a.o.MaxStatuses {
		closing, queued := a.closing, a.queued
		a.mu.Unlock()
		a.m.refused.Inc()
		if closing {
			return fmt.Errorf("%w: the gateway is stopping", ErrUnavailable)
		}
		return fmt.Errorf("%w: %d statuses already wait for a group", ErrUnavailable, queued)
	}
	a.queue = append(a.queue, e)
	a.queued += len(updates)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	select {
	case <-e.done:
		if e.err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, e.err)
		}
		return nil
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !e.sealed {
		for i, q := range a.queue {
			if q == e {
				a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
				a.queued -= len(e.updates)
				break
			}
		}
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
}

// Run applies groups with Options.Appliers appliers until ctx ends; then
// it refuses new POSTs, applies every one queued, and returns.
func (a *Applier) Run(ctx context.Context) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range a.o.Appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				g := a.next(stop)
				if g == nil {
					return
				}
				a.apply(g)
			}
		}()
	}
	<-ctx.Done()
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	close(stop)
	wg.Wait()
}

// next waits for the next group and takes it from the queue: once its
// first POST has waited Options.Wait, or it is full, or the Applier is
// stopping. It returns nil when the Applier has stopped and nothing is
// queued.
func (a *Applier) next(stop <-chan struct{}) []*entry {
	a.gathering.Lock()
	defer a.gathering.Unlock()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		a.mu.Lock()
		switch {
		case len(a.queue) > 0:
			wait := time.Until(a.queue[0].at.Add(a.o.Wait))
			if wait <= 0 || a.queued >= a.o.MaxStatuses || a.closing {
				g := a.takeLocked()
				a.mu.Unlock()
				return g
			}
			timer.Reset(wait)
		case a.closing:
			a.mu.Unlock()
			return nil
		}
		a.mu.Unlock()
		select {
		case <-a.wake:
		case <-timer.C:
		case <-stop:
		}
	}
}

// takeLocked seals the POSTs at the head of the queue, up to
// Options.MaxStatuses statuses (at least one POST), and returns them. The
// caller holds a.mu.
func (a *Applier) takeLocked() []*entry {
	n, size := 0, 0
	for n < len(a.queue) {
		k := len(a.queue[n].updates)
		if n > 0 && size+k > a.o.MaxStatuses {
			break
		}
		n, size = n+1, size+k
	}
	g := a.queue[:n:n]
	if n == len(a.queue) {
		a.queue = nil
	} else {
		a.queue = a.queue[n:]
	}
	a.queued -= size
	for _, e := range g {
		e.sealed = true
	}
	return g
}

// apply applies one group in one transaction and answers its POSTs.
func (a *Applier) apply(g []*entry) {
	var n int
	for _, e := range g {
		n += len(e.updates)
	}
	updates := make([]whatsapp.StatusUpdate, 0, n)
	for _, e := range g {
		updates = append(updates, e.updates...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	err := a.store.ApplyStatuses(ctx, updates)
	cancel()
	a.m.sizes.Observe(float64(n))
	outcome := "committed"
	if err != nil {
		outcome = "failed"
		err = fmt.Errorf("apply a group of %d statuses from %d webhooks: %w", n, len(g), err)
	}
	a.m.groups.WithLabelValues(outcome).Inc()
	for _, e := range g {
		e.err = err
		close(e.done)
	}
}
