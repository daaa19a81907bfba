package record

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/events"
)

// # Reports
//
// A report (Report) never counts messages. Every function of this package
// that changes a message's state appends the counts of that change to
// report_deltas, in the change's own transaction, by the batch's subject
// (its campaign or automation), the hour the change happened (UTC), and the
// metric: accepted, sent, delivered, read, replied, failed (by error code
// and title), skipped_opt_out, cancelled, billable (by pricing category)
// and left (no longer waiting to be sent). A transaction appends rows and
// never updates one, so that concurrent dispatchers and callbacks never wait
// on a shared counter; FoldReports moves them, summed, into report_hours.
// A report reads report_hours and the deltas not folded yet: both are small
// whatever the number of messages (one row per subject, hour and metric).
//
// Each count is of messages that reached the metric's state in the hour, as
// the record has them: a message counts once in delivered (a read that
// came without its delivered counts both), and a message the Cloud API
// reported failed and later delivered leaves failed again. parley_report_counts
// (migration 00015) computes the same counters from the messages; the tests
// compare the two, and RebuildReports rebuilds a company's counters from it.

// Report metrics, as report_deltas and report_hours name them.
const (
	metricAccepted  = "accepted"
	metricSent      = "sent"
	metricDelivered = "delivered"
	metricRead      = "read"
	metricReplied   = "replied"
	metricFailed    = "failed"
	metricSkipped   = "skipped_opt_out"
	metricCancelled = "cancelled"
	metricBillable  = "billable"
	metricLeft      = "left"
)

// labelLimit is the longest error title or pricing category a counter keeps.
const labelLimit = 200

// ReplyAttribution is how long after a message Parley sent a contact's next
// message to the same number counts as a reply to it.
const ReplyAttribution = 24 * time.Hour

// subjectSQL is the subject of a batch b: what its reports are read by.
const subjectSQL = `CASE WHEN b.campaign_id IS NOT NULL THEN 'campaign' WHEN b.automation_id IS NOT NULL THEN 'automation'
	ELSE b.kind::text END, COALESCE(b.campaign_id, b.automation_id, 0)`

// delta is one counter change of a batch's subject.
type delta struct {
	batchID string
	hour    time.Time
	metric  string
	code    int
	label   string
}

// deltas sums counter changes before they are written.
type deltas map[delta]int

func (d deltas) add(batchID string, at time.Time, metric string, code int, label string, n int) {
	label = truncate(label, labelLimit)
	d[delta{batchID: batchID, hour: at.UTC().Truncate(time.Hour), metric: metric, code: code, label: label}] += n
}

// count adds the counters of changed messages: what each change made of the
// message, from the state it left (Prior) to the one it reached.
func (d deltas) count(msgs []changedMessage) {
	for _, m := range msgs {
		b, at := m.BatchID, m.At
		switch m.State {
		case StateSent:
			d.add(b, at, metricSent, 0, "", 1)
			if m.Prior == StateCancelled {
				// A stale claim the provider accepted after the cancel.
				d.add(b, m.PriorAt, metricCancelled, 0, "", -1)
			} else {
				d.add(b, at, metricLeft, 0, "", 1)
			}
		case StateFailed:
			d.add(b, at, metricFailed, m.Code, m.Title, 1)
			if m.Prior != StateSent {
				// Failed before or at its send (a callback may fail a
				// message whose send is not recorded yet).
				d.add(b, at, metricLeft, 0, "", 1)
			}
		case StateSkippedOptOut:
			d.add(b, at, metricSkipped, 0, "", 1)
			d.add(b, at, metricLeft, 0, "", 1)
		case StateCancelled:
			d.add(b, at, metricCancelled, 0, "", 1)
			d.add(b, at, metricLeft, 0, "", 1)
		case StateDelivered, StateRead:
			if m.State == StateRead {
				d.add(b, at, metricRead, 0, "", 1)
			}
			if m.Prior == StateDelivered {
				continue
			}
			// The first sign of delivery.
			deliveredAt := at
			if !m.DeliveredAt.IsZero() {
				deliveredAt = m.DeliveredAt
			}
			d.add(b, deliveredAt, metricDelivered, 0, "", 1)
			if m.Billable {
				d.add(b, deliveredAt, metricBillable, 0, m.Category, 1)
			}
			switch m.Prior {
			case StateSending:
				// Its send was not recorded yet, and will not be.
				d.add(b, deliveredAt, metricSent, 0, "", 1)
				d.add(b, deliveredAt, metricLeft, 0, "", 1)
			case StateFailed:
				d.add(b, m.PriorAt, metricFailed, m.Code, m.Title, -1)
				if m.Unsent {
					// Failed by a callback before its send was
					// recorded (left then), delivered now.
					d.add(b, deliveredAt, metricSent, 0, "", 1)
				}
			}
		}
	}
}

