package sender

import (
	"errors"
	"fmt"
	"time"
)

// Config is the sender's tuning, read from the environment.
type Config struct {
	// Stream is the JetStream stream the relay publishes events to, on
	// <PARLEY_NATS_SUBJECT_PREFIX>.outbox.<company_id>.
	Stream string `env:"PARLEY_WEBHOOK_SENDER_STREAM" envDefault:"EVENTS"`
	// RelayBatch bounds the outbox rows one relay pass moves.
	RelayBatch int `env:"PARLEY_WEBHOOK_SENDER_RELAY_BATCH" envDefault:"1000"`
	// RelayInterval is how often the relay looks at an empty outbox.
	RelayInterval time.Duration `env:"PARLEY_WEBHOOK_SENDER_RELAY_INTERVAL" envDefault:"20ms"`
	// Relays is how many relay passes run at once (each takes rows the
	// others do not hold).
	Relays int `env:"PARLEY_WEBHOOK_SENDER_RELAYS" envDefault:"1"`
	// Fanouts is how many batches of events are fanned out at once.
	Fanouts int `env:"PARLEY_WEBHOOK_SENDER_FANOUTS" envDefault:"2"`
	// FetchBatch bounds the events fanned out at once.
	FetchBatch int `env:"PARLEY_WEBHOOK_SENDER_FETCH_BATCH" envDefault:"1000"`
	// AckWait is how long JetStream waits for an event's ack before
	// redelivering it.
	AckWait time.Duration `env:"PARLEY_WEBHOOK_SENDER_ACK_WAIT" envDefault:"30s"`
	// Timeout bounds one HTTP attempt (connect, headers, body).
	Timeout time.Duration `env:"PARLEY_WEBHOOK_SENDER_TIMEOUT" envDefault:"10s"`
	// Concurrency is how many requests one endpoint has in flight at most.
	Concurrency int `env:"PARLEY_WEBHOOK_SENDER_CONCURRENCY" envDefault:"64"`
	// QueueSize is how many deliveries one endpoint's queue holds in
	// memory; the rest wait in PostgreSQL.
	QueueSize int `env:"PARLEY_WEBHOOK_SENDER_QUEUE_SIZE" envDefault:"5000"`
	// Lease is how long a delivery held by a sender is not taken by
	// another; it is renewed while held, so it only matters after a crash.
	Lease time.Duration `env:"PARLEY_WEBHOOK_SENDER_LEASE" envDefault:"30s"`
	// PollInterval is how often due deliveries (retries, replays, test
	// events, those of a dead sender) are looked for.
	PollInterval time.Duration `env:"PARLEY_WEBHOOK_SENDER_POLL_INTERVAL" envDefault:"250ms"`
	// BackoffBase and BackoffCap shape the exponential backoff, with full
	// jitter, between attempts; a Retry-After is a floor.
	BackoffBase time.Duration `env:"PARLEY_WEBHOOK_SENDER_BACKOFF_BASE" envDefault:"5s"`
	BackoffCap  time.Duration `env:"PARLEY_WEBHOOK_SENDER_BACKOFF_CAP" envDefault:"1h"`
	// RetryPeriod is how long a delivery is retried, from when it was
	// queued, before it is recorded failed.
	RetryPeriod time.Duration `env:"PARLEY_WEBHOOK_SENDER_RETRY_PERIOD" envDefault:"72h"`
	// DisableAfter disables an endpoint whose every attempt has failed for
	// this long (its failure streak, reset by any success).
	DisableAfter time.Duration `env:"PARLEY_WEBHOOK_SENDER_DISABLE_AFTER" envDefault:"72h"`
	// FlushInterval and FlushSize bound how long attempt outcomes wait to
	// be recorded.
	FlushInterval time.Duration `env:"PARLEY_WEBHOOK_SENDER_FLUSH_INTERVAL" envDefault:"10ms"`
	FlushSize     int           `env:"PARLEY_WEBHOOK_SENDER_FLUSH_SIZE" envDefault:"1000"`
	// Recorders is how many flushes may run at once.
	Recorders int `env:"PARLEY_WEBHOOK_SENDER_RECORDERS" envDefault:"4"`
	// CacheTTL bounds how stale a cached endpoint, subscription or secret
	// may be.
	CacheTTL time.Duration `env:"PARLEY_WEBHOOK_SENDER_CACHE_TTL" envDefault:"2s"`
	// ShutdownTimeout bounds the wait for requests in flight and the last
	// flush.
	ShutdownTimeout time.Duration `env:"PARLEY_WEBHOOK_SENDER_SHUTDOWN_TIMEOUT" envDefault:"15s"`
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Stream == "" {
		errs = append(errs, errors.New("PARLEY_WEBHOOK_SENDER_STREAM is empty"))
	}
	for _, p := range []struct {
		name string
		v    int
	}{
		{"PARLEY_WEBHOOK_SENDER_RELAY_BATCH", c.RelayBatch}, {"PARLEY_WEBHOOK_SENDER_FETCH_BATCH", c.FetchBatch},
		{"PARLEY_WEBHOOK_SENDER_RELAYS", c.Relays}, {"PARLEY_WEBHOOK_SENDER_FANOUTS", c.Fanouts},
		{"PARLEY_WEBHOOK_SENDER_CONCURRENCY", c.Concurrency}, {"PARLEY_WEBHOOK_SENDER_QUEUE_SIZE", c.QueueSize},
		{"PARLEY_WEBHOOK_SENDER_FLUSH_SIZE", c.FlushSize}, {"PARLEY_WEBHOOK_SENDER_RECORDERS", c.Recorders},
	} {
		if p.v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1", p.name))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"PARLEY_WEBHOOK_SENDER_RELAY_INTERVAL", c.RelayInterval}, {"PARLEY_WEBHOOK_SENDER_ACK_WAIT", c.AckWait},
		{"PARLEY_WEBHOOK_SENDER_TIMEOUT", c.Timeout}, {"PARLEY_WEBHOOK_SENDER_LEASE", c.Lease},
		{"PARLEY_WEBHOOK_SENDER_POLL_INTERVAL", c.PollInterval}, {"PARLEY_WEBHOOK_SENDER_BACKOFF_BASE", c.BackoffBase},
		{"PARLEY_WEBHOOK_SENDER_BACKOFF_CAP", c.BackoffCap}, {"PARLEY_WEBHOOK_SENDER_RETRY_PERIOD", c.RetryPeriod},
		{"PARLEY_WEBHOOK_SENDER_DISABLE_AFTER", c.DisableAfter}, {"PARLEY_WEBHOOK_SENDER_FLUSH_INTERVAL", c.FlushInterval},
		{"PARLEY_WEBHOOK_SENDER_CACHE_TTL", c.CacheTTL},
		{"PARLEY_WEBHOOK_SENDER_SHUTDOWN_TIMEOUT", c.ShutdownTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", d.name))
		}
	}
	if c.BackoffCap < c.BackoffBase {
		errs = append(errs, errors.New("PARLEY_WEBHOOK_SENDER_BACKOFF_CAP must not be below PARLEY_WEBHOOK_SENDER_BACKOFF_BASE"))
	}
	if c.Lease < 3*c.FlushInterval+time.Second {
		errs = append(errs, errors.New("PARLEY_WEBHOOK_SENDER_LEASE must be at least a second longer than three flushes"))
	}
	if c.AckWait < time.Second {
		errs = append(errs, errors.New("PARLEY_WEBHOOK_SENDER_ACK_WAIT must be at least 1s"))
	}
	return errors.Join(errs...)
}
