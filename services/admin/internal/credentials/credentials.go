// Package credentials is the company API key as the admin service manages
// it, for the console and the admin API alike: the lifecycle of pkg/apikey,
// scoped to a company that must exist, followed by the broadcast that makes
// every gateway drop its cached copy of the changed keys.
package credentials

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
)

// Errors of the service besides those of pkg/apikey (ErrActiveKeyExists,
// ErrNoActiveKey, ErrNotFound, ErrAlreadyRevoked), which pass through.
var (
	ErrCompanyNotFound = errors.New("company not found")
	// ErrStale is a rotation asked for against a key that is no longer the
	// active one: a form submitted twice, or by two admins at once.
	ErrStale = errors.New("the active key changed since the page was loaded")
)

// Publish broadcasts an invalidation; in production bus.PublishInvalidation
// on the service's connection.
type Publish func(ctx context.Context, inv bus.Invalidation) error

// publishTimeout bounds the broadcast after a change. The change is already
// committed, so a broadcast that cannot get out in time is logged and
// counted, and the gateways' cache TTL bounds how long they serve stale keys.
const publishTimeout = 3 * time.Second

// Company is the part of a company the credentials pages show.
type Company struct {
	ID                 int64
	Slug               string
	Name               string
	SubscriptionActive bool
	Provisioned        bool
}

// Service manages companies' API keys.
type Service struct {
	pool           *pgxpool.Pool
	keys           *apikey.Store
	publish        Publish
	log            *zap.Logger
	publishFailure prometheus.Counter
}

// New returns the service. publishFailures counts broadcasts that failed
// after a committed change; it may be nil.
func New(pool *pgxpool.Pool, keys *apikey.Store, publish Publish, log *zap.Logger, publishFailures prometheus.Counter) *Service {
	return &Service{pool: pool, keys: keys, publish: publish, log: log, publishFailure: publishFailures}
}

// Now is the clock the lifecycle runs on.
func (s *Service) Now() time.Time { return s.keys.Now() }

// Company returns a company, or ErrCompanyNotFound.
func (s *Service) Company(ctx context.Context, id int64) (Company, error) {
	var c Company
	err := s.pool.QueryRow(ctx, `SELECT id, slug, name, subscription_active, provisioned FROM companies WHERE id = $1`, id).
		Scan(&c.ID, &c.Slug, &c.Name, &c.SubscriptionActive, &c.Provisioned)
	if errors.Is(err, pgx.ErrNoRows) {
		return Company{}, ErrCompanyNotFound
	}
	if err != nil {
		return Company{}, fmt.Errorf("load company %d: %w", id, err)
	}
	return c, nil
}

// Overview is what the Credentials page shows at one moment.
type Overview struct {
	Now time.Time
	// Active is the company's working key, nil when there is none.
	Active *apikey.Key
	// InGrace are rotated keys still accepted at Now, newest first.
	InGrace []apikey.Key
	// Events is the audit trail, newest first.
	Events []apikey.Event
}

// Overview reads the company's keys and its latest events.
func (s *Service) Overview(ctx context.Context, companyID int64, events int) (Overview, error) {
	keys, err := s.keys.List(ctx, companyID)
	if err != nil {
		return Overview{}, err
	}
	o := Overview{Now: s.keys.Now()}
	for _, k := range keys {
		switch {
		case k.State == apikey.StateActive:
			o.Active = &k
		case k.State == apikey.StateRotated && k.Accepts(o.Now):
			o.InGrace = append(o.InGrace, k)
		}
	}
	if o.Events, err = s.keys.Events(ctx, companyID, events); err != nil {
		return Overview{}, err
	}
	return o, nil
}

// Keys lists every key of the company, newest first.
func (s *Service) Keys(ctx context.Context, companyID int64) ([]apikey.Key, error) {
	if _, err := s.Company(ctx, companyID); err != nil {
		return nil, err
	}
	return s.keys.List(ctx, companyID)
}

// Events returns the company's latest key events, newest first.
func (s *Service) Events(ctx context.Context, companyID int64, limit int) ([]apikey.Event, error) {
	if _, err := s.Company(ctx, companyID); err != nil {
		return nil, err
	}
	return s.keys.Events(ctx, companyID, limit)
}

// Create makes the company's active key and returns its full value, which
// exists nowhere else: show it once, never store or log it.
func (s *Service) Create(ctx context.Context, companyID int64, actor apikey.Actor) (string, apikey.Key, error) {
	if _, err := s.Company(ctx, companyID); err != nil {
		return "", apikey.Key{}, err
	}
	full, key, err := s.keys.Create(ctx, companyID, actor)
	if err != nil {
		return "", apikey.Key{}, err
	}
	s.broadcast(ctx, companyID, "create", key.KeyID)
	return full, key, nil
}

// Rotate replaces the active key; the previous one keeps working for
// apikey.GracePeriod. When expectKeyID is not empty and is not the active
// key, nothing changes and the error is ErrStale.
func (s *Service) Rotate(ctx context.Context, companyID int64, expectKeyID string, actor apikey.Actor) (full string, created, previous apikey.Key, err error) {
	if _, err := s.Company(ctx, companyID); err != nil {
		return "", apikey.Key{}, apikey.Key{}, err
	}
	if expectKeyID != "" {
		// A check before the rotation, not inside it: it stops a resubmitted
		// form, and two admins rotating within the same instant both get a
		// working key anyway.
		o, err := s.Overview(ctx, companyID, 0)
		if err != nil {
			return "", apikey.Key{}, apikey.Key{}, err
		}
		if o.Active == nil || o.Active.KeyID != expectKeyID {
			return "", apikey.Key{}, apikey.Key{}, ErrStale
		}
	}
	full, created, previous, err = s.keys.Rotate(ctx, companyID, actor)
	if err != nil {
		return "", apikey.Key{}, apikey.Key{}, err
	}
	s.broadcast(ctx, companyID, "rotate", created.KeyID, previous.KeyID)
	return full, created, previous, nil
}

// Revoke stops one of the company's keys at once and for good.
func (s *Service) Revoke(ctx context.Context, companyID int64, keyID string, actor apikey.Actor) (apikey.Key, error) {
	if _, err := s.Company(ctx, companyID); err != nil {
		return apikey.Key{}, err
	}
	key, err := s.keys.Revoke(ctx, companyID, keyID, actor)
	if err != nil {
		return apikey.Key{}, err
	}
	s.broadcast(ctx, companyID, "revoke", key.KeyID)
	return key, nil
}

// broadcast runs after the change committed. It is not cut short when the
// caller's request ends, and its failure does not undo the change.
func (s *Service) broadcast(ctx context.Context, companyID int64, action string, keyIDs ...string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	for _, id := range keyIDs {
		if err := s.publish(ctx, bus.Invalidation{Kind: bus.KindAPIKey, ID: id}); err != nil {
			if s.publishFailure != nil {
				s.publishFailure.Inc()
			}
			s.log.Error("API key changed but the invalidation broadcast failed; gateways serve their cached entry until it expires",
				zap.Int64("company_id", companyID), zap.String("action", action), zap.String("key_id", id), zap.Error(err))
		}
	}
}