// write appends the counters to report_deltas with db, the transaction of
// the changes they count.
func (d deltas) write(ctx context.Context, db events.DB) error {
	if len(d) == 0 {
		return nil
	}
	n := len(d)
	batches, metrics, labels := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	hours, codes, ns := make([]time.Time, 0, n), make([]int32, 0, n), make([]int32, 0, n)
	for k, v := range d {
		if v == 0 {
			continue
		}
		batches, hours, metrics = append(batches, k.batchID), append(hours, k.hour), append(metrics, k.metric)
		codes, labels, ns = append(codes, int32(k.code)), append(labels, k.label), append(ns, int32(v))
	}
	if len(batches) == 0 {
		return nil
	}
	_, err := db.Exec(ctx, `
		INSERT INTO report_deltas (company_id, subject_kind, subject_id, hour, metric, code, label, n)
		SELECT b.company_id, `+subjectSQL+`, d.hour, d.metric, d.code, d.label, d.n
		FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::int[], $5::text[], $6::int[])
			AS d(batch_id, hour, metric, code, label, n)
		JOIN batches b ON b.id = d.batch_id`, batches, hours, metrics, codes, labels, ns)
	if err != nil {
		return fmt.Errorf("report counters: %w", err)
	}
	return nil
}

// countMessages counts changed messages in report_deltas.
func countMessages(ctx context.Context, db events.DB, msgs []changedMessage) error {
	d := deltas{}
	d.count(msgs)
	return d.write(ctx, db)
}

// countAccepted counts the messages an expansion just created, by the hour
// they were created in.
func countAccepted(ctx context.Context, tx pgx.Tx, batchID string) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO report_deltas (company_id, subject_kind, subject_id, hour, metric, n)
		SELECT b.company_id, `+subjectSQL+`, m.hour, 'accepted', m.n
		FROM (SELECT date_trunc('hour', created_at, 'UTC') AS hour, count(*) AS n FROM messages WHERE batch_id = $1 GROUP BY 1) m
		JOIN batches b ON b.id = $1`, batchID)
	if err != nil {
		return fmt.Errorf("report counters of batch %s: %w", batchID, err)
	}
	return nil
}

// countCancelled counts n messages of a batch cancelled at at.
func countCancelled(ctx context.Context, db events.DB, batchID string, n int, at time.Time) error {
	d := deltas{}
	d.add(batchID, at, metricCancelled, 0, "", n)
	d.add(batchID, at, metricLeft, 0, "", n)
	return d.write(ctx, db)
}

// countCancelledEach counts one message cancelled at at for each batch id
// of batchIDs (a statement's RETURNING, one row per message).
func countCancelledEach(ctx context.Context, db events.DB, batchIDs []string, at time.Time) error {
	d := deltas{}
	for _, b := range batchIDs {
		d.add(b, at, metricCancelled, 0, "", 1)
		d.add(b, at, metricLeft, 0, "", 1)
	}
	return d.write(ctx, db)
}

// FoldResult says what FoldReports did.
type FoldResult struct {
	// Folded is how many delta rows were moved into report_hours.
	Folded int
	// Busy is true when another process was folding.
	Busy bool
}

// FoldReports moves up to limit of the oldest report_deltas, summed, into
// report_hours, in one transaction: a report reading both sees every count
// exactly once, before or after. One process folds at a time (an advisory
// lock); the others find it Busy.
func FoldReports(ctx context.Context, db TxDB, limit int) (FoldResult, error) {
	var res FoldResult
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtext('parley.report_fold'))`).Scan(&locked); err != nil {
			return err
		}
		if !locked {
			res.Busy = true
			return nil
		}
		return tx.QueryRow(ctx, `
			WITH d AS (
				DELETE FROM report_deltas WHERE id IN (SELECT id FROM report_deltas ORDER BY id LIMIT $1)
				RETURNING company_id, subject_kind, subject_id, hour, metric, code, label, n
			), ins AS (
				INSERT INTO report_hours AS h (company_id, subject_kind, subject_id, hour, metric, code, label, n)
				SELECT company_id, subject_kind, subject_id, hour, metric, code, label, sum(n) FROM d
				GROUP BY 1, 2, 3, 4, 5, 6, 7
				ON CONFLICT (company_id, subject_kind, subject_id, hour, metric, code, label)
				DO UPDATE SET n = h.n + EXCLUDED.n
			)
			SELECT count(*) FROM d`, limit).Scan(&res.Folded)
	})
	if err != nil {
		return FoldResult{}, fmt.Errorf("fold report counters: %w", err)
	}
	return res, nil
}

