// Package catalog is what a company has configured in Parley: the company
// itself (subscription, provisioning, segment allowance), its messaging
// accounts, templates, campaigns, automations and connectors. parleyctl
// creates and lists them; the gateway and the dispatchers read them.
//
// Every read that starts from a request is scoped by company: asking for
// another company's record is ErrNotFound, never a leak.
package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// Errors callers map to statuses or exit codes.
var (
	ErrNotFound = errors.New("not found")
	// ErrConflict is a record that already exists under the same unique name.
	ErrConflict = errors.New("already exists")
	// ErrInvalid wraps a value the database refused (a check constraint).
	ErrInvalid = errors.New("invalid")
)

// Store reads and writes the catalog. Tokens are sealed with box before they
// reach the database and opened only for the dispatchers.
type Store struct {
	pool *pgxpool.Pool
	box  *secretbox.Box
}

// NewStore returns a store. box may be nil for processes that never touch
// access tokens (the gateway).
func NewStore(pool *pgxpool.Pool, box *secretbox.Box) *Store {
	return &Store{pool: pool, box: box}
}

// Company is a customer of Parley.
type Company struct {
	ID                 int64     `json:"id"`
	Slug               string    `json:"slug"`
	Name               string    `json:"name"`
	SubscriptionActive bool      `json:"subscription_active"`
	Provisioned        bool      `json:"provisioned"`
	MaxSegments        int       `json:"max_segments"`
	CreatedAt          time.Time `json:"created_at"`
}

// DeliveryWindow is the local wall-clock window in which non-forced campaign
// messages may go out. End before Start means the window wraps midnight.
type DeliveryWindow struct {
	// Offsets from local midnight.
	Start, End time.Duration
}

// MessagingAccount is a WhatsApp Business phone number of a company. The
// access token is never part of it: see Store.AccessToken.
type MessagingAccount struct {
	ID                  int64           `json:"id"`
	CompanyID           int64           `json:"company_id"`
	Name                string          `json:"name"`
	PhoneNumberID       string          `json:"phone_number_id"`
	Connected           bool            `json:"connected"`
	Timezone            string          `json:"timezone"`
	Window              *DeliveryWindow `json:"delivery_window,omitempty"`
	ThroughputPerSecond int             `json:"throughput_per_second"`
	// WABAID is the number's WhatsApp Business Account ("": the phone
	// number id stands for it, each number its own account); PortfolioID
	// its business portfolio ("": the WABA's).
	WABAID      string `json:"waba_id"`
	PortfolioID string `json:"portfolio_id"`
	// QualityRating is UNKNOWN, GREEN, YELLOW or RED, as the provider last
	// told (phone_number_quality_update), at QualityUpdatedAt.
	QualityRating    string     `json:"quality_rating"`
	QualityUpdatedAt *time.Time `json:"quality_updated_at"`
	CreatedAt        time.Time  `json:"created_at"`
}

// WABA is the WhatsApp Business Account the number is in: its WABAID, else
// its phone number id (provider-sim's and Parley's default).
func (a MessagingAccount) WABA() string {
	if a.WABAID != "" {
		return a.WABAID
	}
	return a.PhoneNumberID
}

// Portfolio is the business portfolio whose messaging limit the number
// shares: its PortfolioID, else its WABA.
func (a MessagingAccount) Portfolio() string {
	if a.PortfolioID != "" {
		return a.PortfolioID
	}
	return a.WABA()
}

// Template is a provider template and how its parameters are filled,
// with its lifecycle at the provider.
type Template struct {
	ID        int64     `json:"id"`
	CompanyID int64     `json:"company_id"`
	CreatedAt time.Time `json:"created_at"`
	whatsapp.Template
	TemplateState
}

