package apikey

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// GracePeriod is how long a rotated-out key keeps working (spec section 3).
const GracePeriod = 24 * time.Hour

// State is where a key is in its lifecycle.
type State string

// The states of a key.
const (
	StateActive  State = "active"
	StateRotated State = "rotated"
	StateRevoked State = "revoked"
)

// Errors of the lifecycle.
var (
	ErrActiveKeyExists = errors.New("the company already has an active API key; rotate or revoke it")
	ErrNoActiveKey     = errors.New("the company has no active API key")
	ErrNotFound        = errors.New("API key not found")
	ErrAlreadyRevoked  = errors.New("API key is already revoked")
)

// Key is a stored key, never its secret.
type Key struct {
	ID          int64
	CompanyID   int64
	KeyID       string
	SecretHash  []byte
	SecretHint  string
	State       State
	CreatedAt   time.Time
	LastUsedAt  *time.Time
	RotatedAt   *time.Time
	GraceEndsAt *time.Time
	RevokedAt   *time.Time
}

// Masked is the display form of the key.
func (k Key) Masked() string { return Mask(k.KeyID, k.SecretHint) }

// Accepts reports whether the key authenticates a request at now: active, or
// rotated with now strictly before the end of its grace.
func (k Key) Accepts(now time.Time) bool {
	switch k.State {
	case StateActive:
		return true
	case StateRotated:
		return k.GraceEndsAt != nil && now.Before(*k.GraceEndsAt)
	default:
		return false
	}
}

// Actor is who performed a key action, for the audit trail.
type Actor struct {
	UserID *int64 // the signed-in user, nil for operators
	Label  string // an email, or "parleyctl", "admin-api"
}

// Event is one entry of the audit trail.
type Event struct {
	ID          int64
	KeyID       string
	Action      string
	ActorUserID *int64
	Actor       string
	CreatedAt   time.Time
}

// Store keeps keys in PostgreSQL. Now is injectable so that the 24-hour grace
// can be tested without waiting.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewStore returns a store; now defaults to time.Now.
func NewStore(pool *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, now: now}
}

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

const keyColumns = `id, company_id, key_id, secret_hash, secret_hint, state, created_at, last_used_at, rotated_at, grace_ends_at, revoked_at`

func scanKey(row pgx.Row) (Key, error) {
	var k Key
	var state string
	err := row.Scan(&k.ID, &k.CompanyID, &k.KeyID, &k.SecretHash, &k.SecretHint, &state, &k.CreatedAt,
		&k.LastUsedAt, &k.RotatedAt, &k.GraceEndsAt, &k.RevokedAt)
	k.State = State(state)
	return k, err
}

// Create makes the company's first active key and returns its full value,
// which is never available again.
func (s *Store) Create(ctx context.Context, companyID int64, actor Actor) (string, Key, error) {
	return s.CreateFrom(ctx, companyID, rand.Reader, actor)
}

// CreateFrom is Create with the key made by GenerateFrom(material): the same
// material gives the same key. Only `parleyctl seed` uses it, with material
// derived from the installation's secret; the key id is unique, so the same
// material cannot make a second key.
func (s *Store) CreateFrom(ctx context.Context, companyID int64, material io.Reader, actor Actor) (string, Key, error) {
	var full string
	var key Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		full, key, err = s.insertActive(ctx, tx, companyID, material, actor)
		if err != nil {
			return err
		}
		return s.audit(ctx, tx, key, "create", actor)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "api_keys_one_active_per_company" {
		return "", Key{}, ErrActiveKeyExists
	}
	if err != nil {
		return "", Key{}, fmt.Errorf("create key for company %d: %w", companyID, err)
	}
	return full, key, nil
}

// Rotate replaces the active key with a new one at once; the previous key
// keeps working for exactly GracePeriod from now. A key that was still in an
// earlier grace is left to expire on its own schedule.
func (s *Store) Rotate(ctx context.Context, companyID int64, actor Actor) (full string, created, previous Key, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now().UTC()
		previous, err = scanKey(tx.QueryRow(ctx, `
			UPDATE api_keys SET state = 'rotated', rotated_at = $2, grace_ends_at = $3
			WHERE company_id = $1 AND state = 'active'
			RETURNING `+keyColumns, companyID, now, now.Add(GracePeriod)))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoActiveKey
		}
		if err != nil {
			return err
		}
		if full, created, err = s.insertActive(ctx, tx, companyID, rand.Reader, actor); err != nil {
			return err
		}
		return s.audit(ctx, tx, created, "rotate", actor)
	})
	if err != nil {
		if errors.Is(err, ErrNoActiveKey) {
			return "", Key{}, Key{}, err
		}
		return "", Key{}, Key{}, fmt.Errorf("rotate key of company %d: %w", companyID, err)
	}
	return full, created, previous, nil
}

