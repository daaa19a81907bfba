package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// NewCompany is what creating a company takes.
type NewCompany struct {
	Slug               string
	Name               string
	SubscriptionActive bool
	Provisioned        bool
	// MaxSegments zero means the default (100).
	MaxSegments int
}

const companyColumns = `id, slug, name, subscription_active, provisioned, max_segments, created_at`

func scanCompany(row pgx.Row) (Company, error) {
	var c Company
	err := row.Scan(&c.ID, &c.Slug, &c.Name, &c.SubscriptionActive, &c.Provisioned, &c.MaxSegments, &c.CreatedAt)
	return c, err
}

// CreateCompany adds a company.
func (s *Store) CreateCompany(ctx context.Context, n NewCompany) (Company, error) {
	if n.MaxSegments == 0 {
		n.MaxSegments = 100
	}
	c, err := scanCompany(s.pool.QueryRow(ctx, `
		INSERT INTO companies (slug, name, subscription_active, provisioned, max_segments)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+companyColumns,
		n.Slug, n.Name, n.SubscriptionActive, n.Provisioned, n.MaxSegments))
	if err != nil {
		return Company{}, dbError("create company "+n.Slug, err)
	}
	return c, nil
}

// CompanyUpdate changes the fields that are set.
type CompanyUpdate struct {
	Name               *string
	SubscriptionActive *bool
	Provisioned        *bool
	MaxSegments        *int
}

// UpdateCompany changes a company's name, subscription, provisioning or
// segment allowance.
func (s *Store) UpdateCompany(ctx context.Context, id int64, u CompanyUpdate) (Company, error) {
	c, err := scanCompany(s.pool.QueryRow(ctx, `
		UPDATE companies SET
			name = COALESCE($2, name),
			subscription_active = COALESCE($3, subscription_active),
			provisioned = COALESCE($4, provisioned),
			max_segments = COALESCE($5, max_segments),
			updated_at = now()
		WHERE id = $1 RETURNING `+companyColumns, id, u.Name, u.SubscriptionActive, u.Provisioned, u.MaxSegments))
	if errors.Is(err, pgx.ErrNoRows) {
		return Company{}, fmt.Errorf("company %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Company{}, dbError(fmt.Sprintf("update company %d", id), err)
	}
	return c, nil
}

// Company returns a company by id.
func (s *Store) Company(ctx context.Context, id int64) (Company, error) {
	c, err := scanCompany(s.pool.QueryRow(ctx, `SELECT `+companyColumns+` FROM companies WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Company{}, fmt.Errorf("company %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Company{}, fmt.Errorf("load company %d: %w", id, err)
	}
	return c, nil
}

// CompanyBySlug returns a company by its slug.
func (s *Store) CompanyBySlug(ctx context.Context, slug string) (Company, error) {
	c, err := scanCompany(s.pool.QueryRow(ctx, `SELECT `+companyColumns+` FROM companies WHERE slug = $1`, slug))
	if errors.Is(err, pgx.ErrNoRows) {
		return Company{}, fmt.Errorf("company %q: %w", slug, ErrNotFound)
	}
	if err != nil {
		return Company{}, fmt.Errorf("load company %q: %w", slug, err)
	}
	return c, nil
}

// Companies lists every company, oldest first.
func (s *Store) Companies(ctx context.Context) ([]Company, error) {
	return collect(ctx, s, "list companies", scanCompany, `SELECT `+companyColumns+` FROM companies ORDER BY id`)
}

// NewMessagingAccount is what connecting a phone number takes.
type NewMessagingAccount struct {
	CompanyID     int64
	Name          string
	PhoneNumberID string
	AccessToken   string
	Connected     bool
	// Timezone is an IANA zone; empty means UTC.
	Timezone string
	Window   *DeliveryWindow
	// ThroughputPerSecond zero means the provider default (80).
	ThroughputPerSecond int
	// WABAID and PortfolioID are optional (digits): see MessagingAccount.
	WABAID, PortfolioID string
}

const accountColumns = `id, company_id, name, phone_number_id, connected, timezone,
	delivery_window_start, delivery_window_end, throughput_per_second, COALESCE(waba_id, ''), COALESCE(portfolio_id, ''),
	quality_rating, quality_updated_at, created_at`

func scanAccount(row pgx.Row) (MessagingAccount, error) {
	var a MessagingAccount
	var start, end pgtype.Time
	err := row.Scan(&a.ID, &a.CompanyID, &a.Name, &a.PhoneNumberID, &a.Connected, &a.Timezone,
		&start, &end, &a.ThroughputPerSecond, &a.WABAID, &a.PortfolioID, &a.QualityRating, &a.QualityUpdatedAt, &a.CreatedAt)
	if start.Valid && end.Valid {
		a.Window = &DeliveryWindow{
			Start: time.Duration(start.Microseconds) * time.Microsecond,
			End:   time.Duration(end.Microseconds) * time.Microsecond,
		}
	}
	return a, err
}

func windowParams(w *DeliveryWindow) (pgtype.Time, pgtype.Time) {
	if w == nil {
		return pgtype.Time{}, pgtype.Time{}
	}
	return pgtype.Time{Microseconds: w.Start.Microseconds(), Valid: true},
		pgtype.Time{Microseconds: w.End.Microseconds(), Valid: true}
}

// CreateMessagingAccount connects a phone number; its token is sealed.
func (s *Store) CreateMessagingAccount(ctx context.Context, n NewMessagingAccount) (MessagingAccount, error) {
	if s.box == nil {
		return MessagingAccount{}, errors.New("create messaging account: store has no token key")
	}
	if n.Timezone == "" {
		n.Timezone = "UTC"
	}
	if _, err := time.LoadLocation(n.Timezone); err != nil {
		return MessagingAccount{}, fmt.Errorf("create messaging account: %w: timezone %q", ErrInvalid, n.Timezone)
	}
	if n.ThroughputPerSecond == 0 {
		n.ThroughputPerSecond = 80
	}
	sealed, err := s.box.Seal(n.AccessToken)
	if err != nil {
		return MessagingAccount{}, fmt.Errorf("seal access token: %w", err)
	}
	start, end := windowParams(n.Window)
	a, err := scanAccount(s.pool.QueryRow(ctx, `
		INSERT INTO messaging_accounts (company_id, name, phone_number_id, access_token_encrypted, connected,
			timezone, delivery_window_start, delivery_window_end, throughput_per_second, waba_id, portfolio_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, ''), NULLIF($11, '')) RETURNING `+accountColumns,
		n.CompanyID, n.Name, n.PhoneNumberID, sealed, n.Connected, n.Timezone, start, end, n.ThroughputPerSecond, n.WABAID, n.PortfolioID))
	if err != nil {
		return MessagingAccount{}, dbError("create messaging account "+n.PhoneNumberID, err)
	}
	return a, nil
}

// AccountUpdate changes the fields that are set. ClearWindow removes the
// delivery-hours restriction.
type AccountUpdate struct {
	Connected           *bool
	Timezone            *string
	Window              *DeliveryWindow
	ClearWindow         bool
	ThroughputPerSecond *int
	// WABAID and PortfolioID set the account's WABA and portfolio; an
	// empty string clears one.
	WABAID, PortfolioID *string
}

// UpdateMessagingAccount changes an account's connection, hours or throughput.
func (s *Store) UpdateMessagingAccount(ctx context.Context, id int64, u AccountUpdate) (MessagingAccount, error) {
	if u.Timezone != nil {
		if _, err := time.LoadLocation(*u.Timezone); err != nil {
			return MessagingAccount{}, fmt.Errorf("update messaging account: %w: timezone %q", ErrInvalid, *u.Timezone)
		}
	}
	start, end := windowParams(u.Window)
	a, err := scanAccount(s.pool.QueryRow(ctx, `
		UPDATE messaging_accounts SET
			connected = COALESCE($2, connected),
			timezone = COALESCE($3, timezone),
			delivery_window_start = CASE WHEN $6 THEN NULL WHEN $4::time IS NOT NULL THEN $4 ELSE delivery_window_start END,
			delivery_window_end = CASE WHEN $6 THEN NULL WHEN $5::time IS NOT NULL THEN $5 ELSE delivery_window_end END,
			throughput_per_second = COALESCE($7, throughput_per_second),
			waba_id = CASE WHEN $8::text IS NULL THEN waba_id ELSE NULLIF($8, '') END,
			portfolio_id = CASE WHEN $9::text IS NULL THEN portfolio_id ELSE NULLIF($9, '') END
		WHERE id = $1 RETURNING `+accountColumns,
		id, u.Connected, u.Timezone, start, end, u.ClearWindow, u.ThroughputPerSecond, u.WABAID, u.PortfolioID))
	if errors.Is(err, pgx.ErrNoRows) {
		return MessagingAccount{}, fmt.Errorf("messaging account %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return MessagingAccount{}, dbError(fmt.Sprintf("update messaging account %d", id), err)
	}
	return a, nil
}

// MessagingAccount returns an account by id.
func (s *Store) MessagingAccount(ctx context.Context, id int64) (MessagingAccount, error) {
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountColumns+` FROM messaging_accounts WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return MessagingAccount{}, fmt.Errorf("messaging account %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return MessagingAccount{}, fmt.Errorf("load messaging account %d: %w", id, err)
	}
	return a, nil
}

// MessagingAccounts lists a company's accounts.
func (s *Store) MessagingAccounts(ctx context.Context, companyID int64) ([]MessagingAccount, error) {
	return collect(ctx, s, "list messaging accounts", scanAccount,
		`SELECT `+accountColumns+` FROM messaging_accounts WHERE company_id = $1 ORDER BY id`, companyID)
}

// AccessToken opens an account's Bearer token. Only dispatchers call it.
func (s *Store) AccessToken(ctx context.Context, accountID int64) (string, error) {
	if s.box == nil {
		return "", errors.New("access token: store has no token key")
	}
	var sealed []byte
	err := s.pool.QueryRow(ctx, `SELECT access_token_encrypted FROM messaging_accounts WHERE id = $1`, accountID).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("messaging account %d: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("load access token of account %d: %w", accountID, err)
	}
	tok, err := s.box.Open(sealed)
	if err != nil {
		return "", fmt.Errorf("access token of account %d: %w", accountID, err)
	}
	return tok, nil
}

// NewTemplate is what registering a template takes.
type NewTemplate struct {
	CompanyID int64
	whatsapp.Template
	// Category is MARKETING (when empty), UTILITY or AUTHENTICATION.
	Category string
	// Submission is set for a template created through Parley: it is
	// stored PENDING, with the submitted definition and the account whose
	// WABA it goes to. Without it the template is registered by hand, one
	// the provider already approved (APPROVED).
	Submission *Submission
}

// Submission is a template's submission to the provider.
type Submission struct {
	MessagingAccountID int64
	Definition         json.RawMessage
}

const templateColumns = `id, company_id, name, language, header_kind, COALESCE(header_text, ''), COALESCE(header_media_url, ''),
	body_parameters, url_button_1_base, url_button_1_default_suffix, url_button_2_base, url_button_2_default_suffix, created_at,
	status, category, quality, COALESCE(status_reason, ''), COALESCE(provider_template_id, ''), messaging_account_id, definition,
	pause_count, paused_until, status_changed_at`

func scanTemplate(row pgx.Row) (Template, error) {
	var t Template
	var kind string
	var params []byte
	var b1, s1, b2, s2 *string
	err := row.Scan(&t.ID, &t.CompanyID, &t.Name, &t.Language, &kind, &t.HeaderText, &t.HeaderMediaURL,
		&params, &b1, &s1, &b2, &s2, &t.CreatedAt,
		&t.Status, &t.Category, &t.Quality, &t.StatusReason, &t.ProviderTemplateID, &t.MessagingAccountID, &t.Definition,
		&t.PauseCount, &t.PausedUntil, &t.StatusChangedAt)
	if err != nil {
		return Template{}, err
	}
	t.HeaderKind = whatsapp.HeaderKind(kind)
	if err := json.Unmarshal(params, &t.BodyParameters); err != nil {
		return Template{}, fmt.Errorf("template %d body_parameters: %w", t.ID, err)
	}
	if b1 != nil {
		t.URLButtons = append(t.URLButtons, whatsapp.URLButton{Base: *b1, DefaultSuffix: deref(s1)})
		if b2 != nil {
			t.URLButtons = append(t.URLButtons, whatsapp.URLButton{Base: *b2, DefaultSuffix: deref(s2)})
		}
	}
	return t, nil
}

// CreateTemplate registers a template.
func (s *Store) CreateTemplate(ctx context.Context, n NewTemplate) (Template, error) {
	if len(n.URLButtons) > 2 {
		return Template{}, fmt.Errorf("create template: %w: at most two URL buttons", ErrInvalid)
	}
	for i, b := range n.BodyParameters {
		switch b.Source {
		case "first_name", "last_name", "phone", "literal":
		case "variable":
			if b.Name == "" {
				return Template{}, fmt.Errorf("create template: %w: body parameter %d binds a variable without a name", ErrInvalid, i+1)
			}
		default:
			return Template{}, fmt.Errorf("create template: %w: body parameter %d has source %q", ErrInvalid, i+1, b.Source)
		}
	}
	if n.Language == "" {
		n.Language = "en_US"
	}
	if n.HeaderKind == "" {
		n.HeaderKind = whatsapp.HeaderNone
	}
	params := n.BodyParameters
	if params == nil {
		params = []whatsapp.Binding{}
	}
	pj, err := json.Marshal(params)
	if err != nil {
		return Template{}, fmt.Errorf("create template: %w", err)
	}
	var b [2]whatsapp.URLButton
	copy(b[:], n.URLButtons)
	if n.Category == "" {
		n.Category = whatsapp.CategoryMarketing
	}
	status, sub := whatsapp.TemplateApproved, Submission{}
	if n.Submission != nil {
		status, sub = whatsapp.TemplatePending, *n.Submission
	}
	t, err := scanTemplate(s.pool.QueryRow(ctx, `
		WITH t AS (
			INSERT INTO templates (company_id, name, language, header_kind, header_text, header_media_url, body_parameters,
				url_button_1_base, url_button_1_default_suffix, url_button_2_base, url_button_2_default_suffix,
				category, status, messaging_account_id, definition)
			SELECT $1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7, NULLIF($8, ''), NULLIF($9, ''), NULLIF($10, ''), NULLIF($11, ''),
				$12, $13, NULLIF($14, 0), $15
			WHERE $14 = 0 OR EXISTS (SELECT 1 FROM messaging_accounts WHERE id = $14 AND company_id = $1)
			RETURNING *),
		h AS (
			INSERT INTO template_status_events (template_id, company_id, status, previous_status, source)
			SELECT id, company_id, status, '', 'submit' FROM t WHERE status = 'PENDING')
		SELECT `+templateColumns+` FROM t`,
		n.CompanyID, n.Name, n.Language, string(n.HeaderKind), n.HeaderText, n.HeaderMediaURL, pj,
		b[0].Base, b[0].DefaultSuffix, b[1].Base, b[1].DefaultSuffix, n.Category, status, sub.MessagingAccountID, []byte(sub.Definition)))
	if errors.Is(err, pgx.ErrNoRows) {
		return Template{}, fmt.Errorf("create template %s: messaging account %d of company %d: %w", n.Name, sub.MessagingAccountID, n.CompanyID, ErrNotFound)
	}
	if err != nil {
		return Template{}, dbError("create template "+n.Name, err)
	}
	return t, nil
}

// Template returns a template by id.
func (s *Store) Template(ctx context.Context, id int64) (Template, error) {
	t, err := scanTemplate(s.pool.QueryRow(ctx, `SELECT `+templateColumns+` FROM templates WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Template{}, fmt.Errorf("template %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Template{}, fmt.Errorf("load template %d: %w", id, err)
	}
	return t, nil
}

// Templates lists a company's templates.
func (s *Store) Templates(ctx context.Context, companyID int64) ([]Template, error) {
	return collect(ctx, s, "list templates", scanTemplate,
		`SELECT `+templateColumns+` FROM templates WHERE company_id = $1 ORDER BY id`, companyID)
}

const campaignColumns = `id, company_id, name, template_id, messaging_account_id, created_at`

func scanCampaign(row pgx.Row) (Campaign, error) {
	var c Campaign
	err := row.Scan(&c.ID, &c.CompanyID, &c.Name, &c.TemplateID, &c.MessagingAccountID, &c.CreatedAt)
	return c, err
}

// CreateCampaign adds a campaign; its template and account must belong to the
// same company.
func (s *Store) CreateCampaign(ctx context.Context, companyID int64, name string, templateID, accountID int64) (Campaign, error) {
	c, err := scanCampaign(s.pool.QueryRow(ctx, `
		INSERT INTO campaigns (company_id, name, template_id, messaging_account_id)
		SELECT $1, $2, t.id, a.id FROM templates t, messaging_accounts a
		WHERE t.id = $3 AND t.company_id = $1 AND a.id = $4 AND a.company_id = $1
		RETURNING `+campaignColumns, companyID, name, templateID, accountID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Campaign{}, fmt.Errorf("create campaign: template %d or account %d of company %d: %w", templateID, accountID, companyID, ErrNotFound)
	}
	if err != nil {
		return Campaign{}, dbError("create campaign "+name, err)
	}
	return c, nil
}

// Campaign returns a company's campaign.
func (s *Store) Campaign(ctx context.Context, companyID, id int64) (Campaign, error) {
	c, err := scanCampaign(s.pool.QueryRow(ctx, `SELECT `+campaignColumns+` FROM campaigns WHERE id = $1 AND company_id = $2`, id, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Campaign{}, fmt.Errorf("campaign %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Campaign{}, fmt.Errorf("load campaign %d: %w", id, err)
	}
	return c, nil
}

// Campaigns lists a company's campaigns.
func (s *Store) Campaigns(ctx context.Context, companyID int64) ([]Campaign, error) {
	return collect(ctx, s, "list campaigns", scanCampaign,
		`SELECT `+campaignColumns+` FROM campaigns WHERE company_id = $1 ORDER BY id`, companyID)
}

// NewAutomation is what creating an automation takes.
type NewAutomation struct {
	CompanyID          int64
	Name               string
	Type               AutomationType
	Active             bool
	TemplateID         *int64
	MessagingAccountID *int64
	TriggerVariables   []string
}

const automationColumns = `au.id, au.company_id, au.name, au.type, au.active, au.template_id, au.messaging_account_id,
	COALESCE(ma.connected, false), au.trigger_variables, au.created_at`

const automationFrom = ` FROM automations au LEFT JOIN messaging_accounts ma ON ma.id = au.messaging_account_id`

func scanAutomation(row pgx.Row) (Automation, error) {
	var a Automation
	var typ string
	err := row.Scan(&a.ID, &a.CompanyID, &a.Name, &typ, &a.Active, &a.TemplateID, &a.MessagingAccountID,
		&a.AccountConnected, &a.TriggerVariables, &a.CreatedAt)
	a.Type = AutomationType(typ)
	return a, err
}

// CreateAutomation adds an automation. A template or account, when given,
// must belong to the same company.
func (s *Store) CreateAutomation(ctx context.Context, n NewAutomation) (Automation, error) {
	if n.Type == "" {
		n.Type = TypeAPI
	}
	if n.TriggerVariables == nil {
		n.TriggerVariables = []string{}
	}
	var id int64
	err := s.pool.QueryRow(ctx, `
		INSERT INTO automations (company_id, name, type, active, template_id, messaging_account_id, trigger_variables)
		SELECT $1, $2, $3, $4, $5, $6, $7
		WHERE ($5::bigint IS NULL OR EXISTS (SELECT 1 FROM templates WHERE id = $5 AND company_id = $1))
		  AND ($6::bigint IS NULL OR EXISTS (SELECT 1 FROM messaging_accounts WHERE id = $6 AND company_id = $1))
		RETURNING id`, n.CompanyID, n.Name, string(n.Type), n.Active, n.TemplateID, n.MessagingAccountID, n.TriggerVariables).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Automation{}, fmt.Errorf("create automation: template or account of company %d: %w", n.CompanyID, ErrNotFound)
	}
	if err != nil {
		return Automation{}, dbError("create automation "+n.Name, err)
	}
	return s.Automation(ctx, n.CompanyID, id)
}

// SetAutomationActive switches an automation on or off.
func (s *Store) SetAutomationActive(ctx context.Context, companyID, id int64, active bool) error {
	tag, err := s.pool.Exec(ctx, `UPDATE automations SET active = $3 WHERE id = $1 AND company_id = $2`, id, companyID, active)
	if err != nil {
		return fmt.Errorf("update automation %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("automation %d: %w", id, ErrNotFound)
	}
	return nil
}

// Automation returns a company's automation, whatever its state.
func (s *Store) Automation(ctx context.Context, companyID, id int64) (Automation, error) {
	a, err := scanAutomation(s.pool.QueryRow(ctx, `SELECT `+automationColumns+automationFrom+` WHERE au.id = $1 AND au.company_id = $2`, id, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Automation{}, fmt.Errorf("automation %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Automation{}, fmt.Errorf("load automation %d: %w", id, err)
	}
	return a, nil
}

// Automations lists a company's automations.
func (s *Store) Automations(ctx context.Context, companyID int64) ([]Automation, error) {
	return collect(ctx, s, "list automations", scanAutomation,
		`SELECT `+automationColumns+automationFrom+` WHERE au.company_id = $1 ORDER BY au.id`, companyID)
}

// NewConnector is what adding a connector takes; at most one target.
type NewConnector struct {
	CompanyID          int64
	Name               string
	Connected          bool
	TargetAutomationID *int64
	TargetCampaignID   *int64
}

const connectorColumns = `id, company_id, name, connected, target_automation_id, target_campaign_id, created_at`

func scanConnector(row pgx.Row) (Connector, error) {
	var c Connector
	err := row.Scan(&c.ID, &c.CompanyID, &c.Name, &c.Connected, &c.TargetAutomationID, &c.TargetCampaignID, &c.CreatedAt)
	return c, err
}

// CreateConnector adds a connector; its target must belong to the company,
// and its name must not be reserved (ErrInvalid).
func (s *Store) CreateConnector(ctx context.Context, n NewConnector) (Connector, error) {
	if ReservedConnectorName(n.Name) {
		return Connector{}, fmt.Errorf("create connector %s: %w: the name is reserved for the API's own routes", n.Name, ErrInvalid)
	}
	c, err := scanConnector(s.pool.QueryRow(ctx, `
		INSERT INTO connectors (company_id, name, connected, target_automation_id, target_campaign_id)
		SELECT $1, $2, $3, $4, $5
		WHERE ($4::bigint IS NULL OR EXISTS (SELECT 1 FROM automations WHERE id = $4 AND company_id = $1))
		  AND ($5::bigint IS NULL OR EXISTS (SELECT 1 FROM campaigns WHERE id = $5 AND company_id = $1))
		RETURNING `+connectorColumns, n.CompanyID, n.Name, n.Connected, n.TargetAutomationID, n.TargetCampaignID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Connector{}, fmt.Errorf("create connector: target of company %d: %w", n.CompanyID, ErrNotFound)
	}
	if err != nil {
		return Connector{}, dbError("create connector "+n.Name, err)
	}
	return c, nil
}

// SetConnectorConnected connects or disconnects a connector.
func (s *Store) SetConnectorConnected(ctx context.Context, companyID int64, name string, connected bool) error {
	tag, err := s.pool.Exec(ctx, `UPDATE connectors SET connected = $3 WHERE company_id = $1 AND name = $2`, companyID, name, connected)
	if err != nil {
		return fmt.Errorf("update connector %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("connector %s: %w", name, ErrNotFound)
	}
	return nil
}

// Connector returns a company's connector by name.
func (s *Store) Connector(ctx context.Context, companyID int64, name string) (Connector, error) {
	c, err := scanConnector(s.pool.QueryRow(ctx, `SELECT `+connectorColumns+` FROM connectors WHERE company_id = $1 AND name = $2`, companyID, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Connector{}, fmt.Errorf("connector %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Connector{}, fmt.Errorf("load connector %q: %w", name, err)
	}
	return c, nil
}

// Connectors lists a company's connectors.
func (s *Store) Connectors(ctx context.Context, companyID int64) ([]Connector, error) {
	return collect(ctx, s, "list connectors", scanConnector,
		`SELECT `+connectorColumns+` FROM connectors WHERE company_id = $1 ORDER BY id`, companyID)
}

func collect[T any](ctx context.Context, s *Store, what string, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
