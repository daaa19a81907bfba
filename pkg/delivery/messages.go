package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/phone"
)

// target is where one message of a message batch goes, or why it cannot.
type target struct {
	campaignID int64
	templateID int64
	accountID  int64
	failure    string
}

// targets resolves the targets of a message batch against the catalog,
// each campaign, template and account once.
type targets struct {
	cat       Catalog
	companyID int64
	campaigns map[int64]target
	templates map[int64]string // failure, "" when usable
	accounts  map[int64]string
}

func (t *targets) campaign(ctx context.Context, id int64) (target, error) {
	if tg, ok := t.campaigns[id]; ok {
		return tg, nil
	}
	tg := target{campaignID: id}
	camp, err := t.cat.Campaign(ctx, t.companyID, id)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		tg.failure = fmt.Sprintf("campaign %d no longer exists", id)
	case err != nil:
		return target{}, err
	default:
		tg.templateID, tg.accountID = camp.TemplateID, camp.MessagingAccountID
		if tg.failure, err = t.account(ctx, camp.MessagingAccountID); err != nil {
			return target{}, err
		}
		if tg.failure != "" {
			tg.failure += fmt.Sprintf(" (campaign %d)", id)
		}
	}
	t.campaigns[id] = tg
	return tg, nil
}

func (t *targets) direct(ctx context.Context, templateID, accountID int64) (target, error) {
	tg := target{templateID: templateID, accountID: accountID}
	why, ok := t.templates[templateID]
	if !ok {
		tpl, err := t.cat.Template(ctx, templateID)
		switch {
		case errors.Is(err, catalog.ErrNotFound) || (err == nil && tpl.CompanyID != t.companyID):
			why = fmt.Sprintf("template %d no longer exists", templateID)
		case err != nil:
			return target{}, err
		}
		t.templates[templateID] = why
	}
	if why != "" {
		tg.failure = why
		return tg, nil
	}
	why, err := t.account(ctx, accountID)
	tg.failure = why
	return tg, err
}

// account is why the company's account cannot send, "" when it can.
func (t *targets) account(ctx context.Context, id int64) (string, error) {
	if why, ok := t.accounts[id]; ok {
		return why, nil
	}
	a, err := t.cat.MessagingAccount(ctx, id)
	var why string
	switch {
	case errors.Is(err, catalog.ErrNotFound) || (err == nil && a.CompanyID != t.companyID):
		why = fmt.Sprintf("messaging account %d no longer exists", id)
	case err != nil:
		return "", err
	case !a.Connected:
		why = fmt.Sprintf("messaging account %d is disconnected", id)
	}
	t.accounts[id] = why
	return why, nil
}

