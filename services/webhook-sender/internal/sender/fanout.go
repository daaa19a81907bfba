package sender

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/webhooks"
)

// marshalBody is webhooks.MarshalBody of an event from the stream, whose
// data is compact JSON already (PostgreSQL's jsonb text): the same bytes,
// without decoding and encoding the data again.
func marshalBody(e StreamEvent) []byte {
	t, _ := json.Marshal(e.Type)
	ts, _ := e.OccurredAt.UTC().MarshalJSON()
	b := make([]byte, 0, len(e.Data)+len(t)+len(ts)+32)
	b = append(b, `{"type":`...)
	b = append(b, t...)
	b = append(b, `,"timestamp":`...)
	b = append(b, ts...)
	b = append(b, `,"data":`...)
	b = append(b, e.Data...)
	return append(b, '}')
}

// job is one delivery a worker posts.
type job struct {
	id         int64
	endpointID string
	companyID  int64
	eventID    string
	eventType  string
	payload    []byte
	attempts   int
	queuedAt   time.Time
	// createdAt is the delivery's week (its partition key, the event's
	// time): every statement on the delivery names it, so that it reads
	// that week's partition only.
	createdAt time.Time
}

// subscriber is an enabled endpoint of a company with its event filter.
type subscriber struct {
	id    string
	types []string
}

func (s subscriber) wants(t string) bool { return len(s.types) == 0 || slices.Contains(s.types, t) }

type cachedSubscribers struct {
	list []subscriber
	at   time.Time
}

