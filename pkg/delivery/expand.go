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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/phone"
	"github.com/parleyhq/parley/pkg/record"
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
func schedule(r *record.BatchRow, ts *timestamppb.Timestamp, now time.Time) (record.State, time.Time) {
	if ts == nil {
		return record.StateQueued, now
	}
	at := ts.AsTime()
	r.ScheduledAt = &at
	if at.After(now) {
		return record.StateScheduled, at
	}
	return record.StateQueued, now
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
func rowOf(b sentBatch, count int, forced bool, now time.Time) (record.BatchRow, error) {
	kind, source, err := bus.DescribeBatch(b)
	if err != nil {
		return record.BatchRow{}, err
	}
	return record.BatchRow{
		ID: b.GetBatchId(), CompanyID: b.GetCompanyId(), Kind: kind, Source: source,
		ContactCount: count, IsForced: forced, IdempotencyKey: b.GetIdempotencyKey(),
		AcceptedAt: acceptedAt(b.GetAcceptedAt(), now),
	}, nil
}

// plan is one batch's expansion for the skeleton every kind shares
// (Expander.expand): the batch row to record, and either why the whole batch
// fails (failure; each of phones gets a failed message saying so) or how
// its messages are created.
type plan struct {
	lane    record.Lane
	row     record.BatchRow
	phones  []string
	failure string
	now     time.Time
	// prepare, when set, runs first in the transaction; it may still set
	// failure.
	prepare func(ctx context.Context, tx pgx.Tx, p *plan) error
	// create inserts the messages and says what that did: the expansion,
	// the batch's status and its failure ("" unless it failed).
	create func(ctx context.Context, tx pgx.Tx) (Expansion, record.BatchState, string, error)
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
		fresh, cancelled, err := record.LockBatch(ctx, tx, p.row)
		if mismatch := (*record.CompanyMismatchError)(nil); errors.As(err, &mismatch) {
			return reject("%s", mismatch.Error())
		}
		if err != nil || !fresh {
			out = Expansion{Result: ResultRedelivered}
			return err
		}
		p.cancelled = cancelled
		status, failure := record.BatchFailed, p.failure
		if failure != "" {
			out = Expansion{Result: ResultFailed, Messages: len(p.phones)}
			if err := record.InsertFailed(ctx, tx, p.lane, p.row.ID, p.row.CompanyID, p.phones, failure, p.now); err != nil {
				return err
			}
		} else if out, status, failure, err = p.create(ctx, tx); err != nil {
			return err
		}
		if cancelled {
			// Nothing of a batch cancelled in the stream is due.
			out.Due, out.AccountID, out.MoreAccounts = false, 0, nil
			return record.FinishCancelled(ctx, tx, p.row.ID, out.Messages, failure, p.now)
		}
		if err := record.FinishExpansion(ctx, tx, p.row.ID, status, out.Messages, failure, p.now); err != nil || !p.settle {
			return err
		}
		return record.CompleteBatches(ctx, tx, []string{p.row.ID}, p.now)
	})
	if err != nil {
		return Expansion{}, err
	}
	return out, nil
}

// statusAfter is the status of a batch that created n messages in state.
func statusAfter(n int, state record.State) record.BatchState {
	switch {
	case n == 0:
		return record.BatchCompleted
	case state == record.StateScheduled:
		return record.BatchScheduled
	}
	return record.BatchProcessing
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
		row.CampaignID = &camp.ID
	}
	state, notBefore := schedule(&row, b.GetScheduledAt(), now)
	p := &plan{lane: record.LaneCampaign, row: row, phones: phones, failure: failure, now: now}
	if segmentID := b.GetSegmentId(); segmentID != 0 {
		p.prepare = func(ctx context.Context, tx pgx.Tx, p *plan) error { return findSegment(ctx, tx, p, segmentID) }
	}
	// A fresh batch due now may claim its first messages for this
	// dispatcher as it creates them (handoff.go).
	var h *handoff
	if failure == "" && b.GetSegmentId() == 0 && state == record.StateQueued {
		h = x.eng.reserve(acct, row.IsForced, len(phones), now)
	}
	p.create = func(ctx context.Context, tx pgx.Tx) (Expansion, record.BatchState, string, error) {
		m := record.NewMessages{BatchID: row.ID, CompanyID: row.CompanyID, AccountID: acct.ID, TemplateID: camp.TemplateID,
			State: state, NotBefore: notBefore, BypassRules: row.IsForced, At: now}
		var n, claimed int
		var err error
		if p.row.SegmentID != nil {
			n, err = record.InsertSegmentMessages(ctx, tx, m, *p.row.SegmentID)
		} else {
			n, claimed, err = x.insertPhones(ctx, tx, h, p, m)
		}
		if err != nil {
			return Expansion{}, "", "", err
		}
		return Expansion{Result: ResultExpanded, AccountID: acct.ID, Messages: n, Due: n > claimed && state == record.StateQueued},
			statusAfter(n, state), "", nil
	}
	out, err := x.expand(ctx, p)
	h.done(err == nil)
	return out, err
}

