package store

import (
	"context"
	"database/sql"
)

// MigrateUpTo applies the migrations up to version, for tests of an
// upgrade over rows written by an older schema.
func MigrateUpTo(ctx context.Context, databaseURL string, version int64) error {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