// Messages expands a message batch (batch send, or a connector send to a
// campaign): one campaign-lane message per entry, in order, duplicates
// included, each for its campaign's template and account or for the
// template and account it names, with its personalisation and media/URL
// overrides, queued now or scheduled for scheduled_at; bypass_rules is
// is_forced. The address book is not changed: the message is linked to the
// contact of its phone when the company has one (for opt-out), and its
// names and variables override the contact's for this message only.
//
// An entry whose target cannot send (campaign, template or account gone,
// account disconnected) becomes a failed message saying why; the others are
// sent. The batch fails as a whole only when every entry did.
func (x *Expander) Messages(ctx context.Context, b *sendsv1.MessageBatch) (Expansion, error) {
	if _, err := uuid.Parse(b.GetBatchId()); err != nil {
		return Expansion{}, reject("batch id %q is not a UUID", b.GetBatchId())
	}
	if b.GetCompanyId() <= 0 {
		return Expansion{}, reject("batch %s has no company", b.GetBatchId())
	}
	n := len(b.GetMessages())
	phones := make([]string, n)
	for i, m := range b.GetMessages() {
		p, ok := phone.Normalize(m.GetPhone())
		if !ok {
			return Expansion{}, reject("batch %s: message %d's phone is not E.164", b.GetBatchId(), i+1)
		}
		phones[i] = p
	}
	now := x.now()
	tg := &targets{cat: x.cat, companyID: b.GetCompanyId(), campaigns: map[int64]target{},
		templates: map[int64]string{}, accounts: map[int64]string{}}
	resolved := make([]target, n)
	for i, m := range b.GetMessages() {
		var err error
		if m.GetCampaignId() != 0 {
			resolved[i], err = tg.campaign(ctx, m.GetCampaignId())
		} else {
			resolved[i], err = tg.direct(ctx, m.GetTemplateId(), m.GetMessagingAccountId())
		}
		if err != nil {
			return Expansion{}, err
		}
	}

	source := b.GetSource()
	if source == "" {
		source = "api:batch_send"
	}
	row := batchRow{
		id: b.GetBatchId(), companyID: b.GetCompanyId(), kind: kindOf(LaneCampaign, source), source: source,
		contactCount: n, isForced: b.GetIsForced(), idempotencyKey: optional(b.GetIdempotencyKey()),
		acceptedAt: acceptedAt(b.GetAcceptedAt(), now),
	}
	// One campaign for every message (a connector's target): recorded.
	if n > 0 && resolved[0].campaignID != 0 && resolved[0].templateID != 0 {
		same := true
		for _, r := range resolved {
			same = same && r.campaignID == resolved[0].campaignID
		}
		if same {
			row.campaignID = &resolved[0].campaignID
		}
	}
	state, notBefore := row.schedule(b.GetScheduledAt(), now)

	seqs := make([]int32, n)
	accounts, templates := make([]*int64, n), make([]*int64, n)
	states, ovs, failures := make([]string, n), make([]string, n), make([]*string, n)
	var firstFailure string
	failed := 0
	var wake []int64
	woken := map[int64]bool{}
	for i, m := range b.GetMessages() {
		r := resolved[i]
		seqs[i] = int32(i)
		if r.accountID != 0 {
			accounts[i] = &r.accountID
		}
		if r.templateID != 0 {
			templates[i] = &r.templateID
		}
		if r.failure != "" {
			states[i], failures[i] = string(StateFailed), &resolved[i].failure
			failed++
			if firstFailure == "" {
				firstFailure = r.failure
			}
		} else {
			states[i] = string(state)
			if !woken[r.accountID] {
				woken[r.accountID] = true
				wake = append(wake, r.accountID)
			}
		}
		ov := messageOverrides{FirstName: m.GetFirstName(), LastName: m.GetLastName(), Variables: m.GetVariables(),
			ImageURL: m.GetImageUrl(), VideoURL: m.GetVideoUrl(), URL: m.GetUrl(), URL2: m.GetUrl2()}
		if len(ov.Variables) == 0 {
			ov.Variables = nil
		}
		raw, err := json.Marshal(ov)
		if err != nil {
			return Expansion{}, fmt.Errorf("message overrides: %w", err)
		}
		ovs[i] = string(raw)
	}

	var out Expansion
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		fresh, cancelled, err := lockBatch(ctx, tx, row)
		if err != nil || !fresh {
			out = Expansion{Result: ResultRedelivered}
			return err
		}
		t, err := tx.Exec(ctx, `
			INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
				lane, template_id, bypass_rules, overrides, error_title, failed_at, created_at, updated_at)
			SELECT $1, u.seq, $2, c.id, u.phone, u.account, u.state::message_state, $3, 'campaign', u.template, $4,
				NULLIF(u.ov, '{}')::jsonb, u.failure, CASE WHEN u.failure IS NULL THEN NULL ELSE $5::timestamptz END, $5, $5
			FROM unnest($6::int[], $7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::text[])
				AS u(seq, phone, account, template, state, ov, failure)
			LEFT JOIN contacts c ON c.company_id = $2 AND c.phone = u.phone
			ON CONFLICT (batch_id, seq) DO NOTHING`,
			row.id, row.companyID, notBefore, row.isForced, now, seqs, phones, accounts, templates, states, ovs, failures)
		if err != nil {
			return fmt.Errorf("expand batch %s: %w", row.id, err)
		}
		created := int(t.RowsAffected())
		status, failure := BatchProcessing, ""
		switch {
		case created == 0:
			status = BatchCompleted
		case failed == created:
			status, failure = BatchFailed, firstFailure
		case state == StateScheduled:
			status = BatchScheduled
		}
		out = Expansion{Result: ResultExpanded, Messages: created, Due: state == StateQueued && len(wake) > 0}
		if failed == created && created > 0 {
			out.Result = ResultFailed
		}
		if len(wake) > 0 {
			out.AccountID, out.MoreAccounts = wake[0], wake[1:]
		}
		if cancelled {
			return finishCancelled(ctx, tx, row.id, created, failure, now, &out)
		}
		return finishBatch(ctx, tx, row.id, status, created, failure, now)
	})
	if err != nil {
		return Expansion{}, err
	}
	return out, nil
}
