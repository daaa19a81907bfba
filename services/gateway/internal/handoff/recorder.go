package handoff

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Accepted is the record of a batch the stream acknowledged, written so that
// GET /api/batches/{id} knows it before a dispatcher picks it up.
type Accepted struct {
	ID             string
	CompanyID      int64
	Kind           string // campaign, automation, batch, connector
	Source         string
	CampaignID     int64
	AutomationID   int64
	SegmentID      int64
	ContactCount   int
	IsForced       bool
	ScheduledAt    *time.Time
	IdempotencyKey string
	AcceptedAt     time.Time
	Overrides      map[string]string
}

// Recorder writes Accepted rows in the background, many per statement. It is
// an optimisation of visibility, not part of the guarantee: the dispatcher
// creates the row too, so a row dropped here (queue full, crash) is only late.
type Recorder struct {
	pool    *pgxpool.Pool
	log     *zap.Logger
	queue   chan Accepted
	dropped prometheus.Counter
}

// NewRecorder returns a recorder with a queue of size n.
func NewRecorder(pool *pgxpool.Pool, n int, reg prometheus.Registerer, log *zap.Logger) *Recorder {
	r := &Recorder{
		pool: pool, log: log, queue: make(chan Accepted, n),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_batch_records_dropped_total",
			Help: "Accepted-batch records not written by the gateway (the dispatcher writes them later).",
		}),
	}
	reg.MustRegister(r.dropped)
	return r
}

// Record queues a row without blocking.
func (r *Recorder) Record(a Accepted) {
	select {
	case r.queue <- a:
	default:
		r.dropped.Inc()
	}
}

// Run writes queued rows until ctx ends, then writes what is left.
func (r *Recorder) Run(ctx context.Context) {
	buf := make([]Accepted, 0, 512)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	// Writes are not cancelled with ctx: what was accepted before shutdown
	// is still written, within a bound.
	flush := func(ctx context.Context) {
		if len(buf) == 0 {
			return
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := r.write(wctx, buf); err != nil {
			r.dropped.Add(float64(len(buf)))
			r.log.Warn("record accepted batches", zap.Int("batches", len(buf)), zap.Error(err))
		}
		buf = buf[:0]
	}
	for {
		select {
		case a := <-r.queue:
			buf = append(buf, a)
			if len(buf) == cap(buf) {
				flush(ctx)
			}
		case <-t.C:
			flush(ctx)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for {
				select {
				case a := <-r.queue:
					buf = append(buf, a)
				default:
					flush(fctx)
					return
				}
			}
		}
	}
}

func (r *Recorder) write(ctx context.Context, rows []Accepted) error {
	n := len(rows)
	ids, kinds, sources, keys := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	companies, campaigns, automations, segments := make([]int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n)
	counts, forced := make([]int32, n), make([]bool, n)
	scheduled, accepted := make([]*time.Time, n), make([]time.Time, n)
	overrides := make([]*string, n)
	for i, a := range rows {
		ids[i], companies[i], kinds[i], sources[i] = a.ID, a.CompanyID, a.Kind, a.Source
		campaigns[i], automations[i], segments[i] = nonZero(a.CampaignID), nonZero(a.AutomationID), nonZero(a.SegmentID)
		counts[i], forced[i], scheduled[i], accepted[i] = int32(a.ContactCount), a.IsForced, a.ScheduledAt, a.AcceptedAt
		if a.IdempotencyKey != "" {
			k := a.IdempotencyKey
			keys[i] = &k
		}
		if len(a.Overrides) > 0 {
			b, _ := json.Marshal(a.Overrides)
			s := string(b)
			overrides[i] = &s
		}
	}
	_, err := r.pool.Exec(ctx, `
		INSERT INTO batches (id, company_id, kind, source, campaign_id, automation_id, segment_id,
			contact_count, is_forced, scheduled_at, idempotency_key, accepted_at, overrides, status)
		SELECT u.id, u.company_id, u.kind::batch_kind, u.source, u.campaign_id, u.automation_id, u.segment_id,
			u.contact_count, u.is_forced, u.scheduled_at, u.idempotency_key, u.accepted_at, u.overrides::jsonb, 'accepted'
		FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[],
			$8::int[], $9::bool[], $10::timestamptz[], $11::text[], $12::timestamptz[], $13::text[])
			AS u(id, company_id, kind, source, campaign_id, automation_id, segment_id, contact_count, is_forced,
			     scheduled_at, idempotency_key, accepted_at, overrides)
		ON CONFLICT (id) DO NOTHING`,
		ids, companies, kinds, sources, campaigns, automations, segments, counts, forced, scheduled, keys, accepted, overrides)
	return err
}

func nonZero(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}
