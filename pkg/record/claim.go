package record

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/contacts"
)

// claimSQL takes up to $4 due messages of one account, oldest first,
// skipping rows another dispatcher holds. In the same statement a
// non-forced message to an opted-out contact becomes skipped_opt_out (the
// opt-out is read now, not at expansion), and the rest become sending with
// this claim's time. With $5 (delivery hours closed) only messages that
// bypass the rules are taken. It returns what rendering needs.
const claimSQL = `
WITH picked AS (
	SELECT m.id, (NOT m.bypass_rules AND c.opted_out_at IS NOT NULL) AS opted_out,
		c.first_name, c.last_name, c.variables
	FROM messages m
	LEFT JOIN contacts c ON c.company_id = m.company_id AND c.phone = m.phone
	WHERE m.lane = $1 AND m.messaging_account_id = $2
	  AND m.state IN ('queued', 'scheduled', 'deferred') AND m.not_before <= $3
	  AND (m.bypass_rules OR NOT $5)
	ORDER BY m.not_before, m.id
	LIMIT $4
	FOR UPDATE OF m SKIP LOCKED
)
UPDATE messages m SET
	state = (CASE WHEN p.opted_out THEN 'skipped_opt_out' ELSE 'sending' END)::message_state,
	claimed_at = $3,
	skipped_at = CASE WHEN p.opted_out THEN $3::timestamptz ELSE NULL END,
	updated_at = $3
FROM picked p WHERE m.id = p.id
RETURNING m.id, m.batch_id::text, m.state::text, m.phone, COALESCE(m.template_id, 0), m.attempts, m.overrides, m.claimed_at,
	COALESCE(p.first_name, ''), COALESCE(p.last_name, ''), p.variables, m.company_id, m.content, COALESCE(m.error_code, 0)`

// deferSQL moves an account's due non-forced campaign messages to the next
// opening of its delivery hours.
const deferSQL = `
UPDATE messages SET state = 'deferred', not_before = $3, updated_at = $2,
	deferred_at = CASE WHEN state = 'deferred' THEN deferred_at ELSE $2::timestamptz END
WHERE lane = 'campaign' AND messaging_account_id = $1
  AND state IN ('queued', 'scheduled', 'deferred') AND not_before <= $2 AND NOT bypass_rules`

// dueAccountsSQL lists the accounts of a lane with due work: a loose index
// scan over the distinct accounts with waiting messages, then one probe
// each, so a large backlog costs a handful of index lookups.
const dueAccountsSQL = `
WITH RECURSIVE a AS (
	(SELECT messaging_account_id AS id FROM messages
	 WHERE lane = $1 AND state IN ('queued', 'scheduled', 'deferred') AND messaging_account_id IS NOT NULL
	 ORDER BY messaging_account_id LIMIT 1)
	UNION ALL
	SELECT (SELECT messaging_account_id FROM messages
	        WHERE lane = $1 AND state IN ('queued', 'scheduled', 'deferred') AND messaging_account_id > a.id
	        ORDER BY messaging_account_id LIMIT 1)
	FROM a WHERE a.id IS NOT NULL
)
SELECT a.id FROM a WHERE a.id IS NOT NULL AND EXISTS (
	SELECT 1 FROM messages m WHERE m.lane = $1 AND m.messaging_account_id = a.id
	  AND m.state IN ('queued', 'scheduled', 'deferred') AND m.not_before <= $2)`

// leaseSQL returns claims older than the lease to the queue (their
// dispatcher died or stalled between claim and record); a message whose
// attempts are spent fails instead, and one whose contact was erased
// meanwhile (phone ”: EraseContact) is cancelled, never sent again.
const leaseSQL = `
UPDATE messages SET
	state = (CASE WHEN phone = '' THEN 'cancelled' WHEN attempts + 1 >= $3 THEN 'failed' ELSE 'queued' END)::message_state,
	cancelled_at = CASE WHEN phone = '' THEN $1::timestamptz ELSE cancelled_at END,
	attempts = attempts + 1,
	not_before = $1,
	error_title = CASE WHEN attempts + 1 >= $3 AND phone <> '' THEN 'no outcome recorded after ' || (attempts + 1) || ' claims' ELSE error_title END,
	failed_at = CASE WHEN attempts + 1 >= $3 AND phone <> '' THEN $1::timestamptz ELSE failed_at END,
	updated_at = $1
WHERE state = 'sending' AND claimed_at < $2 AND lane = $4
RETURNING batch_id::text, state::text, id, company_id, phone, COALESCE(error_code, 0), COALESCE(error_title, '')`

// Overrides is messages.overrides: what personalises one message beyond
// its contact record, as the trigger or the batch entry gave it.
type Overrides struct {
	FirstName string            `json:"first_name,omitempty"`
	LastName  string            `json:"last_name,omitempty"`
	Variables map[string]string `json:"variables,omitempty"`
	ImageURL  string            `json:"image_url,omitempty"`
	VideoURL  string            `json:"video_url,omitempty"`
	URL       string            `json:"url,omitempty"`
	URL2      string            `json:"url2,omitempty"`
}

// Claimed is one message taken for sending, with what rendering needs: the
// contact's names and variables as the claim read them, and the message's
// own overrides.
type Claimed struct {
	ID         int64
	BatchID    string
	State      State
	Phone      string
	TemplateID int64
	Attempts   int
	ClaimedAt  time.Time
	Overrides  Overrides
	FirstName  string
	LastName   string
	Variables  map[string]string
	// TemplateSeen is the template's status_changed_at as the dispatcher
	// read it before the send (TemplateStatuses), and TemplateName and
	// TemplateLanguage name the template in a refusal's title.
	TemplateSeen     time.Time
	TemplateName     string
	TemplateLanguage string
	// LastCode is the provider's error code of the message's last attempt
	// (0 when none).
	LastCode int
	// Content is a reply's session message (whatsapp.Session as JSON);
	// nil for a template message.
	Content []byte
}