// PendingReportDeltas counts the counter rows not folded yet, up to
// 1,000,000 (a sweep that cannot fold shows as this figure growing).
func PendingReportDeltas(ctx context.Context, db DB) (int64, error) {
	var n int64
	if err := db.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM report_deltas LIMIT 1000000) d`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count report counter rows: %w", err)
	}
	return n, nil
}

// RebuildReports replaces a company's counters with those computed from its
// messages (parley_report_counts): for an operator who finds them wrong, and
// for a benchmark that creates messages without sending them. It locks the
// company's report rows against folds and concurrent changes' deltas are
// kept: run it when nothing of the company is being sent, or accept that
// changes committed during the rebuild count twice.
func RebuildReports(ctx context.Context, db TxDB, companyID int64) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('parley.report_fold'))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM report_deltas WHERE company_id = $1`, companyID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM report_hours WHERE company_id = $1`, companyID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO report_hours (company_id, subject_kind, subject_id, hour, metric, code, label, n)
			SELECT $1, subject_kind, subject_id, hour, metric, code, label, n FROM parley_report_counts($1)`, companyID)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rebuild the report counters of company %d: %w", companyID, err)
	}
	return n, nil
}

// Subject kinds a report is read for.
const (
	SubjectCampaign   = "campaign"
	SubjectAutomation = "automation"
)

// Intervals of a report's series.
const (
	IntervalHour = "hour"
	IntervalDay  = "day"
)

// ReportQuery asks for the report of one subject over [From, To).
type ReportQuery struct {
	CompanyID   int64
	SubjectKind string
	SubjectID   int64
	From, To    time.Time
	// Interval is IntervalHour or IntervalDay: the series' step.
	Interval string
	// Location is where days begin (UTC when nil). Counters are kept by
	// the UTC hour, so a zone whose offset is not whole hours has its days
	// begin at the UTC hour its midnight falls in.
	Location *time.Location
}

// Counts are the messages that reached each state in a period.
type Counts struct {
	Accepted      int64 `json:"accepted"`
	Sent          int64 `json:"sent"`
	Delivered     int64 `json:"delivered"`
	Read          int64 `json:"read"`
	Replied       int64 `json:"replied"`
	Failed        int64 `json:"failed"`
	SkippedOptOut int64 `json:"skipped_opt_out"`
	Cancelled     int64 `json:"cancelled"`
	Billable      int64 `json:"billable"`
}

// Rates are the report's ratios; nil when the denominator is 0.
type Rates struct {
	// Delivered is delivered / sent.
	Delivered *float64 `json:"delivered"`
	// Read is read / delivered.
	Read *float64 `json:"read"`
	// Replied is replied / delivered.
	Replied *float64 `json:"replied"`
}

// FailureCount is how many messages failed with one error.
type FailureCount struct {
	Code  int    `json:"code"`
	Title string `json:"title"`
	Count int64  `json:"count"`
}

// CategoryCount is how many billable messages one pricing category had.
type CategoryCount struct {
	Category string `json:"category"`
	Count    int64  `json:"count"`
}

// ReportPoint is one step of a report's series.
type ReportPoint struct {
	Start time.Time `json:"start"`
	Counts
}

// Report is what a subject's messages did over a range.
type Report struct {
	Counts
	Rates    Rates           `json:"rates"`
	Failures []FailureCount  `json:"failures"`
	Billing  []CategoryCount `json:"billable_by_category"`
	// Waiting is how many of the subject's messages, accepted at any
	// time, are not sent, failed, skipped or cancelled yet: now, not in
	// the range.
	Waiting int64         `json:"waiting"`
	Series  []ReportPoint `json:"series"`
}

// ErrBadRange is a report range that is empty or too long for its interval.
var ErrBadRange = errors.New("bad report range")

