package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/batcher"
	"github.com/parleyhq/parley/pkg/record"
)

// flushTimeout bounds one flush transaction.
const flushTimeout = 30 * time.Second

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
	lane  record.Lane
	pool  *pgxpool.Pool
	now   Clock
	log   *zap.Logger
	m     *Metrics
	queue *batcher.Batcher[record.Outcome]
}

func newRecorder(lane record.Lane, pool *pgxpool.Pool, now Clock, log *zap.Logger, m *Metrics, cfg Config) *recorder {
	r := &recorder{lane: lane, pool: pool, now: now, log: log, m: m}
	r.queue = batcher.New(batcher.Config{
		Size: cfg.FlushSize, Interval: cfg.FlushInterval, Flushers: cfg.Recorders, Queue: cfg.Workers,
		GiveUp: cfg.ShutdownTimeout,
	}, batcher.Hooks[record.Outcome]{
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
func (r *recorder) add(o record.Outcome) { r.queue.Add(o) }

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

func (r *recorder) flush(buf []record.Outcome) error {
	start := time.Now()
	err := r.write(buf)
	if err != nil && !transient(err) && len(buf) > 1 {
		// One row the database refuses must not hold back the others.
		for i := range buf {
			if err = r.write(buf[i : i+1]); err != nil && !transient(err) && buf[i].Kind == record.OutcomeSent {
				r.log.Error("provider answered a message id that cannot be recorded; recording the send without it",
					zap.Int64("message_id", buf[i].ID), zap.Error(err))
				o := buf[i]
				o.Wamid, o.Title = "", "provider message id already recorded for another message"
				err = r.write([]record.Outcome{o})
			}
			if err != nil && transient(err) {
				return err
			}
			if err != nil {
				r.log.Error("outcome refused by the database; dropped (the lease will send it again)",
					zap.Int64("message_id", buf[i].ID), zap.Error(err))
			}
		}
		err = nil
	}
	if err == nil {
		r.m.flushSeconds.WithLabelValues(string(r.lane)).Observe(time.Since(start).Seconds())
	}
	return err
}

func (r *recorder) write(buf []record.Outcome) error {
	// Bounded, so that a connection that hangs (rather than fails) is
	// given up and the flush retried on another.
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	counts, err := record.RecordOutcomes(ctx, r.pool, buf, r.now())
	if err != nil {
		return err
	}
	for k, c := range counts {
		r.m.messages.WithLabelValues(string(r.lane), string(k)).Add(float64(c))
	}
	return nil
}
