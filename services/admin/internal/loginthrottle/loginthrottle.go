// Package loginthrottle slows password guessing on the console sign-in: after
// too many failures within a sliding window, for one email address or from
// one client network, sign-in is refused (without checking the password)
// until enough of those failures have aged out of the window.
//
// The failures live in PostgreSQL (table login_failures), not in Redis: every
// admin replica sees the same count, a restart does not hand an attacker a
// fresh allowance, and the admin service needs no Redis at all. Sign-in is
// rare enough that a row per failure costs nothing.
package loginthrottle

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Limits are how many failures are allowed within Window, per email address
// and per client network, before sign-in is refused.
type Limits struct {
	PerEmail int
	PerIP    int
	Window   time.Duration
}

// Throttle counts failed sign-ins.
type Throttle struct {
	pool   *pgxpool.Pool
	limits Limits
	now    func() time.Time
}

// New returns a throttle; now defaults to time.Now.
func New(pool *pgxpool.Pool, limits Limits, now func() time.Time) *Throttle {
	if now == nil {
		now = time.Now
	}
	return &Throttle{pool: pool, limits: limits, now: now}
}

// Network is the subject an address is counted under: an IPv4 address
// itself, an IPv6 address's /64 (one subscriber usually holds a whole /64,
// so counting single IPv6 addresses would throttle nothing).
func Network(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// Check returns zero when a sign-in for email from ip may be attempted, or
// how long until it may be.
func (t *Throttle) Check(ctx context.Context, email string, ip netip.Addr) (time.Duration, error) {
	now := t.now()
	var wait time.Duration
	for _, c := range []struct {
		scope, subject string
		limit          int
	}{
		{"email", email, t.limits.PerEmail},
		{"ip", Network(ip), t.limits.PerIP},
	} {
		// The limit-th newest failure in the window: once it ages out, fewer
		// than limit remain.
		var at time.Time
		err := t.pool.QueryRow(ctx, `
			SELECT failed_at FROM login_failures
			WHERE scope = $1 AND subject = $2 AND failed_at > $3
			ORDER BY failed_at DESC OFFSET $4 LIMIT 1`,
			c.scope, c.subject, now.Add(-t.limits.Window), c.limit-1).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("check sign-in failures by %s: %w", c.scope, err)
		}
		if w := at.Add(t.limits.Window).Sub(now); w > wait {
			wait = w
		}
	}
	return wait, nil
}

// RecordFailure counts a failed sign-in against the email and the network,
// and forgets failures that have left the window.
func (t *Throttle) RecordFailure(ctx context.Context, email string, ip netip.Addr) error {
	now := t.now().UTC()
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO login_failures (scope, subject, failed_at) VALUES ('email', $1, $3), ('ip', $2, $3)`, email, Network(ip), now)
	b.Queue(`DELETE FROM login_failures WHERE failed_at <= $1`, now.Add(-t.limits.Window))
	if err := t.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record sign-in failure: %w", err)
	}
	return nil
}

// Reset forgets the failures of an email address after its owner signed in.
// The network's failures stay: one success from a network says nothing
// about the other addresses guessed from it.
func (t *Throttle) Reset(ctx context.Context, email string) error {
	if _, err := t.pool.Exec(ctx, `DELETE FROM login_failures WHERE scope = 'email' AND subject = $1`, email); err != nil {
		return fmt.Errorf("reset sign-in failures: %w", err)
	}
	return nil
}