// DefaultReportSpan is the range of a report that names no start, by
// interval: the 30 days by day, the 24 hours by hour, before its end.
var DefaultReportSpan = map[string]time.Duration{IntervalDay: 30 * 24 * time.Hour, IntervalHour: 24 * time.Hour}

// MaxReportPoints is the most steps a report's series may have.
const MaxReportPoints = 744

// ReportBuckets returns the starts of the steps of [from, to) by interval
// in loc: from rounded down to its step, to rounded up. ErrBadRange when
// the range is empty or has more than MaxReportPoints steps.
func ReportBuckets(from, to time.Time, interval string, loc *time.Location) ([]time.Time, error) {
	if loc == nil {
		loc = time.UTC
	}
	if !from.Before(to) {
		return nil, fmt.Errorf("%w: from must be before to", ErrBadRange)
	}
	start := from.In(loc)
	step := func(t time.Time) time.Time { return t.Add(time.Hour) }
	switch interval {
	case IntervalHour:
		start = start.Truncate(time.Hour)
	case IntervalDay:
		start = time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, loc)
		step = func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }
	default:
		return nil, fmt.Errorf("%w: interval must be hour or day", ErrBadRange)
	}
	var out []time.Time
	for t := start; t.Before(to); t = step(t) {
		if len(out) == MaxReportPoints {
			return nil, fmt.Errorf("%w: more than %d %ss", ErrBadRange, MaxReportPoints, interval)
		}
		out = append(out, t)
	}
	return out, nil
}

// reportSQL sums a subject's folded and unfolded counters by metric, code,
// label and hour over [$4, $5).
const reportSQL = `
SELECT hour, metric, code, label, sum(n)::bigint FROM (
	SELECT hour, metric, code, label, n FROM report_hours
	WHERE company_id = $1 AND subject_kind = $2 AND subject_id = $3 AND hour >= $4 AND hour < $5
	UNION ALL
	SELECT hour, metric, code, label, n FROM report_deltas
	WHERE company_id = $1 AND subject_kind = $2 AND subject_id = $3 AND hour >= $4 AND hour < $5
) c GROUP BY 1, 2, 3, 4`

// waitingSQL is a subject's messages accepted and not yet left, at any time.
const waitingSQL = `
SELECT COALESCE(sum(CASE metric WHEN 'accepted' THEN n ELSE -n END), 0)::bigint FROM (
	SELECT metric, n FROM report_hours
	WHERE company_id = $1 AND subject_kind = $2 AND subject_id = $3 AND metric IN ('accepted', 'left')
	UNION ALL
	SELECT metric, n FROM report_deltas
	WHERE company_id = $1 AND subject_kind = $2 AND subject_id = $3 AND metric IN ('accepted', 'left')
) c`