func (s *Sender) subscribers(ctx context.Context, company int64) ([]subscriber, error) {
	s.mu.Lock()
	c, ok := s.subs[company]
	s.mu.Unlock()
	if ok && time.Since(c.at) < s.cfg.CacheTTL {
		return c.list, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id::text, event_types FROM webhook_endpoints WHERE company_id = $1 AND enabled`, company)
	if err != nil {
		return nil, fmt.Errorf("endpoints of company %d: %w", company, err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (subscriber, error) {
		var sub subscriber
		err := r.Scan(&sub.id, &sub.types)
		return sub, err
	})
	if err != nil {
		return nil, fmt.Errorf("endpoints of company %d: %w", company, err)
	}
	s.mu.Lock()
	s.subs[company] = cachedSubscribers{list: list, at: time.Now()}
	s.mu.Unlock()
	return list, nil
}

// fanoutLoop takes events from the consumer in batches of up to FetchBatch.
func (s *Sender) fanoutLoop(ctx context.Context, in <-chan jetstream.Msg) {
	batch := make([]jetstream.Msg, 0, s.cfg.FetchBatch)
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-in:
			batch = append(batch[:0], m)
		}
	more:
		for len(batch) < s.cfg.FetchBatch {
			select {
			case m := <-in:
				batch = append(batch, m)
			default:
				break more
			}
		}
		for {
			err := s.fanout(ctx, batch)
			if err == nil {
				failures = 0
				break
			}
			if ctx.Err() != nil {
				// Not acked: JetStream redelivers them after AckWait.
				return
			}
			failures++
			s.warn("fan out events; retrying", zap.Int("events", len(batch)), zap.Error(err))
			sleep(ctx, min(time.Duration(failures)*200*time.Millisecond, 5*time.Second))
		}
	}
}

// insertDeliveriesSQL creates the deliveries of a batch of events, held by
// this sender for a lease; an endpoint deleted or disabled meanwhile gets
// none, and a (endpoint, event) made before (a redelivered event) is not
// made again: its created_at, the event's time, is the same.
const insertDeliveriesSQL = `
INSERT INTO webhook_deliveries (endpoint_id, company_id, event_id, event_type, payload, next_attempt_at, queued_at, created_at, updated_at)
SELECT u.endpoint_id, u.company_id, u.event_id, u.event_type, u.payload::jsonb, $7, $8, u.created_at, $8
FROM unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::text[], $5::text[], $6::timestamptz[])
	AS u(endpoint_id, company_id, event_id, event_type, payload, created_at)
JOIN webhook_endpoints e ON e.id = u.endpoint_id AND e.enabled
ON CONFLICT (endpoint_id, event_id, created_at) DO NOTHING
RETURNING id, endpoint_id::text, event_id::text, created_at`

// fanout creates the deliveries of a batch of events, acks the events, and
// queues the new deliveries.
func (s *Sender) fanout(ctx context.Context, msgs []jetstream.Msg) error {
	var endpoints, eventIDs, types, payloads []string
	var companies []int64
	var weeks []time.Time
	type key struct{ endpoint, event string }
	bodies := map[key][]byte{}
	company := map[string]int64{}
	valid := make([]jetstream.Msg, 0, len(msgs))
	unsubscribed := 0
	for _, m := range msgs {
		var e StreamEvent
		if err := json.Unmarshal(m.Data(), &e); err != nil || e.ID == "" || e.Type == "" {
			s.log.Error("undecodable event on the stream; terminated", zap.String("subject", m.Subject()), zap.Error(err))
			_ = m.Term()
			continue
		}
		valid = append(valid, m)
		subs, err := s.subscribers(ctx, e.CompanyID)
		if err != nil {
			return err
		}
		body := marshalBody(e)
		week := webhooks.EventTime(e.ID, e.OccurredAt)
		n := 0
		for _, sub := range subs {
			if !sub.wants(e.Type) {
				continue
			}
			n++
			endpoints = append(endpoints, sub.id)
			companies = append(companies, e.CompanyID)
			eventIDs = append(eventIDs, e.ID)
			types = append(types, e.Type)
			payloads = append(payloads, string(body))
			weeks = append(weeks, week)
			bodies[key{sub.id, e.ID}] = body
			company[e.ID] = e.CompanyID
		}
		if n == 0 {
			unsubscribed++
		}
	}
	var jobs []*job
	if len(endpoints) > 0 {
		now := s.now()
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rows, err := s.pool.Query(qctx, insertDeliveriesSQL, endpoints, companies, eventIDs, types, payloads, weeks,
			now.Add(s.cfg.Lease), now)
		if err != nil {
			return fmt.Errorf("create deliveries: %w", err)
		}
		typeOf := map[string]string{}
		for i, id := range eventIDs {
			typeOf[id] = types[i]
		}
		jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*job, error) {
			j := &job{queuedAt: now}
			err := r.Scan(&j.id, &j.endpointID, &j.eventID, &j.createdAt)
			j.companyID, j.eventType, j.payload = company[j.eventID], typeOf[j.eventID], bodies[key{j.endpointID, j.eventID}]
			return j, err
		})
		if err != nil {
			return fmt.Errorf("create deliveries: %w", err)
		}
	}
	for _, m := range valid {
		_ = m.Ack()
	}
	s.m.fannedOut.WithLabelValues("delivered").Add(float64(len(valid) - unsubscribed))
	s.m.fannedOut.WithLabelValues("unsubscribed").Add(float64(unsubscribed))
	var overflow []*job
	for _, j := range jobs {
		if !s.enqueue(j) {
			overflow = append(overflow, j)
		}
	}
	s.handBack(overflow)
	return nil
}

// handBack makes deliveries this process will not send now due at once,
// for the poller (its own, when the endpoint's queue has room, or
// another's).
func (s *Sender) handBack(jobs []*job) {
	if len(jobs) == 0 {
		return
	}
	ids, weeks := keys(jobs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, handBackSQL, ids, weeks, s.now()); err != nil {
		s.warn("hand back deliveries; they are taken when their lease ends", zap.Error(err))
	}
}

// handBackSQL makes deliveries due now. The ids are unique across the
// weeks; the weeks only narrow the partitions read.
const handBackSQL = `
UPDATE webhook_deliveries SET next_attempt_at = $3
WHERE id = ANY($1::bigint[]) AND created_at = ANY($2::timestamptz[]) AND status = 'pending'`

// keys are the ids and the weeks of jobs, for statements on their
// deliveries.
func keys(jobs []*job) ([]int64, []time.Time) {
	ids := make([]int64, len(jobs))
	weeks := make([]time.Time, len(jobs))
	for i, j := range jobs {
		ids[i], weeks[i] = j.id, j.createdAt
	}
	return ids, weeks
}

// pollSQL takes due deliveries no other sender holds (retries, replays,
// test events, deliveries of a dead sender or handed back), oldest first,
// skipping endpoints whose queue here is full, and holds them for a lease.
const pollSQL = `
WITH due AS (
	SELECT id, created_at FROM webhook_deliveries
	WHERE status = 'pending' AND next_attempt_at <= $1 AND NOT (endpoint_id = ANY($3::uuid[]))
	ORDER BY next_attempt_at LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE webhook_deliveries d SET next_attempt_at = $4 FROM due WHERE d.id = due.id AND d.created_at = due.created_at
RETURNING d.id, d.endpoint_id::text, d.company_id, d.event_id::text, d.event_type, d.payload::text, d.attempts, d.queued_at,
	d.created_at`

func (s *Sender) poll(ctx context.Context) {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, err := s.pollOnce(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.warn("find due deliveries", zap.Error(err))
				}
				break
			}
			if n < s.cfg.FetchBatch {
				break
			}
		}
	}
}

func (s *Sender) pollOnce(ctx context.Context) (int, error) {
	full := s.fullQueues()
	now := s.now()
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := s.pool.Query(qctx, pollSQL, now, s.cfg.FetchBatch, full, now.Add(s.cfg.Lease))
	if err != nil {
		return 0, err
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*job, error) {
		j := &job{}
		var payload string
		err := r.Scan(&j.id, &j.endpointID, &j.companyID, &j.eventID, &j.eventType, &payload, &j.attempts, &j.queuedAt, &j.createdAt)
		j.payload = []byte(payload)
		return j, err
	})
	if err != nil {
		return 0, err
	}
	var overflow []*job
	for _, j := range jobs {
		if !s.enqueue(j) {
			overflow = append(overflow, j)
		}
	}
	s.handBack(overflow)
	return len(jobs), nil
}
