// Package storetest gives each test its own migrated PostgreSQL database on
// the local server, cloned from a template so that it takes milliseconds.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/store"
)

// ServerURL is the local server's maintenance database; PARLEY_TEST_POSTGRES_URL overrides it.
func ServerURL() string {
	if u := os.Getenv("PARLEY_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NewDatabase creates a fresh, migrated database for t, dropped when t ends,
// and returns its URL and an open pool.
func NewDatabase(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("storetest: connect to %s: %v", ServerURL(), err)
	}
	defer admin.Close(ctx)

	tmpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		t.Fatalf("storetest: template: %v", err)
	}
	name := "parley_test_" + randomHex(6)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	dbURL := withDatabase(ServerURL(), name)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("storetest: connect %s: %v", name, err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			t.Logf("storetest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Logf("storetest: drop %s: %v", name, err)
		}
	})
	return dbURL, pool
}

// NewEmptyDatabase creates a database with no schema at all, dropped when t ends.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("storetest: connect: %v", err)
	}
	defer admin.Close(ctx)
	name := "parley_test_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, ServerURL()); err == nil {
			_, _ = c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
			c.Close(ctx)
		}
	})
	return withDatabase(ServerURL(), name)
}

// ensureTemplate migrates a template database named for the migrations'
// content once per schema, serialised across test processes by an advisory lock.
func ensureTemplate(ctx context.Context, admin *pgx.Conn) (string, error) {
	sum, err := store.MigrationsDigest()
	if err != nil {
		return "", err
	}
	name := "parley_tmpl_" + sum[:12]
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(727274)"); err != nil {
		return "", err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(727274)") //nolint:errcheck
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_build"
	if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", building)); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	if _, err := store.Migrate(ctx, withDatabase(ServerURL(), building)); err != nil {
		return "", err
	}
	// Renamed only once complete, so a crashed build never serves as a template.
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		return "", err
	}
	return name, nil
}

func withDatabase(serverURL, name string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		panic(fmt.Sprintf("storetest: server url: %v", err)) // a broken test environment, not an expected failure
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Subscribe gives company an enabled webhook endpoint that receives types
// (every type when none is given), so that its changes write their events
// to the outbox (pkg/events writes only what an endpoint receives).
func Subscribe(t testing.TB, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, company int64, types ...string) {
	t.Helper()
	if types == nil {
		types = []string{}
	}
	if _, err := db.Exec(context.Background(), `INSERT INTO webhook_endpoints (company_id, url, event_types) VALUES ($1, 'https://hooks.example.com/parley', $2)`,
		company, types); err != nil {
		t.Fatalf("storetest: subscribe company %d: %v", company, err)
	}
}
