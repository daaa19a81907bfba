package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/batcher"
	"github.com/parleyhq/parley/pkg/batchview"
)

// outcomeKind is what became of one claim.
type outcomeKind string

const (
	kindSent    outcomeKind = "sent"
	kindRetry   outcomeKind = "retry"   // back to queued at notBefore, one attempt spent
	kindFailed  outcomeKind = "failed"  // permanent error or attempts exhausted
	kindRelease outcomeKind = "release" // never sent (shutdown): back to queued, no attempt spent
	kindTouch   outcomeKind = ""        // no message change; only re-check the batch's status
)

// outcome is the result of one claimed message, waiting to be recorded.
type outcome struct {
	kind      outcomeKind
	id        int64
	batchID   string
	claimedAt time.Time
	wamid     string
	code      int
	title     string
	notBefore time.Time
	at        time.Time
}

// flushTimeout bounds one flush transaction.
const flushTimeout = 30 * time.Second

// recordSQL applies outcomes to the claims they belong to: a row whose claim
// was taken back by the lease and claimed again (another claimed_at) is left
// alone; a row the lease put back in queued but nobody claimed yet still
// takes its outcome, which closes most of the duplicate window after a long
// outage. Such a row may have been cancelled meanwhile: a send still
// records (the provider has it), other outcomes leave it cancelled. The
// ids are looked up by the primary key (m.id = ANY): joined to the unnest
// alone, a table the planner has no statistics for yet (a fresh one, or
// one grown faster than autovacuum analyses it) was scanned whole, with
// every open message hashed, on every flush.
const recordSQL = `
UPDATE messages m SET
	state = (CASE r.kind WHEN 'sent' THEN 'sent' WHEN 'failed' THEN 'failed' ELSE 'queued' END)::message_state,
	provider_message_id = CASE r.kind WHEN 'sent' THEN r.wamid ELSE m.provider_message_id END,
	error_code = CASE r.kind WHEN 'sent' THEN NULL WHEN 'release' THEN m.error_code ELSE r.code END,
	error_title = CASE r.kind WHEN 'sent' THEN NULL WHEN 'release' THEN m.error_title ELSE r.title END,
	attempts = m.attempts + CASE r.kind WHEN 'release' THEN 0 ELSE 1 END,
	not_before = CASE WHEN r.kind IN ('retry', 'release') THEN r.not_before ELSE m.not_before END,
	sent_at = CASE r.kind WHEN 'sent' THEN r.at ELSE m.sent_at END,
	failed_at = CASE r.kind WHEN 'failed' THEN r.at ELSE m.failed_at END,
	updated_at = r.at
FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::int[], $6::text[], $7::timestamptz[], $8::timestamptz[])
	AS r(id, claimed_at, kind, wamid, code, title, not_before, at)
WHERE m.id = ANY($1::bigint[]) AND m.id = r.id AND m.claimed_at = r.claimed_at
  AND (m.state IN ('sending', 'queued') OR (m.state = 'cancelled' AND r.kind = 'sent'))
RETURNING m.batch_id::text, r.kind, COALESCE(m.provider_message_id, ''), m.id, m.company_id, m.phone,
	COALESCE(m.error_code, 0), COALESCE(m.error_title, ''), r.at`

// cancelQueuedSQL cancels the messages of cancelled batches that are back
// in the queue (a retry, a released or stale claim) or were never sent:
// under the batches' row locks, in the transaction that put them there, so
// that no dispatcher claims them in between.
const cancelQueuedSQL = `
UPDATE messages m SET state = 'cancelled', cancelled_at = $2, updated_at = $2
FROM batches b
WHERE b.id = ANY($1::uuid[]) AND b.cancelled_at IS NOT NULL AND m.batch_id = b.id
  AND m.state IN ('queued', 'scheduled', 'deferred')`

// completeSQL moves touched batches to completed when none of their
// messages can still change, else to processing (a scheduled batch whose
// first message went out). A cancelled batch none of whose messages the
// provider accepted (sent_at) is cancelled instead of completed. The caller
// holds the batches' row locks, so two recorders finishing one batch's last
// messages cannot both miss it.
const completeSQL = `
UPDATE batches b SET
	status = (CASE WHEN x.open THEN 'processing'
		WHEN b.cancelled_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.batch_id = b.id AND m.sent_at IS NOT NULL)
		THEN 'cancelled' ELSE 'completed' END)::batch_status,
	completed_at = CASE WHEN x.open THEN NULL ELSE COALESCE(b.completed_at, $2::timestamptz) END
FROM (SELECT id, bb.status AS old, EXISTS (SELECT 1 FROM messages m WHERE m.batch_id = bb.id
		AND m.state IN ('queued', 'scheduled', 'deferred', 'sending')) AS open
	FROM batches bb WHERE bb.id = ANY($1::uuid[])) x
WHERE b.id = x.id AND b.status IN ('scheduled', 'processing', 'cancelled')
RETURNING b.id::text, b.company_id, b.kind::text, b.status::text, x.old::text`

