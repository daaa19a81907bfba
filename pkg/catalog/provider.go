package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// What the provider says of a company's templates and numbers: the
// template's lifecycle beside its bindings, each number's quality rating,
// each business portfolio's messaging limit tier. A template's status is
// never written here: record.ApplyTemplateChange is the one place that
// changes it.

// wabaMatch is true for an account (alias a) of WABA $1: its waba_id, or
// its phone number id when it has none (written so that both indexes serve).
const wabaMatch = `(a.waba_id = $1 OR (a.waba_id IS NULL AND a.phone_number_id = $1))`

// CompanyTemplate returns a company's template (another company's is
// ErrNotFound).
func (s *Store) CompanyTemplate(ctx context.Context, companyID, id int64) (Template, error) {
	t, err := scanTemplate(s.pool.QueryRow(ctx, `SELECT `+templateColumns+` FROM templates WHERE id = $1 AND company_id = $2`, id, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Template{}, fmt.Errorf("template %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Template{}, fmt.Errorf("load template %d: %w", id, err)
	}
	return t, nil
}

// TemplateHistory is a company's template's status changes, oldest first.
func (s *Store) TemplateHistory(ctx context.Context, companyID, id int64) ([]TemplateEvent, error) {
	return collect(ctx, s, fmt.Sprintf("history of template %d", id), func(r pgx.Row) (TemplateEvent, error) {
		var e TemplateEvent
		err := r.Scan(&e.Status, &e.PreviousStatus, &e.Reason, &e.Source, &e.At)
		return e, err
	}, `SELECT status, previous_status, COALESCE(reason, ''), source, at FROM template_status_events
		WHERE template_id = $1 AND company_id = $2 ORDER BY id`, id, companyID)
}

// SetProviderTemplateID records the provider's id of a company's template.
func (s *Store) SetProviderTemplateID(ctx context.Context, companyID, id int64, providerID string) error {
	return s.execOne(ctx, fmt.Sprintf("template %d provider id", id),
		`UPDATE templates SET provider_template_id = $3 WHERE id = $1 AND company_id = $2`, id, companyID, providerID)
}

// DeleteTemplate removes a company's template that nothing uses yet (a
// submission the provider refused).
func (s *Store) DeleteTemplate(ctx context.Context, companyID, id int64) error {
	return s.execOne(ctx, fmt.Sprintf("delete template %d", id), `DELETE FROM templates WHERE id = $1 AND company_id = $2`, id, companyID)
}

// SetTemplateQuality records a template's quality score (GREEN, YELLOW,
// RED, UNKNOWN); changed is false when it already had it.
func (s *Store) SetTemplateQuality(ctx context.Context, id int64, quality string) (changed bool, err error) {
	return s.setTemplateField(ctx, id, "quality", quality)
}

// SetTemplateCategory records a template's category as the provider has
// it; changed is false when it already had it.
func (s *Store) SetTemplateCategory(ctx context.Context, id int64, category string) (changed bool, err error) {
	return s.setTemplateField(ctx, id, "category", category)
}

func (s *Store) setTemplateField(ctx context.Context, id int64, column, value string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE templates SET `+column+` = $2 WHERE id = $1 AND `+column+` <> $2`, id, value)
	if err != nil {
		return false, dbError(fmt.Sprintf("template %d %s", id, column), err)
	}
	return tag.RowsAffected() == 1, nil
}

// execOne runs a statement that must touch one row (ErrNotFound if none).
func (s *Store) execOne(ctx context.Context, what, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return dbError(what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// WABATemplates returns the templates a WhatsApp Business Account's
// webhooks and listing may be about: those of every company with a number
// in it, submitted to one of its numbers or registered by hand.
func (s *Store) WABATemplates(ctx context.Context, waba string) ([]Template, error) {
	return collect(ctx, s, "templates of WABA "+waba, scanTemplate, `SELECT `+templateColumns+` FROM templates
		WHERE company_id IN (SELECT company_id FROM messaging_accounts a WHERE `+wabaMatch+`)
		  AND (messaging_account_id IS NULL OR messaging_account_id IN (SELECT id FROM messaging_accounts a WHERE `+wabaMatch+`))
		ORDER BY id`, waba)
}

// WABAAccounts returns the numbers of a WhatsApp Business Account, of every
// company.
func (s *Store) WABAAccounts(ctx context.Context, waba string) ([]MessagingAccount, error) {
	return collect(ctx, s, "numbers of WABA "+waba, scanAccount,
		`SELECT `+accountColumns+` FROM messaging_accounts a WHERE `+wabaMatch+` ORDER BY id`, waba)
}

// WABAs returns each WhatsApp Business Account of the connected numbers
// with the number whose token reads it (the oldest).
func (s *Store) WABAs(ctx context.Context) ([]MessagingAccount, error) {
	return collect(ctx, s, "WABAs", scanAccount, `SELECT DISTINCT ON (COALESCE(waba_id, phone_number_id)) `+accountColumns+`
		FROM messaging_accounts WHERE connected ORDER BY COALESCE(waba_id, phone_number_id), id`)
}

// SetAccountQuality records the numbers' quality rating (UNKNOWN, GREEN,
// YELLOW, RED) at; it returns how many changed.
func (s *Store) SetAccountQuality(ctx context.Context, ids []int64, rating string, at time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE messaging_accounts SET quality_rating = $2, quality_updated_at = $3
		WHERE id = ANY($1::bigint[]) AND quality_rating <> $2`, ids, rating, at)
	if err != nil {
		return 0, dbError("numbers' quality", err)
	}
	return int(tag.RowsAffected()), nil
}

// Tier sources (portfolios.source).
const (
	TierFromProvider = "provider"
	TierFromOperator = "operator"
)

// Portfolio is a business portfolio of a company's numbers with its
// messaging limit.
type Portfolio struct {
	ID string `json:"portfolio_id"`
	// Tier is TIER_250, TIER_2K, TIER_10K, TIER_100K or TIER_UNLIMITED
	// (unlimited until the provider or the operator says otherwise).
	Tier string `json:"tier"`
	// Limit is the tier's unique users in a moving 24 hours; 0: unlimited.
	Limit int `json:"limit"`
	// Source says who set the tier: provider, operator, or "" (never set).
	Source    string             `json:"source"`
	UpdatedAt *time.Time         `json:"updated_at"`
	Numbers   []MessagingAccount `json:"numbers"`
}

// Portfolios returns the business portfolios of a company's numbers, each
// with its tier and its numbers, by portfolio id.
func (s *Store) Portfolios(ctx context.Context, companyID int64) ([]Portfolio, error) {
	accts, err := s.MessagingAccounts(ctx, companyID)
	if err != nil {
		return nil, err
	}
	type tier struct {
		tier, source string
		at           time.Time
	}
	tiers := map[string]tier{}
	rows, err := s.pool.Query(ctx, `SELECT portfolio_id, tier, source, updated_at FROM portfolios WHERE company_id = $1`, companyID)
	if err != nil {
		return nil, fmt.Errorf("portfolios of company %d: %w", companyID, err)
	}
	var id string
	var t tier
	if _, err := pgx.ForEachRow(rows, []any{&id, &t.tier, &t.source, &t.at}, func() error { tiers[id] = t; return nil }); err != nil {
		return nil, fmt.Errorf("portfolios of company %d: %w", companyID, err)
	}
	var out []Portfolio
	index := map[string]int{}
	for _, a := range accts {
		pid := a.Portfolio()
		i, ok := index[pid]
		if !ok {
			p := Portfolio{ID: pid, Tier: whatsapp.TierUnlimited, Numbers: []MessagingAccount{}}
			if t, ok := tiers[pid]; ok {
				at := t.at
				p.Tier, p.Source, p.UpdatedAt = t.tier, t.source, &at
			}
			p.Limit, _ = whatsapp.TierLimit(p.Tier)
			i = len(out)
			index[pid] = i
			out = append(out, p)
		}
		out[i].Numbers = append(out[i].Numbers, a)
	}
	return out, nil
}

// SetPortfolioTier records a portfolio's messaging limit tier from source
// (TierFromProvider, TierFromOperator). The portfolio must be one of the
// company's numbers' (else ErrNotFound) and the tier one of whatsapp's
// (else ErrInvalid). The last word wins, whoever says it.
func (s *Store) SetPortfolioTier(ctx context.Context, companyID int64, portfolioID, tier, source string) error {
	if _, ok := whatsapp.TierLimit(tier); !ok {
		return fmt.Errorf("portfolio %s: %w: tier %q (TIER_250, TIER_2K, TIER_10K, TIER_100K or TIER_UNLIMITED)", portfolioID, ErrInvalid, tier)
	}
	return s.execOne(ctx, "portfolio "+portfolioID, `
		INSERT INTO portfolios (company_id, portfolio_id, tier, source, updated_at)
		SELECT $1, $2, $3, $4, now()
		WHERE EXISTS (SELECT 1 FROM messaging_accounts WHERE company_id = $1 AND COALESCE(portfolio_id, waba_id, phone_number_id) = $2)
		ON CONFLICT (company_id, portfolio_id) DO UPDATE SET tier = EXCLUDED.tier, source = EXCLUDED.source, updated_at = EXCLUDED.updated_at`,
		companyID, portfolioID, tier, source)
}
