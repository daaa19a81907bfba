package replies

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/record"
)

// Store reads what a reply needs from PostgreSQL (pkg/record, the
// company's templates).
type Store struct {
	pool      *pgxpool.Pool
	templates *catalog.Store
	stream    *record.Stream
	now       func() time.Time
}

// WithStream lets the store find a reply still waiting in the SENDS stream
// (PriorMessageID): the gateway's, whose publishes can end in doubt.
func (s *Store) WithStream(js jetstream.JetStream, cfg bus.Config) *Store {
	s.stream = record.NewStream(js, cfg)
	return s
}

// PriorMessageID is record.ReplyMessageID: the message id an earlier
// attempt of the reply batch gave it.
func (s *Store) PriorMessageID(ctx context.Context, companyID int64, batchID string) (int64, bool, error) {
	return record.ReplyMessageID(ctx, s.pool, s.stream, companyID, batchID)
}

// NewStore returns the store on pool.
func NewStore(pool *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, templates: catalog.NewStore(pool, nil), now: now}
}

// TargetReply is record.TargetReply at the store's time.
func (s *Store) TargetReply(ctx context.Context, companyID int64, phone string, accountID int64) (record.ReplyTarget, error) {
	return record.TargetReply(ctx, s.pool, companyID, phone, accountID, s.now())
}

// QuotedWamid is record.QuotedWamid.
func (s *Store) QuotedWamid(ctx context.Context, companyID int64, phone, key string) (string, error) {
	return record.QuotedWamid(ctx, s.pool, companyID, phone, key)
}

// TemplateByName finds the company's template by name, and by language
// when one is given.
func (s *Store) TemplateByName(ctx context.Context, companyID int64, name, language string) (catalog.Template, error) {
	all, err := s.templates.Templates(ctx, companyID)
	if err != nil {
		return catalog.Template{}, err
	}
	var found []catalog.Template
	for _, t := range all {
		if t.Name == name && (language == "" || t.Language == language) {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		return catalog.Template{}, catalog.ErrNotFound
	case 1:
		return found[0], nil
	}
	return catalog.Template{}, ErrAmbiguous
}

// StreamPublisher publishes each reply alone on its company's subject
// (bus.Config.CompanySubject and ForBatch) with its batch id as the
// Nats-Msg-Id: what the console and parleyctl use; the gateway has its
// group commit.
type StreamPublisher struct {
	JS  jetstream.JetStream
	Bus bus.Config
}

// NewBatchID is a fresh batch id (UUIDv7) for Meta.BatchID: the stream
// publisher publishes a batch under the id it carries.
func NewBatchID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("batch id: %w", err)
	}
	return id.String(), nil
}

// Publish puts m, which carries batchID (NewBatchID), on the stream and
// returns the id once acknowledged.
func (p StreamPublisher) Publish(ctx context.Context, kind string, companyID int64, batchID string, m bus.BatchMessage) (string, error) {
	if batchID == "" || m.GetBatchId() != batchID {
		return "", fmt.Errorf("publish: the batch must carry its id (NewBatchID)")
	}
	data, err := proto.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode batch: %w", err)
	}
	subject := bus.ForBatch(p.Bus.CompanySubject(kind, companyID), batchID)
	if _, err := p.JS.Publish(ctx, subject, data, jetstream.WithMsgID(batchID)); err != nil {
		return batchID, fmt.Errorf("publish batch %s: %w", batchID, err)
	}
	return batchID, nil
}
