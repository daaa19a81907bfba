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
	"github.com/parleyhq/parley/pkg/record"
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
			row.CampaignID = &resolved[0].campaignID
		}
	}
	state, notBefore := schedule(&row, b.GetScheduledAt(), now)
	cols, err := messageColumnsOf(msgs, phones, resolved)
	if err != nil {
		return Expansion{}, err
	}
	p := &plan{lane: record.LaneCampaign, row: row, now: now}
	p.create = func(ctx context.Context, tx pgx.Tx) (Expansion, record.BatchState, string, error) {
		created, err := record.InsertBatchMessages(ctx, tx, record.NewMessages{BatchID: row.ID, CompanyID: row.CompanyID,
			State: state, NotBefore: notBefore, BypassRules: row.IsForced, At: now}, cols.entries)
		if err != nil {
			return Expansion{}, "", "", err
		}
		status, failure := statusAfter(created, state), ""
		if created > 0 && cols.failed == created {
			status, failure = record.BatchFailed, cols.firstFailure
		}
		out := Expansion{Result: ResultExpanded, Messages: created, Due: state == record.StateQueued && len(cols.wake) > 0}
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

// messageColumns are a message batch's messages as record.InsertBatchMessages
// takes them, with how many fail, the first failure, and the accounts to
// wake (in order).
type messageColumns struct {
	entries      []record.BatchEntry
	failed       int
	firstFailure string
	wake         []int64
}

func messageColumnsOf(msgs []*sendsv1.BatchMessage, phones []string, resolved []target) (messageColumns, error) {
	c := messageColumns{entries: make([]record.BatchEntry, len(msgs))}
	woken := map[int64]bool{}
	for i, m := range msgs {
		r := resolved[i]
		e := record.BatchEntry{Phone: phones[i], Failure: r.failure}
		if r.accountID != 0 {
			e.AccountID = &resolved[i].accountID
		}
		if r.templateID != 0 {
			e.TemplateID = &resolved[i].templateID
		}
		if r.failure != "" {
			c.failed++
			if c.firstFailure == "" {
				c.firstFailure = r.failure
			}
		} else if !woken[r.accountID] {
			woken[r.accountID] = true
			c.wake = append(c.wake, r.accountID)
		}
		ov := record.Overrides{FirstName: m.GetFirstName(), LastName: m.GetLastName(), Variables: m.GetVariables(),
			ImageURL: m.GetImageUrl(), VideoURL: m.GetVideoUrl(), URL: m.GetUrl(), URL2: m.GetUrl2()}
		if len(ov.Variables) == 0 {
			ov.Variables = nil
		}
		raw, err := json.Marshal(ov)
		if err != nil {
			return messageColumns{}, fmt.Errorf("message overrides: %w", err)
		}
		e.Overrides = string(raw)
		c.entries[i] = e
	}
	return c, nil
}
