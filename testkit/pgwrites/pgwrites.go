// Package pgwrites reads PostgreSQL's cumulative write counters of one
// database (commits, rows) and of its cluster (WAL), so that a load test
// can say what one unit of work wrote: gateway-bench capacity
// (testkit/system/loadtest) and the delivery bench
// (testkit/system/campaign/bench_test.go) use it. The WAL figures are
// the whole cluster's: exact on a private cluster only.
//
// A backend reports its counters at most once a second, and an idle one up
// to 10 s later (PGSTAT_IDLE_INTERVAL): read after Settle, or after the
// connections that wrote have closed.
package pgwrites

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Settle is how long an idle backend may keep its counters before
// reporting them (PGSTAT_IDLE_INTERVAL, 10 s, plus a margin).
const Settle = 11 * time.Second

// Counters are cumulative counters of the database and of the cluster's WAL.
type Counters struct {
	Commits, Rollbacks, Inserted, Updated, Deleted, HOT int64
	WALBytes, WALRecords, WALFPI                        int64
}

const countersSQL = `
SELECT d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted,
       (SELECT coalesce(sum(n_tup_hot_upd), 0)::bigint FROM pg_stat_user_tables),
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, w.wal_records, w.wal_fpi
FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()`

// Read samples the counters of pool's database.
func Read(ctx context.Context, pool *pgxpool.Pool) (Counters, error) {
	var c Counters
	err := pool.QueryRow(ctx, countersSQL).Scan(&c.Commits, &c.Rollbacks, &c.Inserted, &c.Updated, &c.Deleted, &c.HOT,
		&c.WALBytes, &c.WALRecords, &c.WALFPI)
	return c, err
}

// Minus is what happened between o and c.
func (c Counters) Minus(o Counters) Counters {
	return Counters{c.Commits - o.Commits, c.Rollbacks - o.Rollbacks, c.Inserted - o.Inserted, c.Updated - o.Updated,
		c.Deleted - o.Deleted, c.HOT - o.HOT, c.WALBytes - o.WALBytes, c.WALRecords - o.WALRecords, c.WALFPI - o.WALFPI}
}

// Per renders the counters divided by n units named unit.
func (c Counters) Per(n int, unit string) string {
	f := float64(max(n, 1))
	return fmt.Sprintf("PostgreSQL per %s: %.3f commits, %.3f rows inserted, %.3f updated (%.3f HOT), %.3f deleted; WAL %.0f bytes, %.2f records, %.3f full-page images",
		unit, float64(c.Commits)/f, float64(c.Inserted)/f, float64(c.Updated)/f, float64(c.HOT)/f, float64(c.Deleted)/f,
		float64(c.WALBytes)/f, float64(c.WALRecords)/f, float64(c.WALFPI)/f)
}