// TemplateState is a template as the provider knows it (migration 00016).
type TemplateState struct {
	// Status is PENDING, APPROVED, REJECTED, PAUSED or DISABLED; a template
	// registered by hand is APPROVED.
	Status string `json:"status"`
	// Category is MARKETING, UTILITY or AUTHENTICATION.
	Category string `json:"category"`
	// Quality is UNKNOWN, GREEN, YELLOW or RED.
	Quality string `json:"quality"`
	// StatusReason is a rejection's reason or a pause's explanation.
	StatusReason string `json:"status_reason"`
	// ProviderTemplateID is the provider's id ("" until known).
	ProviderTemplateID string `json:"provider_template_id"`
	// MessagingAccountID is the number whose WABA it was submitted to (nil:
	// registered by hand).
	MessagingAccountID *int64 `json:"messaging_account_id"`
	// Definition is what was submitted (a TemplateDefinition), nil for a
	// template registered by hand.
	Definition      json.RawMessage `json:"definition,omitempty"`
	PauseCount      int             `json:"pause_count"`
	PausedUntil     *time.Time      `json:"paused_until"`
	StatusChangedAt time.Time       `json:"status_changed_at"`
}

// TemplateEvent is one change of a template's status (its history, pauses
// included), oldest first.
type TemplateEvent struct {
	Status         string `json:"status"`
	PreviousStatus string `json:"previous_status"`
	Reason         string `json:"reason"`
	// Source is webhook, sync, send, submit or operator.
	Source string    `json:"source"`
	At     time.Time `json:"at"`
}

// Campaign sends a template through a messaging account.
type Campaign struct {
	ID                 int64     `json:"id"`
	CompanyID          int64     `json:"company_id"`
	Name               string    `json:"name"`
	TemplateID         int64     `json:"template_id"`
	MessagingAccountID int64     `json:"messaging_account_id"`
	CreatedAt          time.Time `json:"created_at"`
}

// AutomationType is how an automation is triggered; the public API triggers
// only TypeAPI.
type AutomationType string

// Automation types, as stored.
const (
	TypeAPI       AutomationType = "api"
	TypeEvent     AutomationType = "event"
	TypeScheduled AutomationType = "scheduled"
)

// Automation is a scenario that sends a template when triggered. Template and
// account are optional so that a misconfigured automation can exist (the
// trigger then answers 422).
type Automation struct {
	ID                 int64          `json:"id"`
	CompanyID          int64          `json:"company_id"`
	Name               string         `json:"name"`
	Type               AutomationType `json:"type"`
	Active             bool           `json:"active"`
	TemplateID         *int64         `json:"template_id"`
	MessagingAccountID *int64         `json:"messaging_account_id"`
	// AccountConnected is whether the assigned account is connected (false
	// when none is assigned).
	AccountConnected bool      `json:"account_connected"`
	TriggerVariables []string  `json:"trigger_variables"`
	CreatedAt        time.Time `json:"created_at"`
}

// ReservedConnectorNames cannot name a connector: they are the first path
// segments of the public API's own routes under /api, which gin prefers to
// /api/<connector>/send. The database refuses them too (migration 00004).
var ReservedConnectorNames = []string{"automations", "batch", "batches", "campaigns", "contacts", "conversations", "docs", "messages", "segments"}

// ReservedConnectorName reports whether name is one of ReservedConnectorNames.
func ReservedConnectorName(name string) bool {
	for _, r := range ReservedConnectorNames {
		if r == name {
			return true
		}
	}
	return false
}

// Connector is a third-party integration of a company. A send through it
// triggers its target automation or sends its target campaign.
type Connector struct {
	ID                 int64     `json:"id"`
	CompanyID          int64     `json:"company_id"`
	Name               string    `json:"name"`
	Connected          bool      `json:"connected"`
	TargetAutomationID *int64    `json:"target_automation_id"`
	TargetCampaignID   *int64    `json:"target_campaign_id"`
	CreatedAt          time.Time `json:"created_at"`
}

// dbError turns constraint violations into the package's errors.
func dbError(what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return fmt.Errorf("%s: %w (%s)", what, ErrConflict, pgErr.ConstraintName)
		case "23514", "22P02", "23502", "22001", "22007", "22008":
			return fmt.Errorf("%s: %w: %s", what, ErrInvalid, pgErr.Message)
		case "23503":
			return fmt.Errorf("%s: %w: %s", what, ErrNotFound, pgErr.Detail)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
