// Package bus is the contract between the gateway and the dispatchers on
// NATS: the SENDS stream, its subjects, and the broadcast of key changes.
// The messages themselves are the protobuf types in bus/sendsv1.
package bus

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/ops"
)

// Config is the NATS part of a service's configuration. Stream and Prefix
// exist so that tests (and several environments sharing one server) keep
// their work apart.
type Config struct {
	URL            string `env:"PARLEY_NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	Stream         string `env:"PARLEY_NATS_STREAM" envDefault:"SENDS"`
	Prefix         string `env:"PARLEY_NATS_SUBJECT_PREFIX" envDefault:"sends"`
	StreamReplicas int    `env:"PARLEY_NATS_STREAM_REPLICAS" envDefault:"1"`
}

var tokenRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("PARLEY_NATS_URL is empty"))
	}
	if !tokenRe.MatchString(c.Stream) {
		errs = append(errs, fmt.Errorf("PARLEY_NATS_STREAM %q: letters, digits, '-' and '_' only", c.Stream))
	}
	if !tokenRe.MatchString(c.Prefix) {
		errs = append(errs, fmt.Errorf("PARLEY_NATS_SUBJECT_PREFIX %q: one subject token", c.Prefix))
	}
	if c.StreamReplicas != 1 && c.StreamReplicas != 3 && c.StreamReplicas != 5 {
		errs = append(errs, fmt.Errorf("PARLEY_NATS_STREAM_REPLICAS %d: 1, 3 or 5", c.StreamReplicas))
	}
	return errors.Join(errs...)
}

// Subjects. The gateway publishes each batch on its company's subject of its
// kind followed by the batch id (sends.campaign.<company_id>.<batch_id>), so
// that a batch still waiting in the stream can be found by its subject
// (GET /api/batches/{id} before a dispatcher recorded it). The stream and
// the consumers take everything below a kind's prefix.

// CampaignSubject is where a company's campaign batches go.
func (c Config) CampaignSubject(companyID int64) string {
	return c.CompanySubject(KindCampaignBatches, companyID)
}

// AutomationSubject is where a company's automation batches go.
func (c Config) AutomationSubject(companyID int64) string {
	return c.CompanySubject(KindAutomationBatches, companyID)
}

// BatchSubject is where a company's message batches go (batch send, and
// connector sends to a campaign); the campaign dispatcher consumes them.
func (c Config) BatchSubject(companyID int64) string {
	return c.CompanySubject(KindMessageBatches, companyID)
}

// ForBatch is the subject of one batch below a company's subject.
func ForBatch(companySubject, batchID string) string { return companySubject + "." + batchID }

// Subject is a parsed batch subject: <prefix>.<kind>.<company_id>[.<batch_id>]
// for a batch published alone, <prefix>.<kind>.g.<group_id> for a group.
type Subject struct {
	// Kind is campaign, automation or batch.
	Kind string
	// CompanyID is 0 on a group's subject (its batches say theirs).
	CompanyID int64
	// BatchID is empty on a subject without one (a group, older publishers,
	// tools).
	BatchID string
	// Grouped is a group's subject; Group is its id.
	Grouped bool
	Group   GroupID
}

// ParseSubject reads a batch subject. The prefix is one token (Validate).
func ParseSubject(subject string) (Subject, error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 3 && len(parts) != 4 {
		return Subject{}, fmt.Errorf("subject %q is not <prefix>.<kind>.<company_id>[.<batch_id>] or <prefix>.<kind>.g.<group_id>", subject)
	}
	if len(parts) == 4 && parts[2] == groupToken {
		raw, err := hex.DecodeString(parts[3])
		if err != nil || len(raw) != len(GroupID{}) {
			return Subject{}, fmt.Errorf("subject %q has no group id", subject)
		}
		s := Subject{Kind: parts[1], Grouped: true}
		copy(s.Group[:], raw)
		return s, nil
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Subject{}, fmt.Errorf("subject %q has no company id", subject)
	}
	s := Subject{Kind: parts[1], CompanyID: id}
	if len(parts) == 4 {
		s.BatchID = parts[3]
	}
	return s, nil
}

// CampaignFilter matches every company's campaign batches.
func (c Config) CampaignFilter() string { return c.Prefix + ".campaign.>" }

// AutomationFilter matches every company's automation batches.
func (c Config) AutomationFilter() string { return c.Prefix + ".automation.>" }

// BatchFilter matches every company's message batches. It needs a consumer
// of its own: NATS 2.9 consumers take one filter subject.
func (c Config) BatchFilter() string { return c.Prefix + ".batch.>" }

// ReplyFilter matches every company's replies (POST /api/messages); the
// automation dispatcher takes them with a consumer of their own.
func (c Config) ReplyFilter() string { return c.Prefix + ".reply.>" }

// StreamSubjects are the subjects the SENDS stream stores.
func (c Config) StreamSubjects() []string {
	return []string{c.CampaignFilter(), c.AutomationFilter(), c.BatchFilter(), c.ReplyFilter()}
}

// InvalidationSubject carries, on core NATS, a note of every record that
// changed and that a process may have cached (an API key created, rotated or
// revoked; a company's subscription; an automation's configuration), so that
// every gateway drops its cached entry at once.
func (c Config) InvalidationSubject() string { return c.Prefix + ".events.invalidate" }

// Connect opens a connection that keeps reconnecting for as long as the
// process lives. extra options are applied after Parley's defaults.
func Connect(cfg Config, name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second),
		nats.RetryOnFailedConnect(false),
	}, extra...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", cfg.URL, err)
	}
	return nc, nil
}

// EnsureStream creates or updates the SENDS stream. Every process that calls
// it must know the same subjects (an older binary would drop a newer
// subject from the stream): roll out a new subject everywhere at once, or
// dispatchers first. Work-queue retention
// removes a batch once its dispatcher acked it; file storage keeps accepted
// work across restarts; the duplicate window makes a retried publish with the
// same Nats-Msg-Id (the batch id) harmless.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "Accepted send batches awaiting a dispatcher",
		Subjects:    cfg.StreamSubjects(),
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.StreamReplicas,
		Duplicates:  10 * time.Minute,
		Discard:     jetstream.DiscardNew,
		MaxAge:      7 * 24 * time.Hour,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", cfg.Stream, err)
	}
	return s, nil
}

// JetStream returns the JetStream API of a connection.
func JetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// Check is the readiness check of a NATS connection: it is connected.
func Check(nc *nats.Conn) ops.Check {
	return ops.Check{Name: "nats", Ping: func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats: %s", nc.Status())
		}
		return nil
	}}
}

// Kind names what an invalidation is about.
type Kind string

// What can be invalidated. The id of an API key is its public key id; the
// others are the record's numeric id.
const (
	KindAPIKey     Kind = "apikey"
	KindCompany    Kind = "company"
	KindCampaign   Kind = "campaign"
	KindAutomation Kind = "automation"
	KindConnector  Kind = "connector"
	KindSegment    Kind = "segment"
)

// Invalidation says that one record changed.
type Invalidation struct {
	Kind Kind
	ID   string
}

// PublishInvalidation broadcasts that a record changed and waits until the
// server has it. Core NATS gives at-most-once delivery: a subscriber that is
// disconnected at that moment misses it, which is why caches also expire.
func PublishInvalidation(ctx context.Context, nc *nats.Conn, cfg Config, inv Invalidation) error {
	if err := nc.Publish(cfg.InvalidationSubject(), []byte(string(inv.Kind)+" "+inv.ID)); err != nil {
		return fmt.Errorf("publish invalidation %s %s: %w", inv.Kind, inv.ID, err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("publish invalidation %s %s: %w", inv.Kind, inv.ID, err)
	}
	return nil
}

// SubscribeInvalidations calls fn for every invalidation, in order, on the
// subscription's goroutine. Malformed notes are ignored.
func SubscribeInvalidations(nc *nats.Conn, cfg Config, fn func(Invalidation)) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(cfg.InvalidationSubject(), func(m *nats.Msg) {
		kind, id, ok := strings.Cut(string(m.Data), " ")
		if !ok || id == "" {
			return
		}
		fn(Invalidation{Kind: Kind(kind), ID: id})
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", cfg.InvalidationSubject(), err)
	}
	return sub, nil
}
