package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/services/admin/internal/accounts"
)

// The users of the admin console. Package accounts owns them (the rules,
// the hashing, the queries); parleyctl creates and lists them through it.

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
		if accounts.CheckEmail(email) != nil {
			return usagef("--email %q is not an email address", email)
		}
		r, err := accounts.ParseRole(role)
		if err != nil {
			return usagef("--role %q: admin or member", role)
		}
		if c.Flags().Changed("password") && passwordStdin {
			return usagef("give --password or --password-stdin, not both")
		}
		if !c.Flags().Changed("password") {
			if password, err = e.readSecret("Password for " + email + ": "); err != nil {
				return err
			}
		}
		if err := accounts.CheckPasswordRules(password); err != nil {
			return usageError{err}
		}
		_, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		u, err := accounts.NewStore(e.pool).CreateUser(ctx, co.ID, email, password, r)
		if errors.Is(err, accounts.ErrEmailTaken) {
			return fmt.Errorf("user %q already exists", email)
		}
		if err != nil {
			return err
		}
		return e.emit(u, func(w io.Writer) {
			fields(w, "id", fmtID(u.ID), "company", co.Slug, "email", u.Email, "role", string(u.Role), "created", fmtTime(u.CreatedAt))
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
	return companyList[accounts.User, accounts.User]{
		noun: "users", short: "List a company's console users", empty: "no users",
		header: []string{"ID", "EMAIL", "ROLE", "CREATED"},
		load: func(_ *catalog.Store, ctx context.Context, companyID int64) ([]accounts.User, error) {
			return accounts.NewStore(e.pool).Users(ctx, companyID)
		},
		each: func(u accounts.User) (accounts.User, []string) {
			return u, []string{fmtID(u.ID), u.Email, string(u.Role), fmtTime(u.CreatedAt)}
		},
	}.cmd(e)
}