// Revoke stops one of the company's keys (the active one, or a rotated one
// still in its grace) at once and for good.
func (s *Store) Revoke(ctx context.Context, companyID int64, keyID string, actor Actor) (Key, error) {
	var key Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		current, err := scanKey(tx.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE company_id = $1 AND key_id = $2 FOR UPDATE`, companyID, keyID))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if current.State == StateRevoked {
			return ErrAlreadyRevoked
		}
		key, err = scanKey(tx.QueryRow(ctx, `
			UPDATE api_keys SET state = 'revoked', revoked_at = $2, grace_ends_at = NULL
			WHERE id = $1 RETURNING `+keyColumns, current.ID, s.now().UTC()))
		if err != nil {
			return err
		}
		return s.audit(ctx, tx, key, "revoke", actor)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrAlreadyRevoked) {
			return Key{}, err
		}
		return Key{}, fmt.Errorf("revoke key %s: %w", keyID, err)
	}
	return key, nil
}

// Lookup finds a key by its public id, in any state.
func (s *Store) Lookup(ctx context.Context, keyID string) (Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE key_id = $1`, keyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("look up key %s: %w", keyID, err)
	}
	return k, nil
}

// List returns the company's keys that are not revoked-and-forgotten: the
// active key and any rotated key, newest first, then revoked ones.
func (s *Store) List(ctx context.Context, companyID int64) ([]Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE company_id = $1 ORDER BY created_at DESC, id DESC`, companyID)
	if err != nil {
		return nil, fmt.Errorf("list keys of company %d: %w", companyID, err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) { return scanKey(r) })
	if err != nil {
		return nil, fmt.Errorf("list keys of company %d: %w", companyID, err)
	}
	return keys, nil
}

// Events returns the company's audit trail, newest first.
func (s *Store) Events(ctx context.Context, companyID int64, limit int) ([]Event, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT e.id, k.key_id, e.action::text, e.actor_user_id, e.actor, e.created_at
		FROM api_key_events e JOIN api_keys k ON k.id = e.api_key_id
		WHERE e.company_id = $1 ORDER BY e.created_at DESC, e.id DESC LIMIT $2`, companyID, limit)
	if err != nil {
		return nil, fmt.Errorf("key events of company %d: %w", companyID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.KeyID, &e.Action, &e.ActorUserID, &e.Actor, &e.CreatedAt)
		return e, err
	})
}

// TouchLastUsed records use of keys; the gateway calls it in the background,
// at most about once a minute per key.
func (s *Store) TouchLastUsed(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := make([]string, 0, len(used))
	ats := make([]time.Time, 0, len(used))
	for id, at := range used {
		ids = append(ids, id)
		ats = append(ats, at)
	}
	// Several gateways flush overlapping sets of keys at once. The rows are
	// locked in key_id order first, so that concurrent flushes queue behind
	// each other instead of deadlocking (an UPDATE locks in whatever order
	// its join plan visits the rows).
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			SELECT 1 FROM api_keys WHERE key_id = ANY($1::text[]) ORDER BY key_id FOR NO KEY UPDATE`, ids); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			UPDATE api_keys k SET last_used_at = GREATEST(k.last_used_at, u.at)
			FROM unnest($1::text[], $2::timestamptz[]) AS u(key_id, at)
			WHERE k.key_id = u.key_id`, ids, ats)
		return err
	})
	if err != nil {
		return fmt.Errorf("touch last_used_at: %w", err)
	}
	return nil
}

func (s *Store) insertActive(ctx context.Context, tx pgx.Tx, companyID int64, material io.Reader, actor Actor) (string, Key, error) {
	full, p, err := GenerateFrom(material)
	if err != nil {
		return "", Key{}, fmt.Errorf("generate key: %w", err)
	}
	k, err := scanKey(tx.QueryRow(ctx, `
		INSERT INTO api_keys (company_id, key_id, secret_hash, secret_hint, state, created_at, created_by)
		VALUES ($1, $2, $3, $4, 'active', $5, $6) RETURNING `+keyColumns,
		companyID, p.KeyID, HashSecret(p.Secret), Hint(p.Secret), s.now().UTC(), actor.UserID))
	if err != nil {
		return "", Key{}, err
	}
	return full, k, nil
}

func (s *Store) audit(ctx context.Context, tx pgx.Tx, k Key, action string, actor Actor) error {
	label := actor.Label
	if label == "" {
		label = "unknown"
	}
	_, err := tx.Exec(ctx, `INSERT INTO api_key_events (company_id, api_key_id, action, actor_user_id, actor, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		k.CompanyID, k.ID, action, actor.UserID, label, s.now().UTC())
	return err
}
