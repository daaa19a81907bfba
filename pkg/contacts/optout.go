package contacts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/phone"
)

// Default opt-out words, used by a company that has not set its own. An
// inbound text equal to one of them (case and surrounding spaces ignored)
// opts the contact out of campaigns, or back in.
var (
	DefaultOptOutKeywords = []string{
		"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT", // English
		"ARRET", "ARRÊT", "DESABONNER", // French
		"BAJA", "ALTO", "PARAR", "CANCELAR", // Spanish, Portuguese
		"STOPP", "HALT", "ABMELDEN", "ABBESTELLEN", // German
		"ANNULLA", "DISISCRIVITI", "FERMA", // Italian
	}
	DefaultOptInKeywords = []string{"START", "UNSTOP"}
)

// Limits of OptOutSettings.
const (
	MaxKeywords      = 100
	MaxKeywordLength = 64
)

// Reasons of a consent change (ConsentChange.Reason).
const (
	ReasonKeyword  = "keyword"
	ReasonButton   = "button"
	ReasonProvider = "provider"
	ReasonOperator = "operator"
)

// OptOutSettings are the words by which a company's contacts opt out and in.
type OptOutSettings struct {
	OptOutKeywords []string `json:"opt_out_keywords"`
	OptInKeywords  []string `json:"opt_in_keywords"`
	// OptOutPayloads are quick-reply button payloads that opt out (the
	// marketing opt-out button of a template).
	OptOutPayloads []string `json:"opt_out_payloads"`
	// Default is true when the company has not set its own words.
	Default bool `json:"default"`
}

// DefaultOptOutSettings are the settings of a company that set none.
func DefaultOptOutSettings() OptOutSettings {
	return OptOutSettings{OptOutKeywords: slices.Clone(DefaultOptOutKeywords), OptInKeywords: slices.Clone(DefaultOptInKeywords),
		OptOutPayloads: []string{}, Default: true}
}

// ErrInvalidSettings is matched by every error of OptOutSettings.Normalize.
var ErrInvalidSettings = errors.New("invalid opt-out settings")

// NormalizeKeyword is how a keyword is stored and an inbound text compared:
// surrounding spaces trimmed, upper case.
func NormalizeKeyword(s string) string { return strings.ToUpper(strings.TrimSpace(s)) }

