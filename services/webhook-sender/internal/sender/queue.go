package sender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/parleyhq/parley/pkg/backoff"
	"github.com/parleyhq/parley/pkg/webhooks"
)

// endpointQueue is one endpoint's deliveries waiting in this process and
// the workers that post them: Concurrency requests at most.
type endpointQueue struct {
	ch chan *job
}

// enqueue queues a delivery on its endpoint's queue, holding it; false
// means the queue is full (the delivery stays in the table for later).
func (s *Sender) enqueue(j *job) bool {
	s.mu.Lock()
	if s.runCtx == nil || s.runCtx.Err() != nil {
		s.mu.Unlock()
		return false
	}
	if _, held := s.held[j.id]; held {
		s.mu.Unlock()
		return true
	}
	q := s.queues[j.endpointID]
	if q == nil {
		q = &endpointQueue{ch: make(chan *job, s.cfg.QueueSize)}
		s.queues[j.endpointID] = q
		for range s.cfg.Concurrency {
			s.workers.Add(1)
			go s.work(s.runCtx, q)
		}
	}
	select {
	case q.ch <- j:
		s.held[j.id] = j
		s.mu.Unlock()
		return true
	default:
		s.mu.Unlock()
		return false
	}
}

// fullQueues lists the endpoints whose queue here has less than a tenth of
// its room left: the poller leaves their deliveries in the table.
func (s *Sender) fullQueues() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, q := range s.queues {
		if cap(q.ch)-len(q.ch) < max(cap(q.ch)/10, 1) {
			out = append(out, id)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func (s *Sender) work(ctx context.Context, q *endpointQueue) {
	defer s.workers.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-q.ch:
			if ctx.Err() != nil {
				// Left held: handed back at shutdown.
				return
			}
			s.inFlight.Add(1)
			s.rec.add(s.deliver(j))
			s.inFlight.Done()
		}
	}
}

// outcome is one attempt's result, waiting to be recorded.
type outcome struct {
	job       *job
	attempted bool // false: no request made (endpoint disabled, or not loaded)
	gone      bool // the endpoint and its deliveries were deleted
	ok        bool
	code      int
	latency   time.Duration
	excerpt   string
	err       string
	at        time.Time
	// next is when to retry; zero when the delivery is given up.
	next time.Time
}

// excerptLimit is how much of a response body is read and kept.
const excerptLimit = webhooks.ExcerptLength

// deliver posts one delivery and returns its outcome.
func (s *Sender) deliver(j *job) outcome {
	ctx := s.sendCtx
	o := outcome{job: j}
	ep, err := s.endpoint(ctx, j.endpointID)
	if errors.Is(err, errGone) {
		// Deleted with its deliveries: nothing to record.
		o.at, o.gone = s.now(), true
		return o
	}
	if err != nil {
		o.at = s.now()
		o.err = err.Error()
		o.next = o.at.Add(backoff.Jittered(s.cfg.BackoffBase, s.cfg.BackoffCap, 1))
		return o
	}
	if !ep.enabled {
		o.at, o.err = s.now(), "endpoint disabled"
		return o
	}
	o.attempted = true
	u, err := checkURL(ep.url, s.allow)
	if err != nil {
		o.at, o.err = s.now(), err.Error()
		return o // permanent
	}
	if len(ep.secrets) == 0 {
		o.at, o.err = s.now(), "endpoint has no signing secret"
		return o
	}
	ts := s.now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(j.payload))
	if err != nil {
		o.at, o.err = s.now(), err.Error()
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Parley-Webhooks/1")
	req.Header.Set(webhooks.HeaderID, j.eventID)
	req.Header.Set(webhooks.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(webhooks.HeaderSignature, webhooks.Sign(ep.secrets, j.eventID, ts, j.payload))
	start := time.Now()
	resp, err := s.client.Do(req)
	o.latency = time.Since(start)
	o.at = s.now()
	s.m.latency.WithLabelValues(j.endpointID).Observe(o.latency.Seconds())
	var floor time.Duration
	retry := true
	if err != nil {
		o.err = err.Error()
		if errors.Is(err, ErrDisallowedAddress) {
			retry = false
		}
	} else {
		o.code = resp.StatusCode
		buf, _ := io.ReadAll(io.LimitReader(resp.Body, excerptLimit))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		o.excerpt = string(buf)
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			o.ok = true
			return o
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			floor = retryAfter(resp.Header.Get("Retry-After"), o.at)
		default:
			// 3xx (redirects are not followed) and other 4xx: the
			// endpoint refuses this delivery; retrying would not help.
			retry = false
		}
		o.err = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	if !retry {
		return o
	}
	next := o.at.Add(max(backoff.Jittered(s.cfg.BackoffBase, s.cfg.BackoffCap, j.attempts+1), floor))
	if next.Before(j.queuedAt.Add(s.cfg.RetryPeriod)) {
		o.next = next
	}
	return o
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
