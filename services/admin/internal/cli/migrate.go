package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/store"
)

type migrateView struct {
	DatabaseCreated bool    `json:"database_created"`
	From            int64   `json:"from"`
	To              int64   `json:"to"`
	Applied         []int64 `json:"applied"`
}

func migrateCmd(e *env) *cobra.Command {
	var createDB bool
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the embedded schema migrations (running it again is a no-op)",
		Example: `  parleyctl migrate
  parleyctl migrate --create-database   # create the database of PARLEY_POSTGRES_URL first if missing`,
		Args: noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			cfg, err := e.config()
			if err != nil {
				return err
			}
			var v migrateView
			if createDB {
				if v.DatabaseCreated, err = createDatabase(ctx, cfg.Postgres.URL); err != nil {
					return err
				}
			}
			res, err := store.Migrate(ctx, cfg.Postgres.URL)
			if err != nil {
				return err
			}
			v.From, v.To, v.Applied = res.From, res.To, res.Applied
			if v.Applied == nil {
				v.Applied = []int64{}
			}
			return e.emit(v, func(w io.Writer) {
				if v.DatabaseCreated {
					fmt.Fprintln(w, "created the database")
				}
				if len(v.Applied) == 0 {
					fmt.Fprintf(w, "schema is up to date at version %d\n", v.To)
					return
				}
				applied := make([]string, len(v.Applied))
				for i, a := range v.Applied {
					applied[i] = fmt.Sprint(a)
				}
				fmt.Fprintf(w, "migrated schema from version %d to %d (applied %s)\n", v.From, v.To, strings.Join(applied, ", "))
			})
		}),
	}
	c.Flags().BoolVar(&createDB, "create-database", false, "create the database named in PARLEY_POSTGRES_URL if it does not exist")
	return c
}

// createDatabase creates the database that url names, connecting to the
// server's maintenance database "postgres", and reports whether it did.
func createDatabase(ctx context.Context, url string) (bool, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return false, fmt.Errorf("parse postgres url: %w", err)
	}
	name := cfg.Database
	if name == "" {
		return false, fmt.Errorf("PARLEY_POSTGRES_URL names no database")
	}
	cfg.Database = "postgres"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect to the server's postgres database: %w", err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(cctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for database %q: %w", name, err)
	}
	if exists {
		return false, nil
	}
	if _, err := conn.Exec(cctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" {
			return false, nil // created by someone else meanwhile
		}
		return false, fmt.Errorf("create database %q: %w", name, err)
	}
	return true, nil
}
