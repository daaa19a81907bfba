package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
// campaign): one campaign-lane message per number, in order (the first entry
// of each: the gateway's rule, phone.FirstOfEach, applied again as a safety
// net), each for its campaign's template and account or for the
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
	if err := checkBatch(b); err != nil {
		return Expansion{}, err
	}
	msgs, phones, bad := phone.FirstOfEach(b.GetMessages(), (*sendsv1.BatchMessage).GetPhone)
	if bad >= 0 {
		return Expansion{}, reject("batch %s: message %d's phone is not E.164", b.GetBatchId(), bad+1)
	}
	n := len(msgs)
	now := x.now()
	resolved, err := x.resolve(ctx, b.GetCompanyId(), msgs)
	if err != nil {
		return Expansion{}, err
	}
	row, err := rowOf(b, n, b.GetIsForced(), now)
	if err != nil {
		return Expansion{}, err
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
	cols, err := messageColumnsOf(msgs, resolved, state)
	if err != nil {
		return Expansion{}, err
	}
	p := &plan{lane: LaneCampaign, row: row, now: now}
	p.create = func(ctx context.Context, tx pgx.Tx) (Expansion, BatchState, string, error) {
		t, err := tx.Exec(ctx, `
			INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
				lane, template_id, bypass_rules, overrides, error_title, failed_at, created_at, updated_at)
			SELECT $1, u.seq, $2, c.id, u.phone, u.account, u.state::message_state, $3, 'campaign', u.template, $4,
				NULLIF(u.ov, '{}')::jsonb, u.failure, CASE WHEN u.failure IS NULL THEN NULL ELSE $5::timestamptz END, $5, $5
			FROM unnest($6::int[], $7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::text[])
				AS u(seq, phone, account, template, state, ov, failure)
			LEFT JOIN contacts c ON c.company_id = $2 AND c.phone = u.phone
			ON CONFLICT (batch_id, seq) DO NOTHING`,
			row.id, row.companyID, notBefore, row.isForced, now,
			cols.seqs, phones, cols.accounts, cols.templates, cols.states, cols.ovs, cols.failures)
		if err != nil {
			return Expansion{}, "", "", fmt.Errorf("expand batch %s: %w", row.id, err)
		}
		created := int(t.RowsAffected())
		status, failure := statusAfter(created, state), ""
		if created > 0 && cols.failed == created {
			status, failure = BatchFailed, cols.firstFailure
		}
		out := Expansion{Result: ResultExpanded, Messages: created, Due: state == StateQueued && len(cols.wake) > 0}
		if cols.failed == created && created > 0 {
			out.Result = ResultFailed
		}
		if len(cols.wake) > 0 {
			out.AccountID, out.MoreAccounts = cols.wake[0], cols.wake[1:]
		}
		return out, status, failure, nil
	}
	return x.expand(ctx, p)
}

// resolve finds the target of each message of a batch.
func (x *Expander) resolve(ctx context.Context, companyID int64, msgs []*sendsv1.BatchMessage) ([]target, error) {
	tg := &targets{cat: x.cat, companyID: companyID, campaigns: map[int64]target{},
		templates: map[int64]string{}, accounts: map[int64]string{}}
	resolved := make([]target, len(msgs))
	for i, m := range msgs {
		var err error
		if m.GetCampaignId() != 0 {
			resolved[i], err = tg.campaign(ctx, m.GetCampaignId())
		} else {
			resolved[i], err = tg.direct(ctx, m.GetTemplateId(), m.GetMessagingAccountId())
		}
		if err != nil {
			return nil, err
		}
	}
	return resolved, nil
}

// messageColumns are a message batch's messages as the columns of its
// insert, with how many fail, the first failure, and the accounts to wake
// (in order).
type messageColumns struct {
	seqs                []int32
	accounts, templates []*int64
	states, ovs         []string
	failures            []*string
	failed              int
	firstFailure        string
	wake                []int64
}

func messageColumnsOf(msgs []*sendsv1.BatchMessage, resolved []target, state State) (messageColumns, error) {
	n := len(msgs)
	c := messageColumns{seqs: make([]int32, n), accounts: make([]*int64, n), templates: make([]*int64, n),
		states: make([]string, n), ovs: make([]string, n), failures: make([]*string, n)}
	woken := map[int64]bool{}
	for i, m := range msgs {
		r := resolved[i]
		c.seqs[i] = int32(i)
		if r.accountID != 0 {
			c.accounts[i] = &r.accountID
		}
		if r.templateID != 0 {
			c.templates[i] = &r.templateID
		}
		if r.failure != "" {
			c.states[i], c.failures[i] = string(StateFailed), &resolved[i].failure
			c.failed++
			if c.firstFailure == "" {
				c.firstFailure = r.failure
			}
		} else {
			c.states[i] = string(state)
			if !woken[r.accountID] {
				woken[r.accountID] = true
				c.wake = append(c.wake, r.accountID)
			}
		}
		ov := messageOverrides{FirstName: m.GetFirstName(), LastName: m.GetLastName(), Variables: m.GetVariables(),
			ImageURL: m.GetImageUrl(), VideoURL: m.GetVideoUrl(), URL: m.GetUrl(), URL2: m.GetUrl2()}
		if len(ov.Variables) == 0 {
			ov.Variables = nil
		}
		raw, err := json.Marshal(ov)
		if err != nil {
			return messageColumns{}, fmt.Errorf("message overrides: %w", err)
		}
		c.ovs[i] = string(raw)
	}
	return c, nil
}
