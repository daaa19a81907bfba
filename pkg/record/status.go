package record

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/contacts"
)

// statusRow is one status update as the SQL takes it; provider callbacks
// (whatsapp.StatusUpdate) and backlogged rows both become these.
type statusRow struct {
	wamid  string
	status string
	code   int
	title  string
	at     time.Time
	// pricing, when the callback carried it
	billable bool
	category string
	model    string
}

// rowsOf turns webhook statuses into rows; a failed one carries its first
// error, and a status without a readable time takes the receipt time.
func rowsOf(updates []whatsapp.StatusUpdate, now time.Time) []statusRow {
	out := make([]statusRow, 0, len(updates))
	for _, u := range updates {
		r := statusRow{wamid: u.MessageID, status: string(u.Status), at: u.Timestamp}
		if r.at.IsZero() {
			r.at = now
		}
		if u.Pricing != nil {
			r.billable, r.category, r.model = u.Pricing.Billable, u.Pricing.Category, u.Pricing.Model
		}
		if len(u.Errors) > 0 {
			r.code, r.title = u.Errors[0].Code, u.Errors[0].Title
			if r.title == "" {
				r.title = u.Errors[0].Message
			}
		}
		out = append(out, r)
	}
	return out
}

// ApplyResult says what ApplyStatuses did.
type ApplyResult struct {
	// Applied is how many messages moved forward; an update that would move
	// one backwards, or an unknown status, changes nothing.
	Applied int
	// Backlogged is how many updates named a wamid not recorded yet; they are applied as soon as
	// the dispatcher records it.
	Backlogged int
}

// advancesSQL is whether status s moves message m forward: a status past
// sent that ranks above the message's state.
const advancesSQL = `(s.best > 1 AND (CASE m.state WHEN 'sending' THEN 0 WHEN 'sent' THEN 1 WHEN 'failed' THEN 2
	WHEN 'delivered' THEN 3 WHEN 'read' THEN 4 ELSE 99 END) < s.best)`

// changesSQL is whether status s changes message m: it moves it forward,
// or prices a delivered or read message that has no pricing yet.
const changesSQL = `(` + advancesSQL + `
	OR m.state IN ('delivered', 'read') AND m.pricing_category IS NULL AND s.category IS NOT NULL)`

