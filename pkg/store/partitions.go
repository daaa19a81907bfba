package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tables partitioned by week (messages, inbound_messages, the webhook
// deliveries and attempts): range partitions of one timestamptz column, a
// week each from Monday 00:00 UTC, named <table>_wYYYYMMDD, beside the
// partition that holds the rows from before the table was partitioned
// (<table>_legacy) and a default partition for rows whose week has none.
// The services create the weeks ahead (CreateWeeks) and apply the
// retention by dropping whole partitions (DropExpired), never by DELETE.

// Week is the start of the week holding t: Monday, 00:00 UTC.
func Week(t time.Time) time.Time {
	t = t.UTC()
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
}

// CreateWeeks creates the weekly partitions of parent from the week of now
// through ahead weeks after it that do not exist yet, and returns their
// names. Safe to run from every process at once (the SQL function
// serialises them per table).
func CreateWeeks(ctx context.Context, pool *pgxpool.Pool, parent string, now time.Time, ahead int) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT parley_weekly_partitions($1, $2, $3)`, parent, now, ahead)
	if err != nil {
		return nil, fmt.Errorf("create the weeks of %s: %w", parent, err)
	}
	created, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("create the weeks of %s: %w", parent, err)
	}
	return created, nil
}

// Expiring says how a partitioned table's old partitions go.
type Expiring struct {
	// Parent is the partitioned table.
	Parent string
	// Open, when not empty, is an SQL condition on a partition's rows
	// under which the partition is kept whatever its age: rows still at
	// work (a message not sent yet, a delivery still pending).
	Open string
	// With are tables partitioned by the same weeks whose rows belong to
	// Parent's (webhook attempts to their deliveries): the partition of
	// the same week (the same name after the parent's) goes with Parent's,
	// dropped before it.
	With []string
}

// WeeksAhead is how many weeks after the current one Keep keeps created,
// so that a week's first row never waits for its partition.
const WeeksAhead = 2

// Kept is what one Keep did.
type Kept struct {
	// Created are the weekly partitions it created.
	Created []string
	// Dropped are the expired partitions it dropped (each with its With
	// tables' partition of the same week).
	Dropped []string
	// Open are expired partitions kept because a row in them is still open.
	Open []string
}

// Keep is the lifetime of partitioned tables: it creates the weeks of each
// one's Parent and With tables from the week of now through WeeksAhead after
// it and, with a retention (0 keeps everything), drops the weeks that ended
// at or before now-retention and hold nothing open (DropExpired). Every
// process may run it; a table too busy to lock within DropLockTimeout is
// left for the next run (ErrPartitionBusy among the errors).
func Keep(ctx context.Context, pool *pgxpool.Pool, now time.Time, retention time.Duration, tables ...Expiring) (Kept, error) {
	var k Kept
	var errs []error
	for _, e := range tables {
		for _, table := range append([]string{e.Parent}, e.With...) {
			created, err := CreateWeeks(ctx, pool, table, now, WeeksAhead)
			k.Created = append(k.Created, created...)
			if err != nil {
				errs = append(errs, err)
			}
		}
		if retention <= 0 {
			continue
		}
		dropped, open, err := DropExpired(ctx, pool, e, now.Add(-retention))
		k.Dropped, k.Open = append(k.Dropped, dropped...), append(k.Open, open...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return k, errors.Join(errs...)
}

// Partition is one partition of a table: its name and where its range
// ends (zero for the default partition, which never expires).
type Partition struct {
	Name string
	End  time.Time
}

// Partitions lists parent's partitions, oldest first (the default last).
func Partitions(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, parent string) ([]Partition, error) {
	rows, err := db.Query(ctx, `
		SELECT c.relname::text, parley_partition_end(c.oid)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = to_regclass(quote_ident($1))
		ORDER BY 2 NULLS LAST, 1`, parent)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", parent, err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var p Partition
		var end *time.Time
		if err := r.Scan(&p.Name, &end); err != nil {
			return p, err
		}
		if end != nil {
			p.End = *end
		}
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", parent, err)
	}
	return parts, nil
}

// ErrPartitionBusy is a drop that could not take its table's lock within
// DropLockTimeout: the table was busy; the next run tries again.
var ErrPartitionBusy = errors.New("partitioned table busy")

// DropLockTimeout bounds how long a drop waits for its table's lock, and so
// how long the statements queued behind it wait.
const DropLockTimeout = time.Second

// DropExpired drops the partitions of e.Parent whose range ended at or
// before cutoff and that hold no open row, with theirs of e.With, each in
// one transaction that locks the tables (parent first, so that it cannot
// deadlock with statements on them; e.Parent before e.With, the order in
// which writers take them: a delivery, then its attempt) for the check
// and the drop. It
// returns what it dropped and what it kept because it is still open; a
// busy table (ErrPartitionBusy) stops it.
func DropExpired(ctx context.Context, pool *pgxpool.Pool, e Expiring, cutoff time.Time) (dropped, open []string, err error) {
	parts, err := Partitions(ctx, pool, e.Parent)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range parts {
		if p.End.IsZero() || p.End.After(cutoff) {
			continue
		}
		gone, err := dropOne(ctx, pool, e, p.Name)
		if errors.Is(err, errGone) {
			continue // another process dropped it since the list
		}
		if err != nil {
			return dropped, open, err
		}
		if gone {
			dropped = append(dropped, p.Name)
		} else {
			open = append(open, p.Name)
		}
	}
	return dropped, open, nil
}

// errGone is a partition dropped by another process since it was listed.
var errGone = errors.New("partition gone")

// dropOne drops one partition (and its With) unless it holds open rows.
func dropOne(ctx context.Context, pool *pgxpool.Pool, e Expiring, name string) (bool, error) {
	isOpen := func(db interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) (bool, error) {
		if e.Open == "" {
			return false, nil
		}
		var found bool
		err := db.QueryRow(ctx, fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE %s)`, pgx.Identifier{name}.Sanitize(), e.Open)).Scan(&found)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			return false, errGone
		}
		if err != nil {
			return false, fmt.Errorf("open rows of %s: %w", name, err)
		}
		return found, nil
	}
	// Without the lock first: an open partition stays, and no one waits.
	if found, err := isOpen(pool); err != nil || found {
		return false, err
	}
	suffix := strings.TrimPrefix(name, e.Parent)
	tables := make([]string, 0, len(e.With)+1)
	tables = append(tables, pgx.Identifier{e.Parent}.Sanitize())
	for _, w := range e.With {
		tables = append(tables, pgx.Identifier{w}.Sanitize())
	}
	drops := make([]string, 0, len(e.With)+1)
	for _, w := range e.With {
		drops = append(drops, pgx.Identifier{w + suffix}.Sanitize())
	}
	drops = append(drops, pgx.Identifier{name}.Sanitize())
	gone := false
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, DropLockTimeout.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(tables, ", ")+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
				return fmt.Errorf("drop %s: %w", name, ErrPartitionBusy)
			}
			return fmt.Errorf("lock %s: %w", e.Parent, err)
		}
		found, err := isOpen(tx)
		if err != nil || found {
			return err
		}
		if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+strings.Join(drops, ", ")); err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
		gone = true
		return nil
	})
	return gone, err
}
