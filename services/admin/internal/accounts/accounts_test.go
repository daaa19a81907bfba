package accounts_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/services/admin/internal/accounts"
	"github.com/parleyhq/parley/testkit/storetest"
)

func newCompany(t *testing.T, pool *pgxpool.Pool, slug string) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO companies (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestHashPassword(t *testing.T) {
	h, err := accounts.HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q is not an argon2id PHC string with the chosen parameters", h)
	}
	if ok, err := accounts.CheckPassword("correct horse battery", h); err != nil || !ok {
		t.Fatalf("CheckPassword(right) = %v, %v", ok, err)
	}
	if ok, _ := accounts.CheckPassword("correct horse batterY", h); ok {
		t.Fatal("a different password matched")
	}
	h2, _ := accounts.HashPassword("correct horse battery")
	if h2 == h {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, weak := range []string{"", "short", strings.Repeat("x", accounts.MinPasswordLen-1), strings.Repeat("x", accounts.MaxPasswordLen+1)} {
		if _, err := accounts.HashPassword(weak); !errors.Is(err, accounts.ErrWeakPassword) {
			t.Errorf("HashPassword(%d chars) err = %v, want ErrWeakPassword", len(weak), err)
		}
	}
}

func TestParseRole(t *testing.T) {
	for in, want := range map[string]accounts.Role{"admin": accounts.RoleAdmin, " Member ": accounts.RoleMember} {
		if got, err := accounts.ParseRole(in); err != nil || got != want {
			t.Errorf("ParseRole(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := accounts.ParseRole("owner"); !errors.Is(err, accounts.ErrInvalidRole) {
		t.Errorf("ParseRole(owner) err = %v", err)
	}
}

func TestCreateAndAuthenticate(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	s := accounts.NewStore(pool)
	acme := newCompany(t, pool, "acme")

	u, err := s.CreateUser(ctx, acme, " Ada@Example.com ", "a long enough password", accounts.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if u.Email != "Ada@Example.com" || u.CompanyID != acme || !u.IsAdmin() {
		t.Fatalf("created %+v", u)
	}

	got, err := s.Authenticate(ctx, "ada@example.COM", "a long enough password")
	if err != nil || got.ID != u.ID {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}
	if _, err := s.Authenticate(ctx, "ada@example.com", "a wrong password!!"); !errors.Is(err, accounts.ErrInvalidCredentials) {
		t.Fatalf("wrong password: err = %v", err)
	}
	if _, err := s.Authenticate(ctx, "nobody@example.com", "a long enough password"); !errors.Is(err, accounts.ErrInvalidCredentials) {
		t.Fatalf("unknown email: err = %v", err)
	}

	if err := s.SetPassword(ctx, "ADA@example.com", "another long password"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "ada@example.com", "a long enough password"); !errors.Is(err, accounts.ErrInvalidCredentials) {
		t.Fatalf("old password after SetPassword: err = %v", err)
	}
	if _, err := s.Authenticate(ctx, "ada@example.com", "another long password"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if err := s.SetPassword(ctx, "nobody@example.com", "another long password"); !errors.Is(err, accounts.ErrNotFound) {
		t.Fatalf("SetPassword(unknown) err = %v", err)
	}

	byID, err := s.User(ctx, u.ID)
	if err != nil || byID != got {
		t.Fatalf("User(%d) = %+v, %v; want %+v", u.ID, byID, err, got)
	}
	if _, err := s.User(ctx, u.ID+1000); !errors.Is(err, accounts.ErrNotFound) {
		t.Fatalf("User(unknown) err = %v", err)
	}

	var stored string
	if err := pool.QueryRow(ctx, `SELECT password_hash FROM users WHERE id = $1`, u.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, "password") || !strings.HasPrefix(stored, "$argon2id$") {
		t.Fatalf("stored hash %q", stored)
	}
}

func TestCreateUserRejects(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	s := accounts.NewStore(pool)
	acme := newCompany(t, pool, "acme")
	if _, err := s.CreateUser(ctx, acme, "ada@example.com", "a long enough password", accounts.RoleMember); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		company   int64
		email     string
		password  string
		role      accounts.Role
		wantError error
	}{
		{"taken, other case", acme, "ADA@example.com", "a long enough password", accounts.RoleMember, accounts.ErrEmailTaken},
		{"no at sign", acme, "ada.example.com", "a long enough password", accounts.RoleMember, accounts.ErrInvalidEmail},
		{"space inside", acme, "ada lovelace@example.com", "a long enough password", accounts.RoleMember, accounts.ErrInvalidEmail},
		{"short password", acme, "bob@example.com", "too short", accounts.RoleMember, accounts.ErrWeakPassword},
		{"unknown role", acme, "bob@example.com", "a long enough password", accounts.Role("owner"), accounts.ErrInvalidRole},
		{"unknown company", acme + 999, "bob@example.com", "a long enough password", accounts.RoleAdmin, accounts.ErrNoCompany},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.CreateUser(ctx, c.company, c.email, c.password, c.role); !errors.Is(err, c.wantError) {
				t.Fatalf("err = %v, want %v", err, c.wantError)
			}
		})
	}
}

func TestUsersAndUserByEmail(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	s := accounts.NewStore(pool)
	acme, globex := newCompany(t, pool, "acme"), newCompany(t, pool, "globex")

	if us, err := s.Users(ctx, acme); err != nil || us == nil || len(us) != 0 {
		t.Fatalf("Users(empty company) = %#v, %v; want an empty, non-nil list", us, err)
	}
	admin, err := s.CreateUser(ctx, acme, "Ops@Acme.example", "a long enough password", accounts.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	member, err := s.CreateUser(ctx, acme, "dev@acme.example", "a long enough password", accounts.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateUser(ctx, globex, "ops@globex.example", "a long enough password", accounts.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}

	us, err := s.Users(ctx, acme)
	if err != nil || len(us) != 2 || us[0] != admin || us[1] != member {
		t.Fatalf("Users(acme) = %+v, %v; want [%+v %+v]", us, err, admin, member)
	}
	if us, err := s.Users(ctx, globex); err != nil || len(us) != 1 || us[0] != other {
		t.Fatalf("Users(globex) = %+v, %v", us, err)
	}

	got, err := s.UserByEmail(ctx, " ops@ACME.example ")
	if err != nil || got != admin {
		t.Fatalf("UserByEmail = %+v, %v; want %+v", got, err, admin)
	}
	if _, err := s.UserByEmail(ctx, "nobody@acme.example"); !errors.Is(err, accounts.ErrNotFound) {
		t.Fatalf("UserByEmail(unknown) err = %v, want ErrNotFound", err)
	}
}

func TestCheckRules(t *testing.T) {
	for _, ok := range []string{"a@b", " ada@example.com "} {
		if err := accounts.CheckEmail(ok); err != nil {
			t.Errorf("CheckEmail(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "ada", "a b@c", "@c", "a@", strings.Repeat("a", 250) + "@b.cd"} {
		if err := accounts.CheckEmail(bad); !errors.Is(err, accounts.ErrInvalidEmail) {
			t.Errorf("CheckEmail(%q) = %v, want ErrInvalidEmail", bad, err)
		}
	}
	// Length counts characters: twelve two-byte runes pass.
	if err := accounts.CheckPasswordRules(strings.Repeat("é", accounts.MinPasswordLen)); err != nil {
		t.Errorf("12 runes: %v", err)
	}
	if err := accounts.CheckPasswordRules(strings.Repeat("x", accounts.MinPasswordLen-1)); !errors.Is(err, accounts.ErrWeakPassword) {
		t.Errorf("11 characters: %v", err)
	}
}
