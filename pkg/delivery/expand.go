package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/phone"
)

// Catalog is what the engine reads of a company's configuration
// (*catalog.Store).
type Catalog interface {
	Campaign(ctx context.Context, companyID, id int64) (catalog.Campaign, error)
	Automation(ctx context.Context, companyID, id int64) (catalog.Automation, error)
	Template(ctx context.Context, id int64) (catalog.Template, error)
	MessagingAccount(ctx context.Context, id int64) (catalog.MessagingAccount, error)
	AccessToken(ctx context.Context, accountID int64) (string, error)
}

// RejectError is a bus message that can never be expanded (undecodable, or
// contradicting what is recorded); it is terminated and kept in
// rejected_bus_messages for an operator.
type RejectError struct{ Reason string }

func (e *RejectError) Error() string { return "reject batch: " + e.Reason }

func reject(format string, args ...any) error {
	return &RejectError{Reason: fmt.Sprintf(format, args...)}
}

// Expansion is what expanding one batch did.
type Expansion struct {
	// Result is expanded, redelivered (its messages already existed) or
	// failed (the batch could not be expanded; its messages say why).
	Result string
	// AccountID is the messaging account whose messages were created.
	AccountID int64
	// MoreAccounts are the other accounts with new messages (a message
	// batch names several).
	MoreAccounts []int64
	// Messages is how many messages were created.
	Messages int
	// Due is whether some message may be sent now.
	Due bool
}

// Expansion results.
const (
	ResultExpanded    = "expanded"
	ResultRedelivered = "redelivered"
	ResultFailed      = "failed"
)

// Expander turns batches into messages, each batch in one transaction.
type Expander struct {
	pool *pgxpool.Pool
	cat  Catalog
	now  Clock
}

// NewExpander returns an expander.
func NewExpander(pool *pgxpool.Pool, cat Catalog, now Clock) *Expander {
	return &Expander{pool: pool, cat: cat, now: now}
}

type batchRow struct {
	id             string
	companyID      int64
	kind           bus.BatchKind
	source         bus.Source
	campaignID     *int64
	automationID   *int64
	segmentID      *int64
	contactCount   int
	isForced       bool
	scheduledAt    *time.Time
	idempotencyKey *string
	acceptedAt     time.Time
	overrides      []byte
}

// acceptedAt is when the gateway accepted a batch, or now for a batch that
// does not say.
func acceptedAt(ts *timestamppb.Timestamp, now time.Time) time.Time {
	if ts == nil {
		return now
	}
	return ts.AsTime()
}

// schedule records a batch's scheduled_at (ts, when it has one) and returns
// the state and due time of its new messages: scheduled until then when that
// is still ahead, else queued now.
func (r *batchRow) schedule(ts *timestamppb.Timestamp, now time.Time) (State, time.Time) {
	if ts == nil {
		return StateQueued, now
	}
	at := ts.AsTime()
	r.scheduledAt = &at
	if at.After(now) {
		return StateScheduled, at
	}
	return StateQueued, now
}

