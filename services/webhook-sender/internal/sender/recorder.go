package sender

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/batcher"
)

// recorder writes attempt outcomes in batches (every FlushInterval or
// FlushSize outcomes; Recorders flushes at once, so that recording is not
// one PostgreSQL backend's work at a time), each in one transaction: the deliveries move on, the
// attempts are inserted, the endpoints' failure streaks follow, and
// endpoints failing for DisableAfter are disabled. A failed flush is
// retried with everything that arrived meanwhile.
type recorder struct {
	s     *Sender
	queue *batcher.Batcher[outcome]
}

func newRecorder(s *Sender) *recorder {
	r := &recorder{s: s}
	r.queue = batcher.New(batcher.Config{
		Size: s.cfg.FlushSize, Interval: s.cfg.FlushInterval, Flushers: s.cfg.Recorders, Queue: s.cfg.FlushSize,
		GiveUp: s.cfg.ShutdownTimeout,
	}, batcher.Hooks[outcome]{
		Write: r.write,
		Failed: func(pending, _ int, err error) {
			s.m.flushFailures.Inc()
			s.warn("record webhook attempts; retrying", zap.Int("outcomes", pending), zap.Error(err))
		},
		GaveUp: func(pending int) {
			s.log.Error("gave up recording attempts at shutdown: these deliveries are sent again after their lease",
				zap.Int("outcomes", pending))
		},
	})
	return r
}

func (r *recorder) add(o outcome) { r.queue.Add(o) }

func (r *recorder) close() { r.queue.Close() }

func (r *recorder) run() { r.queue.Start() }

const recordDeliveriesSQL = `
UPDATE webhook_deliveries d SET
	status = r.status,
	attempts = d.attempts + CASE WHEN r.attempted THEN 1 ELSE 0 END,
	next_attempt_at = r.next,
	last_response_code = CASE WHEN r.attempted THEN r.code ELSE d.last_response_code END,
	last_latency_ms = CASE WHEN r.attempted THEN r.latency ELSE d.last_latency_ms END,
	last_error = r.error,
	updated_at = r.at
FROM unnest($1::bigint[], $2::text[], $3::bool[], $4::timestamptz[], $5::int[], $6::int[], $7::text[], $8::timestamptz[],
	$9::timestamptz[]) AS r(id, status, attempted, next, code, latency, error, at, created_at)
WHERE d.id = r.id AND d.created_at = r.created_at AND d.status = 'pending'
  AND d.id IN (SELECT id FROM webhook_deliveries WHERE id = ANY($1::bigint[]) AND created_at = ANY($9::timestamptz[])
	ORDER BY id FOR UPDATE)`

const recordAttemptsSQL = `
INSERT INTO webhook_attempts (delivery_id, delivery_created_at, endpoint_id, event_id, event_type, status, response_code,
	latency_ms, excerpt, error, attempted_at)
SELECT r.id, r.created_at, r.endpoint, r.event, r.type, r.status, r.code, r.latency, r.excerpt, r.error, r.at
FROM unnest($1::bigint[], $2::timestamptz[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::int[], $8::int[], $9::text[],
	$10::text[], $11::timestamptz[]) AS r(id, created_at, endpoint, event, type, status, code, latency, excerpt, error, at)
WHERE EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = r.id AND d.created_at = r.created_at)`

// streakSQL records each endpoint's failure streak: cleared by a success,
// begun by the first failure after one, with the last error.
const streakSQL = `
UPDATE webhook_endpoints e SET
	failing_since = CASE WHEN r.ok THEN NULL WHEN r.reset THEN r.since ELSE COALESCE(e.failing_since, r.since) END,
	last_error = CASE WHEN r.ok THEN e.last_error ELSE r.error END
FROM unnest($1::uuid[], $2::bool[], $3::bool[], $4::timestamptz[], $5::text[]) AS r(id, ok, reset, since, error)
WHERE e.id = r.id AND NOT (r.ok AND e.failing_since IS NULL)`

const disableSQL = `
UPDATE webhook_endpoints SET enabled = false, disabled_at = $2, updated_at = $2,
	disabled_reason = 'every delivery attempt failed for ' || $3 || '; last error: ' || last_error
WHERE id = ANY($1::uuid[]) AND enabled AND failing_since <= $2::timestamptz - $4::interval
RETURNING id::text`

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && s[len(s)-1]&0xC0 == 0x80 {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] >= 0xC0 {
		s = s[:len(s)-1]
	}
	return s
}

func optionalInt(v int) *int32 {
	if v == 0 {
		return nil
	}
	x := int32(v)
	return &x
}

