// Package accounts is the company users who sign in to the admin console:
// their roles, their passwords (argon2id, PHC strings) and sign-in itself.
// The console and the operator CLI (parleyctl users, seed) both go through
// this package, so there is one set of password and address rules and one
// argon2id parameter set.
package accounts

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/alexedwards/argon2id"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Role is what a user may do: admins create, rotate and revoke the company's
// API key; members only look.
type Role string

// The roles, as in the user_role type of the schema.
const (
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// ParseRole accepts "admin" or "member".
func ParseRole(s string) (Role, error) {
	switch r := Role(strings.ToLower(strings.TrimSpace(s))); r {
	case RoleAdmin, RoleMember:
		return r, nil
	default:
		return "", fmt.Errorf("%w: %q (admin or member)", ErrInvalidRole, s)
	}
}

// Password rules. Length is what makes a password hard to guess (NIST SP
// 800-63B); no composition rules. The upper bound keeps a request from
// making the server hash megabytes.
const (
	MinPasswordLen = 12   // characters
	MaxPasswordLen = 1024 // bytes
)

// Errors of the package; the HTTP edge and the CLI map them to messages.
var (
	ErrInvalidRole  = errors.New("invalid role")
	ErrInvalidEmail = errors.New("invalid email address")
	ErrWeakPassword = fmt.Errorf("the password must have at least %d characters (and at most %d bytes)", MinPasswordLen, MaxPasswordLen)
	ErrEmailTaken   = errors.New("a user with this email address already exists")
	ErrNoCompany    = errors.New("company not found")
	ErrNotFound     = errors.New("user not found")
	// ErrInvalidCredentials is the one answer for an unknown email and a
	// wrong password alike, so that sign-in does not reveal who has an account.
	ErrInvalidCredentials = errors.New("invalid email or password")
)

// hashParams are OWASP's recommended argon2id settings (19 MiB, 2 passes,
// 1 lane): about 30 ms on one core, so that a burst of sign-ins cannot
// exhaust the admin service's memory. They are written into every PHC
// string, so raising them later leaves existing hashes verifiable.
var hashParams = &argon2id.Params{Memory: 19 * 1024, Iterations: 2, Parallelism: 1, SaltLength: 16, KeyLength: 32}

// The schema's own check on users.email, applied before the database sees it.
var emailRe = regexp.MustCompile(`^[^@\s]+@[^@\s]+$`)

// CheckPasswordRules returns ErrWeakPassword for a password too short or
// too long, so that a caller can refuse it before doing anything else.
func CheckPasswordRules(password string) error {
	if utf8.RuneCountInString(password) < MinPasswordLen || len(password) > MaxPasswordLen {
		return ErrWeakPassword
	}
	return nil
}

// CheckEmail returns ErrInvalidEmail unless email (trimmed) is an address
// the schema accepts.
func CheckEmail(email string) error {
	email = strings.TrimSpace(email)
	if len(email) > 254 || !emailRe.MatchString(email) {
		return ErrInvalidEmail
	}
	return nil
}

// HashPassword checks the password rules and returns the argon2id PHC string
// to store in users.password_hash ($argon2id$v=19$m=19456,t=2,p=1$salt$hash).
func HashPassword(password string) (string, error) {
	if err := CheckPasswordRules(password); err != nil {
		return "", err
	}
	h, err := argon2id.CreateHash(password, hashParams)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}

// CheckPassword reports whether password matches a PHC string made by
// HashPassword.
func CheckPassword(password, hash string) (bool, error) {
	ok, err := argon2id.ComparePasswordAndHash(password, hash)
	if err != nil {
		return false, fmt.Errorf("check password: %w", err)
	}
	return ok, nil
}

// NormalizeEmail is the form an address is compared in: trimmed and
// lower-cased (the schema's unique index is on lower(email)).
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// User is a console user, without the password hash. The JSON names are
// the ones parleyctl prints.
type User struct {
	ID        int64     `json:"id"`
	CompanyID int64     `json:"company_id"`
	Email     string    `json:"email"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// IsAdmin reports whether the user may change the company's API key.
func (u User) IsAdmin() bool { return u.Role == RoleAdmin }

// Store keeps users in PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	// dummyHash is verified against when the email is unknown, so that an
	// unknown address takes as long to refuse as a wrong password.
	dummyHash func() (string, error)
}

// NewStore returns a store on pool.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, dummyHash: sync.OnceValues(func() (string, error) {
		return argon2id.CreateHash("parley-timing-equaliser", hashParams)
	})}
}

// CreateUser adds a user to a company with a password (checked against the
// rules, then hashed). Errors: ErrInvalidEmail, ErrWeakPassword,
// ErrInvalidRole, ErrNoCompany, ErrEmailTaken.
func (s *Store) CreateUser(ctx context.Context, companyID int64, email, password string, role Role) (User, error) {
	if err := CheckEmail(email); err != nil {
		return User{}, err
	}
	email = strings.TrimSpace(email)
	if role != RoleAdmin && role != RoleMember {
		return User{}, fmt.Errorf("%w: %q", ErrInvalidRole, role)
	}
	hash, err := HashPassword(password)
	if err != nil {
		return User{}, err
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `
		INSERT INTO users (company_id, email, password_hash, role) VALUES ($1, $2, $3, $4)
		RETURNING `+userColumns, companyID, email, hash, string(role)))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505" && pgErr.ConstraintName == "users_email_unique":
			return User{}, ErrEmailTaken
		case pgErr.Code == "23503":
			return User{}, ErrNoCompany
		}
	}
	if err != nil {
		return User{}, fmt.Errorf("create user in company %d: %w", companyID, err)
	}
	return u, nil
}

// SetPassword replaces a user's password. Errors: ErrWeakPassword, ErrNotFound.
func (s *Store) SetPassword(ctx context.Context, email, password string) error {
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE users SET password_hash = $2 WHERE lower(email) = $1`, NormalizeEmail(email), hash)
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Authenticate returns the user whose email and password these are, or
// ErrInvalidCredentials. It takes the same time whether or not the email
// exists.
func (s *Store) Authenticate(ctx context.Context, email, password string) (User, error) {
	if len(password) > MaxPasswordLen || len(email) > 320 {
		return User{}, ErrInvalidCredentials
	}
	var hash string
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+`, password_hash FROM users WHERE lower(email) = $1`,
		NormalizeEmail(email)), &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		dummy, err := s.dummyHash()
		if err != nil {
			return User{}, fmt.Errorf("authenticate: %w", err)
		}
		_, _ = argon2id.ComparePasswordAndHash(password, dummy)
		return User{}, ErrInvalidCredentials
	}
	if err != nil {
		return User{}, fmt.Errorf("authenticate: %w", err)
	}
	ok, err := CheckPassword(password, hash)
	if err != nil {
		return User{}, fmt.Errorf("authenticate user %d: %w", u.ID, err)
	}
	if !ok {
		return User{}, ErrInvalidCredentials
	}
	return u, nil
}