// applyStatusesSQL applies a set of status updates, never backwards, by the
// Cloud API's rank (whatsapp.Status.Rank): sending 0 < sent 1 < failed 2 <
// delivered 3 < read 4. Per wamid the highest status wins and replaces the
// message's state only when it ranks higher: failed applies to sending and
// sent only, and a delivered or read after failed wins (the recipient's
// device answering is the stronger evidence; the error stays as a note).
// With $7, updates naming a wamid no message carries yet go to
// provider_status_backlog. The same statement records the pricing a
// callback carries on a delivered or read message that has none (its
// delivered came after its read, its sent after its delivered), without
// moving it: such a row keeps its updated_at, and its prior_state (which
// only this statement's RETURNING reads) becomes NULL, which tells it apart.
//
// The statement takes any number of updates at once (the gateway applies
// a group of webhooks in one call), one wamid several times among them.
// Each wamid is looked up once (f: by the wamid's index, in every weekly
// partition), then the messages it changes are locked in id order (l)
// before any is updated by its primary key: two groups naming the same
// messages at once queue up on the first they share instead of locking
// them in opposite orders and deadlocking (the order an UPDATE ... FROM
// joins in is the planner's choice). The second reads the first's changes
// once it has the lock (READ COMMITTED re-reads a row updated meanwhile),
// so a status never moves a message backwards whichever group commits first.
const applyStatusesSQL = `
WITH u AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::timestamptz[], $8::bool[], $9::text[], $10::text[])
		AS u(wamid, status, code, title, at, billable, category, model)
	WHERE status IN ('sent', 'delivered', 'read', 'failed')
), s AS (
	SELECT wamid,
		max(CASE status WHEN 'read' THEN 4 WHEN 'delivered' THEN 3 WHEN 'failed' THEN 2 ELSE 1 END) AS best,
		min(at) FILTER (WHERE status = 'delivered') AS delivered_at,
		min(at) FILTER (WHERE status = 'read') AS read_at,
		min(at) FILTER (WHERE status = 'failed') AS failed_at,
		(array_agg(code) FILTER (WHERE status = 'failed'))[1] AS code,
		(array_agg(title) FILTER (WHERE status = 'failed'))[1] AS title,
		(array_agg(billable) FILTER (WHERE category <> ''))[1] AS billable,
		(array_agg(left(category, 64)) FILTER (WHERE category <> ''))[1] AS category,
		(array_agg(left(model, 64)) FILTER (WHERE category <> ''))[1] AS model
	FROM u GROUP BY wamid
), f AS MATERIALIZED (
	SELECT m.id, m.created_at, s.* FROM s JOIN messages m ON m.provider_message_id = s.wamid
), l AS MATERIALIZED (
	SELECT s.*
	FROM f s JOIN messages m ON m.id = s.id AND m.created_at = s.created_at
	WHERE ` + changesSQL + `
	ORDER BY m.id
	FOR NO KEY UPDATE OF m
), upd AS (
	UPDATE messages m SET
		state = CASE WHEN ` + advancesSQL + ` THEN (CASE s.best WHEN 4 THEN 'read' WHEN 3 THEN 'delivered' ELSE 'failed' END)::message_state
			ELSE m.state END,
		delivered_at = CASE WHEN ` + advancesSQL + ` AND s.best >= 3 THEN COALESCE(m.delivered_at, s.delivered_at, s.read_at)
			ELSE m.delivered_at END,
		read_at = CASE WHEN ` + advancesSQL + ` AND s.best = 4 THEN s.read_at ELSE m.read_at END,
		failed_at = CASE WHEN ` + advancesSQL + ` AND s.best = 2 THEN s.failed_at ELSE m.failed_at END,
		error_code = CASE WHEN ` + advancesSQL + ` AND s.best = 2 THEN s.code ELSE m.error_code END,
		error_title = CASE WHEN ` + advancesSQL + ` AND s.best = 2 THEN s.title ELSE m.error_title END,
		billable = COALESCE(m.billable, s.billable),
		pricing_category = COALESCE(m.pricing_category, s.category),
		pricing_model = COALESCE(m.pricing_model, s.model),
		prior_state = CASE WHEN ` + advancesSQL + ` THEN m.state END,
		updated_at = CASE WHEN ` + advancesSQL + ` THEN $6 ELSE m.updated_at END
	FROM l AS s
	WHERE m.id = s.id AND m.created_at = s.created_at AND ` + changesSQL + `
	RETURNING m.prior_state IS NOT NULL AS moved, m.id, m.company_id, m.batch_id::text AS batch_id, m.phone, m.state::text AS state, m.provider_message_id,
		COALESCE(m.error_code, 0) AS code, COALESCE(m.error_title, '') AS title,
		(CASE m.state WHEN 'read' THEN m.read_at WHEN 'delivered' THEN m.delivered_at ELSE m.failed_at END) AS at,
		m.prior_state::text AS prior, m.failed_at, m.delivered_at, COALESCE(m.billable, false) AS billable,
		COALESCE(m.pricing_category, '') AS category, COALESCE(m.pricing_model, '') AS model,
		m.sent_at IS NULL AS unsent
), back AS (
	INSERT INTO provider_status_backlog (provider_message_id, status, error_code, error_title, occurred_at, received_at,
		billable, pricing_category, pricing_model)
	SELECT u.wamid, u.status, u.code, u.title, u.at, $6, u.billable, NULLIF(u.category, ''), NULLIF(u.model, '') FROM u
	WHERE $7 AND NOT EXISTS (SELECT 1 FROM f WHERE f.wamid = u.wamid)
	RETURNING id
)
SELECT b.n, upd.id, upd.company_id, upd.batch_id, upd.phone, upd.state, upd.provider_message_id, upd.code, upd.title, upd.at,
	upd.prior, upd.failed_at, upd.delivered_at, upd.billable, upd.category, upd.model, upd.unsent, upd.moved
FROM (SELECT count(*) AS n FROM back) b LEFT JOIN upd ON true`

