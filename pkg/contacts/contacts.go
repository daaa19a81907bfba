// Package contacts is a company's address book: the people Parley sends to,
// found by their phone number, with the names and saved variables that
// personalise their messages and whether they opted out of campaigns.
//
// An automation trigger creates the contacts it does not know and merges what
// it carries into the ones it knows (see Store.Upsert); campaigns read
// contacts but never create them.
package contacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/parleyhq/parley/pkg/phone"
)

// ErrNotFound is a contact the company does not have.
var ErrNotFound = errors.New("contact not found")

// ErrInvalidPhone is a number that is not E.164.
var ErrInvalidPhone = errors.New("phone is not an E.164 number")

// DB is what the store runs its statements on: a pool, or a transaction
// when contacts change together with other records (an automation batch).
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Contact is one person of a company's address book.
type Contact struct {
	ID        int64  `json:"id"`
	CompanyID int64  `json:"company_id"`
	Phone     string `json:"phone"` // E.164 with '+'
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
	// ProfileName is the WhatsApp profile name of the contact's last
	// inbound message.
	ProfileName string `json:"profile_name,omitempty"`
	// Variables are the saved trigger variables, for personalisation.
	Variables  map[string]string `json:"variables"`
	OptedOutAt *time.Time        `json:"opted_out_at,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
}

// OptedOut reports whether the contact refused campaign messages.
func (c Contact) OptedOut() bool { return c.OptedOutAt != nil }

// Upsert is what one trigger says about a contact. Nil names are "not
// given" and keep what is stored; so does an empty one.
type Upsert struct {
	Phone     string
	FirstName *string
	LastName  *string
	Variables map[string]string
}

// Store reads and writes contacts.
type Store struct {
	db  DB
	now func() time.Time
}

// NewStore returns a store on db with the clock now (time.Now when nil).
func NewStore(db DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}
}

const columns = `id, company_id, phone, COALESCE(first_name, ''), COALESCE(last_name, ''), COALESCE(profile_name, ''), variables, opted_out_at, created_at, updated_at`

func scan(row pgx.Row) (Contact, error) {
	var c Contact
	var vars []byte
	if err := row.Scan(&c.ID, &c.CompanyID, &c.Phone, &c.FirstName, &c.LastName, &c.ProfileName, &vars, &c.OptedOutAt, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return Contact{}, err
	}
	v, err := DecodeVariables(vars)
	if err != nil {
		return Contact{}, fmt.Errorf("contact %d: %w", c.ID, err)
	}
	c.Variables = v
	return c, nil
}

// DecodeVariables reads a stored variables object. Values are strings when
// Parley wrote them; any other JSON value is kept as its JSON text.
func DecodeVariables(raw []byte) (map[string]string, error) {
	out := map[string]string{}
	if len(raw) == 0 {
		return out, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("variables: %w", err)
	}
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			out[k] = s
			continue
		}
		out[k] = string(v)
	}
	return out, nil
}

// ByPhone returns a company's contact by number (with or without '+').
func (s *Store) ByPhone(ctx context.Context, companyID int64, number string) (Contact, error) {
	p, ok := phone.Normalize(number)
	if !ok {
		return Contact{}, fmt.Errorf("contact %q: %w", number, ErrInvalidPhone)
	}
	c, err := scan(s.db.QueryRow(ctx, `SELECT `+columns+` FROM contacts WHERE company_id = $1 AND phone = $2`, companyID, p))
	if errors.Is(err, pgx.ErrNoRows) {
		return Contact{}, fmt.Errorf("contact %s of company %d: %w", p, companyID, ErrNotFound)
	}
	if err != nil {
		return Contact{}, fmt.Errorf("load contact of company %d: %w", companyID, err)
	}
	return c, nil
}

// upsertRow is one element of the JSON array the upsert statement reads.
type upsertRow struct {
	Phone     string            `json:"phone"`
	FirstName *string           `json:"first_name"`
	LastName  *string           `json:"last_name"`
	Variables map[string]string `json:"variables"`
}

// Upsert creates the contacts a company does not have and updates the ones
// it has, in one statement, and returns every contact by phone:
//   - a new contact gets the given names and variables;
//   - an existing contact gets the names that are given (non-empty) and its
//     variables MERGED with the given ones: new keys are added, given keys
//     overwritten, the others kept (variables || given).
//
// The same phone given twice is merged in order (later values win). Rows
// are written in phone order so that concurrent upserts of overlapping
// contacts lock them in the same order and cannot deadlock each other.
func (s *Store) Upsert(ctx context.Context, companyID int64, in []Upsert) (map[string]Contact, error) {
	byPhone := make(map[string]*upsertRow, len(in))
	for _, u := range in {
		p, ok := phone.Normalize(u.Phone)
		if !ok {
			return nil, fmt.Errorf("upsert contact %q: %w", u.Phone, ErrInvalidPhone)
		}
		r := byPhone[p]
		if r == nil {
			r = &upsertRow{Phone: p, Variables: map[string]string{}}
			byPhone[p] = r
		}
		if u.FirstName != nil && *u.FirstName != "" {
			r.FirstName = u.FirstName
		}
		if u.LastName != nil && *u.LastName != "" {
			r.LastName = u.LastName
		}
		for k, v := range u.Variables {
			r.Variables[k] = v
		}
	}
	rows := make([]*upsertRow, 0, len(byPhone))
	for _, r := range byPhone {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Phone < rows[j].Phone })
	out := make(map[string]Contact, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	doc, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("upsert contacts: %w", err)
	}
	res, err := s.db.Query(ctx, `
		INSERT INTO contacts AS c (company_id, phone, first_name, last_name, variables, created_at, updated_at)
		SELECT $1, x.phone, x.first_name, x.last_name, COALESCE(x.variables, '{}'), $3, $3
		FROM jsonb_to_recordset($2::jsonb) AS x(phone text, first_name text, last_name text, variables jsonb)
		ORDER BY x.phone
		ON CONFLICT (company_id, phone) DO UPDATE SET
			first_name = COALESCE(EXCLUDED.first_name, c.first_name),
			last_name = COALESCE(EXCLUDED.last_name, c.last_name),
			variables = c.variables || EXCLUDED.variables,
			updated_at = EXCLUDED.updated_at
		RETURNING `+columns, companyID, doc, s.now())
	if err != nil {
		return nil, fmt.Errorf("upsert contacts of company %d: %w", companyID, err)
	}
	list, err := pgx.CollectRows(res, func(r pgx.CollectableRow) (Contact, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("upsert contacts of company %d: %w", companyID, err)
	}
	for _, c := range list {
		out[c.Phone] = c
	}
	return out, nil
}

// SetOptedOut records that a contact refused (optedOut) or accepted again
// campaign messages, creating the contact when the company does not have
// it, so that an opt-out received before any trigger still counts.
func (s *Store) SetOptedOut(ctx context.Context, companyID int64, number string, optedOut bool) (Contact, error) {
	p, ok := phone.Normalize(number)
	if !ok {
		return Contact{}, fmt.Errorf("opt-out %q: %w", number, ErrInvalidPhone)
	}
	now := s.now()
	var at *time.Time
	if optedOut {
		at = &now
	}
	c, err := scan(s.db.QueryRow(ctx, `
		INSERT INTO contacts AS c (company_id, phone, opted_out_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (company_id, phone) DO UPDATE SET
			opted_out_at = CASE WHEN EXCLUDED.opted_out_at IS NULL THEN NULL ELSE COALESCE(c.opted_out_at, EXCLUDED.opted_out_at) END,
			updated_at = EXCLUDED.updated_at
		RETURNING `+columns, companyID, p, at, now))
	if err != nil {
		return Contact{}, fmt.Errorf("opt-out contact of company %d: %w", companyID, err)
	}
	return c, nil
}
