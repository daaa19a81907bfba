package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alexedwards/argon2id"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// The users of the admin console. The console's own package owns sign-in;
// parleyctl only creates and lists users, with the same rules.

// Password length bounds (NIST SP 800-63B: length, no composition rules).
const (
	minPasswordLen = 12
	maxPasswordLen = 1024
)

var emailRe = regexp.MustCompile(`^[^@\s]+@[^@\s]+$`)

var (
	errEmailTaken = errors.New("a user with this email address already exists")
	errWeak       = fmt.Errorf("the password must have at least %d characters (and at most %d bytes)", minPasswordLen, maxPasswordLen)
)

// user is a console user, never with its password hash.
type user struct {
	ID        int64     `json:"id"`
	CompanyID int64     `json:"company_id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// hashPassword returns the argon2id PHC string the schema requires
// ($argon2id$v=19$m=...,t=...,p=...$salt$hash).
func hashPassword(password string) (string, error) {
	if utf8.RuneCountInString(password) < minPasswordLen || len(password) > maxPasswordLen {
		return "", errWeak
	}
	h, err := argon2id.CreateHash(password, argon2id.DefaultParams)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}

const userColumns = `id, company_id, email, role::text, created_at`

func scanUser(row pgx.Row, extra ...any) (user, error) {
	var u user
	err := row.Scan(append([]any{&u.ID, &u.CompanyID, &u.Email, &u.Role, &u.CreatedAt}, extra...)...)
	return u, err
}

func createUser(ctx context.Context, pool *pgxpool.Pool, companyID int64, email, password, role string) (user, error) {
	hash, err := hashPassword(password)
	if err != nil {
		return user{}, err
	}
	u, err := scanUser(pool.QueryRow(ctx, `
		INSERT INTO users (company_id, email, password_hash, role) VALUES ($1, $2, $3, $4)
		RETURNING `+userColumns, companyID, email, hash, role))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "users_email_unique" {
		return user{}, errEmailTaken
	}
	if err != nil {
		return user{}, fmt.Errorf("create user in company %d: %w", companyID, err)
	}
	return u, nil
}

func listUsers(ctx context.Context, pool *pgxpool.Pool, companyID int64) ([]user, error) {
	rows, err := pool.Query(ctx, `SELECT `+userColumns+` FROM users WHERE company_id = $1 ORDER BY id`, companyID)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	us, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (user, error) { return scanUser(r) })
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	if us == nil {
		us = []user{}
	}
	return us, nil
}

// userByEmail returns the user and its password hash, or pgx.ErrNoRows.
func userByEmail(ctx context.Context, pool *pgxpool.Pool, email string) (user, string, error) {
	var hash string
	u, err := scanUser(pool.QueryRow(ctx, `SELECT `+userColumns+`, password_hash FROM users WHERE lower(email) = lower($1)`, email), &hash)
	return u, hash, err
}

// readSecret reads one line from in. On a terminal it prompts on stderr and
// does not echo what is typed.
func (e *env) readSecret(prompt string) (string, error) {
	if f, ok := stdinIsTerminal(e.io.In); ok {
		fmt.Fprint(e.io.Err, prompt)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.io.Err)
		if err != nil {
			return "", fmt.Errorf("read from terminal: %w", err)
		}
		return string(b), nil
	}
	line, err := bufio.NewReader(e.io.In).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func usersCmd(e *env) *cobra.Command {
	return group("users", "Create and list the users of a company's admin console",
		usersCreateCmd(e), usersListCmd(e))
}

func usersCreateCmd(e *env) *cobra.Command {
	var company, email, password, role string
	var passwordStdin bool
	c := &cobra.Command{
		Use:   "create",
		Short: "Create a console user (admins manage the API key; members only look)",
		Example: `  parleyctl users create --company acme --email ops@acme.example --role admin   # prompts for the password
  printf '%s\n' "$PASSWORD" | parleyctl users create --company acme --email dev@acme.example --password-stdin`,
		Args: noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		email = strings.TrimSpace(email)
		if len(email) > 254 || !emailRe.MatchString(email) {
			return usagef("--email %q is not an email address", email)
		}
		role = strings.ToLower(strings.TrimSpace(role))
		if role != "admin" && role != "member" {
			return usagef("--role %q: admin or member", role)
		}
		if c.Flags().Changed("password") && passwordStdin {
			return usagef("give --password or --password-stdin, not both")
		}
		if !c.Flags().Changed("password") {
			var err error
			if password, err = e.readSecret("Password for " + email + ": "); err != nil {
				return err
			}
		}
		if utf8.RuneCountInString(password) < minPasswordLen || len(password) > maxPasswordLen {
			return usageError{errWeak}
		}
		_, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		u, err := createUser(ctx, e.pool, co.ID, email, password, role)
		if errors.Is(err, errEmailTaken) {
			return fmt.Errorf("user %q already exists", email)
		}
		if err != nil {
			return err
		}
		return e.emit(u, func(w io.Writer) {
			fields(w, "id", fmtID(u.ID), "company", co.Slug, "email", u.Email, "role", u.Role, "created", fmtTime(u.CreatedAt))
		})
	})
	companyFlag(c, &company)
	c.Flags().StringVar(&email, "email", "", "the address the user signs in with (required)")
	c.Flags().StringVar(&role, "role", "member", "admin or member")
	c.Flags().StringVar(&password, "password", "", "the password (at least 12 characters); without it, read from stdin")
	c.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from stdin (the default when --password is not given)")
	_ = c.MarkFlagRequired("email")
	return c
}

func usersListCmd(e *env) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "list",
		Short:   "List a company's console users",
		Example: `  parleyctl users list --company acme`,
		Args:    noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			_, co, err := e.withCompany(ctx, company)
			if err != nil {
				return err
			}
			us, err := listUsers(ctx, e.pool, co.ID)
			if err != nil {
				return err
			}
			return e.emit(us, func(w io.Writer) {
				rows := make([][]string, len(us))
				for i, u := range us {
					rows[i] = []string{fmtID(u.ID), u.Email, u.Role, fmtTime(u.CreatedAt)}
				}
				table(w, "no users", []string{"ID", "EMAIL", "ROLE", "CREATED"}, rows)
			})
		}),
	}
	companyFlag(c, &company)
	return c
}