func optional[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// lockBatch records the batch (an earlier delivery may have done it) and
// locks its row, so that concurrent deliveries of one batch expand it once.
// fresh is false when it was expanded before. cancelled is whether the
// batch was cancelled while it waited in the stream (pkg/batchctl recorded
// it with status cancelled): it is expanded all the same, and its messages
// are cancelled in the same transaction (expanded).
func lockBatch(ctx context.Context, tx pgx.Tx, r batchRow) (fresh, cancelled bool, err error) {
	if _, err := tx.Exec(ctx, `
		INSERT INTO batches (id, company_id, kind, source, campaign_id, automation_id, segment_id, contact_count,
			is_forced, scheduled_at, status, idempotency_key, accepted_at, overrides, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'accepted', $11, $12, $13, $14)
		ON CONFLICT (id) DO NOTHING`,
		r.id, r.companyID, r.kind, r.source, r.campaignID, r.automationID, r.segmentID, r.contactCount,
		r.isForced, r.scheduledAt, r.idempotencyKey, r.acceptedAt, r.overrides, r.acceptedAt); err != nil {
		return false, false, fmt.Errorf("record batch: %w", err)
	}
	var company int64
	var status string
	var expanded bool
	if err := tx.QueryRow(ctx, `
		SELECT company_id, status::text, EXISTS (SELECT 1 FROM messages WHERE batch_id = b.id)
		FROM batches b WHERE id = $1 FOR UPDATE`, r.id).Scan(&company, &status, &expanded); err != nil {
		return false, false, fmt.Errorf("lock batch: %w", err)
	}
	if company != r.companyID {
		return false, false, reject("batch %s is recorded for company %d, the message says %d", r.id, company, r.companyID)
	}
	if expanded {
		return false, false, nil
	}
	switch BatchState(status) {
	case BatchAccepted:
		return true, false, nil
	case BatchCancelled:
		// The cancel recorded what the stream said; the batch itself knows
		// its targets and options.
		if _, err := tx.Exec(ctx, `
			UPDATE batches SET campaign_id = $2, automation_id = $3, segment_id = $4, is_forced = $5,
				scheduled_at = $6, idempotency_key = $7, overrides = $8, status = 'accepted'
			WHERE id = $1`,
			r.id, r.campaignID, r.automationID, r.segmentID, r.isForced, r.scheduledAt, r.idempotencyKey, r.overrides); err != nil {
			return false, false, fmt.Errorf("record cancelled batch %s: %w", r.id, err)
		}
		return true, true, nil
	}
	return false, false, nil
}

// finishCancelled ends the expansion of a batch cancelled in the stream:
// its new messages become cancelled and its status follows (see
// CompleteBatches): cancelled, even when its targets were gone (its failed
// messages say so); nothing is due.
func finishCancelled(ctx context.Context, tx pgx.Tx, id string, count int, failure string, now time.Time, out *Expansion) error {
	if err := finishBatch(ctx, tx, id, BatchProcessing, count, failure, now); err != nil {
		return err
	}
	out.Due, out.AccountID, out.MoreAccounts = false, 0, nil
	return completeBatches(ctx, tx, []string{id}, now)
}

func finishBatch(ctx context.Context, tx pgx.Tx, id string, status BatchState, count int, failure string, now time.Time) error {
	var completed *time.Time
	if status == BatchCompleted || status == BatchFailed {
		completed = &now
	}
	var company int64
	var kind string
	if err := tx.QueryRow(ctx, `
		UPDATE batches SET status = $2, contact_count = $3, error = NULLIF($4, ''), completed_at = $5 WHERE id = $1
		RETURNING company_id, kind::text`,
		id, string(status), count, failure, completed).Scan(&company, &kind); err != nil {
		return fmt.Errorf("update batch %s: %w", id, err)
	}
	if err := emitFailedAtExpansion(ctx, tx, id); err != nil {
		return err
	}
	if completed == nil {
		return nil
	}
	return emitBatches(ctx, tx, []finishedBatch{{id: id, companyID: company, kind: kind, status: status, failure: failure, at: now}})
}

// insertFailed records one failed message per phone, saying why.
func insertFailed(ctx context.Context, tx pgx.Tx, lane Lane, batchID string, companyID int64, phones []string, why string, now time.Time) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO messages (batch_id, seq, company_id, phone, state, lane, error_title, failed_at, not_before, created_at, updated_at)
		SELECT $1, p.ord - 1, $2, p.phone, 'failed', $3, $4, $5, $5, $5, $5
		FROM unnest($6::text[]) WITH ORDINALITY AS p(phone, ord)
		ON CONFLICT (batch_id, seq) DO NOTHING`, batchID, companyID, string(lane), why, now, phones)
	if err != nil {
		return fmt.Errorf("record failed messages of batch %s: %w", batchID, err)
	}
	return nil
}

func (x *Expander) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, x.pool, fn)
}

// Campaign expands a campaign batch: one message per phone (or per member
// of its segment), queued now or scheduled for scheduled_at, for the
// campaign's account and template; bypass_rules is is_forced. Opt-out is
// decided when a message is claimed, so that a later opt-out still counts.
func (x *Expander) Campaign(ctx context.Context, b *sendsv1.CampaignBatch) (Expansion, error) {
	if _, err := uuid.Parse(b.GetBatchId()); err != nil {
		return Expansion{}, reject("batch id %q is not a UUID", b.GetBatchId())
	}
	if b.GetCompanyId() <= 0 {
		return Expansion{}, reject("batch %s has no company", b.GetBatchId())
	}
	// The gateway removes duplicates (phone.FirstOfEach); one that slips
	// through still gets a single message.
	_, phones, bad := phone.FirstOfEach(b.GetPhones(), phone.Itself)
	if bad >= 0 {
		return Expansion{}, reject("batch %s: phone %d is not E.164", b.GetBatchId(), bad+1)
	}
	kind, source, err := bus.DescribeBatch(b)
	if err != nil {
		return Expansion{}, err
	}
	now := x.now()
	var failure string
	camp, err := x.cat.Campaign(ctx, b.GetCompanyId(), b.GetCampaignId())
	var acct catalog.MessagingAccount
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		failure = fmt.Sprintf("campaign %d no longer exists", b.GetCampaignId())
	case err != nil:
		return Expansion{}, err
	default:
		acct, err = x.cat.MessagingAccount(ctx, camp.MessagingAccountID)
		switch {
		case errors.Is(err, catalog.ErrNotFound):
			failure = fmt.Sprintf("messaging account %d of campaign %d no longer exists", camp.MessagingAccountID, camp.ID)
		case err != nil:
			return Expansion{}, err
		case !acct.Connected:
			failure = fmt.Sprintf("messaging account %d of campaign %d is disconnected", acct.ID, camp.ID)
		}
	}
	row := batchRow{
		id: b.GetBatchId(), companyID: b.GetCompanyId(), kind: kind, source: source,
		contactCount: len(phones), isForced: b.GetIsForced(), idempotencyKey: optional(b.GetIdempotencyKey()),
		acceptedAt: acceptedAt(b.GetAcceptedAt(), now),
	}
	if failure == "" {
		row.campaignID = &camp.ID
	}
	state, notBefore := row.schedule(b.GetScheduledAt(), now)
	var out Expansion
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		segmentID := b.GetSegmentId()
		if segmentID != 0 && failure == "" {
			var ok bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM segments WHERE id = $1 AND company_id = $2)`,
				segmentID, b.GetCompanyId()).Scan(&ok); err != nil {
				return fmt.Errorf("find segment %d: %w", segmentID, err)
			}
			if ok {
				row.segmentID = &segmentID
			} else {
				failure = fmt.Sprintf("segment %d no longer exists", segmentID)
				row.campaignID = nil
			}
		}
		fresh, cancelled, err := lockBatch(ctx, tx, row)
		if err != nil || !fresh {
			out = Expansion{Result: ResultRedelivered}
			return err
		}
		if failure != "" {
			out = Expansion{Result: ResultFailed, Messages: len(phones)}
			if err := insertFailed(ctx, tx, LaneCampaign, row.id, row.companyID, phones, failure, now); err != nil {
				return err
			}
			if cancelled {
				return finishCancelled(ctx, tx, row.id, len(phones), failure, now, &out)
			}
			return finishBatch(ctx, tx, row.id, BatchFailed, len(phones), failure, now)
		}
		var tag int64
		if row.segmentID != nil {
			t, err := tx.Exec(ctx, `
				INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
					lane, template_id, bypass_rules, created_at, updated_at)
				SELECT $1, (row_number() OVER (ORDER BY c.id)) - 1, $2, c.id, c.phone, $3, $4, $5, 'campaign', $6, $7, $8, $8
				FROM segment_members sm JOIN contacts c ON c.id = sm.contact_id
				WHERE sm.segment_id = $9 AND c.company_id = $2
				ON CONFLICT (batch_id, seq) DO NOTHING`,
				row.id, row.companyID, acct.ID, string(state), notBefore, camp.TemplateID, row.isForced, now, *row.segmentID)
			if err != nil {
				return fmt.Errorf("expand segment %d into batch %s: %w", *row.segmentID, row.id, err)
			}
			tag = t.RowsAffected()
		} else {
			t, err := tx.Exec(ctx, `
				INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
					lane, template_id, bypass_rules, created_at, updated_at)
				SELECT $1, p.ord - 1, $2, c.id, p.phone, $3, $4, $5, 'campaign', $6, $7, $8, $8
				FROM unnest($9::text[]) WITH ORDINALITY AS p(phone, ord)
				LEFT JOIN contacts c ON c.company_id = $2 AND c.phone = p.phone
				ON CONFLICT (batch_id, seq) DO NOTHING`,
				row.id, row.companyID, acct.ID, string(state), notBefore, camp.TemplateID, row.isForced, now, phones)
			if err != nil {
				return fmt.Errorf("expand batch %s: %w", row.id, err)
			}
			tag = t.RowsAffected()
		}
		status := BatchProcessing
		switch {
		case tag == 0:
			status = BatchCompleted
		case state == StateScheduled:
			status = BatchScheduled
		}
		out = Expansion{Result: ResultExpanded, AccountID: acct.ID, Messages: int(tag), Due: tag > 0 && state == StateQueued}
		if cancelled {
			return finishCancelled(ctx, tx, row.id, int(tag), "", now, &out)
		}
		return finishBatch(ctx, tx, row.id, status, int(tag), "", now)
	})
	if err != nil {
		return Expansion{}, err
	}
	return out, nil
}

