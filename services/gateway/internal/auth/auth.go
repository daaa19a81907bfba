// Package auth turns the service-api-key header into the company it belongs
// to. Lookups are cached in process for a short TTL; a broadcast on NATS
// drops an entry at once when its key or company changes, and the TTL bounds
// staleness when a broadcast is lost. last_used_at is written in the
// background, at most about once a minute per key, never on the request path.
package auth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/ttlcache"
)

// Outcomes of authentication that are the caller's fault; each maps to one
// status and body at the HTTP edge.
var (
	// ErrInvalidKey: absent, malformed, unknown, revoked, or past its grace (401).
	ErrInvalidKey = errors.New("invalid API key")
	// ErrSubscriptionRequired: the company has no active subscription (403).
	ErrSubscriptionRequired = errors.New("subscription required")
	// ErrNotProvisioned: the company's workspace is not provisioned yet (403).
	ErrNotProvisioned = errors.New("workspace not provisioned")
)

// Principal is who is calling: the company of a valid key.
type Principal struct {
	CompanyID int64
	KeyID     string
}

// Record is what one lookup learns about a key. Found false caches an
// unknown key id, so a client retrying with a deleted key costs nothing.
type Record struct {
	Found              bool
	CompanyID          int64
	SecretHash         []byte
	State              apikey.State
	GraceEndsAt        time.Time
	SubscriptionActive bool
	Provisioned        bool
}

// Config tunes the cache and the last-used writes.
type Config struct {
	Cache ttlcache.Config
	// TouchEvery is the least time between two last_used_at writes of a key.
	TouchEvery time.Duration
	// FlushEvery is how often queued last_used_at writes are flushed.
	FlushEvery time.Duration
}

// Authenticator checks keys against a cached view of the api_keys table.
type Authenticator struct {
	cfg   Config
	cache *ttlcache.Cache[string, Record]
	touch func(ctx context.Context, used map[string]time.Time) error
	now   func() time.Time
	log   *zap.Logger

	// lastTouch is keyID -> *atomic.Int64 (unix nanos of the last queued write),
	// kept apart from the cache so that reloads don't reset it.
	lastTouch sync.Map
	touchMu   sync.Mutex
	touched   map[string]time.Time
}

// New returns an authenticator reading from pool. now is the clock (tests
// move it to check the 24-hour grace).
func New(pool *pgxpool.Pool, cfg Config, now func() time.Time, log *zap.Logger) *Authenticator {
	if now == nil {
		now = time.Now
	}
	keys := apikey.NewStore(pool, now)
	return &Authenticator{
		cfg:     cfg,
		cache:   ttlcache.New(cfg.Cache, now, postgresLoader(pool)),
		touch:   keys.TouchLastUsed,
		now:     now,
		log:     log,
		touched: map[string]time.Time{},
	}
}

// postgresLoader looks a key and its company up in one query.
func postgresLoader(pool *pgxpool.Pool) func(context.Context, string) (Record, error) {
	return func(ctx context.Context, keyID string) (Record, error) {
		var r Record
		var state string
		var grace *time.Time
		err := pool.QueryRow(ctx, `
			SELECT k.company_id, k.secret_hash, k.state, k.grace_ends_at, c.subscription_active, c.provisioned
			FROM api_keys k JOIN companies c ON c.id = k.company_id
			WHERE k.key_id = $1`, keyID).Scan(&r.CompanyID, &r.SecretHash, &state, &grace, &r.SubscriptionActive, &r.Provisioned)
		if errors.Is(err, pgx.ErrNoRows) {
			return Record{}, nil
		}
		if err != nil {
			return Record{}, fmt.Errorf("look up key: %w", err)
		}
		r.Found, r.State = true, apikey.State(state)
		if grace != nil {
			r.GraceEndsAt = *grace
		}
		return r, nil
	}
}

// Authenticate checks the full key from the service-api-key header. Errors
// other than the three sentinels mean the record could not be read.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (Principal, error) {
	p, err := apikey.Parse(header)
	if err != nil {
		return Principal{}, ErrInvalidKey // a mistyped or forged key costs no lookup
	}
	e, stale, err := a.cache.Get(ctx, p.KeyID)
	if err != nil {
		return Principal{}, err
	}
	if stale {
		a.log.Warn("key lookup failed; using the cached entry", zap.String("key_id", p.KeyID))
	}
	r := e.Value
	now := a.now()
	if !r.Found || !apikey.SecretMatches(p.Secret, r.SecretHash) || !accepts(r, now) {
		return Principal{}, ErrInvalidKey
	}
	if !r.SubscriptionActive {
		return Principal{}, ErrSubscriptionRequired
	}
	if !r.Provisioned {
		return Principal{}, ErrNotProvisioned
	}
	a.markUsed(p.KeyID, now)
	return Principal{CompanyID: r.CompanyID, KeyID: p.KeyID}, nil
}

func accepts(r Record, now time.Time) bool {
	k := apikey.Key{State: r.State}
	if !r.GraceEndsAt.IsZero() {
		k.GraceEndsAt = &r.GraceEndsAt
	}
	return k.Accepts(now)
}

// Invalidate drops what the cache holds about a changed key or company.
func (a *Authenticator) Invalidate(inv bus.Invalidation) {
	switch inv.Kind {
	case bus.KindAPIKey:
		a.cache.Delete(inv.ID)
	case bus.KindCompany:
		id, err := strconv.ParseInt(inv.ID, 10, 64)
		if err != nil {
			return
		}
		a.cache.DeleteFunc(func(_ string, r Record) bool { return r.CompanyID == id })
	}
}

// markUsed queues a last_used_at write when the key's last one is older than
// TouchEvery. The common case is one map load and one atomic load.
func (a *Authenticator) markUsed(keyID string, now time.Time) {
	v, ok := a.lastTouch.Load(keyID)
	if !ok {
		v, _ = a.lastTouch.LoadOrStore(keyID, new(atomic.Int64))
	}
	last := v.(*atomic.Int64)
	prev := last.Load()
	if now.UnixNano()-prev < int64(a.cfg.TouchEvery) || !last.CompareAndSwap(prev, now.UnixNano()) {
		return
	}
	a.touchMu.Lock()
	a.touched[keyID] = now
	a.touchMu.Unlock()
}

// RunTouches flushes queued last_used_at writes every FlushEvery until ctx
// ends, then once more.
func (a *Authenticator) RunTouches(ctx context.Context) {
	t := time.NewTicker(a.cfg.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			a.flushTouches(fctx)
			cancel()
			return
		case <-t.C:
			a.flushTouches(ctx)
		}
	}
}

func (a *Authenticator) flushTouches(ctx context.Context) {
	a.touchMu.Lock()
	if len(a.touched) == 0 {
		a.touchMu.Unlock()
		return
	}
	batch := a.touched
	a.touched = map[string]time.Time{}
	a.touchMu.Unlock()
	if err := a.touch(ctx, batch); err != nil {
		// Put them back (newest wins) so that the next flush retries.
		a.touchMu.Lock()
		for k, v := range batch {
			if cur, ok := a.touched[k]; !ok || v.After(cur) {
				a.touched[k] = v
			}
		}
		a.touchMu.Unlock()
		a.log.Warn("write last_used_at", zap.Int("keys", len(batch)), zap.Error(err))
	}
}
