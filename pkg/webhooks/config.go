// Package webhooks is the data model of companies' webhook endpoints and the
// Standard Webhooks signature (standardwebhooks.com): endpoints with their
// event type filters, signing secrets sealed with pkg/secretbox and rotated
// with a 24-hour overlap, the per-(endpoint, event) deliveries and their
// attempts, the endpoint URL rules, and Sign / Verify.
//
// The admin service (console, admin API, parleyctl) manages endpoints with
// Store; the webhook sender reads endpoints and secrets, works on pending
// deliveries and records attempts. The sender's side of the contract:
//
//   - Subscribers(company, type) are the enabled endpoints an event goes to;
//     a delivery is one webhook_deliveries row per (endpoint, event id),
//     unique, with payload = MarshalBody(type, occurred_at, data).
//   - Pending rows whose next_attempt_at has come are due: those the sender
//     inserted, those ReplayFailed set back (attempts 0, queued_at now), and
//     test events (SendTest: type webhook.test or a chosen one, sample data).
//     The retry period counts from queued_at.
//   - Each HTTP attempt: headers HeaderID (the event id), HeaderTimestamp
//     (unix seconds), HeaderSignature = Sign(ActiveSecrets(endpoint, now),
//     ...); then RecordAttempt (NextAttemptAt nil gives the delivery up).
//   - Disable(endpoint, reason, last error) when it keeps failing; the
//     console shows the reason and an admin re-enables it.
//   - Dial only addresses Disallowed refuses not, unless
//     Config.AllowPrivate (PARLEY_WEBHOOKS_ALLOW_PRIVATE).
//   - A delivery's created_at is EventTime(event id, occurred_at): the week
//     it is kept in (the tables are partitioned by week); its attempts
//     carry it as delivery_created_at.
//   - KeepDeliveries(now), at start and periodically: creates the weeks
//     ahead and drops the weeks past Config.AttemptRetention that hold no
//     pending delivery, with their attempts.
package webhooks

import (
	"errors"
	"fmt"
	"time"
)

// Config is the webhooks part of a program's configuration. The admin
// service and parleyctl use AllowPrivate and MaxEndpoints; the sender uses
// AllowPrivate for its dialer and AttemptRetention for KeepDeliveries.
type Config struct {
	// AllowPrivate lets endpoints use http and loopback, private and
	// link-local addresses. Only for development and tests (make run sets
	// it so that the local test receiver is reachable); never in production.
	AllowPrivate bool `env:"PARLEY_WEBHOOKS_ALLOW_PRIVATE" envDefault:"false"`
	// MaxEndpoints is how many endpoints a company may have.
	MaxEndpoints int `env:"PARLEY_WEBHOOKS_MAX_ENDPOINTS" envDefault:"10"`
	// AttemptRetention is how long deliveries and their attempts are kept,
	// by whole weeks: a week of them goes once its end is older than this,
	// unless one of its deliveries is still pending.
	AttemptRetention time.Duration `env:"PARLEY_WEBHOOKS_ATTEMPT_RETENTION" envDefault:"720h"`
}

// DefaultConfig is Config with its defaults.
func DefaultConfig() Config {
	return Config{MaxEndpoints: 10, AttemptRetention: 30 * 24 * time.Hour}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.MaxEndpoints < 1 || c.MaxEndpoints > 1000 {
		errs = append(errs, fmt.Errorf("PARLEY_WEBHOOKS_MAX_ENDPOINTS must be from 1 to 1000"))
	}
	if c.AttemptRetention < time.Hour {
		errs = append(errs, errors.New("PARLEY_WEBHOOKS_ATTEMPT_RETENTION must be at least 1h"))
	}
	return errors.Join(errs...)
}
