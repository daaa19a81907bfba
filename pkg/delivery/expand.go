package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
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
	// eng, when set, is the engine a fresh campaign batch's first messages
	// are handed to, claimed as they are created (handoff.go).
	eng *engine
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

// sentBatch is what every batch message of the SENDS stream says about its
// batch.
type sentBatch interface {
	proto.Message
	GetBatchId() string
	GetCompanyId() int64
	GetIdempotencyKey() string
	GetAcceptedAt() *timestamppb.Timestamp
}

// checkBatch rejects a batch without a UUID or a company.
func checkBatch(b sentBatch) error {
	if _, err := uuid.Parse(b.GetBatchId()); err != nil {
		return reject("batch id %q is not a UUID", b.GetBatchId())
	}
	if b.GetCompanyId() <= 0 {
		return reject("batch %s has no company", b.GetBatchId())
	}
	return nil
}

// rowOf is the batches row of b, of count contacts.
func rowOf(b sentBatch, count int, forced bool, now time.Time) (batchRow, error) {
	kind, source, err := bus.DescribeBatch(b)
	if err != nil {
		return batchRow{}, err
	}
	return batchRow{
		id: b.GetBatchId(), companyID: b.GetCompanyId(), kind: kind, source: source,
		contactCount: count, isForced: forced, idempotencyKey: optional(b.GetIdempotencyKey()),
		acceptedAt: acceptedAt(b.GetAcceptedAt(), now),
	}, nil
}

// plan is one batch's expansion for the skeleton every kind shares
// (Expander.expand): the batch row to record, and either why the whole batch
// fails (failure; each of phones gets a failed message saying so) or how
// its messages are created.
type plan struct {
	lane    Lane
	row     batchRow
	phones  []string
	failure string
	now     time.Time
	// prepare, when set, runs first in the transaction; it may still set
	// failure.
	prepare func(ctx context.Context, tx pgx.Tx, p *plan) error
	// create inserts the messages and says what that did: the expansion,
	// the batch's status and its failure ("" unless it failed).
	create func(ctx context.Context, tx pgx.Tx) (Expansion, BatchState, string, error)
	// cancelled is set before create runs: the batch was cancelled in the
	// stream (its messages are cancelled once created; none is claimed).
	cancelled bool
	// settle, set by create, completes the batch after its status is
	// recorded: some of its messages were final at creation.
	settle bool
}

// expand records the batch and creates its messages in one transaction:
// once, however often the batch is delivered; failed when the plan says the
// batch cannot be sent; cancelled when it was cancelled in the stream.
func (x *Expander) expand(ctx context.Context, p *plan) (Expansion, error) {
	var out Expansion
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		if p.prepare != nil {
			if err := p.prepare(ctx, tx, p); err != nil {
				return err
			}
		}
		fresh, cancelled, err := lockBatch(ctx, tx, p.row)
		if err != nil || !fresh {
			out = Expansion{Result: ResultRedelivered}
			return err
		}
		p.cancelled = cancelled
		status, failure := BatchFailed, p.failure
		if failure != "" {
			out = Expansion{Result: ResultFailed, Messages: len(p.phones)}
			if err := insertFailed(ctx, tx, p.lane, p.row.id, p.row.companyID, p.phones, failure, p.now); err != nil {
				return err
			}
		} else if out, status, failure, err = p.create(ctx, tx); err != nil {
			return err
		}
		if cancelled {
			return finishCancelled(ctx, tx, p.row.id, out.Messages, failure, p.now, &out)
		}
		if err := finishBatch(ctx, tx, p.row.id, status, out.Messages, failure, p.now); err != nil || !p.settle {
			return err
		}
		return completeBatches(ctx, tx, []string{p.row.id}, p.now)
	})
	if err != nil {
		return Expansion{}, err
	}
	return out, nil
}

// statusAfter is the status of a batch that created n messages in state.
func statusAfter(n int, state State) BatchState {
	switch {
	case n == 0:
		return BatchCompleted
	case state == StateScheduled:
		return BatchScheduled
	}
	return BatchProcessing
}