// User returns a user by id, or ErrNotFound.
func (s *Store) User(ctx context.Context, id int64) (User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("load user %d: %w", id, err)
	}
	return u, nil
}

// UserByEmail returns the user with this address (compared as
// NormalizeEmail does), or ErrNotFound.
func (s *Store) UserByEmail(ctx context.Context, email string) (User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE lower(email) = $1`, NormalizeEmail(email)))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("load user by email: %w", err)
	}
	return u, nil
}

// Users lists a company's users, oldest first; an unknown company has none.
func (s *Store) Users(ctx context.Context, companyID int64) ([]User, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+userColumns+` FROM users WHERE company_id = $1 ORDER BY id`, companyID)
	if err != nil {
		return nil, fmt.Errorf("list users of company %d: %w", companyID, err)
	}
	us, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) { return scanUser(r) })
	if err != nil {
		return nil, fmt.Errorf("list users of company %d: %w", companyID, err)
	}
	if us == nil {
		us = []User{}
	}
	return us, nil
}

const userColumns = `id, company_id, email, role::text, created_at`

func scanUser(row pgx.Row, extra ...any) (User, error) {
	var u User
	var role string
	err := row.Scan(append([]any{&u.ID, &u.CompanyID, &u.Email, &role, &u.CreatedAt}, extra...)...)
	u.Role = Role(role)
	return u, err
}