// insertPhones creates a campaign batch's messages for p.phones: the first
// ones claimed for h (when the account has no older due message; see
// handoff.limit), the others in m.State. It returns how many it created and
// how many of those it claimed (sent or skipped).
func (x *Expander) insertPhones(ctx context.Context, tx pgx.Tx, h *handoff, p *plan, m record.NewMessages) (n, claimed int, err error) {
	limit := 0
	if !p.cancelled {
		if limit, err = h.limit(ctx, tx, p.now); err != nil {
			return 0, 0, err
		}
	}
	if limit == 0 {
		n, err = record.InsertPhoneMessages(ctx, tx, m, p.phones)
		return n, 0, err
	}
	if n, err = h.insertClaimed(ctx, tx, m, p.phones, limit); err != nil {
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
// the segment is gone. A segment deleted (pkg/segments) after the gateway
// accepted the batch is still a row: the failed batch keeps its campaign
// and segment, whose names its status shows. The share lock holds off a
// delete until the members are expanded.
func findSegment(ctx context.Context, tx pgx.Tx, p *plan, segmentID int64) error {
	if p.failure != "" {
		return nil
	}
	var name string
	var deleted bool
	err := tx.QueryRow(ctx, `SELECT name, deleted_at IS NOT NULL FROM segments WHERE id = $1 AND company_id = $2 FOR KEY SHARE`,
		segmentID, p.row.CompanyID).Scan(&name, &deleted)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		p.failure = fmt.Sprintf("segment %d no longer exists", segmentID)
		p.row.CampaignID = nil
	case err != nil:
		return fmt.Errorf("find segment %d: %w", segmentID, err)
	case deleted:
		p.failure = fmt.Sprintf("segment %q was deleted", name)
		p.row.SegmentID = &segmentID
	default:
		p.row.SegmentID = &segmentID
	}
	return nil
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
	reqOv := record.Overrides{ImageURL: b.GetImageUrl(), VideoURL: b.GetVideoUrl(), URL: b.GetUrl(), URL2: b.GetUrl2()}
	if reqOv.ImageURL != "" || reqOv.VideoURL != "" || reqOv.URL != "" || reqOv.URL2 != "" {
		if row.Overrides, err = json.Marshal(reqOv); err != nil {
			return Expansion{}, fmt.Errorf("batch overrides: %w", err)
		}
	}
	if failure == "" {
		row.AutomationID = &au.ID
	}
	p := &plan{lane: record.LaneAutomation, row: row, phones: order, failure: failure, now: now}
	p.create = func(ctx context.Context, tx pgx.Tx) (Expansion, record.BatchState, string, error) {
		ups := make([]contacts.Upsert, 0, len(order))
		for _, p := range order {
			e := entries[p]
			e.up.Variables = e.ov.Variables
			ups = append(ups, e.up)
		}
		saved, err := contacts.NewStore(tx, func() time.Time { return now }).Upsert(ctx, row.CompanyID, ups)
		if err != nil {
			return Expansion{}, "", "", err
		}
		msgs := make([]record.AutomationMessage, len(order))
		for i, p := range order {
			raw, err := entries[p].ov.With(reqOv)
			if err != nil {
				return Expansion{}, "", "", err
			}
			msgs[i] = record.AutomationMessage{ContactID: saved[p].ID, Phone: p, Overrides: raw}
		}
		n, err := record.InsertAutomationMessages(ctx, tx, record.NewMessages{BatchID: row.ID, CompanyID: row.CompanyID,
			AccountID: *au.MessagingAccountID, TemplateID: *au.TemplateID, State: record.StateQueued, NotBefore: now,
			BypassRules: true, At: now}, msgs)
		if err != nil {
			return Expansion{}, "", "", err
		}
		return Expansion{Result: ResultExpanded, AccountID: *au.MessagingAccountID, Messages: n, Due: n > 0},
			statusAfter(n, record.StateQueued), "", nil
	}
	return x.expand(ctx, p)
}

// automationEntry is one contact of an automation trigger: its address-book
// update and its message's personalisation.
type automationEntry struct {
	up contacts.Upsert
	ov record.Overrides
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
		e := &automationEntry{up: contacts.Upsert{Phone: p}, ov: record.Overrides{Variables: map[string]string{}}}
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

// Reply expands a reply (POST /api/messages): one message on the
// automation lane, recorded with the id the gateway answered, queued now
// with bypass_rules. The gateway checked the contact's window for a
// session message; a window that closed since is the provider's to refuse
// (131047, recorded as the message's failure). A template or account gone
// since the 202 fails the message saying so.
func (x *Expander) Reply(ctx context.Context, b *sendsv1.ReplyBatch) (Expansion, error) {
	if err := checkBatch(b); err != nil {
		return Expansion{}, err
	}
	p, ok := phone.Normalize(b.GetPhone())
	if !ok || p != b.GetPhone() {
		return Expansion{}, reject("batch %s: phone %q is not E.164", b.GetBatchId(), b.GetPhone())
	}
	if b.GetMessageId() <= 0 || (len(b.GetSession()) == 0) == (b.GetTemplateId() == 0) {
		return Expansion{}, reject("batch %s: a reply needs a message id and one of a session message and a template", b.GetBatchId())
	}
	now := x.now()
	var failure string
	acct, err := x.cat.MessagingAccount(ctx, b.GetMessagingAccountId())
	switch {
	case errors.Is(err, catalog.ErrNotFound) || err == nil && acct.CompanyID != b.GetCompanyId():
		failure = fmt.Sprintf("messaging account %d no longer exists", b.GetMessagingAccountId())
	case err != nil:
		return Expansion{}, err
	case !acct.Connected:
		failure = fmt.Sprintf("messaging account %q is disconnected", acct.Name)
	}
	if failure == "" && b.GetTemplateId() != 0 {
		tpl, err := x.cat.Template(ctx, b.GetTemplateId())
		switch {
		case errors.Is(err, catalog.ErrNotFound) || err == nil && tpl.CompanyID != b.GetCompanyId():
			failure = fmt.Sprintf("template %d no longer exists", b.GetTemplateId())
		case err != nil:
			return Expansion{}, err
		}
	}
	row, err := rowOf(b, 1, true, now)
	if err != nil {
		return Expansion{}, err
	}
	ov := "{}"
	if len(b.GetVariables()) > 0 {
		raw, err := json.Marshal(record.Overrides{Variables: b.GetVariables()})
		if err != nil {
			return Expansion{}, fmt.Errorf("reply variables: %w", err)
		}
		ov = string(raw)
	}
	pl := &plan{lane: record.LaneAutomation, row: row, phones: []string{p}, failure: failure, now: now}
	pl.create = func(ctx context.Context, tx pgx.Tx) (Expansion, record.BatchState, string, error) {
		n, err := record.InsertReply(ctx, tx, record.NewMessages{BatchID: row.ID, CompanyID: row.CompanyID,
			AccountID: acct.ID, State: record.StateQueued, NotBefore: now, BypassRules: true, At: now},
			record.Reply{ID: b.GetMessageId(), Phone: p, AccountID: acct.ID, TemplateID: b.GetTemplateId(),
				Content: b.GetSession(), Overrides: ov})
		if err != nil {
			return Expansion{}, "", "", err
		}
		return Expansion{Result: ResultExpanded, AccountID: acct.ID, Messages: n, Due: n > 0},
			statusAfter(n, record.StateQueued), "", nil
	}
	return x.expand(ctx, pl)
}