// Campaign expands a campaign batch: one message per phone (or per member
// of its segment), queued now or scheduled for scheduled_at, for the
// campaign's account and template; bypass_rules is is_forced. Opt-out is
// decided when a message is claimed, so that a later opt-out still counts.
func (x *Expander) Campaign(ctx context.Context, b *sendsv1.CampaignBatch) (Expansion, error) {
	if err := checkBatch(b); err != nil {
		return Expansion{}, err
	}
	// The gateway removes duplicates (phone.FirstOfEach); one that slips
	// through still gets a single message.
	_, phones, bad := phone.FirstOfEach(b.GetPhones(), phone.Itself)
	if bad >= 0 {
		return Expansion{}, reject("batch %s: phone %d is not E.164", b.GetBatchId(), bad+1)
	}
	now := x.now()
	row, err := rowOf(b, len(phones), b.GetIsForced(), now)
	if err != nil {
		return Expansion{}, err
	}
	camp, acct, failure, err := x.campaignTarget(ctx, b.GetCompanyId(), b.GetCampaignId())
	if err != nil {
		return Expansion{}, err
	}
	if failure == "" {
		row.campaignID = &camp.ID
	}
	state, notBefore := row.schedule(b.GetScheduledAt(), now)
	p := &plan{lane: LaneCampaign, row: row, phones: phones, failure: failure, now: now}
	if segmentID := b.GetSegmentId(); segmentID != 0 {
		p.prepare = func(ctx context.Context, tx pgx.Tx, p *plan) error { return findSegment(ctx, tx, p, segmentID) }
	}
	// A fresh batch due now may claim its first messages for this
	// dispatcher as it creates them (handoff.go).
	var h *handoff
	if failure == "" && b.GetSegmentId() == 0 && state == StateQueued {
		h = x.eng.reserve(acct, row.isForced, len(phones), now)
	}
	p.create = func(ctx context.Context, tx pgx.Tx) (Expansion, BatchState, string, error) {
		var t pgconn.CommandTag
		var err error
		if p.row.segmentID != nil {
			t, err = tx.Exec(ctx, `
				INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
					lane, template_id, bypass_rules, created_at, updated_at)
				SELECT $1, (row_number() OVER (ORDER BY c.id)) - 1, $2, c.id, c.phone, $3, $4, $5, 'campaign', $6, $7, $8, $8
				FROM segment_members sm JOIN contacts c ON c.id = sm.contact_id
				WHERE sm.segment_id = $9 AND c.company_id = $2
				ON CONFLICT (batch_id, seq) DO NOTHING`,
				row.id, row.companyID, acct.ID, string(state), notBefore, camp.TemplateID, row.isForced, now, *p.row.segmentID)
		} else {
			var n, claimed int
			n, claimed, err = x.insertPhones(ctx, tx, h, p, acct.ID, string(state), notBefore, camp.TemplateID)
			if err == nil {
				return Expansion{Result: ResultExpanded, AccountID: acct.ID, Messages: n, Due: n > claimed && state == StateQueued},
					statusAfter(n, state), "", nil
			}
		}
		if err != nil {
			return Expansion{}, "", "", fmt.Errorf("expand batch %s: %w", row.id, err)
		}
		n := int(t.RowsAffected())
		return Expansion{Result: ResultExpanded, AccountID: acct.ID, Messages: n, Due: n > 0 && state == StateQueued},
			statusAfter(n, state), "", nil
	}
	out, err := x.expand(ctx, p)
	h.done(err == nil)
	return out, err
}

// insertPhones creates a campaign batch's messages for p.phones: the first
// ones claimed for h (when the account has no older due message; see
// handoff.limit), the others in state. It returns how many it created and
// how many of those it claimed (sent or skipped).
func (x *Expander) insertPhones(ctx context.Context, tx pgx.Tx, h *handoff, p *plan, accountID int64, state string,
	notBefore time.Time, templateID int64) (n, claimed int, err error) {
	limit := 0
	if !p.cancelled {
		if limit, err = h.limit(ctx, tx, p.now); err != nil {
			return 0, 0, err
		}
	}
	row := p.row
	if limit == 0 {
		t, err := tx.Exec(ctx, `
			INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
				lane, template_id, bypass_rules, created_at, updated_at)
			SELECT $1, p.ord - 1, $2, c.id, p.phone, $3, $4, $5, 'campaign', $6, $7, $8, $8
			FROM unnest($9::text[]) WITH ORDINALITY AS p(phone, ord)
			LEFT JOIN contacts c ON c.company_id = $2 AND c.phone = p.phone
			ON CONFLICT (batch_id, seq) DO NOTHING`,
			row.id, row.companyID, accountID, state, notBefore, templateID, row.isForced, p.now, p.phones)
		return int(t.RowsAffected()), 0, err
	}
	n, err = h.insertClaimed(ctx, tx, campaignFromPhones, row.id, row.companyID, templateID, p.now,
		row.id, row.companyID, accountID, state, notBefore, templateID, row.isForced, p.now, p.phones, limit)
	if err != nil {
		return 0, 0, err
	}
	// Opted-out contacts' messages are final already: the batch may be
	// complete (expand settles it after recording its status).
	p.settle = h.skipped > 0
	return n, len(h.claimed), nil
}

// campaignTarget is a campaign and its account, or why a batch of it
// cannot be sent.
func (x *Expander) campaignTarget(ctx context.Context, companyID, id int64) (catalog.Campaign, catalog.MessagingAccount, string, error) {
	camp, err := x.cat.Campaign(ctx, companyID, id)
	var acct catalog.MessagingAccount
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return camp, acct, fmt.Sprintf("campaign %d no longer exists", id), nil
	case err != nil:
		return camp, acct, "", err
	}
	acct, err = x.cat.MessagingAccount(ctx, camp.MessagingAccountID)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return camp, acct, fmt.Sprintf("messaging account %d of campaign %d no longer exists", camp.MessagingAccountID, camp.ID), nil
	case err != nil:
		return camp, acct, "", err
	case !acct.Connected:
		return camp, acct, fmt.Sprintf("messaging account %d of campaign %d is disconnected", acct.ID, camp.ID), nil
	}
	return camp, acct, "", nil
}