// CompleteBatches locks the batches (in id order, so that concurrent
// recorders never deadlock), cancels what came back to the queue of the
// cancelled ones, and updates their status. Call it in the transaction that
// changed their messages.
func CompleteBatches(ctx context.Context, tx pgx.Tx, batches []string, now time.Time) error {
	return completeBatches(ctx, tx, batches, now)
}

func completeBatches(ctx context.Context, tx pgx.Tx, batches []string, now time.Time) error {
	if len(batches) == 0 {
		return nil
	}
	sort.Strings(batches)
	rows, err := tx.Query(ctx, `SELECT cancelled_at IS NOT NULL FROM batches WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`, batches)
	if err != nil {
		return fmt.Errorf("lock batches: %w", err)
	}
	flags, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return fmt.Errorf("lock batches: %w", err)
	}
	if slices.Contains(flags, true) {
		if _, err := tx.Exec(ctx, cancelQueuedSQL, batches, now); err != nil {
			return fmt.Errorf("cancel requeued messages: %w", err)
		}
	}
	rows, err = tx.Query(ctx, completeSQL, batches, now)
	if err != nil {
		return fmt.Errorf("complete batches: %w", err)
	}
	var done []finishedBatch
	for rows.Next() {
		b := finishedBatch{at: now}
		var status, old string
		if err := rows.Scan(&b.id, &b.companyID, &b.kind, &status, &old); err != nil {
			rows.Close()
			return fmt.Errorf("complete batches: %w", err)
		}
		// An event for a batch that reaches completed (a cancelled batch
		// none of whose messages went out stays cancelled: its
		// batch.cancelled came with the cancel).
		if b.status = BatchState(status); b.status == BatchCompleted && old != status {
			done = append(done, b)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("complete batches: %w", err)
	}
	return emitBatches(ctx, tx, done)
}

// recorder writes outcomes in batches: every FlushInterval or FlushSize
// outcomes, one transaction records them, applies the status callbacks
// that arrived before their wamids, and completes finished batches. A
// failed flush is retried, with everything that arrived meanwhile, until
// it succeeds: outcomes are never dropped while the process lives.
//
// Several flushers share the queue (Config.Recorders), so that recording is
// not one PostgreSQL backend's work at a time: each outcome is taken by one
// of them, and their transactions overlap except for the short batch-row
// locks at the end.
type recorder struct {
	lane  Lane
	pool  *pgxpool.Pool
	now   Clock
	log   *zap.Logger
	m     *Metrics
	queue *batcher.Batcher[outcome]
}

func newRecorder(lane Lane, pool *pgxpool.Pool, now Clock, log *zap.Logger, m *Metrics, cfg Config) *recorder {
	r := &recorder{lane: lane, pool: pool, now: now, log: log, m: m}
	r.queue = batcher.New(batcher.Config{
		Size: cfg.FlushSize, Interval: cfg.FlushInterval, Flushers: cfg.Recorders, Queue: cfg.Workers,
		GiveUp: cfg.ShutdownTimeout,
	}, batcher.Hooks[outcome]{
		Write: r.flush,
		Failed: func(pending, failures int, err error) {
			r.m.flushFailures.WithLabelValues(string(r.lane)).Inc()
			if failures == 1 || failures%50 == 0 {
				r.log.Error("record outcomes; retrying", zap.Int("outcomes", pending), zap.Int("failures", failures), zap.Error(err))
			}
		},
		Recovered: func(failures int) {
			r.log.Info("recorded outcomes after failures", zap.Int("failures", failures))
		},
		GaveUp: func(pending int) {
			r.log.Error("recorder gave up at shutdown: these claims will be sent again after the lease",
				zap.Int("outcomes", pending))
		},
	})
	return r
}

// add queues an outcome; it blocks while the recorder is FlushSize behind,
// which holds back new claims.
func (r *recorder) add(o outcome) { r.queue.Add(o) }

// close flushes what is queued and stops; call it once no add can happen.
func (r *recorder) close() { r.queue.Close() }

// run starts the flushers and returns.
func (r *recorder) run() { r.queue.Start() }

// transient reports whether a failed flush may succeed as it is (the
// server was unreachable, restarting, or chose this transaction as a
// deadlock victim) rather than being refused for one row's data.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	switch pgErr.Code[:2] {
	case "22", "23":
		return false
	}
	return true
}