// Normalize upper-cases and trims the keywords (payloads are trimmed only:
// a payload is matched exactly), drops repeats, and reports every problem
// at once: an empty or over-long word, too many, a word in both lists.
func (s OptOutSettings) Normalize() (OptOutSettings, error) {
	var errs []error
	clean := func(name string, in []string, norm func(string) string) []string {
		out := make([]string, 0, len(in))
		if len(in) > MaxKeywords {
			errs = append(errs, fmt.Errorf("%s: at most %d, got %d", name, MaxKeywords, len(in)))
		}
		for _, w := range in {
			n := norm(w)
			switch {
			case n == "":
				errs = append(errs, fmt.Errorf("%s: an entry is empty", name))
				continue
			case utf8.RuneCountInString(n) > MaxKeywordLength:
				errs = append(errs, fmt.Errorf("%s: %q is longer than %d characters", name, n, MaxKeywordLength))
				continue
			case !utf8.ValidString(n):
				errs = append(errs, fmt.Errorf("%s: an entry is not UTF-8", name))
				continue
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	out := OptOutSettings{
		OptOutKeywords: clean("opt_out_keywords", s.OptOutKeywords, NormalizeKeyword),
		OptInKeywords:  clean("opt_in_keywords", s.OptInKeywords, NormalizeKeyword),
		OptOutPayloads: clean("opt_out_payloads", s.OptOutPayloads, strings.TrimSpace),
	}
	for _, w := range out.OptInKeywords {
		if slices.Contains(out.OptOutKeywords, w) {
			errs = append(errs, fmt.Errorf("%q is both an opt-out and an opt-in keyword", w))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return OptOutSettings{}, fmt.Errorf("%w: %w", ErrInvalidSettings, err)
	}
	return out, nil
}

// Match says what an inbound text or button payload asks: opt out (true),
// opt in (false), or nothing (ok false).
func (s OptOutSettings) Match(text, payload string) (optedOut bool, reason, word string, ok bool) {
	if payload != "" {
		if p := strings.TrimSpace(payload); slices.Contains(s.OptOutPayloads, p) {
			return true, ReasonButton, p, true
		}
	}
	if text == "" {
		return false, "", "", false
	}
	w := NormalizeKeyword(text)
	switch {
	case slices.Contains(s.OptOutKeywords, w):
		return true, ReasonKeyword, w, true
	case slices.Contains(s.OptInKeywords, w):
		return false, ReasonKeyword, w, true
	}
	return false, "", "", false
}

// OptOutSettings returns a company's words, or the defaults.
func (s *Store) OptOutSettings(ctx context.Context, companyID int64) (OptOutSettings, error) {
	return LoadOptOutSettings(ctx, s.db, companyID)
}

// LoadOptOutSettings is Store.OptOutSettings on any DB.
func LoadOptOutSettings(ctx context.Context, db DB, companyID int64) (OptOutSettings, error) {
	var out OptOutSettings
	err := db.QueryRow(ctx, `SELECT opt_out_keywords, opt_in_keywords, opt_out_payloads FROM company_opt_out_settings WHERE company_id = $1`,
		companyID).Scan(&out.OptOutKeywords, &out.OptInKeywords, &out.OptOutPayloads)
	if errors.Is(err, pgx.ErrNoRows) {
		return DefaultOptOutSettings(), nil
	}
	if err != nil {
		return OptOutSettings{}, fmt.Errorf("load opt-out settings of company %d: %w", companyID, err)
	}
	return out, nil
}

// SetOptOutSettings validates and stores a company's words (ErrInvalidSettings
// when they are not valid; nothing is changed then).
func (s *Store) SetOptOutSettings(ctx context.Context, companyID int64, in OptOutSettings) (OptOutSettings, error) {
	n, err := in.Normalize()
	if err != nil {
		return OptOutSettings{}, err
	}
	if _, err := s.db.Exec(ctx, `
		INSERT INTO company_opt_out_settings (company_id, opt_out_keywords, opt_in_keywords, opt_out_payloads, updated_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (company_id) DO UPDATE SET opt_out_keywords = EXCLUDED.opt_out_keywords,
			opt_in_keywords = EXCLUDED.opt_in_keywords, opt_out_payloads = EXCLUDED.opt_out_payloads, updated_at = EXCLUDED.updated_at`,
		companyID, n.OptOutKeywords, n.OptInKeywords, n.OptOutPayloads, s.now()); err != nil {
		return OptOutSettings{}, fmt.Errorf("store opt-out settings of company %d: %w", companyID, err)
	}
	return n, nil
}

// ResetOptOutSettings puts a company back on the defaults.
func (s *Store) ResetOptOutSettings(ctx context.Context, companyID int64) (OptOutSettings, error) {
	if _, err := s.db.Exec(ctx, `DELETE FROM company_opt_out_settings WHERE company_id = $1`, companyID); err != nil {
		return OptOutSettings{}, fmt.Errorf("reset opt-out settings of company %d: %w", companyID, err)
	}
	return DefaultOptOutSettings(), nil
}

// ConsentChange is one request of a contact (or about one) to stop or
// resume campaign messages.
type ConsentChange struct {
	CompanyID int64
	Phone     string
	OptedOut  bool
	Reason    string
	// Keyword is the text or payload that asked, if any.
	Keyword string
	// ProviderMessageID is the inbound message's wamid, or the refused
	// message's wamid; a change with one is recorded once however often
	// the webhook is delivered.
	ProviderMessageID string
	// MessageID is the refused outbound message (reason provider).
	MessageID int64
	// At is when the contact asked (the inbound message's timestamp).
	At time.Time
}

// ConsentResult is what RecordConsent did with one change.
type ConsentResult struct {
	ContactID int64
	// Created is true when the contact did not exist.
	Created bool
	// Recorded is false for a change already recorded (a redelivery).
	Recorded bool
	// Changed is true when the contact's state flipped.
	Changed  bool
	OptedOut bool
}

// TouchContact creates a company's contact for a number if it has none
// (an inbound message from an unknown number), and returns its id.
func TouchContact(ctx context.Context, db DB, companyID int64, number string, now time.Time) (id int64, created bool, err error) {
	p, ok := phone.Normalize(number)
	if !ok {
		return 0, false, fmt.Errorf("contact %q: %w", number, ErrInvalidPhone)
	}
	// A row another transaction committed after this statement's snapshot
	// is neither inserted nor seen: the second try sees it.
	for range 2 {
		err = db.QueryRow(ctx, `
			WITH ins AS (
				INSERT INTO contacts (company_id, phone, created_at, updated_at) VALUES ($1, $2, $3, $3)
				ON CONFLICT (company_id, phone) DO NOTHING RETURNING id
			)
			SELECT id, true FROM ins UNION ALL SELECT id, false FROM contacts WHERE company_id = $1 AND phone = $2
			LIMIT 1`, companyID, p, now).Scan(&id, &created)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return 0, false, fmt.Errorf("create contact of company %d: %w", companyID, err)
	}
	return id, created, nil
}

// RecordConsent records one consent change with db, which should be the
// transaction of the change's cause: the contact is created if the company
// does not have it, the request is added to its history (once per
// provider message id or refused message), and the contact's state becomes
// that of its latest request by time; when the state flips, a
// contact.opted_out or contact.opted_in event is appended to the outbox.
func RecordConsent(ctx context.Context, db DB, c ConsentChange, now time.Time) (ConsentResult, error) {
	var res ConsentResult
	p, ok := phone.Normalize(c.Phone)
	if !ok {
		return res, fmt.Errorf("consent %q: %w", c.Phone, ErrInvalidPhone)
	}
	if c.At.IsZero() {
		c.At = now
	}
	id, created, err := TouchContact(ctx, db, c.CompanyID, p, now)
	if err != nil {
		return res, err
	}
	res.ContactID, res.Created = id, created
	var current *time.Time
	// The row lock orders concurrent changes of one contact.
	if err := db.QueryRow(ctx, `SELECT opted_out_at FROM contacts WHERE id = $1 FOR UPDATE`, id).Scan(&current); err != nil {
		return res, fmt.Errorf("lock contact %d: %w", id, err)
	}
	var msgID *int64
	if c.MessageID != 0 {
		msgID = &c.MessageID
	}
	tag, err := db.Exec(ctx, `
		INSERT INTO contact_opt_out_events (company_id, contact_id, opted_out, reason, keyword, provider_message_id, message_id, occurred_at, created_at)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7, $8, $9)
		ON CONFLICT DO NOTHING`, c.CompanyID, id, c.OptedOut, c.Reason, c.Keyword, c.ProviderMessageID, msgID, c.At, now)
	if err != nil {
		return res, fmt.Errorf("record consent of contact %d: %w", id, err)
	}
	res.OptedOut = current != nil
	if tag.RowsAffected() == 0 {
		return res, nil
	}
	res.Recorded = true
	var latestOut bool
	var latestAt time.Time
	if err := db.QueryRow(ctx, `SELECT opted_out, occurred_at FROM contact_opt_out_events WHERE contact_id = $1
		ORDER BY occurred_at DESC, id DESC LIMIT 1`, id).Scan(&latestOut, &latestAt); err != nil {
		return res, fmt.Errorf("latest consent of contact %d: %w", id, err)
	}
	if latestOut == (current != nil) {
		return res, nil
	}
	var at *time.Time
	if latestOut {
		at = &latestAt
	}
	if _, err := db.Exec(ctx, `UPDATE contacts SET opted_out_at = $2, updated_at = $3 WHERE id = $1`, id, at, now); err != nil {
		return res, fmt.Errorf("change consent of contact %d: %w", id, err)
	}
	res.Changed, res.OptedOut = true, latestOut
	typ := events.ContactOptedIn
	if latestOut {
		typ = events.ContactOptedOut
	}
	if err := events.Append(ctx, db, events.Event{CompanyID: c.CompanyID, Type: typ, At: latestAt, Data: events.Contact{
		Phone: p, OptedOut: latestOut, Reason: c.Reason, Keyword: c.Keyword, ProviderMessageID: c.ProviderMessageID, ChangedAt: latestAt,
	}}); err != nil {
		return res, err
	}
	return res, nil
}

// ConsentEvent is one entry of a contact's opt-out history.
type ConsentEvent struct {
	ID                int64     `json:"id"`
	OptedOut          bool      `json:"opted_out"`
	Reason            string    `json:"reason"`
	Keyword           string    `json:"keyword,omitempty"`
	ProviderMessageID string    `json:"provider_message_id,omitempty"`
	MessageID         *int64    `json:"message_id,omitempty"`
	OccurredAt        time.Time `json:"occurred_at"`
	RecordedAt        time.Time `json:"recorded_at"`
}

// OptOutHistory returns a contact's consent history, oldest first.
func (s *Store) OptOutHistory(ctx context.Context, companyID, contactID int64) ([]ConsentEvent, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, opted_out, reason, COALESCE(keyword, ''), COALESCE(provider_message_id, ''), message_id, occurred_at, created_at
		FROM contact_opt_out_events WHERE company_id = $1 AND contact_id = $2 ORDER BY occurred_at, id`, companyID, contactID)
	if err != nil {
		return nil, fmt.Errorf("opt-out history of contact %d: %w", contactID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ConsentEvent, error) {
		var e ConsentEvent
		err := r.Scan(&e.ID, &e.OptedOut, &e.Reason, &e.Keyword, &e.ProviderMessageID, &e.MessageID, &e.OccurredAt, &e.RecordedAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("opt-out history of contact %d: %w", contactID, err)
	}
	if out == nil {
		out = []ConsentEvent{}
	}
	return out, nil
}

// RecordConsent is the package function on the store's DB and clock (an
// operator's change, for one).
func (s *Store) RecordConsent(ctx context.Context, c ConsentChange) (ConsentResult, error) {
	b, ok := s.db.(interface {
		Begin(ctx context.Context) (pgx.Tx, error)
	})
	if !ok {
		return RecordConsent(ctx, s.db, c, s.now())
	}
	var res ConsentResult
	err := pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		var err error
		res, err = RecordConsent(ctx, tx, c, s.now())
		return err
	})
	return res, err
}