// findSegment records a campaign batch's segment, or fails the batch when
// the segment is gone.
func findSegment(ctx context.Context, tx pgx.Tx, p *plan, segmentID int64) error {
	if p.failure != "" {
		return nil
	}
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM segments WHERE id = $1 AND company_id = $2)`,
		segmentID, p.row.companyID).Scan(&ok); err != nil {
		return fmt.Errorf("find segment %d: %w", segmentID, err)
	}
	if ok {
		p.row.segmentID = &segmentID
	} else {
		p.failure = fmt.Sprintf("segment %d no longer exists", segmentID)
		p.row.campaignID = nil
	}
	return nil
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
	if err := checkBatch(b); err != nil {
		return Expansion{}, err
	}
	entries, order, bad := automationEntries(b)
	if bad >= 0 {
		return Expansion{}, reject("batch %s: contact %d's phone is not E.164", b.GetBatchId(), bad+1)
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
	row, err := rowOf(b, len(order), true, now)
	if err != nil {
		return Expansion{}, err
	}
	reqOv := messageOverrides{ImageURL: b.GetImageUrl(), VideoURL: b.GetVideoUrl(), URL: b.GetUrl(), URL2: b.GetUrl2()}
	if reqOv.ImageURL != "" || reqOv.VideoURL != "" || reqOv.URL != "" || reqOv.URL2 != "" {
		if row.overrides, err = json.Marshal(reqOv); err != nil {
			return Expansion{}, fmt.Errorf("batch overrides: %w", err)
		}
	}
	if failure == "" {
		row.automationID = &au.ID
	}
	p := &plan{lane: LaneAutomation, row: row, phones: order, failure: failure, now: now}
	p.create = func(ctx context.Context, tx pgx.Tx) (Expansion, BatchState, string, error) {
		ups := make([]contacts.Upsert, 0, len(order))
		for _, p := range order {
			e := entries[p]
			e.up.Variables = e.ov.Variables
			ups = append(ups, e.up)
		}
		saved, err := contacts.NewStore(tx, func() time.Time { return now }).Upsert(ctx, row.companyID, ups)
		if err != nil {
			return Expansion{}, "", "", err
		}
		seqs := make([]int32, len(order))
		ids := make([]int64, len(order))
		ovs := make([]string, len(order))
		for i, p := range order {
			raw, err := entries[p].ov.with(reqOv)
			if err != nil {
				return Expansion{}, "", "", err
			}
			seqs[i], ids[i], ovs[i] = int32(i), saved[p].ID, raw
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
			return Expansion{}, "", "", fmt.Errorf("expand batch %s: %w", row.id, err)
		}
		n := int(t.RowsAffected())
		return Expansion{Result: ResultExpanded, AccountID: *au.MessagingAccountID, Messages: n, Due: n > 0},
			statusAfter(n, StateQueued), "", nil
	}
	return x.expand(ctx, p)
}

// automationEntry is one contact of an automation trigger: its address-book
// update and its message's personalisation.
type automationEntry struct {
	up contacts.Upsert
	ov messageOverrides
}

// automationEntries are a trigger's contacts by phone, the first entry of
// each (phone.FirstOfEach), and the phones in order; bad is the index of a
// phone that is not E.164, or -1.
func automationEntries(b *sendsv1.AutomationBatch) (map[string]*automationEntry, []string, int) {
	kept, order, bad := phone.FirstOfEach(b.GetContacts(), (*sendsv1.AutomationContact).GetPhone)
	if bad >= 0 {
		return nil, nil, bad
	}
	entries := make(map[string]*automationEntry, len(order))
	for i, c := range kept {
		p := order[i]
		e := &automationEntry{up: contacts.Upsert{Phone: p}, ov: messageOverrides{Variables: map[string]string{}}}
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
	return entries, order, -1
}

// with is a contact's overrides completed by the request's (its own media
// win; the URLs are the request's), as messages.overrides.
func (ov messageOverrides) with(req messageOverrides) (string, error) {
	if ov.ImageURL == "" {
		ov.ImageURL = req.ImageURL
	}
	if ov.VideoURL == "" {
		ov.VideoURL = req.VideoURL
	}
	ov.URL, ov.URL2 = req.URL, req.URL2
	if len(ov.Variables) == 0 {
		ov.Variables = nil
	}
	raw, err := json.Marshal(ov)
	if err != nil {
		return "", fmt.Errorf("message overrides: %w", err)
	}
	return string(raw), nil
}