func (r *recorder) flush(buf []outcome) error {
	start := time.Now()
	err := r.write(buf)
	if err != nil && !transient(err) && len(buf) > 1 {
		// One row the database refuses must not hold back the others.
		for i := range buf {
			if err = r.write(buf[i : i+1]); err != nil && !transient(err) && buf[i].kind == kindSent {
				r.log.Error("provider answered a message id that cannot be recorded; recording the send without it",
					zap.Int64("message_id", buf[i].id), zap.Error(err))
				o := buf[i]
				o.wamid, o.title = "", "provider message id already recorded for another message"
				err = r.write([]outcome{o})
			}
			if err != nil && transient(err) {
				return err
			}
			if err != nil {
				r.log.Error("outcome refused by the database; dropped (the lease will send it again)",
					zap.Int64("message_id", buf[i].id), zap.Error(err))
			}
		}
		err = nil
	}
	if err == nil {
		r.m.flushSeconds.WithLabelValues(string(r.lane)).Observe(time.Since(start).Seconds())
	}
	return err
}

// outcomeColumns are a flush's outcomes as the columns of recordSQL, with
// the batches only touched and the messages whose contact refused marketing.
type outcomeColumns struct {
	ids        []int64
	claimed    []time.Time
	kinds      []string
	wamids     []*string
	codes      []*int32
	titles     []*string
	notBefores []*time.Time
	ats        []time.Time
	touched    map[string]bool
	refused    []int64
}

func columnsOf(buf []outcome) outcomeColumns {
	n := len(buf)
	c := outcomeColumns{
		ids: make([]int64, 0, n), claimed: make([]time.Time, 0, n), kinds: make([]string, 0, n),
		wamids: make([]*string, 0, n), codes: make([]*int32, 0, n), titles: make([]*string, 0, n),
		notBefores: make([]*time.Time, 0, n), ats: make([]time.Time, 0, n), touched: map[string]bool{},
	}
	for _, o := range buf {
		if o.kind == kindTouch {
			c.touched[o.batchID] = true
			continue
		}
		if o.kind == kindFailed && o.code == CodeUserStoppedMarketing {
			c.refused = append(c.refused, o.id)
		}
		c.ids = append(c.ids, o.id)
		c.claimed = append(c.claimed, o.claimedAt)
		c.kinds = append(c.kinds, string(o.kind))
		c.wamids = append(c.wamids, optional(o.wamid))
		var code *int32
		if o.code != 0 {
			v := int32(o.code)
			code = &v
		}
		c.codes = append(c.codes, code)
		c.titles = append(c.titles, optional(o.title))
		var nb *time.Time
		if !o.notBefore.IsZero() {
			t := o.notBefore
			nb = &t
		}
		c.notBefores = append(c.notBefores, nb)
		c.ats = append(c.ats, o.at)
	}
	return c
}

func (r *recorder) write(buf []outcome) error {
	cols := columnsOf(buf)
	ids, touched, refused := cols.ids, cols.touched, cols.refused
	counts := map[outcomeKind]int{}
	// Bounded, so that a connection that hangs (rather than fails) is
	// given up and the flush retried on another.
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		clear(counts)
		var sent []string
		var changed []changedMessage
		if len(ids) > 0 {
			rows, err := tx.Query(ctx, recordSQL, ids, cols.claimed, cols.kinds, cols.wamids, cols.codes, cols.titles, cols.notBefores, cols.ats)
			if err != nil {
				return fmt.Errorf("record outcomes: %w", err)
			}
			for rows.Next() {
				var batch, kind, wamid string
				var m changedMessage
				if err := rows.Scan(&batch, &kind, &wamid, &m.ID, &m.CompanyID, &m.Phone, &m.Code, &m.Title, &m.At); err != nil {
					rows.Close()
					return fmt.Errorf("record outcomes: %w", err)
				}
				touched[batch] = true
				counts[outcomeKind(kind)]++
				if kind == string(kindSent) && wamid != "" {
					sent = append(sent, wamid)
				}
				if kind == string(kindSent) || kind == string(kindFailed) {
					m.BatchID, m.State, m.Wamid = batch, State(kind), wamid
					changed = append(changed, m)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("record outcomes: %w", err)
			}
			if err := emitMessages(ctx, tx, changed); err != nil {
				return err
			}
		}
		now := r.now()
		if err := batchview.OptOutRefused(ctx, tx, refused, nil, now); err != nil {
			return err
		}
		if err := batchview.ApplyBacklog(ctx, tx, sent, now); err != nil {
			return err
		}
		batches := make([]string, 0, len(touched))
		for b := range touched {
			batches = append(batches, b)
		}
		return completeBatches(ctx, tx, batches, now)
	})
	if err != nil {
		return err
	}
	for k, c := range counts {
		r.m.messages.WithLabelValues(string(r.lane), string(k)).Add(float64(c))
	}
	return nil
}