func applyStatuses(ctx context.Context, db DB, rows []statusRow, now time.Time, backlog bool) (ApplyResult, error) {
	var res ApplyResult
	if len(rows) == 0 {
		return res, nil
	}
	n := len(rows)
	wamids, statuses, titles := make([]string, n), make([]string, n), make([]string, n)
	codes, ats := make([]*int32, n), make([]time.Time, n)
	billables, categories, models := make([]bool, n), make([]string, n), make([]string, n)
	for i, r := range rows {
		wamids[i], statuses[i], titles[i], ats[i] = r.wamid, r.status, r.title, r.at
		billables[i], categories[i], models[i] = r.billable, r.category, r.model
		if r.code != 0 {
			c := int32(r.code)
			codes[i] = &c
		}
	}
	dbRows, err := db.Query(ctx, applyStatusesSQL, wamids, statuses, codes, titles, ats, now, backlog,
		billables, categories, models)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply %d statuses: %w", n, err)
	}
	var changed []changedMessage
	priced := deltas{}
	for dbRows.Next() {
		var id, company *int64
		var batch, phone, state, wamid, title, prior, category, model *string
		var code *int
		var at, failedAt, deliveredAt *time.Time
		var billable, unsent, moved *bool
		if err := dbRows.Scan(&res.Backlogged, &id, &company, &batch, &phone, &state, &wamid, &code, &title, &at,
			&prior, &failedAt, &deliveredAt, &billable, &category, &model, &unsent, &moved); err != nil {
			dbRows.Close()
			return ApplyResult{}, fmt.Errorf("apply %d statuses: %w", n, err)
		}
		if id != nil && !*moved {
			// Priced, not moved: a delivered message now known billable.
			if *billable && deliveredAt != nil {
				priced.add(*batch, *deliveredAt, metricBillable, 0, *category, 1)
			}
			continue
		}
		if id != nil {
			m := changedMessage{ID: *id, CompanyID: *company, BatchID: *batch, Phone: *phone,
				State: State(*state), Wamid: *wamid, Code: *code, Title: *title, At: *at,
				Prior: State(deref(prior)), Billable: *billable, Category: *category, Model: *model, Unsent: *unsent}
			if failedAt != nil {
				m.PriorAt = *failedAt
			}
			if deliveredAt != nil {
				m.DeliveredAt = *deliveredAt
			}
			changed = append(changed, m)
		}
	}
	dbRows.Close()
	if err := dbRows.Err(); err != nil {
		return ApplyResult{}, fmt.Errorf("apply %d statuses: %w", n, err)
	}
	res.Applied = len(changed)
	if changed, err = holdMarketingLimited(ctx, db, changed, priced, now); err != nil {
		return ApplyResult{}, err
	}
	if err := emitMessages(ctx, db, changed); err != nil {
		return ApplyResult{}, err
	}
	if err := priced.write(ctx, db); err != nil {
		return ApplyResult{}, err
	}
	if refused := refusedWamids(rows); len(refused) > 0 {
		if err := optOutRefused(ctx, db, nil, refused, now); err != nil {
			return ApplyResult{}, err
		}
	}
	return res, nil
}

// ApplyStatuses records the provider's status callbacks: each moves its
// message forward (sent < failed < delivered < read; a failed records the
// provider's code and title), never backwards, whatever the order they
// arrive in. A callback for a wamid not recorded yet (the
// provider can call back before the dispatcher commits its send) is kept in
// provider_status_backlog and applied when the dispatcher records the wamid.
// now is the receipt time. Each change writes its event (message.delivered,
// message.read, message.failed) in the same transaction, and a failed
// status with 131050 (the user stopped marketing messages) also opts the
// message's contact out in it. db is a pool or a connection (a transaction
// is begun on it), or a transaction.
func ApplyStatuses(ctx context.Context, db DB, updates []whatsapp.StatusUpdate, now time.Time) (ApplyResult, error) {
	rows := rowsOf(updates, now)
	b, ok := db.(TxDB)
	if !ok {
		return applyStatuses(ctx, db, rows, now, true)
	}
	var res ApplyResult
	err := pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		var err error
		res, err = applyStatuses(ctx, tx, rows, now, true)
		return err
	})
	return res, err
}