// messageOverrides is messages.overrides: what personalises one automation
// message beyond its contact record, as the trigger gave it.
type messageOverrides struct {
	FirstName string            `json:"first_name,omitempty"`
	LastName  string            `json:"last_name,omitempty"`
	Variables map[string]string `json:"variables,omitempty"`
	ImageURL  string            `json:"image_url,omitempty"`
	VideoURL  string            `json:"video_url,omitempty"`
	URL       string            `json:"url,omitempty"`
	URL2      string            `json:"url2,omitempty"`
}

// Automation expands an automation trigger: every contact is created or
// updated (names when given, variables merged; see contacts.Store.Upsert),
// then one message per contact is queued now with bypass_rules (no opt-out,
// no delivery hours) and the trigger's personalisation and media/URL
// overrides (a contact's own image_url/video_url win over the request's).
// A phone given twice gets one message, its first entry's (the gateway's
// rule, phone.FirstOfEach, applied again as a safety net).
func (x *Expander) Automation(ctx context.Context, b *sendsv1.AutomationBatch) (Expansion, error) {
	if _, err := uuid.Parse(b.GetBatchId()); err != nil {
		return Expansion{}, reject("batch id %q is not a UUID", b.GetBatchId())
	}
	if b.GetCompanyId() <= 0 {
		return Expansion{}, reject("batch %s has no company", b.GetBatchId())
	}
	type entry struct {
		up contacts.Upsert
		ov messageOverrides
	}
	kept, order, bad := phone.FirstOfEach(b.GetContacts(), (*sendsv1.AutomationContact).GetPhone)
	if bad >= 0 {
		return Expansion{}, reject("batch %s: contact %d's phone is not E.164", b.GetBatchId(), bad+1)
	}
	entries := make(map[string]*entry, len(order))
	for i, c := range kept {
		p := order[i]
		e := &entry{up: contacts.Upsert{Phone: p}, ov: messageOverrides{Variables: map[string]string{}}}
		entries[p] = e
		if c.FirstName != nil && *c.FirstName != "" {
			e.up.FirstName, e.ov.FirstName = c.FirstName, *c.FirstName
		}
		if c.LastName != nil && *c.LastName != "" {
			e.up.LastName, e.ov.LastName = c.LastName, *c.LastName
		}
		for k, v := range c.GetVariables() {
			e.ov.Variables[k] = v
		}
		if c.GetImageUrl() != "" {
			e.ov.ImageURL = c.GetImageUrl()
		}
		if c.GetVideoUrl() != "" {
			e.ov.VideoURL = c.GetVideoUrl()
		}
	}
	now := x.now()
	var failure string
	au, err := x.cat.Automation(ctx, b.GetCompanyId(), b.GetAutomationId())
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		failure = fmt.Sprintf("automation %d no longer exists", b.GetAutomationId())
	case err != nil:
		return Expansion{}, err
	case au.TemplateID == nil:
		failure = fmt.Sprintf("automation %d has no template", au.ID)
	case au.MessagingAccountID == nil:
		failure = fmt.Sprintf("automation %d has no messaging account", au.ID)
	case !au.AccountConnected:
		failure = fmt.Sprintf("messaging account %d of automation %d is disconnected", *au.MessagingAccountID, au.ID)
	}
	kind, source, err := bus.DescribeBatch(b)
	if err != nil {
		return Expansion{}, err
	}
	reqOv := messageOverrides{ImageURL: b.GetImageUrl(), VideoURL: b.GetVideoUrl(), URL: b.GetUrl(), URL2: b.GetUrl2()}
	var batchOv []byte
	if reqOv.ImageURL != "" || reqOv.VideoURL != "" || reqOv.URL != "" || reqOv.URL2 != "" {
		if batchOv, err = json.Marshal(reqOv); err != nil {
			return Expansion{}, fmt.Errorf("batch overrides: %w", err)
		}
	}
	row := batchRow{
		id: b.GetBatchId(), companyID: b.GetCompanyId(), kind: kind, source: source,
		contactCount: len(order), isForced: true, idempotencyKey: optional(b.GetIdempotencyKey()),
		acceptedAt: acceptedAt(b.GetAcceptedAt(), now), overrides: batchOv,
	}
	if failure == "" {
		row.automationID = &au.ID
	}
	var out Expansion
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		fresh, cancelled, err := lockBatch(ctx, tx, row)
		if err != nil || !fresh {
			out = Expansion{Result: ResultRedelivered}
			return err
		}
		if failure != "" {
			out = Expansion{Result: ResultFailed, Messages: len(order)}
			if err := insertFailed(ctx, tx, LaneAutomation, row.id, row.companyID, order, failure, now); err != nil {
				return err
			}
			if cancelled {
				return finishCancelled(ctx, tx, row.id, len(order), failure, now, &out)
			}
			return finishBatch(ctx, tx, row.id, BatchFailed, len(order), failure, now)
		}
		ups := make([]contacts.Upsert, 0, len(order))
		for _, p := range order {
			e := entries[p]
			e.up.Variables = e.ov.Variables
			ups = append(ups, e.up)
		}
		saved, err := contacts.NewStore(tx, func() time.Time { return now }).Upsert(ctx, row.companyID, ups)
		if err != nil {
			return err
		}
		seqs := make([]int32, len(order))
		ids := make([]int64, len(order))
		ovs := make([]string, len(order))
		for i, p := range order {
			ov := entries[p].ov
			if ov.ImageURL == "" {
				ov.ImageURL = reqOv.ImageURL
			}
			if ov.VideoURL == "" {
				ov.VideoURL = reqOv.VideoURL
			}
			ov.URL, ov.URL2 = reqOv.URL, reqOv.URL2
			if len(ov.Variables) == 0 {
				ov.Variables = nil
			}
			raw, err := json.Marshal(ov)
			if err != nil {
				return fmt.Errorf("message overrides: %w", err)
			}
			seqs[i], ids[i], ovs[i] = int32(i), saved[p].ID, string(raw)
		}
		t, err := tx.Exec(ctx, `
			INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
				lane, template_id, bypass_rules, overrides, created_at, updated_at)
			SELECT $1, u.seq, $2, u.contact_id, u.phone, $3, 'queued', $4, 'automation', $5, true,
				NULLIF(u.ov, '{}')::jsonb, $4, $4
			FROM unnest($6::int[], $7::bigint[], $8::text[], $9::text[]) AS u(seq, contact_id, phone, ov)
			ON CONFLICT (batch_id, seq) DO NOTHING`,
			row.id, row.companyID, *au.MessagingAccountID, now, *au.TemplateID, seqs, ids, order, ovs)
		if err != nil {
			return fmt.Errorf("expand batch %s: %w", row.id, err)
		}
		n := int(t.RowsAffected())
		status := BatchProcessing
		if n == 0 {
			status = BatchCompleted
		}
		out = Expansion{Result: ResultExpanded, AccountID: *au.MessagingAccountID, Messages: n, Due: n > 0}
		if cancelled {
			return finishCancelled(ctx, tx, row.id, n, "", now, &out)
		}
		return finishBatch(ctx, tx, row.id, status, n, "", now)
	})
	if err != nil {
		return Expansion{}, err
	}
	return out, nil
}