func (r *recorder) write(buf []outcome) error {
	s := r.s
	n := len(buf)
	ids := make([]int64, 0, n)
	statuses := make([]string, 0, n)
	attempted := make([]bool, 0, n)
	nexts := make([]*time.Time, 0, n)
	codes := make([]*int32, 0, n)
	latencies := make([]int32, 0, n)
	errs := make([]string, 0, n)
	ats := make([]time.Time, 0, n)
	weeks := make([]time.Time, 0, n)
	var aIDs []int64
	var aWeeks []time.Time
	var aEndpoints, aEvents, aTypes, aStatuses, aExcerpts, aErrors []string
	var aCodes []*int32
	var aLatencies []int32
	var aAts []time.Time
	type streak struct {
		ok, reset, sawOK bool
		since            time.Time
		err              string
	}
	streaks := map[string]*streak{}
	var done []int64
	// By time, for the endpoints' streaks; the rows are locked in id order
	// below, so that concurrent flushes never deadlock.
	sorted := append([]outcome(nil), buf...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].at.Before(sorted[j].at) })
	for _, o := range sorted {
		done = append(done, o.job.id)
		if o.gone {
			continue
		}
		status := "failed"
		var next *time.Time
		switch {
		case o.ok:
			status = "succeeded"
		case !o.next.IsZero():
			status = "pending"
			t := o.next
			next = &t
		}
		errText := truncate(o.err, excerptLimit)
		ids, statuses, attempted = append(ids, o.job.id), append(statuses, status), append(attempted, o.attempted)
		nexts, codes = append(nexts, next), append(codes, optionalInt(o.code))
		latencies = append(latencies, int32(o.latency.Milliseconds()))
		errs, ats, weeks = append(errs, errText), append(ats, o.at), append(weeks, o.job.createdAt)
		if !o.attempted {
			continue
		}
		aStatus := "failed"
		if o.ok {
			aStatus = "succeeded"
		}
		aIDs, aWeeks = append(aIDs, o.job.id), append(aWeeks, o.job.createdAt)
		aEndpoints, aEvents, aTypes = append(aEndpoints, o.job.endpointID), append(aEvents, o.job.eventID), append(aTypes, o.job.eventType)
		aStatuses, aCodes, aLatencies = append(aStatuses, aStatus), append(aCodes, optionalInt(o.code)), append(aLatencies, int32(o.latency.Milliseconds()))
		aExcerpts, aErrors, aAts = append(aExcerpts, truncate(o.excerpt, excerptLimit)), append(aErrors, errText), append(aAts, o.at)
		st := streaks[o.job.endpointID]
		if st == nil {
			st = &streak{}
			streaks[o.job.endpointID] = st
		}
		if o.ok {
			st.ok, st.sawOK = true, true
			continue
		}
		if st.ok || st.since.IsZero() {
			st.since, st.reset = o.at, st.sawOK
		}
		st.ok = false
		st.err = errText
		if o.code != 0 && o.excerpt != "" {
			st.err = truncate(fmt.Sprintf("%s: %s", errText, o.excerpt), excerptLimit)
		}
	}
	var sIDs, sErrs []string
	var sOK, sReset []bool
	var sSince []time.Time
	var failing []string
	// In id order: the endpoints' rows are locked first, in that order, so
	// that concurrent flushes of one endpoint queue up before touching its
	// deliveries (the disable step below updates deliveries of other flushes).
	for id := range streaks {
		sIDs = append(sIDs, id)
	}
	sort.Strings(sIDs)
	for _, id := range sIDs {
		st := streaks[id]
		sOK, sReset, sSince, sErrs = append(sOK, st.ok), append(sReset, st.reset), append(sSince, st.since), append(sErrs, st.err)
		if !st.ok {
			failing = append(failing, id)
		}
	}
	var disabled []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := s.now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		disabled = nil
		if len(sIDs) > 0 {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM webhook_endpoints WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`, sIDs); err != nil {
				return fmt.Errorf("lock endpoints: %w", err)
			}
		}
		if len(ids) > 0 {
			if _, err := tx.Exec(ctx, recordDeliveriesSQL, ids, statuses, attempted, nexts, codes, latencies, errs, ats, weeks); err != nil {
				return fmt.Errorf("record deliveries: %w", err)
			}
		}
		if len(aIDs) > 0 {
			if _, err := tx.Exec(ctx, recordAttemptsSQL, aIDs, aWeeks, aEndpoints, aEvents, aTypes, aStatuses, aCodes, aLatencies,
				aExcerpts, aErrors, aAts); err != nil {
				return fmt.Errorf("record attempts: %w", err)
			}
		}
		if len(sIDs) > 0 {
			if _, err := tx.Exec(ctx, streakSQL, sIDs, sOK, sReset, sSince, sErrs); err != nil {
				return fmt.Errorf("record endpoint failures: %w", err)
			}
		}
		if len(failing) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, disableSQL, failing, now, s.cfg.DisableAfter.String(), s.cfg.DisableAfter)
		if err != nil {
			return fmt.Errorf("disable failing endpoints: %w", err)
		}
		if disabled, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("disable failing endpoints: %w", err)
		}
		if len(disabled) > 0 {
			if _, err := tx.Exec(ctx, `
				UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = 'endpoint disabled', updated_at = $2
				WHERE endpoint_id = ANY($1::uuid[]) AND status = 'pending'`, disabled, now); err != nil {
				return fmt.Errorf("fail deliveries of disabled endpoints: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.unhold(done...)
	for _, o := range sorted {
		switch {
		case o.gone || !o.attempted:
		case o.ok:
			s.m.deliveries.WithLabelValues(o.job.endpointID, "succeeded").Inc()
		case !o.next.IsZero():
			s.m.deliveries.WithLabelValues(o.job.endpointID, "retry").Inc()
		default:
			s.m.deliveries.WithLabelValues(o.job.endpointID, "failed").Inc()
		}
	}
	for _, id := range disabled {
		s.forgetEndpoint(id)
		s.m.disabled.Inc()
		s.log.Warn("webhook endpoint disabled: every attempt failed", zap.String("endpoint_id", id),
			zap.Duration("for", s.cfg.DisableAfter))
	}
	return nil
}