// takeBacklog removes and returns the backlogged statuses of wamids that
// are now recorded (all of them, or only those in wamids when it is not nil).
func takeBacklog(ctx context.Context, db DB, wamids []string) ([]statusRow, error) {
	var rows pgx.Rows
	var err error
	if wamids == nil {
		rows, err = db.Query(ctx, `
			DELETE FROM provider_status_backlog p USING messages m
			WHERE m.provider_message_id = p.provider_message_id
			RETURNING p.provider_message_id, p.status, COALESCE(p.error_code, 0), COALESCE(p.error_title, ''), p.occurred_at,
				COALESCE(p.billable, false), COALESCE(p.pricing_category, ''), COALESCE(p.pricing_model, '')`)
	} else {
		rows, err = db.Query(ctx, `
			DELETE FROM provider_status_backlog WHERE provider_message_id = ANY($1::text[])
			RETURNING provider_message_id, status, COALESCE(error_code, 0), COALESCE(error_title, ''), occurred_at,
				COALESCE(billable, false), COALESCE(pricing_category, ''), COALESCE(pricing_model, '')`, wamids)
	}
	if err != nil {
		return nil, fmt.Errorf("take status backlog: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (statusRow, error) {
		var u statusRow
		err := r.Scan(&u.wamid, &u.status, &u.code, &u.title, &u.at, &u.billable, &u.category, &u.model)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("take status backlog: %w", err)
	}
	return out, nil
}

// BacklogRetention is how long a status callback naming an unknown wamid is
// kept before the sweeper drops it.
const BacklogRetention = 7 * 24 * time.Hour

// SweepBacklog applies backlogged status callbacks whose wamid is now
// recorded (those that raced the recorder) and drops week-old ones.
func SweepBacklog(ctx context.Context, db TxDB, now time.Time) (applied, dropped int, err error) {
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		ups, err := takeBacklog(ctx, tx, nil)
		if err != nil {
			return err
		}
		res, err := applyStatuses(ctx, tx, ups, now, false)
		if err != nil {
			return err
		}
		applied = res.Applied
		tag, err := tx.Exec(ctx, `DELETE FROM provider_status_backlog WHERE received_at < $1`, now.Add(-BacklogRetention))
		if err != nil {
			return fmt.Errorf("drop old status backlog: %w", err)
		}
		dropped = int(tag.RowsAffected())
		return nil
	})
	return applied, dropped, err
}

// refusedSQL finds the messages the provider refused with 131050, by id
// ($1) or by wamid ($2).
const refusedSQL = `
SELECT id, company_id, phone, COALESCE(provider_message_id, ''), COALESCE(failed_at, $3)
FROM messages
WHERE (id = ANY($1::bigint[]) OR provider_message_id = ANY($2::text[])) AND error_code = 131050
ORDER BY id`

// optOutRefused opts out the contacts of the messages the provider refused
// with 131050 (named by id or wamid), with tx, the transaction that records
// the refusal. A message already counted changes nothing.
func optOutRefused(ctx context.Context, tx DB, ids []int64, wamids []string, now time.Time) error {
	if len(ids) == 0 && len(wamids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, refusedSQL, ids, wamids, now)
	if err != nil {
		return fmt.Errorf("find messages refused with 131050: %w", err)
	}
	type refused struct {
		id, company int64
		phone       string
		wamid       string
		at          time.Time
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (refused, error) {
		var x refused
		err := r.Scan(&x.id, &x.company, &x.phone, &x.wamid, &x.at)
		return x, err
	})
	if err != nil {
		return fmt.Errorf("find messages refused with 131050: %w", err)
	}
	for _, x := range list {
		if _, err := contacts.RecordConsent(ctx, tx, contacts.ConsentChange{
			CompanyID: x.company, Phone: x.phone, OptedOut: true, Reason: contacts.ReasonProvider,
			ProviderMessageID: x.wamid, MessageID: x.id, At: x.at,
		}, now); err != nil {
			return fmt.Errorf("opt out the contact of message %d: %w", x.id, err)
		}
	}
	return nil
}

// refusedWamids are the wamids of failed statuses with 131050.
func refusedWamids(rows []statusRow) []string {
	var out []string
	for _, r := range rows {
		if r.status == string(whatsapp.StatusFailed) && r.code == CodeUserStoppedMarketing {
			out = append(out, r.wamid)
		}
	}
	return out
}

// applyBacklog applies the backlogged status callbacks of wamids, the
// messages a recorder has just recorded as sent (their callbacks raced the
// send's record), with tx, the transaction that records them.
func applyBacklog(ctx context.Context, tx DB, wamids []string, now time.Time) error {
	if len(wamids) == 0 {
		return nil
	}
	early, err := takeBacklog(ctx, tx, wamids)
	if err != nil {
		return err
	}
	_, err = applyStatuses(ctx, tx, early, now, false)
	return err
}