// ReadReport reads the report of q's subject; the caller has checked that
// the subject is the company's. ErrBadRange for a range ReportBuckets
// refuses.
func ReadReport(ctx context.Context, db DB, q ReportQuery) (Report, error) {
	buckets, err := ReportBuckets(q.From, q.To, q.Interval, q.Location)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Series: make([]ReportPoint, len(buckets)), Failures: []FailureCount{}, Billing: []CategoryCount{}}
	for i, b := range buckets {
		rep.Series[i].Start = b
	}
	// Counters are by the UTC hour: the range is read by whole hours.
	from, to := q.From.UTC().Truncate(time.Hour), q.To.UTC()
	if t := to.Truncate(time.Hour); t.Before(to) {
		to = t.Add(time.Hour)
	}
	rows, err := db.Query(ctx, reportSQL, q.CompanyID, q.SubjectKind, q.SubjectID, from, to)
	if err != nil {
		return Report{}, fmt.Errorf("read report: %w", err)
	}
	failures := map[FailureCount]int64{}
	billing := map[string]int64{}
	for rows.Next() {
		var hour time.Time
		var metric, label string
		var code int
		var n int64
		if err := rows.Scan(&hour, &metric, &code, &label, &n); err != nil {
			rows.Close()
			return Report{}, fmt.Errorf("read report: %w", err)
		}
		i := sort.Search(len(buckets), func(i int) bool { return buckets[i].After(hour) }) - 1
		if i < 0 {
			continue
		}
		rep.Counts.add(metric, n)
		rep.Series[i].Counts.add(metric, n)
		switch metric {
		case metricFailed:
			failures[FailureCount{Code: code, Title: label}] += n
		case metricBillable:
			billing[label] += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Report{}, fmt.Errorf("read report: %w", err)
	}
	for f, n := range failures {
		if n != 0 {
			f.Count = n
			rep.Failures = append(rep.Failures, f)
		}
	}
	sort.Slice(rep.Failures, func(i, j int) bool {
		a, b := rep.Failures[i], rep.Failures[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Code < b.Code || a.Code == b.Code && a.Title < b.Title
	})
	for c, n := range billing {
		if n != 0 {
			rep.Billing = append(rep.Billing, CategoryCount{Category: c, Count: n})
		}
	}
	sort.Slice(rep.Billing, func(i, j int) bool { return rep.Billing[i].Category < rep.Billing[j].Category })
	rep.Rates = Rates{Delivered: ratio(rep.Delivered, rep.Sent), Read: ratio(rep.Read, rep.Delivered),
		Replied: ratio(rep.Replied, rep.Delivered)}
	if err := db.QueryRow(ctx, waitingSQL, q.CompanyID, q.SubjectKind, q.SubjectID).Scan(&rep.Waiting); err != nil {
		return Report{}, fmt.Errorf("read report: %w", err)
	}
	return rep, nil
}

func (c *Counts) add(metric string, n int64) {
	switch metric {
	case metricAccepted:
		c.Accepted += n
	case metricSent:
		c.Sent += n
	case metricDelivered:
		c.Delivered += n
	case metricRead:
		c.Read += n
	case metricReplied:
		c.Replied += n
	case metricFailed:
		c.Failed += n
	case metricSkipped:
		c.SkippedOptOut += n
	case metricCancelled:
		c.Cancelled += n
	case metricBillable:
		c.Billable += n
	}
}

// ratio is a / b rounded to four places, nil when b is 0.
func ratio(a, b int64) *float64 {
	if b == 0 {
		return nil
	}
	r := float64(int64(float64(a)/float64(b)*10000+0.5)) / 10000
	return &r
}

// NamedRef is something a report names: its id and name.
type NamedRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// TemplateRef is the template a campaign or automation sends.
type TemplateRef struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Language string `json:"language"`
}

// ReportSubject is the campaign or automation a report is of, by name, with
// its template and number (nil for an automation without one).
type ReportSubject struct {
	ID               int64        `json:"id"`
	Name             string       `json:"name"`
	Template         *TemplateRef `json:"template"`
	MessagingAccount *NamedRef    `json:"messaging_account"`
}

// SubjectReport is a report with what it is of and over what.
type SubjectReport struct {
	Campaign   *ReportSubject `json:"campaign,omitempty"`
	Automation *ReportSubject `json:"automation,omitempty"`
	From       time.Time      `json:"from"`
	To         time.Time      `json:"to"`
	Interval   string         `json:"interval"`
	TZ         string         `json:"tz"`
	Report
}

// subjectSQLs read a subject by company and id, with its template and number.
var subjectSQLs = map[string]string{
	SubjectCampaign: `
		SELECT s.id, s.name, t.id, t.name, t.language, a.id, a.name
		FROM campaigns s JOIN templates t ON t.id = s.template_id JOIN messaging_accounts a ON a.id = s.messaging_account_id
		WHERE s.company_id = $1 AND s.id = $2`,
	SubjectAutomation: `
		SELECT s.id, s.name, t.id, t.name, t.language, a.id, a.name
		FROM automations s LEFT JOIN templates t ON t.id = s.template_id LEFT JOIN messaging_accounts a ON a.id = s.messaging_account_id
		WHERE s.company_id = $1 AND s.id = $2`,
}

// ReadSubjectReport reads the report of a company's campaign or automation:
// ErrNotFound when the company has no such subject, ErrBadRange for a range
// ReportBuckets refuses.
func ReadSubjectReport(ctx context.Context, db DB, q ReportQuery) (SubjectReport, error) {
	s, err := ReadSubject(ctx, db, q.CompanyID, q.SubjectKind, q.SubjectID)
	if err != nil {
		return SubjectReport{}, err
	}
	rep, err := ReadReport(ctx, db, q)
	if err != nil {
		return SubjectReport{}, err
	}
	loc := q.Location
	if loc == nil {
		loc = time.UTC
	}
	out := SubjectReport{From: q.From.In(loc), To: q.To.In(loc), Interval: q.Interval, TZ: loc.String(), Report: rep}
	if q.SubjectKind == SubjectCampaign {
		out.Campaign = &s
	} else {
		out.Automation = &s
	}
	return out, nil
}