// Claim takes up to n due messages of a lane's account, oldest first, in
// one transaction begun on db: each becomes sending at now, or
// skipped_opt_out (with its message.skipped event) when it is a non-forced
// campaign message to a contact who opted out. With closed (the account's
// delivery hours are closed) only messages that bypass the rules are
// taken. Rows another dispatcher holds are skipped, and so are rows a
// cancel holds: a message is either claimed or cancelled.
func Claim(ctx context.Context, db TxDB, lane Lane, accountID int64, n int, now time.Time, closed bool) ([]Claimed, error) {
	var out []Claimed
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		out, err = claimIn(ctx, tx, lane, accountID, n, now, closed)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim messages of account %d: %w", accountID, err)
	}
	return out, nil
}

func claimIn(ctx context.Context, tx pgx.Tx, lane Lane, accountID int64, n int, now time.Time, closed bool) ([]Claimed, error) {
	rows, err := tx.Query(ctx, claimSQL, string(lane), accountID, now, n, closed)
	if err != nil {
		return nil, err
	}
	var skipped []changedMessage
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Claimed, error) {
		var c Claimed
		var state string
		var ov, vars []byte
		var company int64
		if err := r.Scan(&c.ID, &c.BatchID, &state, &c.Phone, &c.TemplateID, &c.Attempts, &ov, &c.ClaimedAt,
			&c.FirstName, &c.LastName, &vars, &company, &c.Content, &c.LastCode); err != nil {
			return c, err
		}
		if c.State = State(state); c.State == StateSkippedOptOut {
			skipped = append(skipped, changedMessage{ID: c.ID, CompanyID: company, BatchID: c.BatchID, Phone: c.Phone,
				State: StateSkippedOptOut, At: now})
		}
		if len(ov) > 0 {
			if err := json.Unmarshal(ov, &c.Overrides); err != nil {
				return c, fmt.Errorf("message %d overrides: %w", c.ID, err)
			}
		}
		v, err := contacts.DecodeVariables(vars)
		if err != nil {
			return c, fmt.Errorf("message %d contact: %w", c.ID, err)
		}
		c.Variables = v
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	if err := emitMessages(ctx, tx, skipped); err != nil {
		return nil, err
	}
	return out, nil
}

// Defer moves an account's due non-forced campaign messages to next, the
// next opening of its delivery hours, and returns how many it moved.
func Defer(ctx context.Context, db DB, accountID int64, now, next time.Time) (int64, error) {
	tag, err := db.Exec(ctx, deferSQL, accountID, now, next)
	if err != nil {
		return 0, fmt.Errorf("defer messages of account %d: %w", accountID, err)
	}
	return tag.RowsAffected(), nil
}

// DueAccounts lists the accounts of a lane with messages due at now.
func DueAccounts(ctx context.Context, db DB, lane Lane, now time.Time) ([]int64, error) {
	rows, err := db.Query(ctx, dueAccountsSQL, string(lane), now)
	if err != nil {
		return nil, fmt.Errorf("find accounts with due messages: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("find accounts with due messages: %w", err)
	}
	return ids, nil
}

// ReturnStale returns a lane's claims made before staleBefore to the queue
// (their dispatcher died or stalled between claim and record), one attempt
// spent; a message whose attempts are spent (maxAttempts) fails instead,
// with its event. The batches they belong to are completed in the same
// transaction. It returns how many claims it returned or failed.
func ReturnStale(ctx context.Context, db TxDB, lane Lane, now, staleBefore time.Time, maxAttempts int) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, leaseSQL, now, staleBefore, maxAttempts, string(lane))
		if err != nil {
			return fmt.Errorf("return stale claims: %w", err)
		}
		var batches []string
		var failed []changedMessage
		seen := map[string]bool{}
		n = 0
		for rows.Next() {
			var b, s string
			m := changedMessage{At: now}
			if err := rows.Scan(&b, &s, &m.ID, &m.CompanyID, &m.Phone, &m.Code, &m.Title); err != nil {
				rows.Close()
				return fmt.Errorf("return stale claims: %w", err)
			}
			n++
			if State(s) == StateFailed {
				m.BatchID, m.State = b, StateFailed
				failed = append(failed, m)
			}
			if !seen[b] {
				seen[b] = true
				batches = append(batches, b)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("return stale claims: %w", err)
		}
		if err := emitMessages(ctx, tx, failed); err != nil {
			return err
		}
		return CompleteBatches(ctx, tx, batches, now)
	})
	return n, err
}

// Waiting counts a lane's messages that wait to be sent (queued, scheduled
// or deferred).
func Waiting(ctx context.Context, db DB, lane Lane) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `SELECT count(*) FROM messages WHERE lane = $1 AND state IN ('queued', 'scheduled', 'deferred', 'held')`,
		string(lane)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count waiting messages: %w", err)
	}
	return n, nil
}

// CancelledBatches returns those of the batches ids that were cancelled.
func CancelledBatches(ctx context.Context, db DB, ids []string) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT id::text FROM batches WHERE id = ANY($1::uuid[]) AND cancelled_at IS NOT NULL`, ids)
	if err != nil {
		return nil, fmt.Errorf("find cancelled batches: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find cancelled batches: %w", err)
	}
	return out, nil
}
