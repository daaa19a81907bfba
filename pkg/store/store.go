// Package store opens the PostgreSQL pool, applies the embedded schema
// migrations, and refuses to run against a schema older than the code.
package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/parleyhq/parley/pkg/ops"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Config is the PostgreSQL part of a service's configuration.
type Config struct {
	URL      string `env:"PARLEY_POSTGRES_URL" envDefault:"postgres://postgres@127.0.0.1:5432/parley?sslmode=disable"`
	MaxConns int32  `env:"PARLEY_POSTGRES_MAX_CONNS" envDefault:"10"`
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if _, err := pgxpool.ParseConfig(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("PARLEY_POSTGRES_URL: %w", err))
	}
	if c.MaxConns < 1 {
		errs = append(errs, errors.New("PARLEY_POSTGRES_MAX_CONNS must be at least 1"))
	}
	return errors.Join(errs...)
}

// ErrSchemaOutdated is returned when the database has not been migrated to
// the version this binary was built for.
var ErrSchemaOutdated = errors.New("database schema is older than this build expects")

// Open connects a pool and checks that the schema is current.
func Open(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	pcfg.MaxConns = cfg.MaxConns
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	if err := pool.Ping(cctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	if err := CheckSchema(cctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Check is the readiness check of a pool: PostgreSQL answers.
func Check(pool *pgxpool.Pool) ops.Check { return ops.Check{Name: "postgres", Ping: pool.Ping} }

// LatestVersion is the schema version this build expects.
func LatestVersion() (int64, error) {
	vs, err := Versions()
	if err != nil {
		return 0, err
	}
	return vs[len(vs)-1], nil
}

// Versions are the versions of the embedded migrations, ascending. They
// need not be contiguous: a number reserved for a migration of another
// branch may be missing until it lands.
func Versions() ([]int64, error) {
	p, err := provider(nil)
	if err != nil {
		return nil, err
	}
	srcs := p.ListSources()
	if len(srcs) == 0 {
		return nil, errors.New("no migrations embedded")
	}
	out := make([]int64, len(srcs))
	for i, src := range srcs {
		out[i] = src.Version
	}
	return out, nil
}

// CheckSchema returns ErrSchemaOutdated (with both versions) when the
// database is behind this build.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return err
	}
	want, err := LatestVersion()
	if err != nil {
		return err
	}
	have, err := p.GetDBVersion(ctx)
	if err != nil {
		// A database never migrated has no version table at all.
		return fmt.Errorf("%w: it has no Parley schema (want version %d); run `parleyctl migrate`: %v", ErrSchemaOutdated, want, err)
	}
	if have < want {
		return fmt.Errorf("%w: database is at version %d, this build needs %d; run `parleyctl migrate`", ErrSchemaOutdated, have, want)
	}
	return nil
}

// MigrateResult says what a migration run did.
type MigrateResult struct {
	From, To int64
	Applied  []int64
}

// Migrate applies every pending migration. Running it again is a no-op.
func Migrate(ctx context.Context, databaseURL string) (MigrateResult, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("open postgres: %w", err)
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return MigrateResult{}, err
	}
	from, err := p.GetDBVersion(ctx)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("read schema version: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("migrate: %w", err)
	}
	res := MigrateResult{From: from, To: from}
	for _, r := range results {
		res.Applied = append(res.Applied, r.Source.Version)
		res.To = r.Source.Version
	}
	return res, nil
}

func provider(db *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("migrations fs: %w", err)
	}
	if db == nil {
		// Listing sources needs no connection, but goose wants a handle.
		db = &sql.DB{}
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// MigrationsDigest is a hex SHA-256 over every embedded migration, naming the
// schema exactly (tests key their template databases by it).
func MigrationsDigest() (string, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, e := range entries {
		b, err := fs.ReadFile(migrations, "migrations/"+e.Name())
		if err != nil {
			return "", err
		}
		h.Write([]byte(e.Name()))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
